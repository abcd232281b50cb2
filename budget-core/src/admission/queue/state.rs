//! The state behind a [`PermitQueue`](super::PermitQueue)'s lock: the
//! permit count, the waiters per criticality, what the queue has measured
//! (how long a permit is held, how many arrive and leave), and whether it
//! stands. Every rule of the [module docs](super) that decides who gets a
//! permit or a refusal lives here; the public types only lock and wait.

use std::collections::VecDeque;
use std::ops::Not;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Prediction, QueueConfig, QueueOrder, Refusal, RefusalReason};
use crate::admission::criticality::Criticality;

/// The fewest returned permits the hold is the mean of (a round of the
/// limit, but not of a limit of 1 or 3).
const ROUND_MIN: usize = 10;
/// The most returned permits the hold is the mean of, and how many are
/// kept.
const ROUND_MAX: usize = 64;

/// The holds of the last [`ROUND_MAX`] permits returned, in seconds, and
/// their mean over the last round.
///
/// A round's mean, not a moving average of every return: a limit above
/// the partner's workers comes back in rounds of short holds and a few
/// long ones (10 permits on 8 workers of 50 ms: eight after 55 ms, two
/// after 105), and an average that gives each return a fixed weight rises
/// by a sixth with each long hold, just as the queue decides whom to
/// refuse. Measured in a burst on a cold chain (BENCHMARKS.md), each long
/// hold then refused another 14-19 waiters the partner had time for.
#[derive(Debug)]
struct Holds {
    recent: VecDeque<f64>,
}

impl Holds {
    fn new() -> Self {
        Self {
            recent: VecDeque::with_capacity(ROUND_MAX),
        }
    }

    fn push(&mut self, held: f64) {
        if self.recent.len() == ROUND_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back(held);
    }

    /// The mean hold of the last round of `limit` returns (at least
    /// [`ROUND_MIN`], at most [`ROUND_MAX`], fewer before that many came
    /// back); `None` before one has.
    fn mean(&self, limit: usize) -> Option<f64> {
        let n = limit.clamp(ROUND_MIN, ROUND_MAX).min(self.recent.len());
        if n == 0 {
            return None;
        }
        let sum: f64 = self.recent.iter().rev().take(n).sum();
        Some(sum / n as f64)
    }
}

/// What a queued waiter is told, once.
///
/// It carries no permit: the permit is made by the waiter when it reads a
/// grant, so nothing with a `Drop` that locks is ever created or dropped
/// under the lock.
#[derive(Debug)]
pub(super) enum Outcome {
    /// A permit was counted in `in_use` for this waiter after it waited this
    /// long.
    Granted(Duration),
    /// The waiter was refused.
    Refused(Refusal),
}

/// One queued waiter.
#[derive(Debug)]
struct Entry {
    /// Increasing with arrival, so each class's queue is sorted by it.
    id: u64,
    enqueued: Instant,
    give_up_at: Instant,
    tx: oneshot::Sender<Outcome>,
}

impl Entry {
    /// Tells the waiter it is refused.
    fn refuse(self, refusal: Refusal) {
        // A gone receiver already removed itself or will find no entry;
        // either way a refusal holds no permit, so nothing is lost.
        let _ = self.tx.send(Outcome::Refused(refusal));
    }

    /// How long it has waited at `now`.
    fn waited(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.enqueued)
    }
}

/// A waiter's place in the queue, for finding its entry again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Ticket {
    pub(super) class: usize,
    pub(super) id: u64,
    pub(super) enqueued: Instant,
    pub(super) give_up_at: Instant,
}

/// Arrivals and grants counted over the last half `interval` or so (rule
/// 4 asks whether waiters still come faster than permits are handed out).
#[derive(Debug)]
struct Flow {
    /// Where the current count began.
    since: Instant,
    /// Arrivals that found no free permit (queued or refused), and grants
    /// to queued waiters, since `since`.
    current: (u64, u64),
    /// The same over the half interval before `since`.
    previous: (u64, u64),
}

impl Flow {
    fn new(now: Instant) -> Self {
        Self {
            since: now,
            current: (0, 0),
            previous: (0, 0),
        }
    }

    /// Moves the counts on to `now`: a count older than a whole half
    /// interval becomes `previous`, one older than two is forgotten.
    fn roll(&mut self, now: Instant, half: Duration) {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed < half {
            return;
        }
        self.previous = if elapsed < half.saturating_mul(2) {
            self.current
        } else {
            (0, 0)
        };
        self.current = (0, 0);
        self.since = now;
    }

    /// Whether more waiters arrived than were served, over the counts kept.
    fn arriving_faster(&self) -> bool {
        let arrived = self.current.0 + self.previous.0;
        let granted = self.current.1 + self.previous.1;
        arrived > granted
    }
}

