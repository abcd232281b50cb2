//! What the `batch-outage` scenario measures: producers push items at a
//! steady rate into a batch uploader while the partner's `/ingest` fails
//! for a while, then recovers ([`BatchReport`]).
//!
//! The outage has two halves ([`halves`]): in the first, `/ingest`
//! answers `503` and applies nothing (the partner's mode `status`: the
//! failure that opens a breaker); in the second, it applies what it is
//! sent and closes the connection without the answer (mode
//! `applied-reset`: the failure that makes a batch applied twice, when
//! the client sends it again under a new key). Both failures meet both
//! uploaders, in that order, within one `--duration`.
//!
//! # Definitions
//!
//! - **queue memory**: the items (and their bytes) the uploader holds,
//!   sampled every [`SAMPLE_EVERY`] from the uploader itself (`budget`:
//!   its `Stats::queued_items` and `queued_bytes`, the batch in flight
//!   included; `naive`: its queue's length, items all [`ITEM_BYTES`]
//!   long); the peak over the run, against the uploader's bound (none for
//!   the naive queue).
//! - **lost**: items accepted by a push and not applied by the partner
//!   (its distinct items: applied minus applied again) when the run ends (after the uploader's shutdown and its final
//!   flush); refused pushes (a full bounded queue) are counted apart:
//!   they stayed the producer's.
//! - **applied twice**: items the partner applied again, counted by the
//!   partner item by item: its `items_applied_again`, the items applied
//!   whose JSON equals one applied before under any key (every item of a
//!   run is different: [`item`] carries its number). That is a batch
//!   applied again under a new key, what a naive client that makes a key
//!   per send does to a retry whose first answer was lost. Beside it the
//!   partner's `duplicates`: batches that came again with a key already
//!   applied, ignored (idempotency working).
//! - **requests to the dead endpoint**: the partner's
//!   `requests_while_failing`; the goal's bound is the breaker's
//!   `failure_threshold` (the failures that open it) plus the probes the
//!   uploader made (its `Stats::probes`).
//! - **time to drain**: from the recovery until the partner has applied
//!   as many distinct items as had been accepted when it recovered (the
//!   backlog, sent oldest first).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::run::RunError;
use crate::target::LoopbackUrl;

/// Items pushed per second, unless `--rate` says.
pub const ITEM_RATE: f64 = 200.0;

/// How long `/ingest` fails, unless `--duration` says.
pub const OUTAGE: Duration = Duration::from_secs(20);

/// The two halves of an outage of `outage`: how long `/ingest` answers
/// `503` ([`IngestFailure::Status`]), then how long it applies and loses
/// the answer ([`IngestFailure::AppliedReset`]); their sum is `outage`.
///
/// ```
/// use std::time::Duration;
/// use load_tests::batch_outage::halves;
/// let (first, second) = halves(Duration::from_millis(3_001));
/// assert_eq!((first, second), (Duration::from_micros(1_500_500), Duration::from_micros(1_500_500)));
/// assert_eq!(first + second, Duration::from_millis(3_001));
/// ```
pub fn halves(outage: Duration) -> (Duration, Duration) {
    let first = outage / 2;
    (first, outage.saturating_sub(first))
}

/// How a failing `/ingest` fails (the partner's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IngestFailure {
    /// Answers `503`, applies nothing.
    Status,
    /// Applies the batch, then closes the connection without the answer.
    AppliedReset,
}

impl IngestFailure {
    /// The partner's name of the mode.
    ///
    /// ```
    /// use load_tests::batch_outage::IngestFailure;
    /// assert_eq!(IngestFailure::AppliedReset.as_str(), "applied-reset");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            IngestFailure::Status => "status",
            IngestFailure::AppliedReset => "applied-reset",
        }
    }
}

/// Steady pushes before the outage.
pub const BEFORE: Duration = Duration::from_secs(3);

/// Steady pushes after the recovery.
pub const AFTER: Duration = Duration::from_secs(5);

/// The longest the scenario waits after the pushes for the backlog to be
/// applied, before it shuts the uploader down.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(90);

/// The uploader's shutdown deadline (its final flush).
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// How often the queue and the partner are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// The bytes of every item's JSON (`{"seq":…,"pad":"…"}`, zero-padded so
/// that all are the same size).
pub const ITEM_BYTES: usize = 100;

/// Item number `seq` of a run, [`ITEM_BYTES`] of JSON.
///
/// ```
/// use load_tests::batch_outage::{ITEM_BYTES, item};
/// assert_eq!(serde_json::to_vec(&item(7)).unwrap().len(), ITEM_BYTES);
/// assert_eq!(serde_json::to_vec(&item(1_234_567)).unwrap().len(), ITEM_BYTES);
/// ```
pub fn item(seq: u64) -> serde_json::Value {
    // `{"pad":"…","seq":"0000000007"}`: 29 bytes around the pad.
    serde_json::json!({ "seq": format!("{seq:010}"), "pad": "x".repeat(ITEM_BYTES - 29) })
}

