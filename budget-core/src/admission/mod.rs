//! Admission: how much work is let through to a partner at once.
//!
//! A fixed concurrency limit (`concurrency = 8`) is a guess that goes stale
//! the day the partner scales, slows down or shares its workers with a new
//! caller. This module holds the pieces that replace the guess with a
//! measurement:
//!
//! - [`limit`]: [`AdaptiveLimit`], a pure algorithm (no HTTP, no permits)
//!   that turns finished calls' latencies into a concurrency limit, and
//!   [`LimitConfig`], the `concurrency = 8 | "auto" | { ... }` setting.
//!
//! The permits themselves (a queue that obeys the current limit) live
//! beside it; the limit only says how many.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::admission::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
//! assert_eq!(limit.current(), 10);
//! let now = tokio::time::Instant::now();
//! // The first finished call starts the first no-load (min-RTT) measurement.
//! let probing = limit.on_sample(now, Duration::from_millis(50), 4, Sample::Success);
//! assert_eq!(probing, 3);
//! # }
//! ```

pub mod limit;

pub use limit::{AdaptiveLimit, AdaptiveLimitConfig, LimitConfig, Sample};
