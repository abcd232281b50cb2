//! [`Reconnects`]: a follower's schedule between connections, the one
//! place both [`EventSource`](super::sse::EventSource) and
//! [`WebSocket`](super::ws::WebSocket) wait, count and reset.

use std::time::Duration;

use super::{ReconnectPolicy, RetryField, StreamError, StreamStats};

/// The waits between one stream's connections, and its counters.
#[derive(Debug)]
pub(crate) struct Reconnects {
    policy: ReconnectPolicy,
    /// The wait before the next opening (none before the first).
    wait: Option<Duration>,
    pub(crate) stats: StreamStats,
}

impl Reconnects {
    pub(crate) fn new(policy: ReconnectPolicy) -> Self {
        Self {
            policy,
            wait: None,
            stats: StreamStats::default(),
        }
    }

    /// Sleeps the wait drawn after the last connection, then counts an
    /// opening.
    pub(crate) async fn before_open(&mut self) {
        if let Some(wait) = self.wait.take() {
            tokio::time::sleep(wait).await;
        }
        self.stats.opened();
    }

    /// An open stream ended (cleanly or not): the next opening waits.
    pub(crate) fn cut(&mut self) {
        self.stats.cut();
        self.wait = Some(self.policy.next_wait(&mut rand::rng()));
    }

    /// An opening failed with `error`, transient: the next one waits its
    /// jittered wait, and at least the server's `Retry-After` (within the
    /// cap, like `retry:`).
    pub(crate) fn refused(&mut self, error: &StreamError) {
        let wait = self.policy.next_wait(&mut rand::rng());
        let asked = error
            .retry_after()
            .unwrap_or_default()
            .min(self.policy.max());
        self.wait = Some(wait.max(asked));
    }

    /// An item arrived: the stream is healthy, the count starts again.
    pub(crate) fn delivered(&mut self) {
        self.policy.healthy();
        self.stats.deliver();
    }

    /// The server's `retry:`, within the cap (clamped ones counted).
    pub(crate) fn server_retry(&mut self, retry: Option<Duration>) {
        if self.policy.server_retry(retry) == RetryField::Clamped {
            self.stats.clamped();
        }
    }
}
