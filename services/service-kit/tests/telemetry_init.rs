//! `service_kit::telemetry::init`: the global subscriber, the OTLP/HTTP
//! exporter and the guard that flushes it, against a stub collector on
//! 127.0.0.1. A binary of its own: a global subscriber is set once per
//! process.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use budget_core::server::ServerConfig;
use budget_core::telemetry::semconv;
use http::Request;
use service_kit::telemetry::{self, Otlp, TelemetryConfig, TelemetryError};
use tower::ServiceExt;

type Received = Arc<Mutex<Vec<(String, Bytes)>>>;

/// A stub OTLP/HTTP collector keeping each export's content type and body.
async fn collector() -> (String, Received) {
    let received = Received::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(
                |State(received): State<Received>, headers: HeaderMap, body: Bytes| async move {
                    let content_type = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    received.lock().unwrap().push((content_type, body));
                    ""
                },
            ),
        )
        .with_state(Arc::clone(&received));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1/traces"), received)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_exports_the_layer_spans_over_otlp_and_the_guard_flushes_them() {
    let (endpoint, received) = collector().await;

    // A bad filter is an error, and installs nothing.
    let bad = telemetry::init(TelemetryConfig::new("svc").with_log_filter("budget_core=loud"));
    assert!(matches!(bad, Err(TelemetryError::LogFilter(_))), "{bad:?}");

    let config = TelemetryConfig::new("otlp-test-service")
        .with_otlp(Otlp::Endpoint(endpoint))
        .with_log_filter("warn");
    let guard = telemetry::init(config).unwrap();
    assert!(guard.is_exporting());
    // Only one global subscriber per process: a typed error, no panic.
    let again = telemetry::init(TelemetryConfig::new("svc"));
    assert!(
        matches!(again, Err(TelemetryError::SubscriberInstalled(_))),
        "{again:?}"
    );

    let app = Router::new()
        .route("/work", axum::routing::get(|| async { "ok" }))
        .layer(ServerConfig::default().layer().unwrap());
    let req = Request::get("/work")
        .header("request-budget-ms", "1500")
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.oneshot(req).await.unwrap().status(), 200);

    // Nothing is sent before the batch is due; shutdown flushes it.
    tokio::task::spawn_blocking(move || guard.shutdown())
        .await
        .unwrap()
        .unwrap();
    let received = received.lock().unwrap().clone();
    assert!(!received.is_empty(), "the guard flushed the spans");
    let (content_type, body) = &received[0];
    assert_eq!(content_type, "application/x-protobuf");
    assert!(contains(body, "otlp-test-service"), "service.name");
    assert!(contains(body, "GET /work"), "the server span's name");
    assert!(contains(body, semconv::BUDGET_INGRESS_MS));
    assert!(contains(body, semconv::BUDGET_LEDGER));
}
