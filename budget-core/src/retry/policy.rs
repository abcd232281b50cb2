//! The retry decision: [`RetryPolicy`], [`DecisionInput`], [`Decision`],
//! [`StopReason`].
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use rand::Rng;

use super::backoff::Backoff;
use super::budget::RetryBudget;
use super::classify::{Class, Classifier, Outcome};
use super::config::RetryConfig;
use crate::floor::Floor;

/// A validated retry policy: classification, attempts, backoff and the
/// `Retry-After` cap. Cheap to clone. Made by [`RetryConfig::build`].
///
/// `RetryPolicy::default()` is [`RetryConfig::default`] built, the
/// contract's: 3 attempts, backoff from 50 ms doubling to a 1 s cap with
/// full jitter, `Retry-After` honoured up to 10 s, statuses 408, 429, 500,
/// 502, 503, 504.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::RetryPolicy;
///
/// let p = RetryPolicy::default();
/// assert_eq!(p.max_attempts(), 3);
/// assert_eq!(p.retry_after_max(), Duration::from_secs(10));
/// assert_eq!(p.backoff().ceiling(1), Duration::from_millis(50));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
    retry_after_max: Duration,
    classifier: Classifier,
    attempt_timeout: Option<Duration>,
}

impl Default for RetryPolicy {
    /// [`RetryConfig::default`], built: the defaults are stated there once.
    fn default() -> Self {
        RetryConfig::default()
            .build()
            .expect("the default retry config is valid")
    }
}

/// What [`RetryPolicy::decide`] needs to know about the call so far.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::Floor;
/// use budget_core::retry::{DecisionInput, Outcome, TransportKind};
///
/// let input = DecisionInput {
///     outcome: Outcome::Transport(TransportKind::Connect),
///     attempts: 1,
///     may_retry: true,
///     remaining: Duration::from_millis(900),
///     floor: Floor::default(),
///     previous_wait: None,
/// };
/// assert_eq!(input.attempts, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecisionInput {
    /// How the last attempt ended.
    pub outcome: Outcome,
    /// Attempts made so far: 1 after the first attempt.
    pub attempts: u32,
    /// The request may be sent again: its method is idempotent
    /// ([`is_idempotent`](super::is_idempotent)) AND its body can be
    /// replayed.
    pub may_retry: bool,
    /// The budget left now, already net of the per-hop reserve.
    pub remaining: Duration,
    /// The dependency's floor: the least time the next attempt needs.
    pub floor: Floor,
    /// How long the call waited before the last attempt: `None` after the
    /// first attempt. The [backoff](Backoff::wait) sees it, so a jitter
    /// that grows from the previous wait (decorrelated jitter) needs
    /// nothing more from the caller.
    pub previous_wait: Option<Duration>,
}

/// The answer of [`RetryPolicy::decide`].
///
/// Its `Display` reads well in logs: `retry after 50ms`,
/// `stop: retry budget empty`.
///
/// Not `#[non_exhaustive]`: retry or stop is the whole choice, so a
/// caller's `match` stays exhaustive without a wildcard arm.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{Decision, StopReason};
///
/// let d = Decision::Retry { after: Duration::from_millis(120) };
/// assert_eq!(d.to_string(), "retry after 120ms");
/// assert_eq!(Decision::Stop(StopReason::Succeeded).to_string(), "stop: succeeded");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Sleep for `after`, then make the next attempt. `after` plus the floor
    /// fits in the remaining budget, and `after` is below it.
    Retry {
        /// The wait before the next attempt.
        after: Duration,
    },
    /// Stop here and report the last outcome.
    Stop(StopReason),
}

