//! [`Batch`], [`SetAside`], [`Stats`] and [`ShutdownReport`]: what the
//! uploader tells its owner.

use bytes::Bytes;
use http::StatusCode;

/// One batch: its items and the idempotency key it is sent with on every
/// attempt.
///
/// # Example
///
/// ```no_run
/// # async fn run(up: budget_core::batch::Uploader) {
/// let report = up.shutdown(std::time::Duration::from_secs(2)).await.unwrap();
/// if let Some(batch) = report.pending_batch {
///     // Persist it with its key: resent later with the same key, the
///     // server applies it at most once.
///     println!("{} items under {}", batch.items().len(), batch.key());
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    pub(crate) key: String,
    pub(crate) items: Vec<Bytes>,
    pub(crate) sends: u32,
}

impl Batch {
    /// The `Idempotency-Key` every attempt of this batch carries.
    ///
    /// ```no_run
    /// # fn f(b: &budget_core::batch::Batch) { assert!(!b.key().is_empty()); }
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The items, each one JSON value.
    ///
    /// ```no_run
    /// # fn f(b: &budget_core::batch::Batch) { let _n = b.items().len(); }
    /// ```
    pub fn items(&self) -> &[Bytes] {
        &self.items
    }

    /// How many times it was sent (0: never reached the server; more: it
    /// may have been applied, resend it with its [`key`](Self::key)).
    ///
    /// ```no_run
    /// # fn f(b: &budget_core::batch::Batch) { let _ = b.sends(); }
    /// ```
    pub fn sends(&self) -> u32 {
        self.sends
    }

    /// The items' bytes (without the array's brackets and commas).
    pub(crate) fn item_bytes(&self) -> usize {
        self.items.iter().map(Bytes::len).sum()
    }

    /// The request body: the items as one JSON array.
    pub(crate) fn body(&self) -> Bytes {
        let mut body = Vec::with_capacity(body_len(self.item_bytes(), self.items.len()));
        body.push(b'[');
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.push(b']');
        Bytes::from(body)
    }
}

/// The length of a JSON array of `items` values of `bytes` bytes in all.
pub(crate) fn body_len(bytes: usize, items: usize) -> usize {
    bytes
        .saturating_add(items.saturating_sub(1))
        .saturating_add(2)
}

/// A batch the server refused as bad (`400`, `413`, `422`), or that could
/// not be sent at all: not retried, never dropped silently. It stays
/// counted in the queue's bounds until taken with
/// [`Uploader::take_set_aside`](super::Uploader::take_set_aside) or
/// returned by the shutdown report.
///
/// # Example
///
/// ```no_run
/// # fn f(up: &budget_core::batch::Uploader) {
/// for refused in up.take_set_aside() {
///     eprintln!("{:?}: {} ({} items)", refused.status(), refused.reason(), refused.batch().items().len());
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetAside {
    pub(crate) batch: Batch,
    pub(crate) status: Option<StatusCode>,
    pub(crate) reason: String,
}

impl SetAside {
    /// The batch.
    ///
    /// ```no_run
    /// # fn f(s: &budget_core::batch::SetAside) { let _ = s.batch().key(); }
    /// ```
    pub fn batch(&self) -> &Batch {
        &self.batch
    }

    /// The server's status, when it answered.
    ///
    /// ```no_run
    /// # fn f(s: &budget_core::batch::SetAside) { let _ = s.status(); }
    /// ```
    pub fn status(&self) -> Option<StatusCode> {
        self.status
    }

    /// Why: the status and the start of the server's answer, or the error.
    ///
    /// ```no_run
    /// # fn f(s: &budget_core::batch::SetAside) { println!("{}", s.reason()); }
    /// ```
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The batch, taking it.
    ///
    /// ```no_run
    /// # fn f(s: budget_core::batch::SetAside) { let _b = s.into_batch(); }
    /// ```
    pub fn into_batch(self) -> Batch {
        self.batch
    }
}

/// A snapshot of an uploader's counters
/// ([`Uploader::stats`](super::Uploader::stats)).
///
/// # Example
///
/// ```no_run
/// # fn f(up: &budget_core::batch::Uploader) {
/// let s = up.stats();
/// println!("{} items ({} bytes) held, {} batches sent", s.queued_items, s.queued_bytes, s.batches_sent);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Items held now: queued, in the batch being sent, set aside.
    pub queued_items: usize,
    /// Their bytes.
    pub queued_bytes: usize,
    /// Batches the server acknowledged (2xx).
    pub batches_sent: u64,
    /// Items in them.
    pub items_sent: u64,
    /// Sends of a batch after its first.
    pub retries: u64,
    /// Items dropped by the overflow policy.
    pub dropped_items: u64,
    /// Pushes refused: queue full under `Overflow::Reject`, or too large.
    pub rejected_pushes: u64,
    /// Batches set aside (refused by the server as bad).
    pub set_aside_batches: u64,
    /// Items in them.
    pub set_aside_items: u64,
    /// Sends made as the half-open breaker's probe (after an open circuit).
    pub probes: u64,
    /// Flushes the open breaker refused without a request (each followed
    /// by a wait for its `retry_after`).
    pub circuit_open_waits: u64,
}

/// What [`Uploader::shutdown`](super::Uploader::shutdown) hands back:
/// everything accepted and not acknowledged, so the caller can persist it.
///
/// # Example
///
/// ```no_run
/// # async fn run(up: budget_core::batch::Uploader) {
/// let report = up.shutdown(std::time::Duration::from_secs(2)).await.unwrap();
/// println!("sent {} batches; {} items unsent", report.stats.batches_sent, report.unsent_items());
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// The counters at the end (`queued_*` count what is returned here).
    pub stats: Stats,
    /// The batch being sent when time ran out: it may have been applied
    /// (see [`Batch::sends`]); resend it with its key.
    pub pending_batch: Option<Batch>,
    /// Items never put in a batch, oldest first.
    pub unsent: Vec<Bytes>,
    /// Batches the server refused as bad, not yet taken.
    pub set_aside: Vec<SetAside>,
}

impl ShutdownReport {
    /// Items not acknowledged: the pending batch's, the unsent and the set
    /// aside ones. Zero means everything accepted was applied.
    ///
    /// ```
    /// assert_eq!(budget_core::batch::ShutdownReport::default().unsent_items(), 0);
    /// ```
    pub fn unsent_items(&self) -> usize {
        let pending = self.pending_batch.as_ref().map_or(0, |b| b.items.len());
        let set_aside: usize = self.set_aside.iter().map(|s| s.batch.items.len()).sum();
        pending + self.unsent.len() + set_aside
    }
}
