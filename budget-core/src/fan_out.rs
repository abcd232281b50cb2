//! Bounded fan-out: run many calls under one budget, at most K at a time.
//!
//! A handler that asks five dependencies (or one dependency fifty times)
//! wants the calls concurrent, but not unbounded: fifty simultaneous calls
//! to one partner is a small denial of service. [`FanOut`] runs them with at
//! most `concurrency` in flight and a new one started only when one ends,
//! so inputs waiting their turn are just values, never tasks.
//!
//! All of it is paid from one [`Budget`]: when its deadline passes, the
//! calls in flight are aborted (their futures dropped) and the fan-out
//! answers [`FanOutError::BudgetExhausted`] with how many calls finished.
//! Results come back in input order, whatever order the calls end in.
//!
//! A call that panics does not stop the others: every call runs (and every
//! task is drained) before the panic is reported as
//! [`FanOutError::Panicked`], so no task outlives the fan-out and no side
//! effect of the other calls is cut short by someone else's bug.
//!
//! Each call runs in its own tokio task. The request context (like a tokio
//! task-local) does not cross `spawn`, so the fan-out captures the caller's
//! [request context](crate::context) and re-enters it in every task: the
//! calls see the request's budget and write to its ledger.
//!
//! Dropping the future of [`FanOut::run`] aborts every call in flight.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::Budget;
//! use budget_core::fan_out::FanOut;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let fan_out = FanOut::new(2).unwrap();
//! let budget = Budget::new(Duration::from_secs(1));
//! let prices = fan_out
//!     .run(budget, ["apple", "pear", "plum"], |item| async move {
//!         tokio::time::sleep(Duration::from_millis(100)).await;
//!         item.len()
//!     })
//!     .await
//!     .unwrap();
//! assert_eq!(prices, vec![5, 4, 4]);
//! // Two at a time: 100 ms for the first two, 100 ms for the third.
//! assert_eq!(budget.elapsed(), Duration::from_millis(200));
//! # }
//! ```

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::num::NonZeroUsize;

use serde::{Deserialize, Serialize};
use tokio::task::{Id, JoinError, JoinSet};

use crate::budget::Budget;
use crate::config::ConfigError;
use crate::context::{self, RequestContext};

/// A fan-out's configuration, as read from a file.
///
/// # Example
///
/// ```
/// use budget_core::fan_out::FanOutConfig;
///
/// let config: FanOutConfig = serde_json::from_str(r#"{ "concurrency": 4 }"#).unwrap();
/// assert_eq!(config.build().unwrap().concurrency(), 4);
/// assert_eq!(config, FanOutConfig::new(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct FanOutConfig {
    /// The most calls in flight at once; at least 1.
    pub concurrency: usize,
}

impl FanOutConfig {
    /// A config of at most `concurrency` calls in flight (checked by
    /// [`build`](Self::build): at least 1).
    ///
    /// ```
    /// # use budget_core::fan_out::FanOutConfig;
    /// assert_eq!(FanOutConfig::new(8).concurrency, 8);
    /// ```
    pub const fn new(concurrency: usize) -> Self {
        Self { concurrency }
    }

    /// The same config with `concurrency`: the most calls in flight at
    /// once, at least 1 (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use budget_core::fan_out::FanOutConfig;
    /// assert_eq!(FanOutConfig::new(8).concurrency(2).concurrency, 2);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.concurrency = ...")
    )]
    pub const fn concurrency(mut self, value: usize) -> Self {
        self.concurrency = value;
        self
    }

    /// Validates the config into a [`FanOut`], or a [`ConfigError`] naming
    /// `concurrency`.
    ///
    /// ```
    /// # use budget_core::fan_out::FanOutConfig;
    /// assert_eq!(FanOutConfig::new(0).build().unwrap_err().field(), "concurrency");
    /// ```
    pub fn build(&self) -> Result<FanOut, ConfigError> {
        FanOut::new(self.concurrency)
    }
}

/// Runs many calls under one budget with at most `concurrency` in flight.
///
/// # Example
///
/// ```
/// use budget_core::fan_out::FanOut;
///
/// assert_eq!(FanOut::new(8).unwrap().concurrency(), 8);
/// assert!(FanOut::new(0).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FanOut {
    concurrency: NonZeroUsize,
}

