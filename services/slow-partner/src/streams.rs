//! The open streams (SSE and WebSocket): their counters behind
//! `GET /admin/streams`, the defaults of new streams (`/admin/events`), and
//! the cut that ends every open one at once (`POST /admin/events/cut`).
//!
//! Every stream holds an [`OpenStream`]: it counts the stream as open
//! until dropped, and its token fires when the streams are cut or the
//! partner stops. A cut installs a fresh token for the streams opened
//! after it. Memory is bounded: the opening times kept are the last
//! [`MAX_OPENS_KEPT`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::UNIX_EPOCH;

use budget_core::clock::{SystemClock, WallClock};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::stream_knobs::StreamDefaults;

/// How many opening times `GET /admin/streams` keeps (the most recent).
pub(crate) const MAX_OPENS_KEPT: usize = 200_000;

/// The body of `GET /admin/streams`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct StreamsSnapshot {
    /// Streams open now (never reset).
    pub(crate) open: u64,
    /// Streams opened since start or the last reset.
    pub(crate) opened_total: u64,
    /// The wall-clock time of each opening, unix milliseconds, oldest
    /// first: the last [`MAX_OPENS_KEPT`].
    pub(crate) opens_unix_ms: Vec<u64>,
    /// Events (SSE) and messages (WebSocket) sent since then.
    pub(crate) events_sent: u64,
}

#[derive(Debug, Default)]
struct Counters {
    open: u64,
    opened_total: u64,
    opens_unix_ms: VecDeque<u64>,
    events_sent: u64,
}

/// The shared registry of open streams.
#[derive(Debug)]
pub(crate) struct Streams {
    counters: Mutex<Counters>,
    defaults: Mutex<StreamDefaults>,
    /// Fires for the streams open now; replaced by each cut.
    cut: Mutex<CancellationToken>,
    /// The partner's own token: its streams end when it stops.
    shutdown: CancellationToken,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a few plain assignments: the data stays consistent
    // even if a holder panicked.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Streams {
    /// A registry whose streams end when `shutdown` is cancelled.
    pub(crate) fn new(shutdown: CancellationToken) -> Self {
        Self {
            counters: Mutex::default(),
            defaults: Mutex::default(),
            cut: Mutex::new(shutdown.child_token()),
            shutdown,
        }
    }

    /// The defaults of new streams.
    pub(crate) fn defaults(&self) -> StreamDefaults {
        lock(&self.defaults).clone()
    }

    /// Sets the defaults of new streams.
    pub(crate) fn set_defaults(&self, defaults: StreamDefaults) {
        *lock(&self.defaults) = defaults;
    }

    /// Records a stream opening now; it counts as open until the returned
    /// guard is dropped.
    pub(crate) fn open(self: &Arc<Self>) -> OpenStream {
        let now = SystemClock.now();
        let unix_ms = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, crate::stats::whole_millis);
        let mut counters = lock(&self.counters);
        counters.open = counters.open.saturating_add(1);
        counters.opened_total = counters.opened_total.saturating_add(1);
        if counters.opens_unix_ms.len() == MAX_OPENS_KEPT {
            counters.opens_unix_ms.pop_front();
        }
        counters.opens_unix_ms.push_back(unix_ms);
        drop(counters);
        OpenStream {
            streams: Arc::clone(self),
            token: lock(&self.cut).clone(),
        }
    }

    /// Counts one event or message sent.
    pub(crate) fn sent(&self) {
        let mut counters = lock(&self.counters);
        counters.events_sent = counters.events_sent.saturating_add(1);
    }

    /// Ends every stream open now, abruptly; returns how many were open.
    pub(crate) fn cut(&self) -> u64 {
        let fresh = self.shutdown.child_token();
        let old = std::mem::replace(&mut *lock(&self.cut), fresh);
        old.cancel();
        lock(&self.counters).open
    }

    /// A copy of the counters.
    pub(crate) fn snapshot(&self) -> StreamsSnapshot {
        let counters = lock(&self.counters);
        StreamsSnapshot {
            open: counters.open,
            opened_total: counters.opened_total,
            opens_unix_ms: counters.opens_unix_ms.iter().copied().collect(),
            events_sent: counters.events_sent,
        }
    }

    /// Zeroes the counters (not `open`: the streams open now stay open).
    pub(crate) fn reset(&self) {
        let mut counters = lock(&self.counters);
        let open = counters.open;
        *counters = Counters {
            open,
            ..Counters::default()
        };
    }
}

/// One open stream: counted open until dropped; [`cut`](Self::cut) fires
/// when the streams are cut or the partner stops.
#[derive(Debug)]
pub(crate) struct OpenStream {
    streams: Arc<Streams>,
    token: CancellationToken,
}

impl OpenStream {
    /// Resolves when this stream must end abruptly.
    pub(crate) async fn cut(&self) {
        self.token.cancelled().await;
    }

    /// Counts one event or message sent.
    pub(crate) fn sent(&self) {
        self.streams.sent();
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        let mut counters = lock(&self.streams.counters);
        counters.open = counters.open.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cut_ends_the_open_streams_and_not_the_next_ones() {
        let streams = Arc::new(Streams::new(CancellationToken::new()));
        let first = streams.open();
        let second = streams.open();
        assert_eq!(streams.cut(), 2);
        first.cut().await;
        second.cut().await;
        let later = streams.open();
        assert!(!later.token.is_cancelled());
        drop((first, second));
        let snap = streams.snapshot();
        assert_eq!((snap.open, snap.opened_total), (1, 3));
        assert_eq!(snap.opens_unix_ms.len(), 3);
    }

    #[test]
    fn a_reset_keeps_the_open_count() {
        let streams = Arc::new(Streams::new(CancellationToken::new()));
        let open = streams.open();
        open.sent();
        streams.reset();
        let snap = streams.snapshot();
        assert_eq!((snap.open, snap.opened_total, snap.events_sent), (1, 0, 0));
        assert!(snap.opens_unix_ms.is_empty());
    }
}
