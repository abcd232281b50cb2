//! [`PermitQueue`]: a pool of concurrency permits whose waiting line never
//! hands a permit to a waiter that can no longer finish, serves the more
//! critical first, and refuses early when a queue stands.
//!
//! # Why not a semaphore?
//!
//! A FIFO semaphore under overload gives each freed permit to the waiter
//! that has waited longest, which is the one with the least time left. Every
//! waiter then fails at its deadline, having held a place in line for
//! nothing. A load shedder (a queue of zero) fails the other way: a burst
//! that every caller could have waited out is refused. This queue knows
//! what a shedder does not, how long each waiter can still wait, and
//! applies one principle: **wait when the wait fits, refuse at once when
//! it does not** (admission by response-time objective, as in Bouncer,
//! SIGMOD 2024, with each request's objective its own budget).
//!
//! # The rules
//!
//! A caller asks with a [`Waiter`]: its [`Criticality`] and `give_up_at`,
//! the instant after which it cannot finish any more (the client computes
//! its deadline minus its floor). [`PermitQueue::acquire`] takes a free
//! permit at once when nobody waits; otherwise:
//!
//! 1. **Wait when the wait fits.** The queue measures how long a permit is
//!    held (`hold`: the mean of the last round returned, the last `limit`
//!    permits, at least 10 and at most 64) and predicts a newcomer's
//!    wait: with `ahead` waiters of its criticality
//!    or a higher one queued before it, `needed = ahead + 1 + over`
//!    permits must come back first (`over`: permits held beyond a shrunk
//!    limit). They come back in rounds of `limit`, one `hold` apart, the
//!    first round once the permits held now reach an age of one `hold`
//!    (their mean age: a burst's permits, taken together, come back
//!    together; permits taken one by one, about half a hold from now):
//!    the wait is that first return plus `ceil(needed / limit) - 1`
//!    holds, counted in arrival order. While an adaptive limit grows (its
//!    slow start, [`PermitQueue::set_growth`]), the limit doubles every
//!    growth period and the prediction counts the rounds that takes
//!    instead. A newcomer whose predicted wait does not end before its
//!    `give_up_at` is refused **at arrival**
//!    ([`RefusalReason::PredictedWait`], waited zero, the [`Prediction`]
//!    on the refusal); one whose wait fits queues. Before any permit has
//!    come back there is no prediction, and everyone queues. The
//!    prediction is kept honest: each time permits are handed out in
//!    arrival order, the newest waiters whose prediction (with the hold,
//!    the permits' ages and the limit as they are now) no longer ends
//!    before their `give_up_at` are refused then, so a burst that came
//!    before anything was measured is sorted out at the first answer.
//! 2. **No permit for a waiter that can no longer finish.** A waiter whose
//!    `give_up_at` has come is refused [`RefusalReason::Expired`] at that
//!    instant by its own timer (exactly, to the 1 ms resolution of tokio's
//!    timer), and a permit handed out at or after that instant skips it
//!    whether or not the timer has fired. A waiter whose `give_up_at` has
//!    already come on arrival is refused at once (waited zero), even if a
//!    permit is free. A grant read by the waiter only at or after its
//!    `give_up_at` (its task was not polled in time) is returned and counts
//!    as `Expired`.
//! 3. **Order.** A free permit goes to the most critical class that has a
//!    waiter (strict priority: `Critical`, then `Default`, then
//!    `Sheddable`). Within the class, [`QueueOrder::Fifo`] serves the oldest
//!    waiter, [`QueueOrder::Lifo`] the newest, and [`QueueOrder::Adaptive`]
//!    the oldest normally and the newest while the queue stands (rule 4).
//! 4. **A standing queue bounds the wait it adds.** A burst drains; a
//!    queue fed faster than it drains does not, and every caller behind
//!    it pays the wait on top of the calls it still has to make. The queue
//!    *stands* at `now` when all of these hold: a waiter is queued; it has
//!    not been empty for `interval`; since it was last empty a newcomer
//!    came whose predicted wait was more than `standing_share` of what it
//!    could wait (the queue is deep for its callers); and over the last
//!    half `interval` or so more newcomers found no free permit than
//!    queued waiters got one (it is not draining). While it stands, a
//!    newcomer whose predicted wait is more than `standing_share` of what
//!    it can wait (and more than `target`) is refused at arrival
//!    ([`RefusalReason::StandingQueue`]), and each such refusal, or a
//!    `PredictedWait` one, keeps it standing for another `interval`,
//!    empty or not. So a burst the budgets cover (nobody deep, or nothing
//!    arriving any more) is waited out whole, and a sustained overload
//!    keeps a short queue of waiters who will still have most of their
//!    budget when they get their permit, the rest refused at once.
//!    Served newest first, a queued waiter that has waited more than
//!    `standing_share` of what it could wait when it came (and more than
//!    `target`) is refused then (`StandingQueue`, with how long it
//!    waited): newcomers overtake it for as long as the queue stands,
//!    which nothing promises will end before its give-up instant, and a
//!    refusal late in its budget is one its caller can no longer use.
//!    A queue that has stood longer than `sustained` without a break is a
//!    sustained overload, not a burst: for both bounds the share shrinks
//!    to `standing_share * sustained / stood` (never below `target`), so
//!    the queue it keeps drains towards `target` and is short when the
//!    overload ends. It counts from when the queue last started
//!    standing.
//! 5. **No lost permit.** A returned permit goes to the next live waiter
//!    (by rules 1 to 4) or back to the pool. A waiter whose `acquire` future
//!    is dropped leaves the line; if a permit had already been handed to it,
//!    dropping returns that permit to the next waiter. `in_use` never
//!    exceeds `limit` through a grant.
//! 6. **Changing the limit.** [`PermitQueue::set_limit`] growing hands the
//!    new permits to waiters at once, in the order above. Shrinking never
//!    takes back a held permit: `in_use` may exceed the new limit until
//!    permits come back, and no permit is granted until it is below.
//!
//! All time is read from [`tokio::time::Instant`], so paused-clock tests
//! govern every rule exactly.
//!
//! # Cost
//!
//! One `std::sync::Mutex` around a small state. [`PermitQueue::try_acquire`]
//! and the uncontended path of [`PermitQueue::acquire`] lock once, read the
//! clock once (a permit's hold is measured) and do not allocate; a queued
//! waiter allocates one `tokio::sync::oneshot` channel.
//! No task is spawned: each waiter's own future runs its timer.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::admission::criticality::Criticality;
//! use budget_core::admission::queue::{PermitQueue, QueueConfig, RefusalReason, Waiter};
//! use tokio::time::Instant;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
//! let held = queue.try_acquire().unwrap();
//!
//! // Nothing frees the permit in time: the waiter is refused at its give-up instant.
//! let start = Instant::now();
//! let waiter = Waiter::new(start + Duration::from_millis(30), Criticality::Critical);
//! let refusal = queue.acquire(waiter).await.unwrap_err();
//! assert_eq!(refusal.reason(), RefusalReason::Expired);
//! assert_eq!(refusal.waited(), Duration::from_millis(30));
//!
//! drop(held);
//! let permit = queue.acquire(waiter.with_give_up_at(Instant::now() + Duration::from_secs(1))).await.unwrap();
//! assert_eq!(permit.waited(), Duration::ZERO);
//! assert_eq!(queue.in_use(), 1);
//! # }
//! ```

