//! [`Uploader`]: the handle producers push into.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use serde::de::IgnoredAny;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::config::{Settings, UploaderConfig};
use super::error::{AlreadyShutDown, PushError, Pushed};
use super::flush::{Flusher, later};
use super::metrics;
use super::queue::Queue;
use super::report::{SetAside, ShutdownReport, Stats};
use super::sink::{ClientSink, Sink};
use super::state::Shared;
use crate::client::BudgetClient;
use crate::config::ConfigError;

/// A background batch uploader: a bounded queue of JSON items and a task
/// that flushes it as JSON-array batches through a [`BudgetClient`]. See
/// the [module docs](super) for the rules.
///
/// Cheap to clone (every clone pushes into the same queue). Dropping
/// every clone without [`shutdown`](Self::shutdown) lets the task make a
/// final flush of one `flush_budget` and end; what it could not send is
/// then lost: call `shutdown` to get it back.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use budget_core::batch::{Uploader, UploaderConfig};
/// use budget_core::client::DependencyConfig;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let ingest = DependencyConfig::new("ingest", "http://127.0.0.1:9000").build()?;
/// let uploader = Uploader::new(ingest, UploaderConfig::default())?;
/// uploader.push(&serde_json::json!({ "event": "click" }))?;
/// let report = uploader.shutdown(Duration::from_secs(5)).await?;
/// assert_eq!(report.unsent_items(), 0);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Uploader {
    inner: Arc<Handle>,
}

struct Handle {
    shared: Arc<Shared>,
    stop: watch::Sender<Option<Instant>>,
    task: Mutex<Option<JoinHandle<ShutdownReport>>>,
    id: String,
}

impl Uploader {
    /// An uploader POSTing to `config.path` of `client`'s dependency, its
    /// flush task spawned on the current tokio runtime (so this must be
    /// called inside one).
    ///
    /// Each flush is one call of the client: its floor, breaker, retries
    /// (the batch's `Idempotency-Key` makes the POST retryable), ledger
    /// and metrics apply, within `flush_budget`.
    ///
    /// ```no_run
    /// # use budget_core::{batch::{Uploader, UploaderConfig}, client::DependencyConfig};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = DependencyConfig::new("ingest", "http://127.0.0.1:9000").build()?;
    /// let mut config = UploaderConfig::default();
    /// config.batch_max_items = 0;
    /// assert_eq!(Uploader::new(client, config).unwrap_err().field(), "batch_max_items");
    /// # Ok(()) }
    /// ```
    pub fn new(client: BudgetClient, config: UploaderConfig) -> Result<Self, ConfigError> {
        let settings = config.settings()?;
        let name = client.name().to_owned();
        let sink = ClientSink {
            client,
            path: settings.path.clone(),
        };
        Ok(Self::with_sink(Arc::new(sink), &name, settings))
    }

    pub(crate) fn with_sink(sink: Arc<dyn Sink>, name: &str, settings: Settings) -> Self {
        let queue = Queue::new(settings.limits, settings.overflow);
        let shared = Arc::new(Shared::new(queue, name, settings.overflow));
        let id = format!("{:016x}", rand::random::<u64>());
        let (stop, stopped) = watch::channel(None);
        let flusher = Flusher::new(Arc::clone(&shared), sink, settings, id.clone());
        let task = tokio::spawn(flusher.run(stopped));
        Self {
            inner: Arc::new(Handle {
                shared,
                stop,
                task: Mutex::new(Some(task)),
                id,
            }),
        }
    }

