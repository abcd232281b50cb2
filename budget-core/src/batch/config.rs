//! [`UploaderConfig`], its [`Overflow`] policy and their validation.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;
use crate::retry::{Backoff, Jitter};

/// What a push does when the queue is full (its items or its bytes).
///
/// Serialises as `"reject"`, `"drop_oldest"` or `"drop_newest"`. Whatever
/// the policy, the queue never holds more than its bounds: memory stays
/// bounded while the server is down.
///
/// # Example
///
/// ```
/// use budget_core::batch::Overflow;
/// let o: Overflow = serde_json::from_str("\"drop_oldest\"").unwrap();
/// assert_eq!(o, Overflow::DropOldest);
/// assert_eq!(Overflow::default(), Overflow::Reject);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Overflow {
    /// The push fails with [`PushError::Full`](super::PushError::Full): the
    /// producer decides (slow down, persist, drop). Nothing is dropped by
    /// the uploader.
    #[default]
    Reject,
    /// The oldest items not yet in a batch are dropped to make room; the
    /// push succeeds ([`Pushed::DroppedOldest`](super::Pushed)). A batch
    /// already formed (sent or about to be) is never cut: when only such
    /// batches fill the queue, the new item is dropped instead.
    DropOldest,
    /// The new item is dropped ([`Pushed::Dropped`](super::Pushed)); the
    /// queue keeps what it had.
    DropNewest,
}

/// The backoff between failed flushes of one batch: exponential (doubling)
/// from `initial`, capped at `max`, full jitter by default
/// ([`retry::Backoff`](crate::retry::Backoff)).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::batch::BatchBackoffConfig;
/// let b = BatchBackoffConfig::default();
/// assert_eq!(b.max, Duration::from_secs(60));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct BatchBackoffConfig {
    /// The first retry's ceiling (default 500 ms).
    #[serde(with = "crate::config::duration")]
    pub initial: Duration,
    /// The cap of every wait between flushes, a server's `Retry-After`
    /// included (default 60 s).
    #[serde(with = "crate::config::duration")]
    pub max: Duration,
    /// `full` (default) or `none` (exactly the ceilings: demos only).
    pub jitter: Jitter,
}

impl Default for BatchBackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(60),
            jitter: Jitter::Full,
        }
    }
}

/// How an [`Uploader`](super::Uploader) queues and flushes (see the
/// [module docs](super)). Durations read as text (`"250ms"`, `"5s"`).
///
/// # Example
///
/// ```
/// use budget_core::batch::{Overflow, UploaderConfig};
/// let config: UploaderConfig = serde_json::from_str(
///     r#"{"path": "/ingest", "queue_max_items": 1000, "overflow": "drop_oldest",
///         "flush_interval": "250ms", "backoff": {"max": "30s"}}"#,
/// ).unwrap();
/// assert_eq!(config.overflow, Overflow::DropOldest);
/// let mut bad = config.clone();
/// bad.batch_max_items = 0;
/// assert_eq!(bad.validate().unwrap_err().field(), "batch_max_items");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct UploaderConfig {
    /// The path each batch is POSTed to, appended to the client's URL
    /// (default `/ingest`).
    pub path: String,
    /// At most this many items held (queued, in a batch being sent, or set
    /// aside); default 10 000.
    pub queue_max_items: usize,
    /// At most this many item bytes held; default 8 MiB.
    pub queue_max_bytes: usize,
    /// At most this many items in one batch; default 500.
    pub batch_max_items: usize,
    /// At most this many bytes in one batch's body (the JSON array);
    /// default 1 MiB.
    pub batch_max_bytes: usize,
    /// At most this many bytes in one item's JSON; default 64 KiB.
    pub item_max_bytes: usize,
    /// A partial batch is flushed this long after the last flush; a full one
    /// at once. Default 1 s.
    #[serde(with = "crate::config::duration")]
    pub flush_interval: Duration,
    /// The budget of one flush (the call's retries inside it included);
    /// default 5 s.
    #[serde(with = "crate::config::duration")]
    pub flush_budget: Duration,
    /// The wait between failed flushes.
    pub backoff: BatchBackoffConfig,
    /// What a push does on a full queue.
    pub overflow: Overflow,
}

impl Default for UploaderConfig {
    fn default() -> Self {
        Self {
            path: "/ingest".to_owned(),
            queue_max_items: 10_000,
            queue_max_bytes: 8 << 20,
            batch_max_items: 500,
            batch_max_bytes: 1 << 20,
            item_max_bytes: 64 << 10,
            flush_interval: Duration::from_secs(1),
            flush_budget: Duration::from_secs(5),
            backoff: BatchBackoffConfig::default(),
            overflow: Overflow::Reject,
        }
    }
}

/// A validated [`UploaderConfig`].
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) path: String,
    pub(crate) limits: Limits,
    pub(crate) flush_interval: Duration,
    pub(crate) flush_budget: Duration,
    pub(crate) backoff: Backoff,
    pub(crate) overflow: Overflow,
}

