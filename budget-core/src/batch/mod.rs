//! Background batches: an [`Uploader`] queues JSON items and flushes them
//! as batches (a JSON array body, POSTed through a
//! [`BudgetClient`](crate::client::BudgetClient)) without running out of
//! memory while the server is down, and without a batch applied twice.
//!
//! The rules (docs/streams.md, "Background batches"):
//!
//! 1. **Bounded.** The queue holds at most `queue_max_items` items and
//!    `queue_max_bytes` bytes, counting the batch being sent and the
//!    batches set aside. A full queue answers the producer by the
//!    [`Overflow`] policy the user chose: a typed [`PushError::Full`], or a
//!    documented drop (oldest or newest), counted in [`Stats`] and the
//!    metrics. An item over `item_max_bytes` is [`PushError::TooLarge`].
//! 2. **Applied once.** Every batch gets an `Idempotency-Key`
//!    (`<uploader id>-<sequence>`) that stays the same on every send of it,
//!    and leaves the queue only when the server acknowledged it (2xx). A
//!    retried flush the server already applied is a duplicate it ignores.
//! 3. **Bad batches set aside.** `400`, `413`, `422` say the batch itself
//!    is bad: it is not retried, but kept as a [`SetAside`] (counted in the
//!    bounds, [`Uploader::take_set_aside`], the shutdown report), never
//!    dropped silently.
//! 4. **No knocking.** Each flush is one client call within
//!    `flush_budget` (floor, breaker, ledger, metrics apply). Between failed
//!    flushes of a batch the wait is the full-jitter backoff (capped at
//!    `backoff.max`, 60 s by default), at least the server's
//!    `Retry-After` (within the cap). While the endpoint's breaker is open,
//!    the uploader waits for its `retry_after` and sends only when it
//!    admits its probe: one batch in flight at a time, so at most the one
//!    probe reaches a dead endpoint.
//! 5. **Nothing accepted is lost.** [`Uploader::shutdown`] stops accepting,
//!    makes a final flush within its deadline and returns a
//!    [`ShutdownReport`]: the batch in flight (with its key), the items never
//!    sent, the batches set aside.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use budget_core::batch::{Overflow, PushError, Uploader, UploaderConfig};
//! use budget_core::client::DependencyConfig;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let ingest = DependencyConfig::new("ingest", "http://127.0.0.1:9000").build()?;
//! let mut config = UploaderConfig::default();
//! config.queue_max_bytes = 4 << 20;
//! config.overflow = Overflow::Reject;
//! let uploader = Uploader::new(ingest, config)?;
//!
//! for n in 0..1000 {
//!     match uploader.push(&serde_json::json!({ "n": n })) {
//!         Ok(_) => {}
//!         Err(PushError::Full { .. }) => break, // the producer slows down
//!         Err(e) => return Err(e.into()),
//!     }
//! }
//! let report = uploader.shutdown(Duration::from_secs(5)).await?;
//! println!("sent {} batches, {} items left to persist", report.stats.batches_sent, report.unsent_items());
//! # Ok(()) }
//! ```

mod config;
mod error;
mod flush;
pub mod metrics;
mod queue;
mod report;
mod schedule;
mod sink;
mod state;
#[cfg(test)]
mod tests;
mod uploader;

pub use config::{BatchBackoffConfig, Overflow, UploaderConfig};
pub use error::{AlreadyShutDown, PushError, Pushed};
pub use report::{Batch, SetAside, ShutdownReport, Stats};
pub use uploader::Uploader;