impl FanOut {
    /// A fan-out with at most `concurrency` calls in flight; zero is a
    /// [`ConfigError`] naming `concurrency`.
    ///
    /// ```
    /// # use budget_core::fan_out::FanOut;
    /// let err = FanOut::new(0).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `concurrency` must be at least 1");
    /// ```
    pub fn new(concurrency: usize) -> Result<Self, ConfigError> {
        NonZeroUsize::new(concurrency)
            .map(|concurrency| Self { concurrency })
            .ok_or_else(|| ConfigError::new("concurrency", "must be at least 1"))
    }

    /// The most calls in flight at once.
    ///
    /// ```
    /// # use budget_core::fan_out::FanOut;
    /// assert_eq!(FanOut::new(3).unwrap().concurrency(), 3);
    /// ```
    pub fn concurrency(&self) -> usize {
        self.concurrency.get()
    }

    /// Runs `f` on every input, at most [`concurrency`](Self::concurrency)
    /// at a time, each call in its own task inside the caller's request
    /// context; returns the results in input order.
    ///
    /// `f` is called on the caller's task just before its call is spawned,
    /// so an input waiting its turn costs nothing but itself. `inputs` must
    /// be finite: when the budget runs out, the rest of it is counted for
    /// [`FanOutError::BudgetExhausted`]'s `total`.
    ///
    /// Errors, after every task has been drained:
    /// - [`FanOutError::Panicked`] when a call panicked (the lowest index
    ///   if several did; this wins over the budget running out);
    /// - [`FanOutError::BudgetExhausted`] when the deadline passed before
    ///   every call finished; the calls still in flight were aborted and
    ///   the rest were never started. On a tie the deadline wins, as
    ///   everywhere in this crate.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{Budget, fan_out::{FanOut, FanOutError}};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let budget = Budget::new(Duration::from_millis(250));
    /// let err = FanOut::new(1)
    ///     .unwrap()
    ///     .run(budget, 0..4, |_| tokio::time::sleep(Duration::from_millis(100)))
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(err, FanOutError::BudgetExhausted { completed: 2, total: 4 });
    /// # }
    /// ```
    pub async fn run<I, F, Fut, T>(
        &self,
        budget: Budget,
        inputs: I,
        mut f: F,
    ) -> Result<Vec<T>, FanOutError>
    where
        I: IntoIterator,
        F: FnMut(I::Item) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let request = context::current();
        let mut inputs = inputs.into_iter().fuse();
        let mut calls = Calls::new();
        let mut pulled = 0usize; // inputs taken from the iterator
        let deadline = tokio::time::sleep_until(budget.deadline());
        tokio::pin!(deadline);

        loop {
            // Top up: one new call per free slot, while time is left.
            while !calls.out_of_time && calls.tasks.len() < self.concurrency.get() {
                let Some(input) = inputs.next() else { break };
                pulled += 1;
                if budget.is_exhausted() {
                    calls.run_out();
                    break;
                }
                calls.spawn(request.as_ref(), f(input));
            }
            if calls.tasks.is_empty() {
                break;
            }
            let joined = tokio::select! {
                biased;
                () = &mut deadline, if !calls.out_of_time => {
                    tracing::debug!(in_flight = calls.tasks.len(), "fan-out budget ran out, aborting calls in flight");
                    calls.run_out();
                    continue;
                }
                joined = calls.tasks.join_next_with_id() => joined,
            };
            match joined {
                Some(joined) => calls.record(joined),
                None => break,
            }
        }

        if let Some(failure) = calls.failure.take() {
            return Err(failure);
        }
        let total = if calls.out_of_time {
            pulled + inputs.count()
        } else {
            pulled
        };
        calls.into_results(total)
    }
}

/// The calls of one [`FanOut::run`]: the tasks in flight, and what the
/// finished ones gave, in input order.
struct Calls<T> {
    tasks: JoinSet<T>,
    /// Each task's input index.
    index_of: HashMap<Id, usize>,
    /// One slot per call started, filled when it finishes.
    results: Vec<Option<T>>,
    completed: usize,
    /// The failure of the lowest index so far.
    failure: Option<FanOutError>,
    /// The budget ran out: the calls in flight were aborted, and no more
    /// start.
    out_of_time: bool,
}