/// The counts and waiters of a permit queue.
#[derive(Debug)]
pub(super) struct State {
    pub(super) limit: usize,
    pub(super) in_use: usize,
    /// Waiters per criticality rank (0 least critical), each in arrival
    /// order: oldest at the front.
    classes: [VecDeque<Entry>; Criticality::COUNT],
    waiting: usize,
    /// The last instant no waiter was queued. Frozen while any waiter is
    /// queued (it is the instant the first of them arrived).
    last_empty: Instant,
    next_id: u64,
    /// How long the last permits returned were held.
    holds: Holds,
    /// How often the limit is expected to double while it grows (an
    /// adaptive limit's slow start), for the prediction.
    growth: Option<Duration>,
    /// Since `last_empty`, a waiter came whose predicted wait was more than
    /// `standing_share` of what it could wait (rule 4's "deep").
    deep: bool,
    /// A queue that refused a newcomer as standing stands until then
    /// (rule 4), empty or not.
    standing_until: Option<Instant>,
    /// Since when the queue has stood without a break (rule 4's
    /// "sustained"); `None` while it does not stand.
    standing_since: Option<Instant>,
    flow: Flow,
    /// The instants held permits were handed out, summed as nanoseconds
    /// since `epoch`: their mean age tells when the next returns (rule 1).
    held_since: u128,
    epoch: Instant,
}

impl State {
    /// An idle state with `limit` permits.
    pub(super) fn new(limit: usize, now: Instant) -> Self {
        Self {
            limit,
            in_use: 0,
            classes: Default::default(),
            waiting: 0,
            last_empty: now,
            next_id: 0,
            holds: Holds::new(),
            growth: None,
            deep: false,
            standing_until: None,
            standing_since: None,
            flow: Flow::new(now),
            held_since: 0,
            epoch: now,
        }
    }

    /// How many waiters are queued.
    pub(super) fn waiting(&self) -> usize {
        self.waiting
    }

    /// How long a permit is held (the mean of the last round returned),
    /// once one has come back.
    pub(super) fn hold(&self) -> Option<Duration> {
        self.held()
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
    }

    /// [`hold`](Self::hold) in seconds, when it is a usable number.
    fn held(&self) -> Option<f64> {
        self.holds
            .mean(self.limit)
            .filter(|h| h.is_finite() && *h > 0.0)
    }

    /// Sets how often the limit is expected to double (`None`: it is not
    /// growing).
    pub(super) fn set_growth(&mut self, growth: Option<Duration>) {
        self.growth = growth.filter(|period| !period.is_zero());
    }

    /// Takes a free permit at `now` if there is one and nobody waits for it.
    pub(super) fn try_take(&mut self, now: Instant) -> bool {
        if self.waiting == 0 && self.in_use < self.limit {
            self.take(now);
            true
        } else {
            false
        }
    }

    /// Counts a permit handed out at `now`.
    fn take(&mut self, now: Instant) {
        self.in_use += 1;
        self.held_since = self
            .held_since
            .saturating_add(now.saturating_duration_since(self.epoch).as_nanos());
    }

    /// Counts out a permit handed out at `since`.
    fn untake(&mut self, since: Instant) {
        self.in_use = self.in_use.saturating_sub(1);
        self.held_since = self
            .held_since
            .saturating_sub(since.saturating_duration_since(self.epoch).as_nanos());
    }

    /// A permit handed out at `since` came back at `now`.
    pub(super) fn returned(&mut self, since: Instant, now: Instant) {
        self.untake(since);
        let held = now.saturating_duration_since(since).as_secs_f64();
        self.holds.push(held);
    }

    /// Whether the queue stands at `now` (rule 4 of the module docs).
    pub(super) fn is_standing(&mut self, now: Instant, config: &QueueConfig) -> bool {
        let standing = self.standing_until.is_some_and(|until| now < until) || {
            self.flow.roll(now, config.interval / 2);
            self.waiting > 0
                && self.deep
                && self
                    .last_empty
                    .checked_add(config.interval)
                    .is_some_and(|at| now >= at)
                && self.flow.arriving_faster()
        };
        if !standing {
            self.standing_since = None;
        } else if self.standing_since.is_none() {
            self.standing_since = Some(now);
        }
        standing
    }

