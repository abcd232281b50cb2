//! Single-flight refresh: many callers needing the same fresh value cause
//! one refresh, and all of them get its result.
//!
//! When an auth token expires, every request in flight notices at once. If
//! each one fetched a new token, the token service would take a burst of
//! identical calls exactly when it matters least, and each request would pay
//! for a fetch out of its own budget. With [`SingleFlight`], the first caller
//! (the *leader*) runs the refresh; the callers arriving while it runs wait
//! for it and receive a clone of its result, success or error. Once the
//! flight has landed, the next call starts a new one: `SingleFlight` keeps
//! no cache; keep the value (and its expiry) yourself and call
//! [`SingleFlight::run`] only when it needs refreshing.
//!
//! # Cancellation and panics
//!
//! The refresh runs inside the leader's own future, so a leader that is
//! cancelled (its request ran out of budget, its client went away) takes
//! its refresh down with it. The waiters do not hang: the first of them to
//! notice becomes the new leader and runs *its own* refresh closure, and the
//! others wait for that one. A refresh that panics does the same: the panic
//! unwinds through the leader's caller only, a waiter takes over, and the
//! `SingleFlight` stays usable (it holds no lock while user code runs, so
//! nothing is poisoned).
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//! use budget_core::single_flight::SingleFlight;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let refresh = Arc::new(SingleFlight::<String, String>::new());
//! let fetches = Arc::new(AtomicUsize::new(0));
//!
//! let callers: Vec<_> = (0..10)
//!     .map(|_| {
//!         let (refresh, fetches) = (Arc::clone(&refresh), Arc::clone(&fetches));
//!         tokio::spawn(async move {
//!             refresh
//!                 .run(|| async {
//!                     fetches.fetch_add(1, Ordering::SeqCst);
//!                     tokio::time::sleep(Duration::from_millis(50)).await; // the token service
//!                     Ok("token-1".to_owned())
//!                 })
//!                 .await
//!         })
//!     })
//!     .collect();
//! for caller in callers {
//!     assert_eq!(caller.await.unwrap(), Ok("token-1".to_owned()));
//! }
//! assert_eq!(fetches.load(Ordering::SeqCst), 1);
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// The outcome of a flight, once it has landed.
type Landing<T, E> = Option<Result<T, E>>;

/// Runs one refresh at a time; concurrent callers share its result.
///
/// `T` and `E` are cloned once per waiting caller. Put a `SingleFlight` in
/// the struct that owns the refreshed value (or in an `Arc`) and share that.
///
/// # Example
///
/// ```
/// use budget_core::single_flight::SingleFlight;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let flight: SingleFlight<u32, String> = SingleFlight::new();
/// assert_eq!(flight.run(|| async { Ok(7) }).await, Ok(7));
/// assert_eq!(flight.run(|| async { Err("denied".to_owned()) }).await, Err("denied".to_owned()));
/// # }
/// ```
pub struct SingleFlight<T, E> {
    state: Mutex<State<T, E>>,
}

struct State<T, E> {
    /// The flight in the air, if any: its number and where it lands.
    flight: Option<(u64, watch::Receiver<Landing<T, E>>)>,
    next_id: u64,
}

/// What a caller does: lead a new flight, or wait for the one in the air.
enum Role<T, E> {
    Lead(u64, watch::Sender<Landing<T, E>>),
    Wait(watch::Receiver<Landing<T, E>>),
}

impl<T, E> SingleFlight<T, E> {
    /// A `SingleFlight` with nothing in the air.
    ///
    /// ```
    /// # use budget_core::single_flight::SingleFlight;
    /// static TOKEN_REFRESH: SingleFlight<String, String> = SingleFlight::new();
    /// assert!(!TOKEN_REFRESH.is_in_flight());
    /// ```
    pub const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                flight: None,
                next_id: 0,
            }),
        }
    }

    /// True while a refresh is running.
    ///
    /// ```
    /// # use budget_core::single_flight::SingleFlight;
    /// let flight = SingleFlight::<(), ()>::new();
    /// assert!(!flight.is_in_flight());
    /// ```
    pub fn is_in_flight(&self) -> bool {
        self.lock().flight.is_some()
    }

    fn lock(&self) -> MutexGuard<'_, State<T, E>> {
        // No user code runs under the lock; a poisoned lock still holds a
        // consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the flight in the air, or starts one.
    fn board(&self) -> Role<T, E> {
        let mut state = self.lock();
        if let Some((_, landing)) = &state.flight {
            return Role::Wait(landing.clone());
        }
        let id = state.next_id;
        state.next_id = id.wrapping_add(1);
        let (tx, rx) = watch::channel(None);
        state.flight = Some((id, rx));
        Role::Lead(id, tx)
    }

    /// Takes flight `id` off the board, if it is still the one in the air.
    fn clear(&self, id: u64) {
        let mut state = self.lock();
        if state
            .flight
            .as_ref()
            .is_some_and(|(current, _)| *current == id)
        {
            state.flight = None;
        }
    }
}

