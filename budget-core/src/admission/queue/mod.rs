//! [`PermitQueue`]: a pool of concurrency permits whose waiting line never
//! hands a permit to a waiter that can no longer finish, serves the more
//! critical first, and refuses early when a queue stands.
//!
//! # Why not a semaphore?
//!
//! A FIFO semaphore under overload gives each freed permit to the waiter
//! that has waited longest, which is the one with the least time left. Every
//! waiter then fails at its deadline, having held a place in line for
//! nothing. This queue applies three rules instead, after the adaptive-LIFO
//! and controlled-delay queues of Facebook's "Fail at Scale" (ACM Queue,
//! 2015) and the SRE book's "Handling Overload" chapter.
//!
//! # The rules
//!
//! A caller asks with a [`Waiter`]: its [`Criticality`] and `give_up_at`,
//! the instant after which it cannot finish any more (the client computes
//! its deadline minus its floor). [`PermitQueue::acquire`] takes a free
//! permit at once when nobody waits; otherwise the waiter queues, and:
//!
//! 1. **No permit for a waiter that can no longer finish.** A waiter whose
//!    `give_up_at` has come is refused [`RefusalReason::Expired`] at that
//!    instant by its own timer (exactly, to the 1 ms resolution of tokio's
//!    timer), and a permit handed out at or after that instant skips it
//!    whether or not the timer has fired. A waiter whose `give_up_at` has already come on
//!    arrival is refused at once (waited zero), even if a permit is free.
//!    A grant read by the waiter only at or after its `give_up_at` (its task
//!    was not polled in time) is returned and counts as `Expired`.
//! 2. **Order.** A free permit goes to the most critical class that has a
//!    waiter (strict priority: `Critical`, then `Default`, then
//!    `Sheddable`). Within the class, [`QueueOrder::Fifo`] serves the oldest
//!    waiter, [`QueueOrder::Lifo`] the newest, and [`QueueOrder::Adaptive`]
//!    the oldest normally and the newest while the queue is overloaded.
//! 3. **Standing queue (controlled delay).** Let `last_empty` be the last
//!    instant no waiter was queued (the instant the current line's first
//!    waiter arrived). The queue is *overloaded* at `now` when a waiter is
//!    queued and `now >= last_empty + interval`. A queued waiter is refused
//!    [`RefusalReason::StandingQueue`] at the first instant both hold: the
//!    queue is overloaded, and `now >= enqueued + target`. So when overload
//!    begins, every waiter already `target` old is refused at that instant;
//!    a later one is refused `target` after it arrived if still queued.
//!    Because `last_empty` is fixed while anyone waits, each waiter's due
//!    instant is `min(give_up_at, max(enqueued + target, last_empty +
//!    interval))`, known on arrival (a tie with `give_up_at` is reported as
//!    `StandingQueue`). When several are due at one instant they are
//!    refused least critical class first, oldest first. The rule
//!    holds for every [`QueueOrder`]. A `Critical` waiter's standing
//!    target is `interval` instead of `target`: the less critical are
//!    refused first, and a critical waiter only when critical work alone
//!    has kept the queue standing (docs/contract.md §2 rule 11). While not
//!    overloaded, a waiter waits until its `give_up_at`.
//! 4. **No lost permit.** A returned permit goes to the next live waiter
//!    (by rules 1 to 3) or back to the pool. A waiter whose `acquire` future
//!    is dropped leaves the line; if a permit had already been handed to it,
//!    dropping returns that permit to the next waiter. `in_use` never
//!    exceeds `limit` through a grant.
//! 5. **Changing the limit.** [`PermitQueue::set_limit`] growing hands the
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
//! and the uncontended path of [`PermitQueue::acquire`] lock once and do not
//! allocate; a queued waiter allocates one `tokio::sync::oneshot` channel.
//! No task is spawned: each waiter's own future runs its timer.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::admission::{Criticality, PermitQueue, QueueConfig, RefusalReason, Waiter};
//! use tokio::time::Instant;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
//! let held = queue.try_acquire(Criticality::Default).unwrap();
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
use super::Criticality;
use crate::config::ConfigError;

pub use self::config::{DEFAULT_INTERVAL, DEFAULT_TARGET, QueueConfig, QueueOrder};
pub use self::refusal::{Refusal, RefusalReason};

