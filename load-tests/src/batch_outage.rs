//! What the `batch-outage` scenario measures: producers push items at a
//! steady rate into a batch uploader while the partner's `/ingest` fails
//! for a while, then recovers ([`BatchReport`]).
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
//!   when the run ends (after the uploader's shutdown and its final
//!   flush); refused pushes (a full bounded queue) are counted apart:
//!   they stayed the producer's.
//! - **applied twice**: the partner's `duplicates`, batches that came again
//!   with a key already applied (ignored: idempotency working), and the
//!   items applied beyond those accepted (a batch applied again under a
//!   new key: what a naive client that makes a key per send does to a
//!   retry whose first answer was lost). The partner's failing window
//!   applies nothing (it answers `503`), so this outage gives neither mode
//!   a batch applied whose answer was lost: the row shows that nothing
//!   accepted was applied twice, not how each mode would fare if answers
//!   were lost after the apply.
//! - **requests to the dead endpoint**: the partner's
//!   `requests_while_failing`; the goal's bound is the breaker's
//!   `failure_threshold` (the failures that open it) plus the probes the
//!   uploader made (its `Stats::probes`).
//! - **time to drain**: from the recovery until the partner has applied
//!   as many items as had been accepted when it recovered (the backlog,
//!   sent oldest first).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::run::RunError;
use crate::target::LoopbackUrl;

/// Items pushed per second, unless `--rate` says.
pub const ITEM_RATE: f64 = 200.0;

/// How long `/ingest` fails, unless `--duration` says.
pub const OUTAGE: Duration = Duration::from_secs(20);

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
    /// Items applied beyond those accepted (applied twice).
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
    /// Batches sent again with a key already applied.
    pub duplicates: u64,
    /// Requests received.
    pub requests: u64,
    /// Of them, while failing.
    pub requests_while_failing: u64,
    /// Whether it fails now.
    pub failing: bool,
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

    /// Makes `/ingest` answer `503` for `outage` from now.
    ///
    /// # Errors
    ///
    /// When the partner cannot be reached or refuses.
    pub async fn fail_for(&self, outage: Duration) -> Result<(), RunError> {
        let body = serde_json::json!({
            "fail_for": humantime::format_duration(outage).to_string(),
            "status": 503,
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
