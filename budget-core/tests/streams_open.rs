//! A stream's opening is a call (docs/streams.md, "Following a stream"):
//! its status drives the breaker, its budget ends at the head, and the body
//! after it is read under no deadline, over real sockets on 127.0.0.1.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::response::IntoResponse;
use axum::routing::get;
use budget_core::Budget;
use budget_core::breaker::{BreakerConfig, BreakerState};
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::ledger::Ledger;
use budget_core::retry::Jitter;
use bytes::Bytes;
use futures_util::StreamExt;
use http::StatusCode;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn client(url: &str, breaker: bool) -> BudgetClient {
    let mut config = DependencyConfig::new("partner", url);
    config.retry.max_attempts = 1;
    config.retry.backoff.jitter = Jitter::None;
    if breaker {
        let mut breaker = BreakerConfig::default();
        breaker.failure_threshold = 3;
        breaker.open_for = Duration::from_secs(30);
        config.breaker = Some(breaker);
    }
    config.build().unwrap()
}

/// A body that sends a chunk, waits `gap`, sends another, ends.
async fn slow_body() -> impl IntoResponse {
    let chunks = futures_util::stream::unfold(0u8, |n| async move {
        match n {
            0 => Some((Ok::<_, Infallible>(Bytes::from_static(b"one")), 1)),
            1 => {
                tokio::time::sleep(ms(400)).await;
                Some((Ok(Bytes::from_static(b"two")), 2))
            }
            _ => None,
        }
    });
    Body::from_stream(chunks)
}

#[tokio::test]
async fn the_budget_ends_at_the_head_and_the_body_streams_past_it() {
    let url = serve(Router::new().route("/slow", get(slow_body))).await;
    let c = client(&url, true);
    let ledger = Ledger::new();
    let res = c
        .get("/slow")
        .budget(Budget::new(ms(150)))
        .ledger(ledger.clone())
        .open()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.attempts(), 1);
    assert_eq!(ledger.entries().len(), 1, "the opening is in the ledger");
    let chunks: Vec<Bytes> = res
        .bytes_stream()
        .map(|c| c.unwrap())
        .collect::<Vec<_>>()
        .await;
    // The second chunk came 400 ms after the opening: past its 150 ms budget.
    assert_eq!(chunks.concat(), b"onetwo");
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
}

#[tokio::test]
async fn openings_answered_503_open_the_breaker_and_404_does_not() {
    let app = Router::new()
        .route("/down", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route("/gone", get(|| async { StatusCode::NOT_FOUND }));
    let url = serve(app).await;
    let c = client(&url, true);
    for _ in 0..5 {
        let res = c.get("/gone").budget(Budget::new(ms(500))).open().await;
        assert_eq!(res.unwrap().status(), StatusCode::NOT_FOUND);
    }
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
    for _ in 0..3 {
        let res = c.get("/down").budget(Budget::new(ms(500))).open().await;
        assert_eq!(res.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Open);
    let refused = c
        .get("/gone")
        .budget(Budget::new(ms(500)))
        .open()
        .await
        .unwrap_err();
    assert!(refused.is_unavailable(), "{refused}");
}

/// A body that sends one chunk and then holds the stream open.
async fn held_body() -> impl IntoResponse {
    let first =
        futures_util::stream::once(async { Ok::<_, Infallible>(Bytes::from_static(b"open")) });
    Body::from_stream(first.chain(futures_util::stream::pending()))
}

#[tokio::test]
async fn an_open_stream_holds_no_concurrency_permit() {
    let app = Router::new()
        .route("/held", get(held_body))
        .route("/quick", get(|| async { "ok" }));
    let url = serve(app).await;
    let mut config = DependencyConfig::new("partner", &url);
    config.concurrency = Some(1.into());
    let c = config.build().unwrap();
    let res = c
        .get("/held")
        .budget(Budget::new(ms(500)))
        .open()
        .await
        .unwrap();
    let mut body = res.bytes_stream();
    assert_eq!(body.next().await.unwrap().unwrap(), "open");
    // The stream is still open: a call of the same one-permit dependency
    // is made at once, not refused for want of a permit.
    let quick = c
        .get("/quick")
        .budget(Budget::new(ms(300)))
        .send()
        .await
        .unwrap();
    assert_eq!(quick.text(), "ok");
    drop(body);
}
