//! `WebSocket` against an axum `ws` server on 127.0.0.1 (docs/streams.md,
//! "WebSocket"): resuming by a query parameter after a cut with no message
//! lost, the breaker hearing handshakes and never disconnects, closes with
//! valid and invalid codes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::ws::{CloseFrame, Message as ServerMessage, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use budget_core::breaker::{BreakerConfig, BreakerState};
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::stream::ws::{Message, Resume, WebSocket};
use budget_core::stream::{StreamConfig, StreamError};
use http::StatusCode;
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Each handshake's `last_id` query parameter, as the server saw it.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<Option<u64>>>>);

#[derive(serde::Deserialize)]
struct Shape {
    last_id: Option<u64>,
    /// Messages per connection.
    per_conn: u64,
    /// After them: close with this code, or (absent) drop the connection.
    close_code: Option<u16>,
    /// Refuse the upgrade with this status.
    status: Option<u16>,
    /// After the messages, send nothing and hold the connection.
    #[serde(default)]
    stall: bool,
}

async fn ws(
    State(seen): State<Seen>,
    Query(shape): Query<Shape>,
    upgrade: WebSocketUpgrade,
) -> Response {
    seen.0.lock().unwrap().push(shape.last_id);
    if let Some(status) = shape.status {
        return StatusCode::from_u16(status).unwrap().into_response();
    }
    upgrade.on_upgrade(move |mut socket| async move {
        let from = shape.last_id.map_or(1, |k| k + 1);
        for n in from..from + shape.per_conn {
            let text = format!("{{\"id\":{n}}}");
            if socket.send(ServerMessage::Text(text.into())).await.is_err() {
                return;
            }
        }
        if shape.stall {
            std::future::pending::<()>().await;
        }
        match shape.close_code {
            Some(code) => {
                let frame = CloseFrame {
                    code,
                    reason: "bye".into(),
                };
                let _ = socket.send(ServerMessage::Close(Some(frame))).await;
                // Wait for the client's answering close.
                while let Some(Ok(_)) = socket.recv().await {}
            }
            None => {
                tokio::time::sleep(ms(50)).await;
                drop(socket);
            }
        }
    })
}

async fn serve() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new().route("/ws", get(ws)).with_state(seen.clone());
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

/// The partner's resume rule: `{"id":N}` messages, `?last_id=N`.
fn resume() -> Resume {
    Resume::query("last_id", |m: &Message| {
        let v: serde_json::Value = serde_json::from_str(m.to_text().ok()?).ok()?;
        Some(v.get("id")?.to_string())
    })
}

/// The ids of the first `n` messages, and the errors met on the way.
async fn take(socket: &mut WebSocket, n: usize) -> (Vec<u64>, Vec<StreamError>) {
    use futures_util::StreamExt;
    let (mut ids, mut errors) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(15);
    while ids.len() < n {
        let item = tokio::time::timeout_at(deadline, socket.next())
            .await
            .expect("in time");
        match item.expect("the stream goes on") {
            Ok(m) => {
                let v: serde_json::Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
                ids.push(v["id"].as_u64().unwrap());
            }
            Err(e) => errors.push(e),
        }
    }
    (ids, errors)
}

#[tokio::test]
async fn a_dropped_socket_resumes_by_last_id_and_loses_no_message() {
    let (url, seen) = serve().await;
    let c = client(&url);
    let mut socket = WebSocket::new(c.clone(), "/ws?per_conn=3", &fast(), Some(resume())).unwrap();
    let (ids, errors) = take(&mut socket, 10).await;
    assert_eq!(ids, (1..=10).collect::<Vec<_>>());
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors.iter().all(|e| !e.is_final()), "{errors:?}");
    assert_eq!(*seen.0.lock().unwrap(), [None, Some(3), Some(6), Some(9)]);
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
}

#[tokio::test]
async fn a_normal_close_is_no_error_and_an_invalid_code_is_a_typed_one() {
    let (url, _) = serve().await;
    let path = "/ws?per_conn=2&close_code=1000";
    let mut socket =
        WebSocket::new(client(&url), path, &fast(), Some(resume().after("20"))).unwrap();
    let (ids, errors) = take(&mut socket, 5).await;
    assert_eq!(ids, [21, 22, 23, 24, 25]);
    assert!(errors.is_empty(), "{errors:?}");
    // An application's error code is passed on as it is.
    let path = "/ws?per_conn=1&close_code=4001";
    let mut socket = WebSocket::new(client(&url), path, &fast(), Some(resume())).unwrap();
    let (_, errors) = take(&mut socket, 2).await;
    assert!(
        matches!(&errors[..], [StreamError::CloseCode { code: 4001, reason }] if reason == "bye"),
        "{errors:?}"
    );
    for code in [999, 5000, 1005, 2999] {
        let path = format!("/ws?per_conn=1&close_code={code}");
        let mut socket = WebSocket::new(client(&url), path, &fast(), Some(resume())).unwrap();
        let (ids, errors) = take(&mut socket, 2).await;
        assert_eq!(ids, [1, 2], "{code}");
        // tungstenite reads an invalid code as a protocol violation.
        match &errors[..] {
            [StreamError::CloseCode { code: 1002, reason }] => {
                assert_eq!(reason, "Protocol violation", "{code}")
            }
            other => panic!("{code}: {other:?}"),
        }
        assert!(!errors[0].is_final());
    }
}

#[tokio::test]
async fn refused_upgrades_drive_the_breaker_by_status() {
    use futures_util::StreamExt;
    let (url, seen) = serve().await;
    let c = client(&url);
    let mut socket = WebSocket::new(c.clone(), "/ws?per_conn=1&status=503", &fast(), None).unwrap();
    for _ in 0..3 {
        let e = socket.next().await.unwrap().unwrap_err();
        assert!(
            matches!(e, StreamError::Status { status, .. } if status == 503),
            "{e}"
        );
    }
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Open);
    let e = socket.next().await.unwrap().unwrap_err();
    assert!(
        matches!(&e, StreamError::Open(call) if call.is_unavailable()),
        "{e}"
    );
    assert_eq!(seen.0.lock().unwrap().len(), 3);
    // 404: neutral for the breaker, final for the follower.
    let c = client(&url);
    for _ in 0..4 {
        let mut socket =
            WebSocket::new(c.clone(), "/ws?per_conn=1&status=404", &fast(), None).unwrap();
        let e = socket.next().await.unwrap().unwrap_err();
        assert!(e.is_final(), "{e}");
        assert!(socket.next().await.is_none());
    }
    assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
}

#[tokio::test]
async fn a_silent_socket_is_left_after_the_idle_timeout_and_resumed() {
    let (url, seen) = serve().await;
    let mut config = fast();
    config.idle_timeout = ms(300);
    let path = "/ws?per_conn=1&stall=true";
    let mut socket = WebSocket::new(client(&url), path, &config, Some(resume())).unwrap();
    let started = Instant::now();
    let (ids, errors) = take(&mut socket, 2).await;
    assert_eq!(ids, [1, 2]);
    assert!(
        matches!(&errors[..], [StreamError::Idle { after }] if *after == ms(300)),
        "{errors:?}"
    );
    assert!(started.elapsed() >= ms(300));
    assert_eq!(*seen.0.lock().unwrap(), [None, Some(1)]);
}
