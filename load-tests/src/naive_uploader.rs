//! The `batch-outage` scenario's naive mode: the batch uploader most
//! hand-written clients have ([`NaiveUploader`]). An unbounded queue
//! (every push succeeds, memory grows while the server is down); a flush
//! loop that every [`NAIVE_INTERVAL`] sends the queue's head in batches of
//! [`NAIVE_BATCH`] until one fails, and tries again at the next tick: a
//! fixed interval, no backoff, no breaker; a **new idempotency key for
//! every send** (the key is made where the request is built, so a resent
//! batch is a new one to the server: one the server applied and whose
//! answer was lost is applied again).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often the naive loop flushes (and retries a failed batch).
pub const NAIVE_INTERVAL: Duration = Duration::from_secs(1);

/// The most items in one of its batches.
pub const NAIVE_BATCH: usize = 500;

/// How long it waits for an answer to one batch.
pub const NAIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The naive uploader (module docs): push items, they are sent in the
/// background.
#[derive(Debug)]
pub struct NaiveUploader {
    queue: Arc<Mutex<VecDeque<serde_json::Value>>>,
    flusher: JoinHandle<()>,
}

impl NaiveUploader {
    /// Starts its flush loop, posting to `url` (the ingest endpoint) with
    /// `http`.
    pub fn start(http: reqwest::Client, url: String) -> Self {
        let queue = Arc::new(Mutex::new(VecDeque::new()));
        let flusher = tokio::spawn(flush_loop(http, url, Arc::clone(&queue)));
        Self { queue, flusher }
    }

    /// Queues `item`: always accepted, however long the queue is.
    pub fn push(&self, item: serde_json::Value) {
        self.lock().push_back(item);
    }

    /// Items queued and not yet acknowledged.
    pub fn queued(&self) -> usize {
        self.lock().len()
    }

    /// Keeps flushing until the queue is empty or `deadline` has passed,
    /// then stops; returns the items not sent.
    pub async fn shutdown(&self, deadline: Duration) -> usize {
        let end = Instant::now() + deadline;
        while self.queued() > 0 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.flusher.abort();
        self.queued()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<serde_json::Value>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every [`NAIVE_INTERVAL`]: sends batches from the head of the queue
/// until it is empty or a send fails.
async fn flush_loop(
    http: reqwest::Client,
    url: String,
    queue: Arc<Mutex<VecDeque<serde_json::Value>>>,
) {
    static SENDS: AtomicU64 = AtomicU64::new(0);
    let mut tick = tokio::time::interval(NAIVE_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        loop {
            let batch: Vec<serde_json::Value> = {
                let q = queue.lock().unwrap_or_else(PoisonError::into_inner);
                q.iter().take(NAIVE_BATCH).cloned().collect()
            };
            if batch.is_empty() {
                break;
            }
            let key = format!("naive-{}", SENDS.fetch_add(1, Ordering::Relaxed));
            let sent = http
                .post(&url)
                .header("idempotency-key", key)
                .timeout(NAIVE_TIMEOUT)
                .json(&batch)
                .send()
                .await;
            if !sent.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            let mut q = queue.lock().unwrap_or_else(PoisonError::into_inner);
            let sent = batch.len().min(q.len());
            q.drain(..sent);
        }
    }
}
