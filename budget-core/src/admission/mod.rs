//! Admission: how much work is let through to a partner at once, who gets
//! one of its limited concurrency permits, in what order, and who is
//! refused early, so that overload fails fast and the requests that can
//! still finish are the ones served (docs/contract.md §2 rule 11).
//!
//! - [`criticality`]: how much a request matters
//!   ([`criticality::Criticality`]) and its `request-criticality` header.
//! - [`queue`]: [`PermitQueue`](queue::PermitQueue), a pool of permits with
//!   a waiting line that predicts each newcomer's wait from the measured
//!   hold of a permit and lets it wait when the wait fits its budget,
//!   refuses it at arrival when it does not, never hands a permit to a
//!   waiter past its give-up instant, serves the more critical first, and,
//!   once a queue stands (fed faster than it drains, deeper than its
//!   callers can afford), admits only short waits and serves the newest
//!   first.
//! - [`limit`]: [`AdaptiveLimit`](limit::AdaptiveLimit), a pure algorithm
//!   that turns finished calls' latencies into a concurrency limit (a fixed
//!   `concurrency = 8` is a guess that goes stale the day the partner
//!   scales or slows down), and [`LimitConfig`](limit::LimitConfig), the
//!   `concurrency = 8 | "auto" | { ... }` setting.
//!
//! Everything here is pure: no I/O, no HTTP, no spawned task. The client
//! and server sides wire it in.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::admission::criticality::Criticality;
//! use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
//! use budget_core::admission::queue::{PermitQueue, QueueConfig, Waiter};
//! use tokio::time::Instant;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut headers = http::HeaderMap::new();
//! headers.insert("request-criticality", "critical".parse().unwrap());
//! let criticality = Criticality::from_headers(&headers).criticality;
//!
//! let queue = PermitQueue::new(4, QueueConfig::default()).unwrap();
//! let waiter = Waiter::new(Instant::now() + Duration::from_millis(800), criticality);
//! let permit = queue.acquire(waiter).await.unwrap();
//! assert_eq!(permit.waited(), Duration::ZERO);
//!
//! let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
//! // The first three calls, at the min-RTT probe's limit, measure the
//! // partner's no-queue latency; then the limit is its initial 10.
//! assert_eq!(limit.current(), 3);
//! for in_flight in 1..=3 {
//!     limit.on_sample(Instant::now(), Duration::from_millis(50), in_flight, Sample::Success);
//! }
//! assert_eq!(limit.current(), 10);
//! // A call dropped (timed out, or answered 503) cuts the limit by 10 %.
//! let now = limit.on_sample(Instant::now(), Duration::from_millis(50), 4, Sample::Dropped);
//! assert_eq!(now, 9);
//! queue.set_limit(now);
//! assert_eq!(queue.limit(), 9);
//! # }
//! ```

pub mod criticality;
pub mod limit;
pub mod queue;
