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

    /// An opening failed with `error`: `true` when it is final (the
    /// follower ends); else the next opening waits its jittered wait, and
    /// at least the server's `Retry-After` (within the cap, like `retry:`).
    pub(crate) fn refused(&mut self, error: &StreamError) -> bool {
        if error.is_final() {
            return true;
        }
        let wait = self.policy.next_wait(&mut rand::rng());
        let asked = error
            .retry_after()
            .unwrap_or_default()
            .min(self.policy.max());
        self.wait = Some(wait.max(asked));
        false
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

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use tokio::time::Instant;

    use super::*;
    use crate::retry::Jitter;
    use crate::stream::ReconnectConfig;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn reconnects(jitter: Jitter) -> Reconnects {
        let mut c = ReconnectConfig::default();
        (c.initial, c.max, c.jitter) = (ms(100), ms(1000), jitter);
        Reconnects::new(c.build().unwrap())
    }

    /// How long `before_open` sleeps now.
    async fn slept(r: &mut Reconnects) -> Duration {
        let start = Instant::now();
        r.before_open().await;
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_opening_does_not_wait_and_each_cut_waits_more_up_to_the_cap() {
        let mut r = reconnects(Jitter::None);
        assert_eq!(slept(&mut r).await, Duration::ZERO);
        let mut waits = Vec::new();
        for _ in 0..6 {
            r.cut();
            waits.push(slept(&mut r).await.as_millis());
        }
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        // A healthy stream (an event) starts the count again.
        r.delivered();
        r.cut();
        assert_eq!(slept(&mut r).await, ms(100));
        assert_eq!(
            (r.stats.opens(), r.stats.cuts(), r.stats.delivered()),
            (8, 7, 1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn jittered_waits_stay_within_their_ceiling() {
        let mut r = reconnects(Jitter::Full);
        for ceiling in [100, 200, 400, 800, 1000, 1000, 1000] {
            r.cut();
            let wait = slept(&mut r).await;
            assert!(wait <= ms(ceiling), "{wait:?} > {ceiling} ms");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_waits_for_its_retry_after_within_the_cap() {
        let refused = |secs| StreamError::Status {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after: Some(Duration::from_secs(secs)),
        };
        let mut r = reconnects(Jitter::None);
        assert!(!r.refused(&refused(0)));
        assert_eq!(
            slept(&mut r).await,
            ms(100),
            "the policy's wait when longer"
        );
        let mut r = reconnects(Jitter::Full);
        assert!(!r.refused(&refused(60)));
        assert_eq!(
            slept(&mut r).await,
            ms(1000),
            "a minute asked, the cap waited"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_servers_retry_is_the_next_base_and_a_clamp_is_counted() {
        let mut r = reconnects(Jitter::None);
        r.server_retry(Some(ms(300)));
        r.cut();
        assert_eq!(slept(&mut r).await, ms(300));
        r.server_retry(Some(ms(5000)));
        r.delivered();
        r.cut();
        assert_eq!(slept(&mut r).await, ms(1000));
        assert_eq!(r.stats.retry_clamped(), 1);
    }
}
