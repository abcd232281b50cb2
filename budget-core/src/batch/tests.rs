//! Paused-clock tests of the flush schedule against a fake endpoint
//! guarded by the library's own `CircuitBreaker`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::time::{Instant, sleep};

use super::config::UploaderConfig;
use super::sink::{Attempt, SendFuture, Sink};
use super::uploader::Uploader;
use crate::Budget;
use crate::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Verdict};

/// An endpoint down until `recover_at`, behind a real breaker; it records
/// every request that reached it.
struct Fake {
    breaker: Option<CircuitBreaker>,
    recover_at: Instant,
    retry_after: Option<Duration>,
    hits: Mutex<Vec<(Instant, String)>>,
}

impl Fake {
    fn new(
        outage: Duration,
        breaker: Option<(u32, Duration)>,
        retry_after: Option<Duration>,
    ) -> Arc<Self> {
        let breaker = breaker.map(|(threshold, open_for)| {
            let c = BreakerConfig {
                failure_threshold: threshold,
                open_for,
                ..BreakerConfig::default()
            };
            CircuitBreaker::new("http://ingest:80", c.build().unwrap())
        });
        Arc::new(Self {
            breaker,
            recover_at: Instant::now() + outage,
            retry_after,
            hits: Mutex::new(Vec::new()),
        })
    }

    fn hits(&self) -> Vec<(Instant, String)> {
        self.hits.lock().unwrap().clone()
    }
}

impl Sink for Fake {
    fn send(&self, key: &str, _body: Bytes, _budget: Budget) -> SendFuture {
        let permit = match self.breaker.as_ref().map(CircuitBreaker::try_acquire) {
            Some(Err(open)) => {
                let retry_after = open.retry_after();
                return Box::pin(async move { Attempt::CircuitOpen { retry_after } });
            }
            Some(Ok(permit)) => Some(permit),
            None => None,
        };
        let now = Instant::now();
        self.hits.lock().unwrap().push((now, key.to_owned()));
        let up = now >= self.recover_at;
        if let Some(permit) = permit {
            permit.record(if up {
                Verdict::Success
            } else {
                Verdict::Failure
            });
        }
        let attempt = if up {
            Attempt::Acked
        } else {
            Attempt::Failed {
                retry_after: self.retry_after,
            }
        };
        Box::pin(async move { attempt })
    }

    fn breaker_state(&self) -> Option<BreakerState> {
        self.breaker.as_ref().map(CircuitBreaker::state)
    }
}

fn uploader(fake: &Arc<Fake>, max: Duration) -> Uploader {
    let mut c = UploaderConfig {
        flush_interval: Duration::from_millis(100),
        ..UploaderConfig::default()
    };
    c.backoff.initial = Duration::from_millis(100);
    c.backoff.max = max;
    Uploader::with_sink(
        Arc::clone(fake) as Arc<dyn Sink>,
        "ingest",
        c.settings().unwrap(),
    )
}

fn gaps(hits: &[(Instant, String)]) -> Vec<Duration> {
    hits.windows(2).map(|w| w[1].0 - w[0].0).collect()
}

/// Rule 4: while the breaker is open no request reaches the endpoint; it
/// gets the failures that opened it, then one probe per `open_for`.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_admits_only_its_probe() {
    let fake = Fake::new(
        Duration::from_secs(60),
        Some((3, Duration::from_secs(5))),
        None,
    );
    let up = uploader(&fake, Duration::from_secs(60));
    up.push(&1).unwrap();
    // The last wait before the recovery may be a whole cap (60 s).
    sleep(Duration::from_secs(200)).await;
    let hits = fake.hits();
    let down: Vec<_> = hits
        .iter()
        .filter(|(at, _)| *at < fake.recover_at)
        .cloned()
        .collect();
    // 3 failures open it; then at most one probe every 5 s over ~60 s.
    assert!(
        down.len() <= 3 + 13,
        "{} requests reached a dead endpoint",
        down.len()
    );
    let probe_gaps: Vec<Duration> = gaps(&down).into_iter().skip(2).collect();
    assert!(!probe_gaps.is_empty());
    assert!(
        probe_gaps.iter().all(|g| *g >= Duration::from_secs(5)),
        "{probe_gaps:?}"
    );
    let s = up.stats();
    assert_eq!(s.batches_sent, 1);
    assert!(s.probes >= 1 && s.circuit_open_waits >= 1, "{s:?}");
}