impl Decision {
    /// True when the caller should pass the last response up as it is: a
    /// 429 or 503 whose `Retry-After` asked for a wait that did not fit (above
    /// `retry_after_max`, or beyond the budget). The caller then answers its
    /// own caller with the same status and `Retry-After`, so that the
    /// backoff happens where the time is (docs/contract.md §2 rule 6,
    /// section 3).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::retry::{Decision, Outcome, StopReason};
    /// use http::StatusCode;
    ///
    /// let outcome = Outcome::Status {
    ///     status: StatusCode::SERVICE_UNAVAILABLE,
    ///     retry_after: Some(Duration::from_secs(30)),
    /// };
    /// let d = Decision::Stop(StopReason::Deferred {
    ///     retry_after: Duration::from_secs(30),
    ///     cap: Duration::from_secs(10),
    /// });
    /// assert!(d.passes_up(&outcome));
    /// assert!(!Decision::Stop(StopReason::AttemptsExhausted).passes_up(&outcome));
    /// ```
    pub fn passes_up(&self, outcome: &Outcome) -> bool {
        let Outcome::Status {
            status,
            retry_after: Some(retry_after),
        } = outcome
        else {
            return false;
        };
        if !matches!(
            *status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        ) {
            return false;
        }
        match self {
            Decision::Stop(StopReason::Deferred { .. }) => true,
            // The wait that did not fit was the server's, not our backoff.
            Decision::Stop(StopReason::WaitExceedsBudget { wait, .. }) => wait == retry_after,
            _ => false,
        }
    }

    /// True for [`Decision::Retry`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::retry::Decision;
    /// assert!(Decision::Retry { after: Duration::ZERO }.is_retry());
    /// ```
    pub fn is_retry(&self) -> bool {
        matches!(self, Decision::Retry { .. })
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Retry { after } => write!(f, "retry after {}ms", after.as_millis()),
            Decision::Stop(reason) => write!(f, "stop: {reason}"),
        }
    }
}

/// Why a call stops after an attempt.
///
/// The `Display` is short and fit for a log line or a ledger `desc`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::Floor;
/// use budget_core::retry::StopReason;
///
/// let r = StopReason::WaitExceedsBudget {
///     wait: Duration::from_millis(400),
///     remaining: Duration::from_millis(450),
///     floor: Floor::new(Duration::from_millis(100)),
/// };
/// assert_eq!(r.to_string(), "wait 400ms + floor 100ms > remaining 450ms");
/// let r = StopReason::Deferred { retry_after: Duration::from_secs(30), cap: Duration::from_secs(10) };
/// assert_eq!(r.to_string(), "retry-after 30000ms > cap 10000ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The server answered with a success (or a non-error status).
    Succeeded,
    /// The outcome is final: another attempt would get the same.
    NotRetryable,
    /// Retryable, but the request may not be sent twice (method not
    /// idempotent, no `Idempotency-Key`, or a body that cannot be replayed).
    NotIdempotent,
    /// `max_attempts` attempts were made.
    AttemptsExhausted,
    /// The per-client retry budget has no token: the dependency is failing
    /// for many requests, and retries would only add load.
    RetryBudgetEmpty,
    /// The wait plus the floor of the next attempt does not fit in the
    /// remaining budget.
    WaitExceedsBudget {
        /// The wait the retry would have needed.
        wait: Duration,
        /// The budget left.
        remaining: Duration,
        /// The floor of the next attempt.
        floor: Floor,
    },
    /// The server's `Retry-After` exceeds the configured maximum: the caller
    /// passes the response up with it.
    Deferred {
        /// What the server asked for.
        retry_after: Duration,
        /// The configured `retry_after_max`.
        cap: Duration,
    },
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Succeeded => f.write_str("succeeded"),
            StopReason::NotRetryable => f.write_str("not retryable"),
            StopReason::NotIdempotent => f.write_str("not idempotent"),
            StopReason::AttemptsExhausted => f.write_str("attempts exhausted"),
            StopReason::RetryBudgetEmpty => f.write_str("retry budget empty"),
            StopReason::WaitExceedsBudget {
                wait,
                remaining,
                floor,
            } => write!(
                f,
                "wait {}ms + floor {}ms > remaining {}ms",
                wait.as_millis(),
                floor.get().as_millis(),
                remaining.as_millis()
            ),
            StopReason::Deferred { retry_after, cap } => write!(
                f,
                "retry-after {}ms > cap {}ms",
                retry_after.as_millis(),
                cap.as_millis()
            ),
        }
    }
}