/// A pool of `limit` concurrency permits with a deadline-aware, priority
/// and controlled-delay waiting line; see the [module docs](self) for the
/// rules.
///
/// Cloning is cheap and shares the pool.
///
/// # Example
///
/// ```
/// use budget_core::admission::{Criticality, PermitQueue, QueueConfig};
///
/// let queue = PermitQueue::new(2, QueueConfig::default()).unwrap();
/// let a = queue.try_acquire(Criticality::Default).unwrap();
/// let _b = queue.try_acquire(Criticality::Default).unwrap();
/// assert!(queue.try_acquire(Criticality::Critical).is_none());
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

    /// Takes back one permit and hands it on (rule 4).
    fn release(&self) {
        let now = Instant::now();
        let mut state = self.lock();
        state.in_use = state.in_use.saturating_sub(1);
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
/// use budget_core::admission::{Criticality, Waiter};
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
    /// use budget_core::admission::{Criticality, Waiter};
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
    /// use budget_core::admission::{Criticality, Waiter};
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
    /// use budget_core::admission::{PermitQueue, QueueConfig};
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
    /// use budget_core::admission::{PermitQueue, QueueConfig};
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
    /// use budget_core::admission::{PermitQueue, QueueConfig};
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
    /// use budget_core::admission::{Criticality, PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(3, QueueConfig::default()).unwrap();
    /// let _p = queue.try_acquire(Criticality::Default);
    /// assert_eq!(queue.in_use(), 1);
    /// # }
    /// ```
    pub fn in_use(&self) -> usize {
        self.shared.lock().in_use
    }

    /// How many waiters are queued.
    ///
    /// ```
    /// use budget_core::admission::{PermitQueue, QueueConfig};
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
    /// use budget_core::admission::{Criticality, PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(2, QueueConfig::default()).unwrap();
    /// let (a, _b) = (queue.try_acquire(Criticality::Default), queue.try_acquire(Criticality::Default));
    /// queue.set_limit(1);
    /// assert_eq!((queue.limit(), queue.in_use()), (1, 2));
    /// drop(a);
    /// assert!(queue.try_acquire(Criticality::Default).is_none()); // 1 held, limit 1
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

    /// A permit if one is free and nobody is waiting, without waiting.
    ///
    /// `criticality` does not change the answer: a free permit with nobody
    /// waiting goes to anyone. It is asked for so that callers say it and a
    /// future policy (a reserve for critical requests, say) can use it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::{Criticality, PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// let permit = queue.try_acquire(Criticality::Sheddable).unwrap();
    /// assert_eq!(permit.waited(), Duration::ZERO);
    /// assert!(queue.try_acquire(Criticality::Critical).is_none());
    /// # }
    /// ```
    pub fn try_acquire(&self, criticality: Criticality) -> Option<QueuePermit> {
        let _ = criticality;
        let taken = self.shared.lock().try_take();
        taken.then(|| self.permit(Duration::ZERO))
    }

    /// Waits for a permit by the rules of the [module docs](self): at once
    /// if one is free and nobody waits, else in line until granted or
    /// refused ([`RefusalReason::Expired`] at `give_up_at`,
    /// [`RefusalReason::StandingQueue`] when the queue stands).
    ///
    /// Cancel-safe: dropping the future leaves the line, and returns a
    /// permit that was handed to it meanwhile.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::{Criticality, PermitQueue, QueueConfig, Waiter};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// let held = queue.try_acquire(Criticality::Default).unwrap();
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
        let (ticket, rx, due) = {
            let mut state = self.shared.lock();
            if waiter.give_up_at <= now {
                return Err(Refusal::new(RefusalReason::Expired, Duration::ZERO));
            }
            if state.try_take() {
                drop(state);
                return Ok(self.permit(Duration::ZERO));
            }
            let (ticket, rx) = state.enqueue(waiter.criticality, waiter.give_up_at, now);
            let due = state.due(&ticket, config);
            (ticket, rx, due)
        };
        InLine {
            queue: self,
            ticket,
            rx,
            settled: false,
        }
        .wait(due)
        .await
    }

    /// Whether the queue is overloaded now: a waiter is queued and the queue
    /// has not been empty for `interval` (rule 3 of the
    /// [module docs](self)). For metrics and for servers that shed load.
    ///
    /// ```
    /// use budget_core::admission::{PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert!(!PermitQueue::new(1, QueueConfig::default()).unwrap().is_overloaded());
    /// # }
    /// ```
    pub fn is_overloaded(&self) -> bool {
        let now = Instant::now();
        self.shared.lock().is_overloaded(now, &self.shared.config)
    }

    /// A permit of this queue, already counted in `in_use`.
    fn permit(&self, waited: Duration) -> QueuePermit {
        QueuePermit {
            shared: Arc::clone(&self.shared),
            waited,
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
/// use budget_core::admission::{Criticality, PermitQueue, QueueConfig};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
/// let permit = queue.try_acquire(Criticality::Default).unwrap();
/// assert_eq!(queue.in_use(), 1);
/// drop(permit);
/// assert_eq!(queue.in_use(), 0);
/// # }
/// ```
pub struct QueuePermit {
    shared: Arc<Shared>,
    waited: Duration,
}

impl QueuePermit {
    /// How long the holder waited in line for this permit (zero when it was
    /// free on arrival).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::{Criticality, PermitQueue, QueueConfig};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = PermitQueue::new(1, QueueConfig::default()).unwrap();
    /// assert_eq!(queue.try_acquire(Criticality::Default).unwrap().waited(), Duration::ZERO);
    /// # }
    /// ```
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

impl Drop for QueuePermit {
    fn drop(&mut self) {
        self.shared.release();
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
    /// Waits for the outcome, refusing itself when `due` comes.
    async fn wait(mut self, mut due: Instant) -> Result<QueuePermit, Refusal> {
        let shared = &self.queue.shared;
        loop {
            match tokio::time::timeout_at(due, &mut self.rx).await {
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
                    // Standing waiters due now (perhaps this one) go first,
                    // least critical first.
                    state.refuse_standing(now, &shared.config);
                    if !state.is_queued(&self.ticket) {
                        // Told under the lock: the outcome is in `rx`.
                        continue;
                    }
                    if self.ticket.give_up_at <= now {
                        state.withdraw(&self.ticket, now);
                        drop(state);
                        self.settled = true;
                        return Err(self.refusal(RefusalReason::Expired, now));
                    }
                    // Woken early (not expected): wait for the due time again.
                    due = state.due(&self.ticket, &shared.config);
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
                let permit = self.queue.permit(waited);
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
            drop(self.queue.permit(waited));
        }
    }
}