mod config;
mod refusal;
mod state;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use self::state::{Outcome, State, Ticket};
use super::criticality::Criticality;
use crate::config::ConfigError;

pub use self::config::{
    DEFAULT_INTERVAL, DEFAULT_STANDING_SHARE, DEFAULT_SUSTAINED, DEFAULT_TARGET, QueueConfig,
    QueueOrder,
};
pub use self::refusal::{Prediction, Refusal, RefusalReason};

/// A pool of `limit` concurrency permits with a deadline-aware, priority
/// and controlled-delay waiting line; see the [module docs](self) for the
/// rules.
///
/// Cloning is cheap and shares the pool.
///
/// # Example
///
/// ```
/// use budget_core::admission::criticality::Criticality;
/// use budget_core::admission::queue::{PermitQueue, QueueConfig};
///
/// let queue = PermitQueue::new(2, QueueConfig::default()).unwrap();
/// let a = queue.try_acquire().unwrap();
/// let _b = queue.try_acquire().unwrap();
/// assert!(queue.try_acquire().is_none());
/// drop(a);
/// assert_eq!(queue.in_use(), 1);
/// ```
#[derive(Clone)]
pub struct PermitQueue {
    shared: Arc<Shared>,
}

/// What every clone of a queue and every permit share.
struct Shared {
    config: QueueConfig,
    state: Mutex<State>,
}

impl Shared {
    /// The state, even after a panic elsewhere: no code under the lock
    /// leaves it half-changed.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes back one permit, held since `since`, and hands it on (rule 5).
    fn release(&self, since: Instant) {
        let now = Instant::now();
        let mut state = self.lock();
        state.returned(since, now);
        state.hand_out(now, &self.config);
    }
}