impl RetryPolicy {
    /// Decides what follows an attempt.
    ///
    /// Pure: no clock, no socket, randomness passed in. It applies
    /// docs/contract.md §2 in this order:
    ///
    /// 1. the outcome's [`Class`]: a success stops with
    ///    [`StopReason::Succeeded`], a final failure with
    ///    [`StopReason::NotRetryable`] (rule 5);
    /// 2. the request must be safe to send again: idempotent and with a
    ///    replayable body, else [`StopReason::NotIdempotent`] (rule 4);
    /// 3. attempts left (`max_attempts` counts the first attempt), else
    ///    [`StopReason::AttemptsExhausted`];
    /// 4. the wait: the server's `Retry-After` when it gave one, else the
    ///    [backoff](super::Backoff) (rules 6, 7). A `Retry-After` above
    ///    `retry_after_max` stops with [`StopReason::Deferred`]: the caller
    ///    passes the 429/503 up with its `Retry-After` (rule 6);
    /// 5. the wait must fit the budget: after waiting, what remains must still
    ///    reach the dependency's floor, so a wait never ends at or past the
    ///    deadline and the next attempt can still be made; else
    ///    [`StopReason::WaitExceedsBudget`] (rules 2, 3);
    /// 6. last, a token from the per-client [`RetryBudget`], else
    ///    [`StopReason::RetryBudgetEmpty`] (rule 9). It comes last so tokens
    ///    are spent only on retries that really happen.
    ///
    /// `retry_budget` is the per-client [`RetryBudget`]; a token is
    /// withdrawn only when the answer is [`Decision::Retry`]. The caller
    /// deposits once per request (not per attempt). `rng` draws the jitter;
    /// pass `&mut rand::rng()` in production and a seeded generator in
    /// tests (`rand::rng()` is not `Send`: create it in the expression, do
    /// not hold it across an `.await`).
    ///
    /// A `Retry` never asks for a wait that, with the floor, exceeds
    /// `remaining`, nor for one that reaches the deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::floor::Floor;
    /// use budget_core::retry::{Decision, DecisionInput, Outcome, RetryPolicy, StopReason};
    /// use http::StatusCode;
    ///
    /// let policy = RetryPolicy::default();
    /// let input = DecisionInput {
    ///     outcome: Outcome::status(StatusCode::NOT_FOUND),
    ///     attempts: 1,
    ///     may_retry: true,
    ///     remaining: Duration::from_secs(1),
    ///     floor: Floor::default(),
    ///     previous_wait: None,
    /// };
    /// assert_eq!(
    ///     policy.decide(&input, None, &mut rand::rng()),
    ///     Decision::Stop(StopReason::NotRetryable)
    /// );
    /// ```
    ///
    /// Without jitter: a wait that fits, then one that does not:
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::floor::Floor;
    /// use budget_core::retry::{
    ///     Decision, DecisionInput, Jitter, Outcome, RetryConfig, StopReason,
    /// };
    /// use http::StatusCode;
    ///
    /// let mut config = RetryConfig::default();
    /// config.backoff.jitter = Jitter::None;
    /// let policy = config.build().unwrap();
    /// let mut input = DecisionInput {
    ///     outcome: Outcome::status(StatusCode::SERVICE_UNAVAILABLE),
    ///     attempts: 1,
    ///     may_retry: true,
    ///     remaining: Duration::from_millis(800),
    ///     floor: Floor::new(Duration::from_millis(200)),
    ///     previous_wait: None,
    /// };
    /// let mut rng = rand::rng();
    /// assert_eq!(
    ///     policy.decide(&input, None, &mut rng),
    ///     Decision::Retry { after: Duration::from_millis(50) }
    /// );
    ///
    /// // 50 ms of backoff + a 200 ms floor do not fit in 220 ms: stop now.
    /// input.remaining = Duration::from_millis(220);
    /// let d = policy.decide(&input, None, &mut rng);
    /// assert_eq!(d.to_string(), "stop: wait 50ms + floor 200ms > remaining 220ms");
    /// ```
    pub fn decide<R: Rng + ?Sized>(
        &self,
        input: &DecisionInput,
        retry_budget: Option<&RetryBudget>,
        rng: &mut R,
    ) -> Decision {
        match self.classifier.classify(&input.outcome) {
            Class::Success => return Decision::Stop(StopReason::Succeeded),
            Class::Fatal => return Decision::Stop(StopReason::NotRetryable),
            Class::Retryable => {}
        }
        if !input.may_retry {
            return Decision::Stop(StopReason::NotIdempotent);
        }
        if input.attempts >= self.max_attempts {
            return Decision::Stop(StopReason::AttemptsExhausted);
        }
        let wait = match input.outcome.retry_after() {
            Some(retry_after) if retry_after > self.retry_after_max => {
                return Decision::Stop(StopReason::Deferred {
                    retry_after,
                    cap: self.retry_after_max,
                });
            }
            Some(retry_after) => retry_after,
            None => self.backoff.wait(input.attempts, input.previous_wait, rng),
        };
        if !fits(wait, input.remaining, input.floor) {
            return Decision::Stop(StopReason::WaitExceedsBudget {
                wait,
                remaining: input.remaining,
                floor: input.floor,
            });
        }
        if let Some(budget) = retry_budget
            && !budget.withdraw()
        {
            return Decision::Stop(StopReason::RetryBudgetEmpty);
        }
        Decision::Retry { after: wait }
    }