impl<T: Clone, E: Clone> SingleFlight<T, E> {
    /// Returns the result of a refresh: the one in the air if there is one
    /// (`f` is then not called), or a new one running `f`.
    ///
    /// If the leader of the flight this caller waits for is cancelled or
    /// panics, this caller (or another waiter) takes over and runs its own
    /// `f`; see the [module docs](self).
    ///
    /// ```
    /// # use budget_core::single_flight::SingleFlight;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let flight = SingleFlight::<u32, ()>::new();
    /// assert_eq!(flight.run(|| async { Ok(1) }).await, Ok(1));
    /// // The first flight has landed: the next call refreshes again.
    /// assert_eq!(flight.run(|| async { Ok(2) }).await, Ok(2));
    /// # }
    /// ```
    pub async fn run<F, Fut>(&self, f: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        loop {
            match self.board() {
                Role::Lead(id, landing) => return self.lead(id, landing, f).await,
                Role::Wait(mut landing) => {
                    if let Ok(landed) = landing.wait_for(Option::is_some).await
                        && let Some(result) = landed.as_ref()
                    {
                        return result.clone();
                    }
                    // The leader left without a result: board again, and
                    // lead if nobody else has taken over yet.
                }
            }
        }
    }

    async fn lead<F, Fut>(
        &self,
        id: u64,
        landing: watch::Sender<Landing<T, E>>,
        f: F,
    ) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        // Dropped early (cancelled, or unwinding from a panic in `f`), the
        // pilot takes the flight off the board and closes the channel, which
        // wakes the waiters to take over.
        let pilot = Pilot {
            flight: self,
            id,
            landing: Some(landing),
        };
        let result = f().await;
        pilot.land(&result);
        result
    }
}

/// The leader's guard over its flight.
struct Pilot<'a, T, E> {
    flight: &'a SingleFlight<T, E>,
    id: u64,
    landing: Option<watch::Sender<Landing<T, E>>>,
}

impl<T: Clone, E: Clone> Pilot<'_, T, E> {
    /// Takes the flight off the board, then hands its result to the waiters.
    fn land(mut self, result: &Result<T, E>) {
        self.flight.clear(self.id);
        if let Some(landing) = self.landing.take()
            && landing.receiver_count() > 0
        {
            landing.send_replace(Some(result.clone()));
        }
    }
}

impl<T, E> Drop for Pilot<'_, T, E> {
    fn drop(&mut self) {
        if self.landing.is_some() {
            // Abandoned: off the board first, so that the waiters woken by
            // the channel closing find it free.
            self.flight.clear(self.id);
            self.landing = None;
        }
    }
}

impl<T, E> Default for SingleFlight<T, E> {
    /// Same as [`SingleFlight::new`].
    ///
    /// ```
    /// # use budget_core::single_flight::SingleFlight;
    /// let flight: SingleFlight<u8, u8> = Default::default();
    /// assert!(!flight.is_in_flight());
    /// ```
    fn default() -> Self {
        Self::new()
    }
}