/// Who is asking for a permit: the instant it can no longer finish, and how
/// much it matters.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::criticality::Criticality;
/// use budget_core::admission::queue::Waiter;
/// use tokio::time::Instant;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let now = Instant::now();
/// let deadline = now + Duration::from_millis(900);
/// let floor = Duration::from_millis(100);
/// let give_up_at = deadline.checked_sub(floor).unwrap_or(now).max(now);
/// let waiter = Waiter::new(give_up_at, Criticality::Default);
/// assert_eq!(waiter.give_up_at, now + Duration::from_millis(800));
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Waiter {
    /// The moment this waiter can no longer finish (the caller computes
    /// `deadline - floor`); it is refused then if still waiting.
    pub give_up_at: Instant,
    /// How much the request matters.
    pub criticality: Criticality,
}

impl Waiter {
    /// A waiter giving up at `give_up_at`.
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::Waiter;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let w = Waiter::new(tokio::time::Instant::now(), Criticality::Critical);
    /// assert_eq!(w.criticality, Criticality::Critical);
    /// # }
    /// ```
    pub const fn new(give_up_at: Instant, criticality: Criticality) -> Self {
        Self {
            give_up_at,
            criticality,
        }
    }

    /// The same waiter giving up at `give_up_at` instead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::Waiter;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let now = tokio::time::Instant::now();
    /// let w = Waiter::new(now, Criticality::Default).with_give_up_at(now + Duration::from_secs(1));
    /// assert_eq!(w.give_up_at, now + Duration::from_secs(1));
    /// # }
    /// ```
    pub const fn with_give_up_at(self, give_up_at: Instant) -> Self {
        Self { give_up_at, ..self }
    }
}

impl PermitQueue {
    /// A queue of `limit` permits, or a [`ConfigError`] naming `limit` (zero)
    /// or the bad field of `config` (see [`QueueConfig::validate`]).
    ///
    /// ```
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(8, QueueConfig::default()).unwrap();
    /// assert_eq!(queue.limit(), 8);
    /// let err = PermitQueue::new(0, QueueConfig::default()).unwrap_err();
    /// assert_eq!(err.field(), "limit");
    /// # }
    /// ```
    pub fn new(limit: usize, config: QueueConfig) -> Result<Self, ConfigError> {
        if limit == 0 {
            return Err(ConfigError::new("limit", "must be at least 1"));
        }
        config.validate()?;
        Ok(Self {
            shared: Arc::new(Shared {
                config,
                state: Mutex::new(State::new(limit, Instant::now())),
            }),
        })
    }

    /// The configuration the queue runs with.
    ///
    /// ```
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// assert_eq!(queue.config(), QueueConfig::default());
    /// # }
    /// ```
    pub fn config(&self) -> QueueConfig {
        self.shared.config
    }

    /// How many permits may be held at once.
    ///
    /// ```
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(PermitQueue::new(3, QueueConfig::default()).unwrap().limit(), 3);
    /// # }
    /// ```
    pub fn limit(&self) -> usize {
        self.shared.lock().limit
    }

    /// How many permits are held (or handed to a waiter that has not read
    /// its grant yet). After a [`set_limit`](Self::set_limit) shrink this may
    /// exceed [`limit`](Self::limit) until permits come back.
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(3, QueueConfig::default()).unwrap();
    /// let _p = queue.try_acquire();
    /// assert_eq!(queue.in_use(), 1);
    /// # }
    /// ```
    pub fn in_use(&self) -> usize {
        self.shared.lock().in_use
    }

    /// How many waiters are queued.
    ///
    /// ```
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(PermitQueue::new(3, QueueConfig::default()).unwrap().waiting(), 0);
    /// # }
    /// ```
    pub fn waiting(&self) -> usize {
        self.shared.lock().waiting()
    }

    /// Changes the number of permits (for an adaptive limiter); a `limit` of
    /// zero is taken as 1.
    ///
    /// Growing hands the new permits to waiters at once, most critical
    /// first. Shrinking never takes back a held permit: it takes effect as
    /// permits come back.
    ///
    /// ```
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(2, QueueConfig::default()).unwrap();
    /// let (a, _b) = (queue.try_acquire(), queue.try_acquire());
    /// queue.set_limit(1);
    /// assert_eq!((queue.limit(), queue.in_use()), (1, 2));
    /// drop(a);
    /// assert!(queue.try_acquire().is_none()); // 1 held, limit 1
    /// queue.set_limit(0);
    /// assert_eq!(queue.limit(), 1);
    /// # }
    /// ```
    pub fn set_limit(&self, limit: usize) {
        let now = Instant::now();
        let mut state = self.shared.lock();
        state.limit = limit.max(1);
        state.hand_out(now, &self.shared.config);
    }