    /// The class of `outcome` under this policy's status set.
    ///
    /// ```
    /// use budget_core::retry::{Class, Outcome, RetryPolicy};
    /// let p = RetryPolicy::default();
    /// assert_eq!(p.classify(&Outcome::status(http::StatusCode::TOO_MANY_REQUESTS)), Class::Retryable);
    /// ```
    pub fn classify(&self, outcome: &Outcome) -> Class {
        self.classifier.classify(outcome)
    }

    /// The longest one attempt may take, if capped (see
    /// [`RetryConfig::attempt_timeout`]).
    ///
    /// ```
    /// assert_eq!(budget_core::retry::RetryPolicy::default().attempt_timeout(), None);
    /// ```
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// Total attempts allowed, the first included.
    ///
    /// ```
    /// assert_eq!(budget_core::retry::RetryPolicy::default().max_attempts(), 3);
    /// ```
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The backoff used when the server gives no `Retry-After`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = budget_core::retry::RetryPolicy::default();
    /// assert_eq!(p.backoff().max(), Duration::from_secs(1));
    /// ```
    pub fn backoff(&self) -> &Backoff {
        &self.backoff
    }

    /// The longest `Retry-After` honoured by waiting.
    ///
    /// ```
    /// use std::time::Duration;
    /// let p = budget_core::retry::RetryPolicy::default();
    /// assert_eq!(p.retry_after_max(), Duration::from_secs(10));
    /// ```
    pub fn retry_after_max(&self) -> Duration {
        self.retry_after_max
    }

    /// The outcome classifier.
    ///
    /// ```
    /// let p = budget_core::retry::RetryPolicy::default();
    /// assert_eq!(p.classifier().statuses().len(), 6);
    /// ```
    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }
}

impl RetryPolicy {
    /// The same policy, retrying gRPC answers with exactly `codes`.
    #[cfg(feature = "grpc")]
    pub(crate) fn with_grpc_codes(
        mut self,
        codes: impl IntoIterator<Item = crate::grpc_status::GrpcCode>,
    ) -> Self {
        self.classifier = self.classifier.with_grpc_codes(codes);
        self
    }

    /// The policy of validated parts; [`RetryConfig::build`] is the way in.
    pub(super) fn from_parts(
        max_attempts: u32,
        backoff: Backoff,
        retry_after_max: Duration,
        classifier: Classifier,
        attempt_timeout: Option<Duration>,
    ) -> Self {
        Self {
            max_attempts,
            backoff,
            retry_after_max,
            classifier,
            attempt_timeout,
        }
    }
}

