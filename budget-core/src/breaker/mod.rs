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
//! with [`BreakerPermit::record`]: a [`Verdict`] of success, failure or
//! neutral. [`Verdict::from_status`] classifies a response (`5xx`, `401`
//! and `429` are failures, `2xx` success, anything else neutral); a
//! transport error is a failure, said by the caller. Neutral neither counts
//! as a failure nor resets the count.
//!
//! A permit dropped without a verdict (the caller's future was cancelled,
//! say by its budget) counts as neutral: a half-open breaker frees its probe
//! slot for the next caller instead of staying stuck.
//!
//! A verdict counts only in the *spell* its permit was granted in: a call
//! admitted while the breaker was closed that reports after the breaker has
//! opened (or opened and closed again) is ignored, so only the probe decides
//! a half-open breaker.
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
//! let policy = BreakerConfig { failure_threshold: 2, open_for: Duration::from_secs(5) }
//!     .build()
//!     .unwrap();
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
mod registry;
mod verdict;

pub use circuit::{BreakerPermit, BreakerState, CircuitBreaker};
pub use config::{BreakerConfig, BreakerPolicy, DEFAULT_FAILURE_THRESHOLD, DEFAULT_OPEN_FOR};
pub use error::CircuitOpen;
pub use registry::{BreakerRegistry, endpoint_key};
pub use verdict::Verdict;