    /// Tells the queue that its limit is growing, doubling about every
    /// `period` (an adaptive limit's slow start), or no longer (`None`):
    /// the predicted wait (rule 1) counts the rounds of doubling instead
    /// of the limit as it is now.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(10, QueueConfig::default()).unwrap();
    /// queue.set_growth(Some(Duration::from_millis(100)));
    /// queue.set_growth(None);
    /// # }
    /// ```
    pub fn set_growth(&self, period: Option<Duration>) {
        self.shared.lock().set_growth(period);
    }

    /// How long a permit is held: the mean of the last round returned (the
    /// last `limit` permits, at least 10 and at most 64; fewer before that
    /// many came back, `None` before one has). What rule 1's prediction is
    /// made of.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// assert_eq!(queue.hold(), None);
    /// let permit = queue.try_acquire().unwrap();
    /// tokio::time::advance(Duration::from_millis(40)).await;
    /// drop(permit);
    /// assert_eq!(queue.hold(), Some(Duration::from_millis(40)));
    /// # }
    /// ```
    pub fn hold(&self) -> Option<Duration> {
        self.shared.lock().hold()
    }

    /// A permit if one is free and nobody is waiting, without waiting: a
    /// free permit with nobody waiting goes to anyone, whatever its
    /// criticality.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// let permit = queue.try_acquire().unwrap();
    /// assert_eq!(permit.waited(), Duration::ZERO);
    /// assert!(queue.try_acquire().is_none());
    /// # }
    /// ```
    pub fn try_acquire(&self) -> Option<QueuePermit> {
        let now = Instant::now();
        let taken = self.shared.lock().try_take(now);
        taken.then(|| self.permit_since(Duration::ZERO, now))
    }

    /// Waits for a permit by the rules of the [module docs](self): at once
    /// if one is free and nobody waits; else refused at arrival when the
    /// predicted wait does not fit ([`RefusalReason::PredictedWait`]) or
    /// the queue stands ([`RefusalReason::StandingQueue`]); else in line
    /// until granted or refused ([`RefusalReason::Expired`] at
    /// `give_up_at`, `PredictedWait` when the prediction stops fitting).
    ///
    /// Cancel-safe: dropping the future leaves the line, and returns a
    /// permit that was handed to it meanwhile.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig, Waiter};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// let held = queue.try_acquire().unwrap();
    /// let waiter = Waiter::new(Instant::now() + Duration::from_secs(1), Criticality::Default);
    /// let (permit, ()) = tokio::join!(queue.acquire(waiter), async {
    ///     tokio::time::sleep(Duration::from_millis(3)).await;
    ///     drop(held);
    /// });
    /// assert_eq!(permit.unwrap().waited(), Duration::from_millis(3));
    /// # }
    /// ```
    pub async fn acquire(&self, waiter: Waiter) -> Result<QueuePermit, Refusal> {
        let now = Instant::now();
        let config = &self.shared.config;
        let (ticket, rx) = {
            let mut state = self.shared.lock();
            if waiter.give_up_at <= now {
                return Err(Refusal::new(RefusalReason::Expired, Duration::ZERO));
            }
            if state.try_take(now) {
                drop(state);
                return Ok(self.permit_since(Duration::ZERO, now));
            }
            let class = waiter.criticality.rank();
            state.admit(class, waiter.give_up_at, now, config)?;
            state.enqueue(waiter.criticality, waiter.give_up_at, now)
        };
        InLine {
            queue: self,
            ticket,
            rx,
            settled: false,
        }
        .wait()
        .await
    }

    /// Whether the queue stands now (rule 4 of the [module docs](self)):
    /// it has not emptied for `interval`, is deep for its callers and is
    /// fed faster than it drains, or refused a newcomer as standing within
    /// the last `interval`. For metrics and for servers that shed load.
    ///
    /// ```
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert!(!PermitQueue::new(1, QueueConfig::default()).unwrap().is_overloaded());
    /// # }
    /// ```
    pub fn is_overloaded(&self) -> bool {
        let now = Instant::now();
        self.shared.lock().is_standing(now, &self.shared.config)
    }

    /// A permit of this queue, already counted in `in_use`, held from
    /// `since`.
    fn permit_since(&self, waited: Duration, since: Instant) -> QueuePermit {
        QueuePermit {
            shared: Arc::clone(&self.shared),
            waited,
            since,
        }
    }
}