/// Rule 2: the key is the same on every send of one batch, and the next
/// batch has another.
#[tokio::test(start_paused = true)]
async fn the_key_is_stable_across_retries() {
    let fake = Fake::new(Duration::from_secs(10), None, None);
    let up = uploader(&fake, Duration::from_secs(2));
    up.push(&1).unwrap();
    sleep(Duration::from_secs(15)).await;
    up.push(&2).unwrap();
    sleep(Duration::from_secs(1)).await;
    let hits = fake.hits();
    assert!(hits.len() > 3);
    let (last, retries) = hits.split_last().unwrap();
    assert!(retries.iter().all(|(_, k)| *k == retries[0].1));
    assert_ne!(last.1, retries[0].1);
    assert!(retries[0].1.starts_with(up.id()));
    assert_eq!(up.stats().retries, retries.len() as u64 - 1);
}

/// Rule 4: without `Retry-After` every wait is within the cap, and the
/// waits are jittered (not all equal).
#[tokio::test(start_paused = true)]
async fn waits_are_jittered_and_capped() {
    let fake = Fake::new(Duration::from_secs(120), None, None);
    let _up = uploader(&fake, Duration::from_secs(2));
    _up.push(&1).unwrap();
    sleep(Duration::from_secs(100)).await;
    let g = gaps(&fake.hits());
    assert!(g.len() > 40, "{} sends", g.len());
    assert!(g.iter().all(|g| *g <= Duration::from_secs(2)), "{g:?}");
    let distinct: std::collections::HashSet<_> = g.iter().collect();
    assert!(distinct.len() > g.len() / 2, "waits not spread: {g:?}");
}

/// Rule 4: a `Retry-After` within the cap is waited at least.
#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_within_the_cap() {
    let fake = Fake::new(Duration::from_secs(30), None, Some(Duration::from_secs(3)));
    let up = uploader(&fake, Duration::from_secs(10));
    up.push(&1).unwrap();
    sleep(Duration::from_secs(40)).await;
    let g = gaps(&fake.hits());
    assert!(g.len() >= 5);
    assert!(
        g.iter()
            .all(|g| *g >= Duration::from_secs(3) && *g <= Duration::from_secs(10)),
        "{g:?}"
    );
    assert_eq!(up.stats().batches_sent, 1);
}

/// Rule 5: a shutdown during an outage returns the batch in flight with
/// its key and the items not yet batched; a backoff past the deadline
/// ends the final flush without knocking.
#[tokio::test(start_paused = true)]
async fn shutdown_returns_what_was_not_acknowledged() {
    let fake = Fake::new(Duration::from_secs(600), None, None);
    let c = UploaderConfig {
        batch_max_items: 2,
        flush_interval: Duration::from_millis(100),
        ..UploaderConfig::default()
    };
    let up = Uploader::with_sink(
        Arc::clone(&fake) as Arc<dyn Sink>,
        "ingest",
        c.settings().unwrap(),
    );
    for n in 0..5 {
        up.push(&n).unwrap();
    }
    sleep(Duration::from_secs(10)).await;
    let started = Instant::now();
    let report = up.shutdown(Duration::from_secs(1)).await.unwrap();
    assert!(Instant::now() - started <= Duration::from_secs(1));
    let batch = report.pending_batch.as_ref().unwrap();
    assert_eq!(
        batch.items(),
        [Bytes::from_static(b"0"), Bytes::from_static(b"1")]
    );
    assert!(batch.sends() >= 1);
    assert_eq!(batch.key(), fake.hits()[0].1);
    assert_eq!(report.unsent.len(), 3);
    assert_eq!(report.unsent_items(), 5);
    assert!(matches!(up.push(&9), Err(super::PushError::Closed)));
    assert!(up.shutdown(Duration::from_secs(1)).await.is_err());
}