    /// How long the queue has stood without a break, at `now`.
    fn stood_for(&self, now: Instant) -> Duration {
        self.standing_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// How long a waiter of `class` arriving now would wait, by the
    /// measured hold and the limit (rule 1); `None` before any permit has
    /// come back. Counted in arrival order whatever the queue's order:
    /// it is how much queue stands before the newcomer.
    pub(super) fn predict(&self, class: usize, now: Instant) -> Option<Prediction> {
        let hold = self.held()?;
        let ahead: usize = self.classes[class..].iter().map(VecDeque::len).sum();
        Some(self.prediction(ahead, hold, now))
    }

    /// The prediction for a waiter with `ahead` waiters to be served first,
    /// at `now`.
    ///
    /// Permits come back in rounds of `limit`, a hold apart, the first
    /// round when the permits held now have been held a hold: their mean
    /// age tells how soon that is (a burst's permits, all taken together,
    /// come back together; permits taken one by one, about half a hold
    /// from now).
    fn prediction(&self, ahead: usize, hold: f64, now: Instant) -> Prediction {
        let limit = self.limit.max(1) as f64;
        // Permits to come back before this waiter's: one per waiter ahead,
        // its own, and those held beyond a shrunk limit.
        let needed = (ahead + 1 + self.in_use.saturating_sub(self.limit)) as f64;
        let hold = Duration::try_from_secs_f64(hold).unwrap_or(Duration::MAX);
        let first = match u64::try_from(self.in_use) {
            Ok(held @ 1..) => {
                let mean = self.held_since / u128::from(held);
                let mean = Duration::from_nanos(u64::try_from(mean).unwrap_or(u64::MAX));
                let age = now
                    .saturating_duration_since(self.epoch)
                    .saturating_sub(mean);
                hold.saturating_sub(age)
            }
            _ => Duration::ZERO,
        };
        let (rounds, every) = match self.growth {
            // A limit that doubles every `period` serves `limit * (2^r - 1)`
            // in `r` rounds.
            Some(period) => ((needed / limit + 1.0).log2().ceil(), period.max(hold)),
            None => ((needed / limit).ceil(), hold),
        };
        let later = every.mul_f64((rounds - 1.0).max(0.0));
        Prediction::new(
            first.saturating_add(later),
            ahead,
            hold / u32::try_from(self.limit.max(1)).unwrap_or(u32::MAX),
        )
    }

    /// Decides on a newcomer that found no free permit (rules 1 and 4):
    /// `Err` refuses it at arrival; `Ok` lets it queue.
    pub(super) fn admit(
        &mut self,
        class: usize,
        give_up_at: Instant,
        now: Instant,
        config: &QueueConfig,
    ) -> Result<(), Refusal> {
        self.flow.roll(now, config.interval / 2);
        self.flow.current.0 += 1;
        let Some(prediction) = self.predict(class, now) else {
            return Ok(());
        };
        let slack = give_up_at.saturating_duration_since(now);
        // A permit granted at the give-up instant is refused (rule 2).
        if prediction.wait() >= slack {
            self.deep = true;
            self.extend_standing(now, config);
            return Err(Refusal::predicted(RefusalReason::PredictedWait, prediction));
        }
        let share = slack.mul_f64(config.standing_share);
        if prediction.wait() > share {
            self.deep = true;
        }
        if self.is_standing(now, config)
            && prediction.wait() > config.standing_wait(slack, self.stood_for(now))
        {
            self.extend_standing(now, config);
            return Err(Refusal::predicted(RefusalReason::StandingQueue, prediction));
        }
        Ok(())
    }

    /// A queue refusing newcomers as standing (or for their prediction,
    /// while it stands) stands for another `interval`.
    fn extend_standing(&mut self, now: Instant, config: &QueueConfig) {
        if self.is_standing(now, config) {
            self.standing_until = now.checked_add(config.interval);
        }
    }

    /// Queues a waiter arriving at `now`.
    pub(super) fn enqueue(
        &mut self,
        criticality: Criticality,
        give_up_at: Instant,
        now: Instant,
    ) -> (Ticket, oneshot::Receiver<Outcome>) {
        if self.waiting == 0 {
            self.last_empty = now;
        }
        let (tx, rx) = oneshot::channel();
        let id = self.next_id;
        self.next_id += 1;
        let class = criticality.rank();
        self.classes[class].push_back(Entry {
            id,
            enqueued: now,
            give_up_at,
            tx,
        });
        self.waiting += 1;
        let ticket = Ticket {
            class,
            id,
            enqueued: now,
            give_up_at,
        };
        (ticket, rx)
    }

    /// Where the waiter of `ticket` is in its class's queue, if still queued.
    fn position(&self, ticket: &Ticket) -> Option<usize> {
        self.classes[ticket.class]
            .binary_search_by_key(&ticket.id, |entry| entry.id)
            .ok()
    }

    /// Whether the waiter of `ticket` is still queued.
    pub(super) fn is_queued(&self, ticket: &Ticket) -> bool {
        self.position(ticket).is_some()
    }

    /// Takes the waiter of `ticket` out of the queue without telling it
    /// anything; `false` if it was no longer queued (it has been told).
    pub(super) fn withdraw(&mut self, ticket: &Ticket, now: Instant) -> bool {
        let Some(index) = self.position(ticket) else {
            return false;
        };
        if self.classes[ticket.class].remove(index).is_some() {
            self.removed_one(now);
        }
        true
    }

    /// Counts one waiter out; an empty queue remembers `now` and forgets
    /// that it was deep.
    fn removed_one(&mut self, now: Instant) {
        self.waiting -= 1;
        if self.waiting == 0 {
            self.last_empty = now;
            self.deep = false;
        }
    }

    /// Served newest first, refuses the oldest waiters that have waited
    /// longer than a newcomer may wait in a standing queue (rule 4): they
    /// wait only until the newcomers stop overtaking them, which a standing
    /// queue does not promise before their give-up instant. Checked when
    /// permits are handed out, so a refusal comes at most a hold late.
    fn refuse_overtaken(&mut self, now: Instant, config: &QueueConfig) {
        let stood_for = self.stood_for(now);
        for class in 0..Criticality::COUNT {
            while let Some(front) = self.classes[class].front() {
                let could = front.give_up_at.saturating_duration_since(front.enqueued);
                if front.waited(now) <= config.standing_wait(could, stood_for) {
                    break;
                }
                if let Some(entry) = self.classes[class].pop_front() {
                    self.removed_one(now);
                    let waited = entry.waited(now);
                    // At its give-up instant it has expired (rule 2).
                    let reason = if entry.give_up_at <= now {
                        RefusalReason::Expired
                    } else {
                        RefusalReason::StandingQueue
                    };
                    entry.refuse(Refusal::new(reason, waited));
                }
            }
        }
    }

    /// Refuses the newest waiters whose prediction no longer fits what
    /// they can wait (rule 1, kept honest as the measured hold, the
    /// permits' ages and the limit change): in each class, from the back,
    /// until one fits.
    fn refuse_unfit(&mut self, now: Instant) {
        let Some(hold) = self.held() else {
            return;
        };
        for class in 0..Criticality::COUNT {
            loop {
                let ahead: usize = self.classes[class..].iter().map(VecDeque::len).sum();
                let Some(back) = self.classes[class].back() else {
                    break;
                };
                let prediction = self.prediction(ahead.saturating_sub(1), hold, now);
                let left = back.give_up_at.saturating_duration_since(now);
                if left.is_zero().not() && prediction.wait() < left {
                    break;
                }
                if let Some(entry) = self.classes[class].pop_back() {
                    self.removed_one(now);
                    let waited = entry.waited(now);
                    // At its give-up instant a waiter has expired, whatever
                    // the prediction says (rule 2).
                    entry.refuse(if left.is_zero() {
                        Refusal::new(RefusalReason::Expired, waited)
                    } else {
                        Refusal::predicted(RefusalReason::PredictedWait, prediction).after(waited)
                    });
                }
            }
        }
    }

    /// Gives free permits to waiters: serves the most critical class, in
    /// the configured order, skipping (and refusing) waiters whose
    /// `give_up_at` has come; then, when served in arrival order, refuses
    /// the waiters left whose prediction no longer fits.
    pub(super) fn hand_out(&mut self, now: Instant, config: &QueueConfig) {
        let newest_first = match config.order {
            QueueOrder::Fifo => false,
            QueueOrder::Lifo => true,
            QueueOrder::Adaptive => self.is_standing(now, config),
        };
        while self.in_use < self.limit {
            let Some(class) = (0..Criticality::COUNT)
                .rev()
                .find(|&class| !self.classes[class].is_empty())
            else {
                break;
            };
            let queue = &mut self.classes[class];
            let Some(entry) = (if newest_first {
                queue.pop_back()
            } else {
                queue.pop_front()
            }) else {
                break;
            };
            self.removed_one(now);
            let waited = entry.waited(now);
            if entry.give_up_at <= now {
                entry.refuse(Refusal::new(RefusalReason::Expired, waited));
                continue;
            }
            self.take(now);
            self.flow.roll(now, config.interval / 2);
            self.flow.current.1 += 1;
            if entry.tx.send(Outcome::Granted(waited)).is_err() {
                // The receiver is gone (it cannot be while its waiter is
                // queued, but the count must not depend on that).
                self.untake(now);
            }
        }
        // In arrival order the prediction is what the waiters will see;
        // served newest first, an older waiter's turn depends on who comes.
        if self.waiting > 0 && newest_first {
            self.refuse_overtaken(now, config);
        }
        if self.waiting > 0 && !newest_first {
            self.refuse_unfit(now);
        }
    }
}