impl fmt::Debug for PermitQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("PermitQueue")
            .field("limit", &state.limit)
            .field("in_use", &state.in_use)
            .field("waiting", &state.waiting())
            .field("config", &self.shared.config)
            .finish()
    }
}

/// A held permit of a [`PermitQueue`]; dropping it returns it (to the next
/// waiter, or to the pool).
///
/// # Example
///
/// ```
/// use budget_core::admission::criticality::Criticality;
/// use budget_core::admission::queue::{PermitQueue, QueueConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
/// let permit = queue.try_acquire().unwrap();
/// assert_eq!(queue.in_use(), 1);
/// drop(permit);
/// assert_eq!(queue.in_use(), 0);
/// # }
/// ```
pub struct QueuePermit {
    shared: Arc<Shared>,
    waited: Duration,
    /// When it was handed out: its hold is measured from here.
    since: Instant,
}

impl QueuePermit {
    /// How long the holder waited in line for this permit (zero when it was
    /// free on arrival).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::criticality::Criticality;
    /// use budget_core::admission::queue::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// assert_eq!(queue.try_acquire().unwrap().waited(), Duration::ZERO);
    /// # }
    /// ```
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl Drop for QueuePermit {
    fn drop(&mut self) {
        self.shared.release(self.since);
    }
}

impl fmt::Debug for QueuePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuePermit")
            .field("waited", &self.waited)
            .finish_non_exhaustive()
    }
}

/// A waiter in line. Dropping it before it settles (its `acquire` future
/// was cancelled) takes it out of the line, or returns the permit that was
/// handed to it meanwhile.
struct InLine<'a> {
    queue: &'a PermitQueue,
    ticket: Ticket,
    rx: oneshot::Receiver<Outcome>,
    settled: bool,
}

impl InLine<'_> {
    /// Waits for the outcome, refusing itself when `give_up_at` comes.
    async fn wait(mut self) -> Result<QueuePermit, Refusal> {
        let shared = &self.queue.shared;
        let give_up_at = self.ticket.give_up_at;
        loop {
            match tokio::time::timeout_at(give_up_at, &mut self.rx).await {
                Ok(Ok(outcome)) => return self.settle(outcome),
                Ok(Err(_)) => {
                    // Every entry taken out of the line by someone else is
                    // told first, so a closed channel cannot happen; if it
                    // did, no permit was counted for this waiter.
                    self.settled = true;
                    return Err(self.refusal(RefusalReason::Expired, Instant::now()));
                }
                Err(_) => {
                    let now = Instant::now();
                    let mut state = shared.lock();
                    if !state.is_queued(&self.ticket) {
                        // Told under the lock: the outcome is in `rx`.
                        drop(state);
                        if let Ok(outcome) = self.rx.try_recv() {
                            return self.settle(outcome);
                        }
                        continue;
                    }
                    state.withdraw(&self.ticket, now);
                    drop(state);
                    self.settled = true;
                    return Err(self.refusal(RefusalReason::Expired, now));
                }
            }
        }
    }

    /// Turns the outcome into the answer; a grant read at or after
    /// `give_up_at` is returned (rule 1).
    fn settle(&mut self, outcome: Outcome) -> Result<QueuePermit, Refusal> {
        self.settled = true;
        match outcome {
            Outcome::Granted(waited) => {
                let permit = self.granted(waited);
                let now = Instant::now();
                if now >= self.ticket.give_up_at {
                    drop(permit);
                    return Err(self.refusal(RefusalReason::Expired, now));
                }
                Ok(permit)
            }
            Outcome::Refused(refusal) => Err(refusal),
        }
    }

    /// The permit granted after `waited`, held from the instant it was
    /// granted (as the queue counted it).
    fn granted(&self, waited: Duration) -> QueuePermit {
        let since = self
            .ticket
            .enqueued
            .checked_add(waited)
            .unwrap_or(self.ticket.enqueued);
        self.queue.permit_since(waited, since)
    }

    /// A refusal for this waiter at `now`.
    fn refusal(&self, reason: RefusalReason, now: Instant) -> Refusal {
        Refusal::new(reason, now.saturating_duration_since(self.ticket.enqueued))
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let withdrawn = self
            .queue
            .shared
            .lock()
            .withdraw(&self.ticket, Instant::now());
        if withdrawn {
            return;
        }
        // Taken out by someone else, who told us under the lock: a grant
        // must go back (outside the lock).
        if let Ok(Outcome::Granted(waited)) = self.rx.try_recv() {
            drop(self.granted(waited));
        }
    }
}
