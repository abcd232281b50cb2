//! `EventSource` against a small SSE server on 127.0.0.1 (docs/streams.md,
//! "Following a stream"): resuming with `Last-Event-ID` after a cut with
//! no event lost, the breaker hearing openings and never disconnects, the
//! idle timeout, the server's `retry:`, final and transient errors.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use budget_core::Budget;
use budget_core::breaker::{BreakerConfig, BreakerState};
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::retry::Jitter;
use budget_core::stream::sse::{Event, EventSource};
use budget_core::stream::{StreamConfig, StreamError};
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderMap, StatusCode};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What the server saw: each opening's `Last-Event-ID`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Option<String>>>>);

impl Seen {
    fn openings(&self) -> Vec<Option<String>> {
        self.0.lock().unwrap().clone()
    }
}

/// How one stream of the test server goes.
#[derive(serde::Deserialize)]
struct Shape {
    /// Events per connection before `end`.
    #[serde(default = "three")]
    per_conn: u64,
    /// `cut` (abort the connection), `clean` (end the body), `stall`
    /// (send nothing more, hold the connection).
    #[serde(default)]
    end: String,
    /// A raw `retry:` line's value, sent first.
    retry: Option<String>,
    /// Answer this status instead of a stream.
    status: Option<u16>,
    /// Send these raw bytes (hex) before the events.
    raw: Option<String>,
}

fn three() -> u64 {
    3
}

async fn events(
    State(seen): State<Seen>,
    Query(shape): Query<Shape>,
    headers: HeaderMap,
) -> Response {
    let last = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap().to_owned());
    seen.0.lock().unwrap().push(last.clone());
    if let Some(status) = shape.status {
        let mut res = StatusCode::from_u16(status).unwrap().into_response();
        if status == 429 {
            res.headers_mut()
                .insert("retry-after", "0".parse().unwrap());
        }
        return res;
    }
    let from = last.map_or(1, |l| l.parse::<u64>().unwrap() + 1);
    let mut head = String::new();
    if let Some(retry) = &shape.retry {
        head.push_str(&format!("retry: {retry}\n\n"));
    }
    let mut first: Vec<u8> = head.into_bytes();
    if let Some(raw) = &shape.raw {
        first.extend(
            (0..raw.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&raw[i..i + 2], 16).unwrap()),
        );
    }
    let lines: Vec<Result<Bytes, std::io::Error>> = std::iter::once(Ok(Bytes::from(first)))
        .chain(
            (from..from + shape.per_conn)
                .map(|n| Ok(Bytes::from(format!("id: {n}\ndata: {n}\n\n")))),
        )
        .collect();
    let end = shape.end.clone();
    let tail = futures_util::stream::once(async move {
        match end.as_str() {
            "clean" => None,
            "stall" => {
                std::future::pending::<()>().await;
                None
            }
            _ => {
                // What was sent reaches the client before the cut.
                tokio::time::sleep(Duration::from_millis(50)).await;
                Some(Err(std::io::Error::other("cut")))
            }
        }
    })
    .filter_map(|x| async move { x });
    let body = Body::from_stream(futures_util::stream::iter(lines).chain(tail));
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn serve() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/events", get(events))
        .route("/plain", get(|| async { "not a stream" }))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn client(url: &str) -> BudgetClient {
    let mut config = DependencyConfig::new("partner", url);
    config.retry.max_attempts = 1;
    let mut breaker = BreakerConfig::default();
    breaker.failure_threshold = 3;
    breaker.open_for = Duration::from_secs(60);
    config.breaker = Some(breaker);
    config.build().unwrap()
}

fn fast() -> StreamConfig {
    let mut c = StreamConfig::default();
    c.reconnect.initial = ms(10);
    c.reconnect.max = ms(40);
    c.idle_timeout = Duration::from_secs(5);
    c.open_budget = Duration::from_secs(2);
    c
}

