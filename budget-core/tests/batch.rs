//! The batch uploader against a loopback ingest server (an axum app in
//! this file: it applies a batch once per `Idempotency-Key`, counts
//! duplicates, and fails on command), and against a raw TCP server that
//! applies a batch and then closes the connection before answering.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use budget_core::batch::{Uploader, UploaderConfig};
use budget_core::breaker::BreakerConfig;
use budget_core::client::DependencyConfig;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, sleep};

/// What the ingest server saw.
#[derive(Default)]
struct Ingest {
    /// Items applied, each once per key.
    applied: Vec<Value>,
    keys: HashSet<String>,
    duplicates: u64,
    requests: u64,
    requests_while_failing: u64,
    fail_until: Option<Instant>,
    /// Keys answered 422 (the batch is bad).
    bad: u64,
}

type Shared = Arc<Mutex<Ingest>>;

/// Applies one batch under `key` (once per key); `true` when new.
fn apply(ingest: &mut Ingest, key: &str, items: Vec<Value>) -> bool {
    if !ingest.keys.insert(key.to_owned()) {
        ingest.duplicates += 1;
        return false;
    }
    ingest.applied.extend(items);
    true
}

async fn ingest(
    State(state): State<Shared>,
    headers: HeaderMap,
    Json(items): Json<Vec<Value>>,
) -> (StatusCode, HeaderMap) {
    let mut s = state.lock().unwrap();
    s.requests += 1;
    let mut answer = HeaderMap::new();
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return (StatusCode::BAD_REQUEST, answer);
    };
    if s.fail_until.is_some_and(|until| Instant::now() < until) {
        s.requests_while_failing += 1;
        answer.insert("retry-after", "0".parse().unwrap());
        return (StatusCode::SERVICE_UNAVAILABLE, answer);
    }
    if items.iter().any(|i| i.get("bad").is_some()) {
        s.bad += 1;
        return (StatusCode::UNPROCESSABLE_ENTITY, answer);
    }
    apply(&mut s, key, items);
    (StatusCode::OK, answer)
}

async fn serve(state: Shared) -> SocketAddr {
    let app = Router::new()
        .route("/ingest", post(ingest))
        .with_state(state);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

fn client(addr: SocketAddr) -> budget_core::client::BudgetClient {
    let mut c = DependencyConfig::new("ingest", format!("http://{addr}"));
    let mut breaker = BreakerConfig::default();
    breaker.failure_threshold = 3;
    breaker.open_for = Duration::from_millis(300);
    c.breaker = Some(breaker);
    c.build().unwrap()
}

fn config() -> UploaderConfig {
    let mut c = UploaderConfig::default();
    c.batch_max_items = 20;
    c.flush_interval = Duration::from_millis(50);
    c.flush_budget = Duration::from_secs(1);
    c.backoff.initial = Duration::from_millis(50);
    c.backoff.max = Duration::from_millis(500);
    c
}

/// Every item pushed was applied exactly once.
fn assert_each_applied_once(applied: &[Value], pushed: u64) {
    let mut seen = HashMap::new();
    for item in applied {
        *seen.entry(item["n"].as_u64().unwrap()).or_insert(0) += 1;
    }
    assert_eq!(seen.len() as u64, pushed, "items lost");
    assert!(seen.values().all(|n| *n == 1), "an item applied twice");
}

/// The outage: the server fails for 2 s and recovers while producers
/// push steadily. Zero batches lost, none applied twice, and the dead
/// server saw the breaker's opening failures and its probes, not a
/// request every backoff.
#[tokio::test]
async fn an_outage_loses_nothing_and_applies_nothing_twice() {
    let state = Shared::default();
    let addr = serve(Arc::clone(&state)).await;
    state.lock().unwrap().fail_until = Some(Instant::now() + Duration::from_secs(2));
    let up = Uploader::new(client(addr), config()).unwrap();
    for n in 0..300u64 {
        assert!(up.push(&serde_json::json!({ "n": n })).unwrap().is_queued());
        sleep(Duration::from_millis(10)).await;
    }
    let report = up.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(report.unsent_items(), 0, "{report:?}");
    let s = state.lock().unwrap();
    assert_each_applied_once(&s.applied, 300);
    assert_eq!(report.stats.items_sent, 300);
    assert_eq!(s.duplicates, 0);
    // 3 failures open the breaker (a call's own retries included), then
    // one probe per 300 ms over 2 s.
    assert!(
        s.requests_while_failing <= 3 + 8 + 2,
        "{} requests while failing",
        s.requests_while_failing
    );
    assert!(
        report.stats.probes >= 1 && report.stats.retries >= 1,
        "{:?}",
        report.stats
    );
}

/// A bad batch (422) is set aside and reported, not retried, not lost;
/// the others go through.
#[tokio::test]
async fn a_bad_batch_is_set_aside_and_reported() {
    let state = Shared::default();
    let addr = serve(Arc::clone(&state)).await;
    let mut c = config();
    c.batch_max_items = 1;
    let up = Uploader::new(client(addr), c).unwrap();
    up.push(&serde_json::json!({ "n": 0 })).unwrap();
    up.push(&serde_json::json!({ "n": 1, "bad": true }))
        .unwrap();
    up.push(&serde_json::json!({ "n": 2 })).unwrap();
    let report = up.shutdown(Duration::from_secs(3)).await.unwrap();
    assert_eq!(report.stats.batches_sent, 2);
    assert_eq!(report.stats.set_aside_batches, 1);
    assert_eq!(report.set_aside.len(), 1);
    let aside = &report.set_aside[0];
    assert_eq!(aside.status(), Some(StatusCode::UNPROCESSABLE_ENTITY));
    assert_eq!(aside.batch().items()[0].as_ref(), br#"{"bad":true,"n":1}"#);
    assert_eq!(state.lock().unwrap().bad, 1, "a bad batch is not retried");
}

/// Shutdown while the server is down: within the deadline, and every
/// item accepted comes back (the batch in flight with its key).
#[tokio::test]
async fn shutdown_during_an_outage_returns_every_item() {
    let state = Shared::default();
    let addr = serve(Arc::clone(&state)).await;
    state.lock().unwrap().fail_until = Some(Instant::now() + Duration::from_secs(3600));
    let up = Uploader::new(client(addr), config()).unwrap();
    for n in 0..50u64 {
        up.push(&serde_json::json!({ "n": n })).unwrap();
    }
    sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let report = up.shutdown(Duration::from_millis(300)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.unsent_items(), 50);
    let pending = report.pending_batch.as_ref().unwrap();
    assert!(pending.sends() >= 1 && pending.key().starts_with(up.id()));
    assert_eq!(report.stats.batches_sent, 0);
    assert!(state.lock().unwrap().applied.is_empty());
}

/// A raw HTTP/1.1 server that applies each batch, and closes the
/// connection without an answer the first time it sees a key.
async fn serve_applied_then_reset(state: Shared) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            tokio::spawn(connection(conn, Arc::clone(&state)));
        }
    });
    addr
}

