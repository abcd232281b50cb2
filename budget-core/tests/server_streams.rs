//! Streams on the server (docs/streams.md, "Streams on the server"), on a
//! real axum server on 127.0.0.1:0 read by reqwest: the request's budget
//! holds until the head, the route's `StreamPolicy` after it.

#![cfg(feature = "server")]

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::response::sse::{Event, Sse};
use axum::routing::get;
use budget_core::server::{ServerConfig, StreamPolicy};
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

/// `count` events (`None`: for ever), one every `every`.
fn ticks(every: Duration, count: Option<u32>) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(0u32, move |n| async move {
        if count.is_some_and(|count| n >= count) {
            return None;
        }
        tokio::time::sleep(every).await;
        Some((Ok(Event::default().id(n.to_string()).data("tick")), n + 1))
    })
}

fn policy(idle_ms: u64, total_ms: Option<u64>) -> StreamPolicy {
    let mut policy = StreamPolicy::default();
    policy.idle_timeout = Some(Duration::from_millis(idle_ms));
    policy.max_duration = total_ms.map(Duration::from_millis);
    policy
}

/// The routes: `/late` answers its head after 500 ms; `/ticks` sends 15
/// events 100 ms apart (idle limit 300 ms); `/stalls` sends 2 events and
/// then nothing (idle limit 200 ms); `/forever` ticks every 50 ms until
/// its 400 ms run out; `/plain` answers at once.
fn app(config: ServerConfig) -> Router {
    Router::new()
        .route(
            "/late",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                Sse::new(ticks(Duration::from_millis(10), Some(1)))
            }),
        )
        .route(
            "/ticks",
            get(|| async { Sse::new(ticks(Duration::from_millis(100), Some(15))) })
                .layer(policy(300, None).layer().unwrap()),
        )
        .route(
            "/stalls",
            get(|| async {
                Sse::new(
                    ticks(Duration::from_millis(20), Some(2))
                        .chain(futures_util::stream::pending()),
                )
            })
            .layer(policy(200, None).layer().unwrap()),
        )
        .route(
            "/forever",
            get(|| async { Sse::new(ticks(Duration::from_millis(50), None)) })
                .layer(policy(1000, Some(400)).layer().unwrap()),
        )
        .route("/plain", get(|| async { "plain" }))
        .layer(config.layer().unwrap())
}

async fn serve(config: ServerConfig) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app(config)).await });
    format!("http://{addr}")
}

/// GETs `path` with a budget of `budget_ms`.
async fn get_with_budget(base: &str, path: &str, budget_ms: u64) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .header("request-budget-ms", budget_ms.to_string())
        .send()
        .await
        .unwrap()
}

/// Reads the body to its end; a transport error (a reset, a cut chunked
/// body) fails the test.
async fn read_to_end(mut res: reqwest::Response) -> String {
    let mut body = String::new();
    while let Some(chunk) = res.chunk().await.expect("a clean stream") {
        body.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    body
}

#[tokio::test]
async fn an_sse_head_that_comes_after_the_budget_is_a_504() {
    let base = serve(ServerConfig::default()).await;
    let start = Instant::now();
    let res = get_with_budget(&base, "/late", 200).await;
    assert_eq!(res.status(), 504);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert!(
        start.elapsed() < Duration::from_millis(450),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn a_healthy_stream_runs_well_past_the_request_budget() {
    let base = serve(ServerConfig::default()).await;
    let start = Instant::now();
    // A budget of 200 ms; the stream runs 1.5 s, its gaps (100 ms) under
    // its idle limit (300 ms).
    let res = get_with_budget(&base, "/ticks", 200).await;
    assert_eq!(res.status(), 200);
    let body = read_to_end(res).await;
    assert!(
        start.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(body.matches("data: tick").count(), 15, "{body}");
    assert!(body.contains("id: 14"), "{body}");
    assert!(!body.contains("event: end"), "not ended by a limit: {body}");
}

#[tokio::test]
async fn a_stalled_stream_ends_cleanly_at_its_idle_limit_with_a_final_event() {
    let base = serve(ServerConfig::default()).await;
    let start = Instant::now();
    let res = get_with_budget(&base, "/stalls", 5000).await;
    let body = read_to_end(res).await;
    let took = start.elapsed();
    assert_eq!(body.matches("data: tick").count(), 2, "{body}");
    assert!(
        body.ends_with("event: end\ndata: {\"reason\":\"idle\"}\n\n"),
        "{body}"
    );
    assert!(
        took >= Duration::from_millis(240) && took < Duration::from_millis(1000),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_busy_stream_ends_cleanly_at_its_total_duration() {
    let base = serve(ServerConfig::default()).await;
    let start = Instant::now();
    let body = read_to_end(get_with_budget(&base, "/forever", 5000).await).await;
    let took = start.elapsed();
    assert!(
        body.ends_with("event: end\ndata: {\"reason\":\"duration\"}\n\n"),
        "{body}"
    );
    let ticks = body.matches("data: tick").count();
    assert!((5..=8).contains(&ticks), "{ticks} ticks: {body}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1000),
        "{took:?}"
    );
}

/// The in-flight slot covers the work up to the head: a long stream does
/// not hold it, so with `max_in_flight = 1` another request is served
/// while the stream runs.
#[tokio::test]
async fn a_stream_gives_its_in_flight_slot_back_with_its_head() {
    let config: ServerConfig = toml::from_str("max_in_flight = 1").unwrap();
    let base = serve(config).await;
    let mut stream = get_with_budget(&base, "/ticks", 1000).await;
    assert_eq!(stream.status(), 200);
    stream.chunk().await.unwrap().unwrap();
    let other = get_with_budget(&base, "/plain", 300).await;
    assert_eq!(other.status(), 200);
    assert_eq!(other.text().await.unwrap(), "plain");
    // The stream is still going.
    assert!(stream.chunk().await.unwrap().is_some());
}