    /// Queues `item` serialised as JSON. Never blocks; see
    /// [`Overflow`](super::Overflow) for a full queue.
    ///
    /// ```no_run
    /// # fn f(up: &budget_core::batch::Uploader) -> Result<(), budget_core::batch::PushError> {
    /// use budget_core::batch::PushError;
    /// match up.push(&serde_json::json!({ "n": 1 })) {
    ///     Ok(pushed) => assert!(pushed.is_queued()),
    ///     Err(PushError::Full { queued_items, .. }) => println!("slow down: {queued_items} held"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn push<T: Serialize + ?Sized>(&self, item: &T) -> Result<Pushed, PushError> {
        let bytes = serde_json::to_vec(item).map_err(PushError::Json)?;
        self.enqueue(Bytes::from(bytes))
    }

    /// Queues one pre-encoded JSON value (checked to be JSON, so a batch
    /// body is always a valid array).
    ///
    /// ```no_run
    /// # fn f(up: &budget_core::batch::Uploader) {
    /// assert!(up.push_json_bytes(&b"{\"n\":1}"[..]).is_ok());
    /// assert!(up.push_json_bytes(&b"{\"n\":"[..]).is_err());
    /// # }
    /// ```
    pub fn push_json_bytes(&self, item: impl Into<Bytes>) -> Result<Pushed, PushError> {
        let item = item.into();
        let limit = self.inner.shared.read(|q| q.item_limit());
        if item.len() <= limit {
            serde_json::from_slice::<IgnoredAny>(&item).map_err(PushError::Json)?;
        }
        self.enqueue(item)
    }

    fn enqueue(&self, item: Bytes) -> Result<Pushed, PushError> {
        let shared = &self.inner.shared;
        let (result, wake) = shared.update(|q| {
            let was_empty = !q.has_pending();
            let result = q.push(item);
            let wake =
                result.as_ref().is_ok_and(Pushed::is_queued) && (was_empty || q.batch_ready());
            (result, wake)
        });
        if wake {
            shared.wake.notify_one();
        }
        match &result {
            Err(PushError::Full { .. }) => metrics::rejected(&shared.dependency, "full"),
            Err(PushError::TooLarge { .. }) => metrics::rejected(&shared.dependency, "too_large"),
            _ => {}
        }
        result
    }

    /// The counters now.
    ///
    /// ```no_run
    /// # fn f(up: &budget_core::batch::Uploader) {
    /// let s = up.stats();
    /// assert!(s.queued_items <= 10_000);
    /// # }
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner.shared.read(Queue::stats)
    }

    /// The batches the server refused as bad since the last call; they no
    /// longer count in the queue's bounds.
    ///
    /// ```no_run
    /// # fn f(up: &budget_core::batch::Uploader) {
    /// for s in up.take_set_aside() { eprintln!("{}", s.reason()); }
    /// # }
    /// ```
    pub fn take_set_aside(&self) -> Vec<SetAside> {
        self.inner.shared.update(Queue::take_set_aside)
    }

    /// This uploader's id: every batch key is `<id>-<sequence>`.
    ///
    /// ```no_run
    /// # fn f(up: &budget_core::batch::Uploader) { assert_eq!(up.id().len(), 16); }
    /// ```
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// Stops accepting (pushes fail with [`PushError::Closed`]), makes a
    /// final flush within `deadline` (the schedule's waits kept: an open
    /// breaker or a backoff past the deadline ends it), and reports what
    /// was sent and everything not acknowledged, for the caller to
    /// persist. Only the first call reports.
    ///
    /// ```no_run
    /// # async fn run(up: budget_core::batch::Uploader) {
    /// let report = up.shutdown(std::time::Duration::from_secs(3)).await.unwrap();
    /// println!("{} batches sent, {} items to keep", report.stats.batches_sent, report.unsent_items());
    /// # }
    /// ```
    pub async fn shutdown(&self, deadline: Duration) -> Result<ShutdownReport, AlreadyShutDown> {
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or(AlreadyShutDown)?;
        let shared = &self.inner.shared;
        shared.update(Queue::close);
        let at = later(Instant::now(), deadline);
        // The task holds the receiver until it ends: the send cannot fail.
        let _ = self.inner.stop.send(Some(at));
        match task.await {
            Ok(report) => Ok(report),
            // The task did not finish (its runtime is shutting down): what
            // it held is still in the queue.
            Err(_) => Ok(shared.update(Queue::drain)),
        }
    }
}

impl fmt::Debug for Uploader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Uploader")
            .field("id", &self.inner.id)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