impl<T: Send + 'static> Calls<T> {
    fn new() -> Self {
        Self {
            tasks: JoinSet::new(),
            index_of: HashMap::new(),
            results: Vec::new(),
            completed: 0,
            failure: None,
            out_of_time: false,
        }
    }

    /// Starts `call` in a task of its own, in the request's context when
    /// there is one, its result due in the next slot.
    fn spawn<Fut>(&mut self, request: Option<&RequestContext>, call: Fut)
    where
        Fut: Future<Output = T> + Send + 'static,
    {
        let handle = match request {
            Some(cx) => self.tasks.spawn(cx.clone().scope(call)),
            None => self.tasks.spawn(call),
        };
        self.index_of.insert(handle.id(), self.results.len());
        self.results.push(None);
    }

    /// The budget ran out: aborts every call in flight.
    fn run_out(&mut self) {
        self.out_of_time = true;
        self.tasks.abort_all();
    }

    /// A task that finished: its value in its slot, or its failure kept
    /// (if its index is the lowest yet).
    fn record(&mut self, joined: Result<(Id, T), JoinError>) {
        match joined {
            Ok((id, value)) => {
                if let Some(slot) = self
                    .index_of
                    .remove(&id)
                    .and_then(|i| self.results.get_mut(i))
                {
                    *slot = Some(value);
                    self.completed += 1;
                }
            }
            Err(err) => {
                let index = self.index_of.remove(&err.id()).unwrap_or(usize::MAX);
                keep_first(
                    &mut self.failure,
                    FanOutError::from_join(index, err, self.out_of_time),
                );
            }
        }
    }

    /// Every result in input order when all `total` calls finished;
    /// otherwise how many did.
    fn into_results(self, total: usize) -> Result<Vec<T>, FanOutError> {
        let completed = self.completed;
        match self.results.into_iter().collect::<Option<Vec<T>>>() {
            Some(values) if values.len() == total => Ok(values),
            _ => Err(FanOutError::BudgetExhausted { completed, total }),
        }
    }
}

/// Keeps the failure of the lowest index; `None` candidates (our own
/// aborts) change nothing.
fn keep_first(kept: &mut Option<FanOutError>, candidate: Option<FanOutError>) {
    let Some(candidate) = candidate else { return };
    match kept {
        Some(old) if old.index() <= candidate.index() => {}
        _ => *kept = Some(candidate),
    }
}

/// Why a fan-out did not return every result.
///
/// # Example
///
/// ```
/// use budget_core::fan_out::FanOutError;
///
/// let err = FanOutError::BudgetExhausted { completed: 3, total: 10 };
/// assert_eq!(err.to_string(), "budget ran out during fan-out: 3 of 10 calls finished");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FanOutError {
    /// A call panicked; every other call still ran to its end.
    #[error("fan-out call {index} panicked: {message}")]
    Panicked {
        /// The input position of the call that panicked.
        index: usize,
        /// The panic message, when it was a string.
        message: String,
    },
    /// The budget ran out before every call finished: the calls in flight
    /// were aborted, the rest never started.
    #[error("budget ran out during fan-out: {completed} of {total} calls finished")]
    BudgetExhausted {
        /// Calls that finished by the deadline.
        completed: usize,
        /// Calls asked for (the number of inputs).
        total: usize,
    },
    /// A call's task was cancelled by something other than the fan-out:
    /// the runtime is shutting down.
    #[error("fan-out call {index} was cancelled by the runtime")]
    Cancelled {
        /// The input position of the cancelled call.
        index: usize,
    },
}

impl FanOutError {
    /// The failure of the task of input `index`, or `None` when it is our
    /// own abort after the deadline.
    fn from_join(index: usize, err: JoinError, out_of_time: bool) -> Option<Self> {
        match err.try_into_panic() {
            Ok(payload) => Some(FanOutError::Panicked {
                index,
                message: panic_message(payload.as_ref()),
            }),
            Err(_) if out_of_time => None,
            Err(_) => Some(FanOutError::Cancelled { index }),
        }
    }

    /// The input position the failure is about (`usize::MAX` for none).
    fn index(&self) -> usize {
        match self {
            FanOutError::Panicked { index, .. } | FanOutError::Cancelled { index } => *index,
            FanOutError::BudgetExhausted { .. } => usize::MAX,
        }
    }
}