impl<T, E> fmt::Debug for SingleFlight<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleFlight")
            .field("in_flight", &self.is_in_flight())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    type Flight = Arc<SingleFlight<String, String>>;

    /// Bounds every test: a hang fails instead of blocking the suite.
    const PATIENCE: Duration = Duration::from_secs(60);

    fn caller(
        flight: &Flight,
        calls: &Arc<AtomicUsize>,
        took: Duration,
        answer: Result<&'static str, &'static str>,
    ) -> tokio::task::JoinHandle<Result<String, String>> {
        let (flight, calls) = (Arc::clone(flight), Arc::clone(calls));
        tokio::spawn(async move {
            flight
                .run(|| async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(took).await;
                    answer.map(str::to_owned).map_err(str::to_owned)
                })
                .await
        })
    }

    async fn all(
        callers: Vec<tokio::task::JoinHandle<Result<String, String>>>,
    ) -> Vec<Result<String, String>> {
        tokio::time::timeout(PATIENCE, async {
            let mut out = Vec::new();
            for c in callers {
                out.push(c.await.expect("caller task"));
            }
            out
        })
        .await
        .expect("no caller hangs")
    }

    #[tokio::test(start_paused = true)]
    async fn a_hundred_concurrent_callers_cause_exactly_one_refresh() {
        let flight = Flight::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let callers = (0..100)
            .map(|_| caller(&flight, &calls, Duration::from_millis(100), Ok("token-1")))
            .collect();
        let results = all(callers).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(results.iter().all(|r| r.as_deref() == Ok("token-1")));
        assert_eq!(results.len(), 100);
        assert!(!flight.is_in_flight());
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_result_reaches_every_waiter() {
        let flight = Flight::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let callers = (0..10)
            .map(|_| caller(&flight, &calls, Duration::from_millis(100), Err("denied")))
            .collect();
        let results = all(callers).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(results.iter().all(|r| *r == Err("denied".to_owned())));
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_flight_lands_the_next_call_refreshes_again() {
        let flight = Flight::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let first = all(vec![
            caller(&flight, &calls, Duration::from_millis(10), Ok("token-1")),
            caller(&flight, &calls, Duration::from_millis(10), Ok("token-1")),
        ])
        .await;
        let second = all(vec![
            caller(&flight, &calls, Duration::from_millis(10), Ok("token-2")),
            caller(&flight, &calls, Duration::from_millis(10), Ok("token-2")),
        ])
        .await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(first.iter().all(|r| r.as_deref() == Ok("token-1")));
        assert!(second.iter().all(|r| r.as_deref() == Ok("token-2")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_leader_hands_over_to_one_waiter() {
        let flight = Flight::default();
        let leader_calls = Arc::new(AtomicUsize::new(0));
        let waiter_calls = Arc::new(AtomicUsize::new(0));
        let leader = caller(&flight, &leader_calls, PATIENCE * 10, Ok("never"));
        tokio::task::yield_now().await; // the leader boards first
        let waiters: Vec<_> = (0..5)
            .map(|_| {
                caller(
                    &flight,
                    &waiter_calls,
                    Duration::from_millis(10),
                    Ok("token-2"),
                )
            })
            .collect();
        tokio::task::yield_now().await; // the waiters board
        assert_eq!(leader_calls.load(Ordering::SeqCst), 1);
        assert_eq!(waiter_calls.load(Ordering::SeqCst), 0);

        leader.abort();
        assert!(leader.await.unwrap_err().is_cancelled());
        let results = all(waiters).await;
        assert!(results.iter().all(|r| r.as_deref() == Ok("token-2")));
        assert_eq!(
            waiter_calls.load(Ordering::SeqCst),
            1,
            "exactly one waiter took over"
        );
        assert!(!flight.is_in_flight());
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_leader_without_waiters_leaves_nothing_in_the_air() {
        let flight = SingleFlight::<u32, ()>::new();
        let cut =
            tokio::time::timeout(Duration::from_millis(5), flight.run(std::future::pending)).await;
        assert!(cut.is_err());
        assert!(!flight.is_in_flight());
        assert_eq!(flight.run(|| async { Ok(3) }).await, Ok(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_refresh_neither_poisons_nor_hangs_the_waiters() {
        let flight = Flight::default();
        let waiter_calls = Arc::new(AtomicUsize::new(0));
        let panicking = {
            let flight = Arc::clone(&flight);
            tokio::spawn(async move {
                flight
                    .run(|| async {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        panic!("token service returned garbage")
                    })
                    .await
            })
        };
        tokio::task::yield_now().await;
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                caller(
                    &flight,
                    &waiter_calls,
                    Duration::from_millis(10),
                    Ok("token-2"),
                )
            })
            .collect();
        assert!(panicking.await.unwrap_err().is_panic());
        let results = all(waiters).await;
        assert!(results.iter().all(|r| r.as_deref() == Ok("token-2")));
        assert_eq!(waiter_calls.load(Ordering::SeqCst), 1);
        // Still usable afterwards.
        assert_eq!(
            flight
                .run(|| async { Ok("token-3".to_owned()) })
                .await
                .as_deref(),
            Ok("token-3")
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_on_many_threads_all_get_a_result_from_few_refreshes() {
        let flight = Flight::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let callers = (0..200)
            .map(|_| caller(&flight, &calls, Duration::from_millis(50), Ok("token")))
            .collect();
        let results = all(callers).await;
        assert!(results.iter().all(|r| r.as_deref() == Ok("token")));
        // Callers that arrive after a landing start a new flight, so the
        // exact count depends on scheduling; it is far below one per caller.
        let calls = calls.load(Ordering::SeqCst);
        assert!(
            (1..=20).contains(&calls),
            "{calls} refreshes for 200 callers"
        );
    }
}