/// The first `n` events of `source`, and the errors met on the way.
async fn take(source: &mut EventSource, n: usize) -> (Vec<Event>, Vec<StreamError>) {
    let (mut events, mut errors) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(15);
    while events.len() < n {
        let item = tokio::time::timeout_at(deadline, source.next())
            .await
            .expect("in time");
        match item.expect("the stream goes on") {
            Ok(e) => events.push(e),
            Err(e) => errors.push(e),
        }
    }
    (events, errors)
}

fn ids(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.id.as_deref().unwrap().parse().unwrap())
        .collect()
}

#[tokio::test]
async fn a_cut_stream_resumes_with_last_event_id_and_loses_no_event() {
    let (url, seen) = serve().await;
    let c = client(&url);
    let mut source = EventSource::new(c.clone(), "/events?per_conn=3&end=cut", &fast()).unwrap();
    let (events, errors) = take(&mut source, 10).await;
    assert_eq!(ids(&events), (1..=10).collect::<Vec<_>>());
    assert_eq!(events[0].data, "1");
    assert_eq!(events[0].event, "message");
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors
            .iter()
            .all(|e| matches!(e, StreamError::Body(_)) && !e.is_final())
    );
    let sent: Vec<Option<String>> = seen.openings();
    assert_eq!(
        sent,
        [None, Some("3".into()), Some("6".into()), Some("9".into())]
    );
    // Three disconnects after the stream opened: none is a breaker failure.
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
    assert_eq!(source.stats().cuts(), 3);
    assert_eq!(source.stats().delivered(), 10);
}

#[tokio::test]
async fn a_clean_end_is_no_error_and_resumes() {
    let (url, seen) = serve().await;
    let mut source =
        EventSource::resume(client(&url), "/events?per_conn=2&end=clean", &fast(), "40").unwrap();
    let (events, errors) = take(&mut source, 5).await;
    assert_eq!(ids(&events), [41, 42, 43, 44, 45]);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        seen.openings()[..3],
        [Some("40".into()), Some("42".into()), Some("44".into())]
    );
}

#[tokio::test]
async fn openings_answered_503_open_the_breaker_and_the_follower_keeps_trying() {
    let (url, seen) = serve().await;
    let c = client(&url);
    let mut source = EventSource::new(c.clone(), "/events?status=503", &fast()).unwrap();
    for _ in 0..3 {
        let e = source.next().await.unwrap().unwrap_err();
        assert!(
            matches!(e, StreamError::Status { status, .. } if status == 503),
            "{e}"
        );
        assert!(!e.is_final());
    }
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Open);
    // Now refused before any I/O, still transient.
    let e = source.next().await.unwrap().unwrap_err();
    match &e {
        StreamError::Open(call) => assert!(call.is_unavailable(), "{call}"),
        other => panic!("{other}"),
    }
    assert_eq!(
        seen.openings().len(),
        3,
        "the open circuit kept the fourth off the server"
    );
}

#[tokio::test]
async fn openings_answered_401_or_429_count_and_404_is_neutral() {
    let (url, _) = serve().await;
    for (status, opens) in [(401, true), (429, true), (404, false)] {
        let c = client(&url);
        // Three in a row: the breaker's threshold.
        for _ in 0..3 {
            let res = c
                .get(&format!("/events?status={status}"))
                .budget(Budget::new(Duration::from_secs(1)))
                .open()
                .await;
            assert_eq!(res.unwrap().status().as_u16(), status);
        }
        let state = c.breaker().unwrap().state();
        assert_eq!(state == BreakerState::Open, opens, "{status}: {state:?}");
    }
    // A 401 or 404 ends an EventSource (reconnecting cannot help); a 429 does not.
    for (status, ends) in [(401, true), (404, true), (429, false), (204, true)] {
        let path = format!("/events?status={status}");
        let mut source = EventSource::new(client(&url), path, &fast()).unwrap();
        let e = source.next().await.unwrap().unwrap_err();
        assert_eq!(e.is_final(), ends, "{status}: {e}");
        if ends {
            assert!(source.next().await.is_none(), "{status}");
        } else {
            assert!(source.next().await.unwrap().is_err());
        }
    }
}

