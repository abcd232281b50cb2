//! The state behind a [`PermitQueue`](super::PermitQueue)'s lock: the
//! permit count, the waiters per criticality, and when the queue was last
//! empty. Every rule of the [module docs](super) that decides who gets a
//! permit or a refusal lives here; the public types only lock and wait.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{QueueConfig, QueueOrder, Refusal, RefusalReason};
use crate::admission::Criticality;

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
    /// Tells the waiter it is refused for `reason`.
    fn refuse(self, reason: RefusalReason, now: Instant) {
        let waited = now.saturating_duration_since(self.enqueued);
        // A gone receiver already removed itself or will find no entry;
        // either way a refusal holds no permit, so nothing is lost.
        let _ = self.tx.send(Outcome::Refused(Refusal::new(reason, waited)));
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
    /// queued (it is the instant the first of them arrived), so each
    /// waiter's standing-queue due time is fixed when it arrives.
    last_empty: Instant,
    next_id: u64,
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
        }
    }

    /// How many waiters are queued.
    pub(super) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Takes a free permit if there is one and nobody waits for it.
    pub(super) fn try_take(&mut self) -> bool {
        if self.waiting == 0 && self.in_use < self.limit {
            self.in_use += 1;
            true
        } else {
            false
        }
    }

    /// The instant the current queue becomes overloaded (`interval` after it
    /// was last empty), if that instant is representable.
    fn overload_starts(&self, config: &QueueConfig) -> Option<Instant> {
        self.last_empty.checked_add(config.interval)
    }

    /// Whether the queue is overloaded at `now`: someone waits and nobody
    /// has been missing for `interval`.
    pub(super) fn is_overloaded(&self, now: Instant, config: &QueueConfig) -> bool {
        self.waiting > 0 && self.overload_starts(config).is_some_and(|at| now >= at)
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

    /// When the waiter of `ticket` must be refused if still queued: its
    /// `give_up_at`, or earlier the instant it has waited `target` in an
    /// overloaded queue.
    pub(super) fn due(&self, ticket: &Ticket, config: &QueueConfig) -> Instant {
        let standing = ticket
            .enqueued
            .checked_add(standing_target(config, ticket.class))
            .zip(self.overload_starts(config))
            .map(|(old_enough, overloaded)| old_enough.max(overloaded));
        match standing {
            Some(standing) => standing.min(ticket.give_up_at),
            None => ticket.give_up_at,
        }
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

    /// Counts one waiter out; an empty queue remembers `now`.
    fn removed_one(&mut self, now: Instant) {
        self.waiting -= 1;
        if self.waiting == 0 {
            self.last_empty = now;
        }
    }

    /// Refuses every waiter that has waited its standing target (see
    /// [`standing_target`]) while the queue is
    /// overloaded at `now`, least critical class first (oldest first
    /// within a class).
    ///
    /// Within a class the queue is in arrival order and all its waiters
    /// share one overload start, so the due waiters are a prefix.
    pub(super) fn refuse_standing(&mut self, now: Instant, config: &QueueConfig) {
        if !self.is_overloaded(now, config) {
            return;
        }
        for class in 0..Criticality::COUNT {
            while let Some(front) = self.classes[class].front() {
                let due = front
                    .enqueued
                    .checked_add(standing_target(config, class))
                    .is_some_and(|at| now >= at);
                if !due {
                    break;
                }
                if let Some(entry) = self.classes[class].pop_front() {
                    self.removed_one(now);
                    entry.refuse(RefusalReason::StandingQueue, now);
                }
            }
        }
    }

    /// Gives free permits to waiters: refuses the standing ones first, then
    /// serves the most critical class, in the configured order, skipping
    /// (and refusing) waiters whose `give_up_at` has come.
    pub(super) fn hand_out(&mut self, now: Instant, config: &QueueConfig) {
        self.refuse_standing(now, config);
        while self.in_use < self.limit {
            let newest_first = match config.order {
                QueueOrder::Fifo => false,
                QueueOrder::Lifo => true,
                QueueOrder::Adaptive => self.is_overloaded(now, config),
            };
            let Some(class) = (0..Criticality::COUNT)
                .rev()
                .find(|&class| !self.classes[class].is_empty())
            else {
                return;
            };
            let queue = &mut self.classes[class];
            let Some(entry) = (if newest_first {
                queue.pop_back()
            } else {
                queue.pop_front()
            }) else {
                return;
            };
            self.removed_one(now);
            if entry.give_up_at <= now {
                entry.refuse(RefusalReason::Expired, now);
                continue;
            }
            let waited = now.saturating_duration_since(entry.enqueued);
            self.in_use += 1;
            if entry.tx.send(Outcome::Granted(waited)).is_err() {
                // The receiver is gone (it cannot be while its waiter is
                // queued, but the count must not depend on that).
                self.in_use -= 1;
            }
        }
    }
}

/// How long a waiter of `class` may stand in an overloaded queue: `target`,
/// and `interval` for critical waiters. The less critical are refused
/// first (docs/contract.md §2 rule 11): critical waiters are served first
/// and refused only when even they have stood a whole interval, that is
/// when critical work alone overloads the dependency.
fn standing_target(config: &QueueConfig, class: usize) -> std::time::Duration {
    if class == Criticality::Critical.rank() {
        config.interval
    } else {
        config.target
    }
}
