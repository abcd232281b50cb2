//! Retry rules: when a failed attempt is tried again, after how long, and
//! when it is not (docs/contract.md §2, rules 3 to 9).
//!
//! Everything here is a pure decision that tests without sockets; the HTTP
//! client does the I/O and asks:
//!
//! - [`classify`](Classifier::classify): is the outcome a success, worth
//!   another attempt, or final? ([`Outcome`], [`TransportKind`], [`Class`]);
//!   and [`is_idempotent`]: may this request be sent twice?
//! - [`Backoff`]: how long to wait when the server did not say
//!   (exponential, full jitter, capped, overflow-safe; [`Jitter::None`] for
//!   demos and tests);
//! - [`parse_retry_after`]: how long the server said to wait;
//! - [`RetryPolicy::decide`]: retry after how long, or stop and why
//!   ([`Decision`], [`StopReason`]), from a [`RetryConfig`] (the
//!   configuration, with its [`BackoffConfig`] and the defaults stated
//!   once);
//! - [`RetryBudget`]: the per-client ratio of retries to requests;
//! - [`sleep_within`]: the backoff sleep, never past the deadline.
//!
//! # Why retries are paid from the request's budget
//!
//! A fixed "3 retries with backoff" ignores the caller's deadline: the third
//! attempt may start after the caller has given up, which is work nobody
//! waits for, at the moment the dependency is least able to do it. Here
//! every wait comes out of the same [`Budget`](crate::Budget) as the
//! attempts: a retry is made only when its wait *and* the next attempt's
//! [`Floor`](crate::floor::Floor) still fit in what remains, and a server asking for
//! a longer pause than that gets its 429/503 passed up, so the caller backs
//! off instead of timing out.
//!
//! # Why a retry budget and not only max attempts
//!
//! `max_attempts` bounds one request; it does nothing against a dependency
//! that is down for everyone, where each request triples the load. The
//! [`RetryBudget`] (tower's and Finagle's idea; see "Why budgets and not max
//! retries?" in `tower::retry::budget`) bounds retries across requests to a
//! ratio of traffic, so a storm stays a drizzle. Note the two budgets: the
//! *request time budget* is [`crate::Budget`]; the *retry budget* is
//! [`RetryBudget`].
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::Budget;
//! use budget_core::floor::Floor;
//! use budget_core::retry::{
//!     is_idempotent, sleep_within, Decision, DecisionInput, Outcome, RetryBudgetConfig,
//!     RetryPolicy,
//! };
//! use http::{HeaderMap, Method, StatusCode};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let policy = RetryPolicy::default();
//! let retry_budget = RetryBudgetConfig::default().build().unwrap();
//! let budget = Budget::new(Duration::from_secs(2));
//! let may_retry = is_idempotent(&Method::GET, &HeaderMap::new());
//!
//! retry_budget.deposit(); // once per request
//! let mut attempts = 0;
//! let mut previous_wait = None;
//! let answers = [StatusCode::SERVICE_UNAVAILABLE, StatusCode::OK];
//! let last = loop {
//!     let outcome = Outcome::status(answers[attempts as usize]); // the attempt
//!     attempts += 1;
//!     let input = DecisionInput {
//!         outcome,
//!         attempts,
//!         may_retry,
//!         remaining: budget.remaining(),
//!         floor: Floor::new(Duration::from_millis(100)),
//!         previous_wait,
//!     };
//!     match policy.decide(&input, Some(&retry_budget), &mut rand::rng()) {
//!         Decision::Retry { after } => {
//!             if sleep_within(after, &budget).await.is_err() {
//!                 break outcome;
//!             }
//!             previous_wait = Some(after);
//!         }
//!         Decision::Stop(_reason) => break outcome,
//!     }
//! };
//! assert_eq!(last.status_code(), Some(StatusCode::OK));
//! assert_eq!(attempts, 2);
//! # }
//! ```

mod backoff;
mod budget;
mod classify;
mod config;
mod policy;
mod retry_after;
mod sleep;

pub use backoff::{Backoff, Jitter};
pub use budget::{RetryBudget, RetryBudgetConfig};
pub use classify::{
    Class, Classifier, DEFAULT_RETRYABLE_GRPC_CODES, DEFAULT_RETRYABLE_STATUSES, IDEMPOTENCY_KEY,
    Outcome, TransportKind, is_idempotent,
};
pub use config::{BackoffConfig, RetryConfig};
pub use policy::{Decision, DecisionInput, RetryPolicy, StopReason};
pub use retry_after::{RetryAfterError, parse_retry_after};
pub use sleep::sleep_within;