/// The text of a panic payload (`panic!("...")` gives `&str` or `String`).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic payload is not a string".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::context::RequestContext;
    use crate::ledger::Entry;

    const HOUR: Duration = Duration::from_secs(3600);

    /// A scrambled but deterministic delay per input.
    fn delay(i: usize) -> Duration {
        Duration::from_millis(((i * 7919 + 13) % 97) as u64 + 1)
    }

    /// Counts calls in flight and remembers the most seen at once.
    #[derive(Clone, Default)]
    struct InFlight {
        now: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl InFlight {
        fn enter(&self) -> Leave {
            let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            Leave(Arc::clone(&self.now))
        }
        fn most(&self) -> usize {
            self.most.load(Ordering::SeqCst)
        }
    }

    struct Leave(Arc<AtomicUsize>);
    impl Drop for Leave {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Counts how the calls ended: finished, or dropped before finishing.
    #[derive(Clone, Default)]
    struct Endings {
        finished: Arc<AtomicUsize>,
        aborted: Arc<AtomicUsize>,
    }

    struct Ending {
        endings: Endings,
        finished: bool,
    }

    impl Ending {
        fn finish(mut self) {
            self.finished = true;
        }
    }

    impl Drop for Ending {
        fn drop(&mut self) {
            let counter = if self.finished {
                &self.endings.finished
            } else {
                &self.endings.aborted
            };
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Endings {
        fn start(&self) -> Ending {
            Ending {
                endings: self.clone(),
                finished: false,
            }
        }
        fn counts(&self) -> (usize, usize) {
            (
                self.finished.load(Ordering::SeqCst),
                self.aborted.load(Ordering::SeqCst),
            )
        }
    }

    #[tokio::test(start_paused = true)]
    async fn results_come_back_in_input_order_whatever_order_calls_end_in() {
        let fan_out = FanOut::new(4).unwrap();
        let out = fan_out
            .run(Budget::new(HOUR), 0..40, |i| async move {
                tokio::time::sleep(delay(i)).await;
                i * 10
            })
            .await
            .unwrap();
        assert_eq!(out, (0..40).map(|i| i * 10).collect::<Vec<_>>());
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_k_calls_are_in_flight() {
        let in_flight = InFlight::default();
        let fan_out = FanOut::new(3).unwrap();
        let out = fan_out
            .run(Budget::new(HOUR), 0..30, |i| {
                let in_flight = in_flight.clone();
                async move {
                    let _leave = in_flight.enter();
                    tokio::time::sleep(delay(i)).await;
                }
            })
            .await
            .unwrap();
        assert_eq!(out.len(), 30);
        assert_eq!(in_flight.most(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_inputs_never_become_tasks() {
        let made = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let most_tasks = Arc::new(AtomicUsize::new(0));
        let fan_out = FanOut::new(2).unwrap();
        fan_out
            .run(Budget::new(HOUR), 0..20, |i| {
                // The future for input i is made only when its call starts.
                let started = made.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(started - done.load(Ordering::SeqCst) <= 2);
                let (done, most_tasks) = (Arc::clone(&done), Arc::clone(&most_tasks));
                async move {
                    let alive = tokio::runtime::Handle::current()
                        .metrics()
                        .num_alive_tasks();
                    most_tasks.fetch_max(alive, Ordering::SeqCst);
                    tokio::time::sleep(delay(i)).await;
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
            .await
            .unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 20);
        assert_eq!(most_tasks.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_call_is_reported_after_every_other_call_completes() {
        let endings = Endings::default();
        let fan_out = FanOut::new(3).unwrap();
        let err = fan_out
            .run(Budget::new(HOUR), 0..10, |i| {
                let ending = endings.start();
                async move {
                    tokio::time::sleep(delay(i)).await;
                    if i == 4 {
                        panic!("boom at {i}");
                    }
                    ending.finish();
                }
            })
            .await
            .unwrap_err();
        assert_eq!(
            err,
            FanOutError::Panicked {
                index: 4,
                message: "boom at 4".into()
            }
        );
        // Nine finished, one (the panicking one) unwound: all drained.
        assert_eq!(endings.counts(), (9, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn of_several_panics_the_lowest_index_is_reported() {
        let fan_out = FanOut::new(5).unwrap();
        let err = fan_out
            .run(Budget::new(HOUR), 0..5, |i| async move {
                // Input 3 panics first, input 1 later.
                tokio::time::sleep(Duration::from_millis(if i == 1 { 50 } else { 10 })).await;
                assert!(i != 1 && i != 3, "bad input {i}");
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err, FanOutError::Panicked { index: 1, ref message } if message == "bad input 1")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn budget_expiry_aborts_calls_in_flight_and_reports_how_many_finished() {
        let endings = Endings::default();
        let started = Arc::new(AtomicUsize::new(0));
        let budget = Budget::new(Duration::from_millis(100));
        let fan_out = FanOut::new(2).unwrap();
        let err = fan_out
            .run(budget, 0..10, |_| {
                started.fetch_add(1, Ordering::SeqCst);
                let ending = endings.start();
                async move {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    ending.finish();
                }
            })
            .await
            .unwrap_err();
        // 0-1 end at 30 ms, 2-3 at 60, 4-5 at 90; 6-7 are cut off at 100.
        assert_eq!(
            err,
            FanOutError::BudgetExhausted {
                completed: 6,
                total: 10
            }
        );
        assert_eq!(
            endings.counts(),
            (6, 2),
            "the two calls in flight were aborted"
        );
        assert_eq!(
            started.load(Ordering::SeqCst),
            8,
            "inputs 8 and 9 never started"
        );
        assert_eq!(
            budget.elapsed(),
            Duration::from_millis(100),
            "no waiting past the deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_exhausted_budget_starts_no_call() {
        let started = AtomicUsize::new(0);
        let fan_out = FanOut::new(4).unwrap();
        let err = fan_out
            .run(Budget::new(Duration::ZERO), 0..3, |_| {
                started.fetch_add(1, Ordering::SeqCst);
                async {}
            })
            .await
            .unwrap_err();
        assert_eq!(
            err,
            FanOutError::BudgetExhausted {
                completed: 0,
                total: 3
            }
        );
        assert_eq!(started.load(Ordering::SeqCst), 0);
        let none: Vec<()> = fan_out
            .run(Budget::new(Duration::ZERO), Vec::<u8>::new(), |_| async {})
            .await
            .unwrap();
        assert!(none.is_empty(), "no inputs, nothing to run out of");
    }

    #[tokio::test(start_paused = true)]
    async fn dropping_the_fan_out_aborts_every_call_in_flight() {
        let endings = Endings::default();
        let fan_out = FanOut::new(3).unwrap();
        let run = fan_out.run(Budget::new(HOUR), 0..10, |_| {
            let ending = endings.start();
            async move {
                tokio::time::sleep(HOUR).await;
                ending.finish();
            }
        });
        let cut = tokio::time::timeout(Duration::from_millis(10), run).await;
        assert!(cut.is_err());
        tokio::task::yield_now().await;
        assert_eq!(endings.counts(), (0, 3));
    }

    #[test]
    fn concurrency_zero_is_a_config_error_naming_concurrency() {
        let err = FanOut::new(0).unwrap_err();
        assert_eq!(err.field(), "concurrency");
        let config: FanOutConfig = toml::from_str("concurrency = 0").unwrap();
        assert_eq!(config.build().unwrap_err().field(), "concurrency");
        assert!(toml::from_str::<FanOutConfig>("concurency = 2").is_err());
        let ok: FanOutConfig = toml::from_str("concurrency = 6").unwrap();
        assert_eq!(ok.build().unwrap().concurrency(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn the_request_context_is_visible_in_every_call() {
        let budget = Budget::new(Duration::from_secs(2));
        let cx = RequestContext::new(budget).with_reserve(Duration::from_millis(7));
        let ledger = cx.ledger().clone();
        let fan_out = FanOut::new(2).unwrap();
        let seen = cx
            .scope(fan_out.run(budget, 0..5, |i| async move {
                let cx = context::current().expect("the request context crossed the spawn");
                cx.ledger()
                    .record(Entry::local(format!("part-{i}"), Duration::ZERO, None));
                (cx.budget(), cx.reserve())
            }))
            .await
            .unwrap();
        assert!(
            seen.iter()
                .all(|&(b, r)| b == budget && r == Duration::from_millis(7))
        );
        assert_eq!(ledger.entries().len(), 5);
        // Outside a request there is no context to carry, and none appears.
        let outside = fan_out
            .run(budget, 0..2, |_| async { context::current().is_none() })
            .await
            .unwrap();
        assert_eq!(outside, vec![true, true]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_fan_out_ends_when_the_last_call_does() {
        let start = Instant::now();
        FanOut::new(10)
            .unwrap()
            .run(Budget::new(HOUR), 0..10, |i| tokio::time::sleep(delay(i)))
            .await
            .unwrap();
        let longest = (0..10).map(delay).max().unwrap();
        assert_eq!(start.elapsed(), longest);
    }
}
