//! The circuit breaker: stop calling an endpoint that keeps failing, and
//! let one probe find out when it is back.
//!
//! # Why a breaker in a budget crate?
//!
//! A budget makes each call give up in time; it does not stop the *next*
//! call from spending its whole budget on a dependency that has failed the
//! last fifty times. A breaker does: after `failure_threshold` consecutive
//! failures it *opens*, and every call is refused at once with
//! [`CircuitOpen`], which carries how long until a probe is allowed (the
//! `Retry-After` of the `503` the contract asks for). After `open_for` the
//! breaker is *half-open*: exactly one call, the probe, is let through. Its
//! success closes the breaker; its failure opens it for another `open_for`.
//!
//! # Verdicts
//!
//! Every admitted call holds a [`BreakerPermit`] and reports how it went
//! with [`BreakerPermit::record`]: a [`Verdict`] of success, failure,
//! neutral or timed out. [`Verdict::from_status`] classifies a response
//! (`5xx`, `401` and `429` are failures, `2xx` success, anything else
//! neutral); a transport error is a failure, said by the caller, and a call
//! that ran out of time is [`Verdict::TimedOut`], which the breaker judges
//! by how long it went unanswered (below). Neutral neither counts as a
//! failure nor resets the count.
//!
//! A permit dropped without a verdict (the caller's future was cancelled,
//! say by its budget) counts as neutral: a half-open breaker frees its probe
//! slot for the next caller instead of staying stuck. Unless the call had
//! gone silent (next section): dropped after the silence limit with nothing
//! answered since it was sent (its caller's own deadline came before the
//! call's timeout), it counts as the silent timeout it was.
//!
//! A verdict counts only in the *spell* its permit was granted in: a call
//! admitted while the breaker was closed that reports after the breaker has
//! opened (or opened and closed again) is ignored, so only the probe decides
//! a half-open breaker.
//!
//! # A dependency that stops answering
//!
//! A dependency that accepts calls and never answers fails each call only
//! when its caller's budget ends, one at a time: at two calls a second
//! `failure_threshold` failures take many seconds to pile up, and each of
//! them costs a caller its whole budget. So a breaker also watches for
//! silence, with a second, smaller threshold, `timeout_threshold`
//! (default [`DEFAULT_TIMEOUT_THRESHOLD`], 3):
//!
//! - It learns the endpoint's **typical latency**: the smoothed mean of
//!   its *successful* attempts' latencies, each new one weighing 1/8 (as
//!   TCP smooths its round-trip time, RFC 6298). Successes only: a
//!   timed-out attempt's latency is its caller's budget, not the
//!   endpoint's; the learned floor learns from timeouts and so drifts up
//!   to the budgets when the endpoint goes silent.
//! - An attempt **went silent** when it has had no answer for the
//!   **silence limit**, four typical latencies and at
//!   least 250 ms, and no other attempt was answered
//!   since it was sent.
//! - A closed breaker **opens** when `timeout_threshold` attempts went
//!   silent: those that ended so (in a row: any answer starts the count
//!   again) and those still outstanding, so that a hang is seen before
//!   its calls end. It is checked when such an attempt ends and when a
//!   call asks to be admitted; no timer runs per call.
//! - A timeout before the typical latency had passed was **cut short** by
//!   its caller's small budget: neutral. One between the typical latency
//!   and the silence limit is an ordinary failure, and so is every
//!   timeout before the first success (**cold start**: no latency known,
//!   only `failure_threshold` applies).
//! - The half-open **probe** may wait the silence limit for its answer
//!   ([`BreakerPermit::attempt_limit`]; the HTTP client shortens the
//!   probe's attempt to it), so that an endpoint that still does not
//!   answer is probed again soon: with a 200 ms endpoint and
//!   `open_for = 1s`, a probe every 1.8 s, and a recovery is answered
//!   within 1.8 s. Every fourth probe in a row that timed
//!   out gets its call's whole time instead, so that an endpoint that came
//!   back slower than its silence limit is still found (a short probe
//!   cannot tell it from a silent one); a recovery that comes while such a
//!   probe waits is seen when it ends, up to its budget plus `open_for`
//!   later.
//!
//! A breaker opened this way refuses calls like any open breaker
//! ([`CircuitOpen`], whose [`no_answer_for`](CircuitOpen::no_answer_for)
//! says how long nothing has been answered), and logs its opening at
//! `info` with `cause = "no answer"`.
//!
//! ```
//! use std::time::Duration;
//! use budget_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Verdict};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let ms = Duration::from_millis;
//! let mut config = BreakerConfig::default();
//! config.failure_threshold = 20;
//! config.open_for = ms(1000);
//! let policy = config.build().unwrap();
//! let breaker = CircuitBreaker::new("http://pricing:80", policy);
//! // The endpoint answers in 200 ms ...
//! let permit = breaker.try_acquire().unwrap();
//! tokio::time::advance(ms(200)).await;
//! permit.record(Verdict::Success);
//! // ... then stops answering: three calls, one at a time, wait out 2 s budgets.
//! for _ in 0..3 {
//!     let permit = breaker.try_acquire().unwrap();
//!     tokio::time::advance(ms(2000)).await;
//!     permit.record(Verdict::TimedOut);
//! }
//! assert_eq!(breaker.state(), BreakerState::Open); // not 20 failures
//! assert_eq!(breaker.try_acquire().unwrap_err().no_answer_for(), Some(ms(6000)));
//! // A second later, one probe, which waits 4 x 200 ms at most.
//! tokio::time::advance(ms(1000)).await;
//! assert_eq!(breaker.try_acquire().unwrap().attempt_limit(), Some(ms(800)));
//! # }
//! ```
//!
//! # Sharing
//!
//! Breakers are per endpoint, keyed `scheme://host:port` by [`endpoint_key`].
//! A [`BreakerRegistry`] hands every client of one endpoint the same breaker.
//!
//! Time is read from [`tokio::time::Instant`], so paused-clock tests govern
//! `open_for`.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::breaker::{BreakerConfig, BreakerRegistry, BreakerState, Verdict};
//! use http::StatusCode;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut config = BreakerConfig::default();
//! config.failure_threshold = 2;
//! config.open_for = Duration::from_secs(5);
//! let policy = config.build().unwrap();
//! let registry = BreakerRegistry::new(policy);
//! let uri: http::Uri = "http://pricing.internal/quote".parse().unwrap();
//! let breaker = registry.get_for(&uri).unwrap();
//! assert_eq!(breaker.key(), "http://pricing.internal:80");
//!
//! for _ in 0..2 {
//!     let permit = breaker.try_acquire().unwrap();
//!     permit.record(Verdict::from_status(StatusCode::SERVICE_UNAVAILABLE));
//! }
//! assert_eq!(breaker.state(), BreakerState::Open);
//!
//! let refused = breaker.try_acquire().unwrap_err();
//! assert_eq!(refused.retry_after(), Duration::from_secs(5));
//!
//! tokio::time::advance(Duration::from_secs(5)).await;
//! let probe = breaker.try_acquire().unwrap(); // the one probe
//! assert!(breaker.try_acquire().is_err()); // no second one
//! probe.record(Verdict::Success);
//! assert_eq!(breaker.state(), BreakerState::Closed);
//! # }
//! ```

mod circuit;
mod config;
mod error;
mod evidence;
mod observer;
mod registry;
mod verdict;

pub use circuit::{BreakerPermit, BreakerState, CircuitBreaker};
pub use config::{
    BreakerConfig, BreakerPolicy, DEFAULT_FAILURE_THRESHOLD, DEFAULT_OPEN_FOR,
    DEFAULT_TIMEOUT_THRESHOLD,
};
pub use error::CircuitOpen;
pub(crate) use observer::SharedObserver;
pub use observer::{NoObserver, Observer};
pub use registry::{BreakerRegistry, endpoint_key};
pub use verdict::Verdict;