/// The queue's and a batch's bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) queue_items: usize,
    pub(crate) queue_bytes: usize,
    pub(crate) batch_items: usize,
    pub(crate) batch_bytes: usize,
    pub(crate) item_bytes: usize,
}

impl UploaderConfig {
    /// Checks the config; each error names its field (`batch_max_bytes`,
    /// `backoff.max`, ...).
    ///
    /// - every bound at least 1, every duration above zero;
    /// - a batch fits the queue (`batch_max_items <= queue_max_items`,
    ///   `batch_max_bytes <= queue_max_bytes`);
    /// - an item fits a batch (`item_max_bytes + 2 <= batch_max_bytes`, the
    ///   array's brackets) and the queue;
    /// - `path` starts with `/`.
    ///
    /// ```
    /// use budget_core::batch::UploaderConfig;
    /// let mut c = UploaderConfig::default();
    /// c.item_max_bytes = c.batch_max_bytes;
    /// assert_eq!(c.validate().unwrap_err().field(), "item_max_bytes");
    /// assert!(UploaderConfig::default().validate().is_ok());
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.settings().map(|_| ())
    }

    pub(crate) fn settings(&self) -> Result<Settings, ConfigError> {
        if !self.path.starts_with('/') {
            return Err(ConfigError::new("path", "must start with `/`"));
        }
        let positive = [
            ("queue_max_items", self.queue_max_items),
            ("queue_max_bytes", self.queue_max_bytes),
            ("batch_max_items", self.batch_max_items),
            ("batch_max_bytes", self.batch_max_bytes),
            ("item_max_bytes", self.item_max_bytes),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(ConfigError::new(*field, "must be at least 1"));
        }
        if self.batch_max_items > self.queue_max_items {
            return Err(ConfigError::new(
                "batch_max_items",
                "must not exceed queue_max_items",
            ));
        }
        if self.batch_max_bytes > self.queue_max_bytes {
            return Err(ConfigError::new(
                "batch_max_bytes",
                "must not exceed queue_max_bytes",
            ));
        }
        if self.item_max_bytes.saturating_add(2) > self.batch_max_bytes {
            return Err(ConfigError::new(
                "item_max_bytes",
                "must leave room for the array's brackets in batch_max_bytes",
            ));
        }
        if self.flush_interval.is_zero() {
            return Err(ConfigError::new("flush_interval", "must not be zero"));
        }
        if self.flush_budget.is_zero() {
            return Err(ConfigError::new("flush_budget", "must not be zero"));
        }
        let b = &self.backoff;
        let backoff = Backoff::new(b.initial, b.max, 2.0, b.jitter)?;
        Ok(Settings {
            path: self.path.clone(),
            limits: Limits {
                queue_items: self.queue_max_items,
                queue_bytes: self.queue_max_bytes,
                batch_items: self.batch_max_items,
                batch_bytes: self.batch_max_bytes,
                item_bytes: self.item_max_bytes,
            },
            flush_interval: self.flush_interval,
            flush_budget: self.flush_budget,
            backoff,
            overflow: self.overflow,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every bound and duration is checked and its error names the field.
    #[test]
    fn each_bad_field_is_named() {
        type Spoil = fn(&mut UploaderConfig);
        let cases: [(&str, Spoil); 9] = [
            ("path", |c| c.path = "ingest".into()),
            ("queue_max_items", |c| c.queue_max_items = 0),
            ("queue_max_bytes", |c| c.queue_max_bytes = 0),
            ("batch_max_items", |c| {
                c.batch_max_items = c.queue_max_items + 1
            }),
            ("batch_max_bytes", |c| {
                c.batch_max_bytes = c.queue_max_bytes + 1
            }),
            ("item_max_bytes", |c| {
                c.item_max_bytes = c.batch_max_bytes - 1
            }),
            ("flush_interval", |c| c.flush_interval = Duration::ZERO),
            ("flush_budget", |c| c.flush_budget = Duration::ZERO),
            ("backoff.max", |c| c.backoff.max = Duration::from_millis(1)),
        ];
        for (field, spoil) in cases {
            let mut c = UploaderConfig::default();
            spoil(&mut c);
            assert_eq!(c.validate().unwrap_err().field(), field);
        }
    }

    /// Unknown fields are refused; durations read as text.
    #[test]
    fn reads_text_durations_and_refuses_unknown_fields() {
        let c: UploaderConfig =
            serde_json::from_str(r#"{"flush_budget":"2s","backoff":{"initial":"100ms"}}"#).unwrap();
        assert_eq!(c.flush_budget, Duration::from_secs(2));
        assert_eq!(c.backoff.initial, Duration::from_millis(100));
        assert!(serde_json::from_str::<UploaderConfig>(r#"{"queue":1}"#).is_err());
    }
}