async fn connection(mut conn: TcpStream, state: Shared) {
    let mut buf = Vec::new();
    loop {
        let Some((key, body, used)) = request(&mut conn, &mut buf).await else {
            return;
        };
        buf.drain(..used);
        let items: Vec<Value> = serde_json::from_slice(&body).unwrap();
        let first = {
            let mut s = state.lock().unwrap();
            s.requests += 1;
            apply(&mut s, &key, items)
        };
        if first {
            return; // applied, then the connection closes: no answer
        }
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        if conn.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one request: its `Idempotency-Key`, its body, and the bytes it
/// took from `buf`.
async fn request(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>, usize)> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let field = |name: &str| {
                head.lines()
                    .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_owned()))
            };
            let len: usize = field("content-length:")?.parse().ok()?;
            let key = field("idempotency-key:")?;
            let total = end + 4 + len;
            if buf.len() >= total {
                return Some((key, buf[end + 4..total].to_vec(), total));
            }
        }
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The server applied the batch and the connection closed before its
/// answer: the retry carries the same key, the server sees a duplicate,
/// and every item is applied once.
#[tokio::test]
async fn applied_then_reset_is_applied_once() {
    let state = Shared::default();
    let addr = serve_applied_then_reset(Arc::clone(&state)).await;
    let up = Uploader::new(client(addr), config()).unwrap();
    for n in 0..60u64 {
        up.push(&serde_json::json!({ "n": n })).unwrap();
    }
    let report = up.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(report.unsent_items(), 0, "{report:?}");
    let s = state.lock().unwrap();
    assert_each_applied_once(&s.applied, 60);
    assert_eq!(
        s.duplicates,
        s.keys.len() as u64,
        "each batch retried once under its key"
    );
    assert!(s.duplicates >= 3);
}

/// The metrics (feature `metrics`): drops by policy, refused pushes by
/// reason, batches and items sent, the held gauge back to zero.
#[cfg(feature = "metrics")]
#[test]
fn drops_refusals_and_sends_are_in_the_metrics() {
    use budget_core::batch::Overflow;
    use budget_core::batch::metrics::*;

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let state = Shared::default();
            let addr = serve(Arc::clone(&state)).await;
            let mut c = config();
            c.queue_max_items = 20;
            c.overflow = Overflow::DropNewest;
            c.item_max_bytes = 100;
            let up = Uploader::new(client(addr), c).unwrap();
            for n in 0..22u64 {
                up.push(&serde_json::json!({ "n": n })).unwrap();
            }
            assert!(up.push(&"x".repeat(200)).is_err());
            let report = up.shutdown(Duration::from_secs(3)).await.unwrap();
            assert_eq!(report.stats.items_sent, 20);
        })
    });
    let rendered = handle.render();
    let line = |name: &str, label: &str| {
        rendered
            .lines()
            .find(|l| l.starts_with(name) && l.contains(label))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(
        line(METRIC_BATCH_DROPPED_ITEMS_TOTAL, "policy=\"drop_newest\""),
        Some(2.0)
    );
    assert_eq!(
        line(METRIC_BATCH_REJECTED_PUSHES_TOTAL, "reason=\"too_large\""),
        Some(1.0)
    );
    assert_eq!(
        line(METRIC_BATCH_ITEMS_SENT_TOTAL, "dependency=\"ingest\""),
        Some(20.0)
    );
    assert!(line(METRIC_BATCH_SENT_TOTAL, "dependency=\"ingest\"").is_some_and(|n| n >= 1.0));
    assert_eq!(
        line(METRIC_BATCH_QUEUED_ITEMS, "dependency=\"ingest\""),
        Some(0.0)
    );
}