/// What one run of `batch-outage` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    /// The uploader, in a few words.
    pub policy: String,
    /// Items pushed per second.
    pub items_per_s: f64,
    /// How long `/ingest` failed, seconds.
    pub outage_s: f64,
    /// Pushes accepted.
    pub accepted: u64,
    /// Pushes refused (a full bounded queue).
    pub rejected: u64,
    /// The uploader's bound, items (`None`: unbounded).
    pub bound_items: Option<u64>,
    /// Its bound, bytes.
    pub bound_bytes: Option<u64>,
    /// The most items it held at once.
    pub peak_items: u64,
    /// The most bytes.
    pub peak_bytes: u64,
    /// Items the partner applied.
    pub applied_items: u64,
    /// Batches it applied.
    pub applied_batches: u64,
    /// Accepted items not applied at the end.
    pub lost_items: u64,
    /// Items the uploader's shutdown reported unsent.
    pub unsent_at_shutdown: u64,
    /// Batches that came again with a key already applied (ignored).
    pub duplicates: u64,
    /// Items the partner applied again (its `items_applied_again`).
    pub applied_twice: u64,
    /// Requests `/ingest` received.
    pub requests: u64,
    /// Of them, while it was failing.
    pub requests_while_failing: u64,
    /// The goal's bound on those: the failures that open the breaker plus
    /// the uploader's probes (`None`: no breaker).
    pub dead_bound: Option<u64>,
    /// Seconds from the recovery until the backlog was applied (`None`:
    /// not within the watch).
    pub drain_s: Option<f64>,
}

/// What `GET /admin/ingest` says (the partner's wire spec).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct IngestStats {
    /// Batches applied.
    pub batches_applied: u64,
    /// Items in them.
    pub items_applied: u64,
    /// Of them, items equal to one applied before (under any key).
    pub items_applied_again: u64,
    /// Batches sent again with a key already applied.
    pub duplicates: u64,
    /// Requests received.
    pub requests: u64,
    /// Of them, while failing.
    pub requests_while_failing: u64,
    /// Whether it fails now.
    pub failing: bool,
}

impl IngestStats {
    /// The different items applied: each counted once however often it
    /// was applied.
    ///
    /// ```
    /// use load_tests::batch_outage::IngestStats;
    /// let s = IngestStats { items_applied: 700, items_applied_again: 200, ..IngestStats::default() };
    /// assert_eq!(s.distinct_items(), 500);
    /// ```
    pub fn distinct_items(&self) -> u64 {
        self.items_applied.saturating_sub(self.items_applied_again)
    }
}

/// The partner's ingest admin, at its base URL.
#[derive(Clone, Debug)]
pub struct IngestAdmin {
    http: reqwest::Client,
    base: LoopbackUrl,
}

impl IngestAdmin {
    /// The admin of the partner at `base` (`http://127.0.0.1:port`).
    ///
    /// # Errors
    ///
    /// A URL that is not loopback, or a client that cannot be built.
    pub fn new(base: &str) -> Result<Self, RunError> {
        Ok(Self {
            http: crate::target::loopback_client(Duration::from_secs(2))?,
            base: LoopbackUrl::parse(base)?,
        })
    }

    /// Makes `/ingest` fail as `failure` says for `outage` from now (a
    /// window in force is replaced).
    ///
    /// # Errors
    ///
    /// When the partner cannot be reached or refuses.
    pub async fn fail_for(&self, outage: Duration, failure: IngestFailure) -> Result<(), RunError> {
        let body = serde_json::json!({
            "fail_for": humantime::format_duration(outage).to_string(),
            "status": 503,
            "mode": failure.as_str(),
        });
        self.http
            .put(self.base.with_path("/admin/ingest").url().clone())
            .timeout(Duration::from_secs(5))
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// The counters.
    ///
    /// # Errors
    ///
    /// When the partner cannot be reached or answers something else.
    pub async fn stats(&self) -> Result<IngestStats, RunError> {
        Ok(self
            .http
            .get(self.base.with_path("/admin/ingest").url().clone())
            .timeout(Duration::from_secs(5))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?)
    }
}

/// The peak of a run's queue, from its samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// The most items held at once.
    pub items: u64,
    /// The most bytes.
    pub bytes: u64,
}

impl Peak {
    /// Takes one sample.
    ///
    /// ```
    /// use load_tests::batch_outage::Peak;
    /// let mut p = Peak::default();
    /// p.sample(10, 1_000);
    /// p.sample(4, 400);
    /// assert_eq!((p.items, p.bytes), (10, 1_000));
    /// ```
    pub fn sample(&mut self, items: usize, bytes: usize) {
        self.items = self.items.max(items as u64);
        self.bytes = self.bytes.max(bytes as u64);
    }
}