#[tokio::test]
async fn an_answer_that_is_not_an_event_stream_ends_the_follower() {
    let (url, _) = serve().await;
    let mut source = EventSource::new(client(&url), "/plain", &fast()).unwrap();
    let e = source.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&e, StreamError::NotEventStream { content_type: Some(t) } if t.starts_with("text/plain")),
        "{e}"
    );
    assert!(source.next().await.is_none());
}

#[tokio::test]
async fn a_server_that_goes_silent_is_left_after_the_idle_timeout() {
    let (url, seen) = serve().await;
    let mut config = fast();
    config.idle_timeout = ms(300);
    let mut source =
        EventSource::new(client(&url), "/events?per_conn=1&end=stall", &config).unwrap();
    let started = Instant::now();
    let first = source.next().await.unwrap().unwrap();
    let idle = source.next().await.unwrap().unwrap_err();
    assert!(
        matches!(idle, StreamError::Idle { after } if after == ms(300)),
        "{idle}"
    );
    assert!(started.elapsed() >= ms(300));
    let second = source.next().await.unwrap().unwrap();
    assert_eq!(
        (first.id.as_deref(), second.id.as_deref()),
        (Some("1"), Some("2"))
    );
    assert_eq!(seen.openings(), [None, Some("1".into())]);
}

#[tokio::test]
async fn the_servers_retry_is_the_base_within_the_cap_and_out_of_range_is_clamped() {
    let (url, _) = serve().await;
    let mut config = fast();
    config.reconnect.jitter = Jitter::None;
    config.reconnect.max = ms(2000);
    // retry: 400 (within the 2 s cap): the reconnect waits 400 ms.
    let mut source = EventSource::new(
        client(&url),
        "/events?per_conn=1&end=clean&retry=400",
        &config,
    )
    .unwrap();
    source.next().await.unwrap().unwrap();
    let cut = Instant::now();
    source.next().await.unwrap().unwrap();
    let gap = cut.elapsed();
    assert!(gap >= ms(400) && gap < ms(1500), "{gap:?}");
    assert_eq!(source.stats().retry_clamped(), 0);
    // Over the cap, and too large for a u64: clamped to the cap, counted.
    config.reconnect.max = ms(300);
    for retry in ["600000", "99999999999999999999999"] {
        let path = format!("/events?per_conn=1&end=clean&retry={retry}");
        let mut source = EventSource::new(client(&url), path, &config).unwrap();
        source.next().await.unwrap().unwrap();
        let cut = Instant::now();
        source.next().await.unwrap().unwrap();
        let gap = cut.elapsed();
        assert!(gap >= ms(300) && gap < ms(1200), "{retry}: {gap:?}");
        assert_eq!(
            source.stats().retry_clamped(),
            2,
            "{retry}: each opening's retry counted"
        );
    }
}

#[tokio::test]
async fn a_malformed_frame_is_a_typed_error_and_a_reconnect() {
    let (url, seen) = serve().await;
    // "data: \xff\n\n" first: invalid UTF-8.
    let mut source = EventSource::new(
        client(&url),
        "/events?per_conn=1&end=clean&raw=646174613a20ff0a0a",
        &fast(),
    )
    .unwrap();
    let e = source.next().await.unwrap().unwrap_err();
    assert!(matches!(e, StreamError::InvalidUtf8), "{e}");
    assert!(!e.is_final());
    let _ = source.next().await;
    assert!(
        seen.openings().len() >= 2,
        "reconnected after the bad frame"
    );
    // A line over the limit.
    let mut config = fast();
    config.max_line = 16;
    let long = "64617461".to_owned() + &"61".repeat(40);
    let mut source =
        EventSource::new(client(&url), format!("/events?raw={long}"), &config).unwrap();
    let e = source.next().await.unwrap().unwrap_err();
    assert!(matches!(e, StreamError::LineTooLong { limit: 16 }), "{e}");
}
