//! [`StreamStats`]: what a follower did, counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a follower did so far, shared with its handle: openings tried,
/// items delivered, connections lost, `retry:` values clamped.
///
/// # Example
///
/// ```no_run
/// use budget_core::stream::{StreamConfig, sse::EventSource};
/// # fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::config::ConfigError> {
/// let events = EventSource::new(c, "/events", &StreamConfig::default())?;
/// let stats = events.stats();
/// println!("{} openings, {} lost", stats.opens(), stats.cuts());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    opens: AtomicU64,
    delivered: AtomicU64,
    cuts: AtomicU64,
    retry_clamped: AtomicU64,
}

impl StreamStats {
    /// Openings tried (the first and every reconnect).
    ///
    /// ```
    /// assert_eq!(budget_core::stream::StreamStats::default().opens(), 0);
    /// ```
    pub fn opens(&self) -> u64 {
        self.inner.opens.load(Ordering::Relaxed)
    }

    /// Events (or messages) delivered.
    ///
    /// ```
    /// assert_eq!(budget_core::stream::StreamStats::default().delivered(), 0);
    /// ```
    pub fn delivered(&self) -> u64 {
        self.inner.delivered.load(Ordering::Relaxed)
    }

    /// Open streams that ended (a clean end, a disconnect, an idle
    /// timeout, a malformed frame): each followed by a reconnect.
    ///
    /// ```
    /// assert_eq!(budget_core::stream::StreamStats::default().cuts(), 0);
    /// ```
    pub fn cuts(&self) -> u64 {
        self.inner.cuts.load(Ordering::Relaxed)
    }

    /// Server `retry:` values over the cap (or too large to read), taken
    /// as the cap.
    ///
    /// ```
    /// assert_eq!(budget_core::stream::StreamStats::default().retry_clamped(), 0);
    /// ```
    pub fn retry_clamped(&self) -> u64 {
        self.inner.retry_clamped.load(Ordering::Relaxed)
    }

    pub(crate) fn opened(&self) {
        self.inner.opens.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn deliver(&self) {
        self.inner.delivered.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn cut(&self) {
        self.inner.cuts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn clamped(&self) {
        self.inner.retry_clamped.fetch_add(1, Ordering::Relaxed);
    }
}