/// True when, after waiting `wait`, what remains still reaches `floor`
/// (docs/contract.md §2 rule 3). A wait that uses up the whole budget never
/// fits, even with a zero floor: the deadline wins a tie.
fn fits(wait: Duration, remaining: Duration, floor: Floor) -> bool {
    remaining
        .checked_sub(wait)
        .is_some_and(|left| floor.check(left).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use crate::retry::{BackoffConfig, Jitter, RetryBudgetConfig, TransportKind};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// The contract defaults without jitter: waits 50, 100, 200 ms, ...
    fn exact() -> RetryPolicy {
        RetryConfig {
            backoff: BackoffConfig {
                jitter: Jitter::None,
                ..Default::default()
            },
            ..Default::default()
        }
        .build()
        .unwrap()
    }

    fn input(outcome: Outcome) -> DecisionInput {
        DecisionInput {
            outcome,
            attempts: 1,
            may_retry: true,
            remaining: Duration::from_secs(2),
            floor: Floor::new(ms(100)),
            previous_wait: None,
        }
    }

    fn unavailable_after(secs: u64) -> Outcome {
        Outcome::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: Some(Duration::from_secs(secs)),
        }
    }

    fn decide(p: &RetryPolicy, i: &DecisionInput, b: Option<&RetryBudget>) -> Decision {
        p.decide(i, b, &mut StdRng::seed_from_u64(0))
    }

    fn stop(reason: StopReason) -> Decision {
        Decision::Stop(reason)
    }

    /// A retry budget with `tokens` retries and no deposits.
    fn tokens(n: u32) -> RetryBudget {
        RetryBudgetConfig {
            ttl: Duration::from_secs(1),
            min_per_sec: n,
            ratio: 0.0,
        }
        .build()
        .unwrap()
    }

    #[test]
    fn rule5_a_success_stops_with_succeeded() {
        let i = input(Outcome::status(StatusCode::OK));
        assert_eq!(decide(&exact(), &i, None), stop(StopReason::Succeeded));
    }

    #[test]
    fn rule5_other_4xx_stop_as_not_retryable() {
        let i = input(Outcome::status(StatusCode::BAD_REQUEST));
        assert_eq!(decide(&exact(), &i, None), stop(StopReason::NotRetryable));
        let i = input(Outcome::Transport(TransportKind::Body));
        assert_eq!(decide(&exact(), &i, None), stop(StopReason::NotRetryable));
    }

    #[test]
    fn rule4_a_request_that_may_not_be_repeated_stops_as_not_idempotent() {
        let mut i = input(Outcome::status(StatusCode::BAD_GATEWAY));
        i.may_retry = false;
        assert_eq!(decide(&exact(), &i, None), stop(StopReason::NotIdempotent));
    }

    #[test]
    fn max_attempts_counts_the_first_attempt() {
        let p = exact();
        let mut i = input(Outcome::Transport(TransportKind::Connect));
        i.attempts = 2;
        assert_eq!(decide(&p, &i, None), Decision::Retry { after: ms(100) });
        i.attempts = 3;
        assert_eq!(decide(&p, &i, None), stop(StopReason::AttemptsExhausted));
        let once = RetryConfig {
            max_attempts: 1,
            ..Default::default()
        }
        .build()
        .unwrap();
        i.attempts = 1;
        assert_eq!(decide(&once, &i, None), stop(StopReason::AttemptsExhausted));
    }

    #[test]
    fn rule7_without_retry_after_the_wait_is_the_backoff() {
        let i = input(Outcome::Transport(TransportKind::Timeout));
        assert_eq!(
            decide(&exact(), &i, None),
            Decision::Retry { after: ms(50) }
        );
    }

    #[test]
    fn rule7_the_backoff_sees_the_previous_wait() {
        // With the test-only decorrelated jitter, a wait may reach three
        // times the previous one: the decision hands the previous wait on.
        let p = RetryConfig {
            max_attempts: 5,
            backoff: BackoffConfig {
                jitter: Jitter::Decorrelated,
                ..Default::default()
            },
            ..Default::default()
        }
        .build()
        .unwrap();
        let mut i = input(Outcome::Transport(TransportKind::Connect));
        i.attempts = 2;
        let mut rng = StdRng::seed_from_u64(9);
        let mut waits = |previous| {
            i.previous_wait = previous;
            (0..50)
                .map(|_| match p.decide(&i, None, &mut rng) {
                    Decision::Retry { after } => after,
                    d => panic!("{d}"),
                })
                .max()
                .unwrap()
        };
        assert!(waits(None) <= ms(150));
        assert!(waits(Some(ms(300))) > ms(150));
    }

    #[test]
    fn rule6_retry_after_replaces_the_backoff() {
        let i = input(unavailable_after(1));
        assert_eq!(
            decide(&exact(), &i, None),
            Decision::Retry {
                after: Duration::from_secs(1)
            }
        );
        let mut i = input(Outcome::Status {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(Duration::ZERO),
        });
        i.remaining = ms(150);
        assert_eq!(
            decide(&exact(), &i, None),
            Decision::Retry {
                after: Duration::ZERO
            }
        );
    }

    #[test]
    fn rule6_retry_after_above_the_cap_is_deferred_and_passed_up() {
        let outcome = unavailable_after(11);
        let mut i = input(outcome);
        i.remaining = Duration::from_secs(60);
        let d = decide(&exact(), &i, None);
        assert_eq!(
            d,
            stop(StopReason::Deferred {
                retry_after: Duration::from_secs(11),
                cap: Duration::from_secs(10),
            })
        );
        assert!(d.passes_up(&outcome));
        assert_eq!(d.to_string(), "stop: retry-after 11000ms > cap 10000ms");
        // At the cap exactly, the wait is honoured.
        let i = DecisionInput {
            outcome: unavailable_after(10),
            ..i
        };
        assert!(decide(&exact(), &i, None).is_retry());
    }

    #[test]
    fn rule6_retry_after_beyond_the_budget_ends_the_call_and_is_passed_up() {
        let outcome = unavailable_after(5);
        let i = input(outcome); // 2 s remaining
        let d = decide(&exact(), &i, None);
        assert_eq!(
            d,
            stop(StopReason::WaitExceedsBudget {
                wait: Duration::from_secs(5),
                remaining: Duration::from_secs(2),
                floor: Floor::new(ms(100)),
            })
        );
        assert!(d.passes_up(&outcome));
    }

    #[test]
    fn rule6_only_429_and_503_with_their_own_wait_are_passed_up() {
        let exceeded = stop(StopReason::WaitExceedsBudget {
            wait: ms(50),
            remaining: ms(60),
            floor: Floor::new(ms(100)),
        });
        // Our backoff did not fit, not the server's wait: report, do not pass up.
        assert!(!exceeded.passes_up(&unavailable_after(5)));
        assert!(!exceeded.passes_up(&Outcome::status(StatusCode::SERVICE_UNAVAILABLE)));
        let deferred = stop(StopReason::Deferred {
            retry_after: Duration::from_secs(30),
            cap: Duration::from_secs(10),
        });
        let bad_gateway = Outcome::Status {
            status: StatusCode::BAD_GATEWAY,
            retry_after: Some(Duration::from_secs(30)),
        };
        assert!(!deferred.passes_up(&bad_gateway));
        assert!(!deferred.passes_up(&Outcome::Transport(TransportKind::Reset)));
        assert!(!Decision::Retry { after: ms(1) }.passes_up(&unavailable_after(0)));
    }

    #[test]
    fn rule3_wait_plus_floor_must_fit_in_what_remains() {
        let p = exact();
        let mut i = input(Outcome::status(StatusCode::BAD_GATEWAY));
        // 50 ms backoff + 100 ms floor = 150 ms.
        i.remaining = ms(150);
        assert_eq!(decide(&p, &i, None), Decision::Retry { after: ms(50) });
        i.remaining = ms(149);
        let d = decide(&p, &i, None);
        assert_eq!(
            d,
            stop(StopReason::WaitExceedsBudget {
                wait: ms(50),
                remaining: ms(149),
                floor: Floor::new(ms(100)),
            })
        );
        assert_eq!(
            d.to_string(),
            "stop: wait 50ms + floor 100ms > remaining 149ms"
        );
    }

    #[test]
    fn rule3_a_wait_never_ends_at_the_deadline_even_with_no_floor() {
        // Rule: on a tie the deadline wins; an attempt timeout with no
        // budget left is not retried.
        let p = exact();
        let mut i = input(Outcome::Transport(TransportKind::Timeout));
        i.floor = Floor::default();
        i.remaining = ms(50);
        assert!(matches!(
            decide(&p, &i, None),
            Decision::Stop(StopReason::WaitExceedsBudget { .. })
        ));
        i.remaining = Duration::ZERO;
        i.outcome = Outcome::Status {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(Duration::ZERO),
        };
        assert!(matches!(
            decide(&p, &i, None),
            Decision::Stop(StopReason::WaitExceedsBudget { .. })
        ));
    }

    #[test]
    fn rule9_an_empty_retry_budget_stops_retries() {
        let empty = tokens(0);
        let i = input(Outcome::status(StatusCode::GATEWAY_TIMEOUT));
        assert_eq!(
            decide(&exact(), &i, Some(&empty)),
            stop(StopReason::RetryBudgetEmpty)
        );
        assert_eq!(
            stop(StopReason::RetryBudgetEmpty).to_string(),
            "stop: retry budget empty"
        );
    }

    #[test]
    fn rule9_the_retry_budget_is_withdrawn_only_on_real_retries() {
        let p = exact();
        let one = tokens(1);
        // Every stop before the last step leaves the token in place.
        let mut stops = vec![
            input(Outcome::status(StatusCode::OK)),
            input(Outcome::status(StatusCode::NOT_FOUND)),
            DecisionInput {
                may_retry: false,
                ..input(Outcome::status(StatusCode::BAD_GATEWAY))
            },
            DecisionInput {
                attempts: 3,
                ..input(Outcome::status(StatusCode::BAD_GATEWAY))
            },
            input(unavailable_after(60)),
            input(unavailable_after(2)),
        ];
        stops.push(DecisionInput {
            remaining: ms(120),
            ..input(Outcome::status(StatusCode::BAD_GATEWAY))
        });
        for i in &stops {
            let d = decide(&p, i, Some(&one));
            assert!(!d.is_retry(), "{d}");
        }
        // The token is still there for the one real retry, then gone.
        let retryable = input(Outcome::status(StatusCode::BAD_GATEWAY));
        assert!(decide(&p, &retryable, Some(&one)).is_retry());
        assert_eq!(
            decide(&p, &retryable, Some(&one)),
            stop(StopReason::RetryBudgetEmpty)
        );
    }

    fn arb_outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            (100u16..=599, proptest::option::of(0u64..20_000)).prop_map(|(code, ra)| {
                Outcome::Status {
                    status: StatusCode::from_u16(code).unwrap(),
                    retry_after: ra.map(Duration::from_millis),
                }
            }),
            prop_oneof![
                Just(TransportKind::Connect),
                Just(TransportKind::ConnectTimeout),
                Just(TransportKind::Timeout),
                Just(TransportKind::Reset),
                Just(TransportKind::Body),
                Just(TransportKind::Other),
            ]
            .prop_map(Outcome::Transport),
        ]
    }

    proptest! {
        #[test]
        fn rule3_a_retry_never_waits_past_the_budget_or_into_the_floor(
            outcome in arb_outcome(),
            attempts in 0u32..10,
            may_retry in any::<bool>(),
            remaining_ms in 0u64..5_000,
            floor_ms in 0u64..2_000,
            jitter_free in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let policy = RetryConfig {
                max_attempts: 5,
                backoff: BackoffConfig {
                    jitter: if jitter_free { Jitter::None } else { Jitter::Full },
                    ..Default::default()
                },
                ..Default::default()
            }.build().unwrap();
            let input = DecisionInput {
                outcome,
                attempts,
                may_retry,
                remaining: ms(remaining_ms),
                floor: Floor::new(ms(floor_ms)),
                previous_wait: None,
            };
            let d = policy.decide(&input, None, &mut StdRng::seed_from_u64(seed));
            if let Decision::Retry { after } = d {
                prop_assert!(after + input.floor.get() <= input.remaining);
                prop_assert!(after < input.remaining);
                prop_assert!(after <= policy.retry_after_max());
                prop_assert!(may_retry && attempts < 5);
                prop_assert_eq!(policy.classify(&outcome), Class::Retryable);
            }
        }
    }
}
