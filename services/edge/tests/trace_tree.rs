//! One request through the whole chain is one trace (docs/operations.md,
//! "Metrics and traces"): a caller's `traceparent` -> edge's server span -> edge's
//! client span -> checkout's server span -> checkout's client spans, with
//! the conventions' attributes, and nothing else exported (no request-log
//! span of its own, no `/healthz`). An in-memory exporter behind the same
//! layer the binaries install (`service_kit::telemetry::otel_layer`), as
//! this process's global subscriber: edge and checkout run in it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// A partner that answers `{}` and keeps every request's `traceparent`.
async fn partner(seen: Arc<Mutex<Vec<String>>>) -> String {
    let app = axum::Router::new()
        .fallback(
            |State(seen): State<Arc<Mutex<Vec<String>>>>, headers: HeaderMap| async move {
                if let Some(tp) = headers.get("traceparent") {
                    seen.lock().unwrap().push(tp.to_str().unwrap().to_owned());
                }
                axum::Json(serde_json::json!({"ok": true}))
            },
        )
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| kv.value.clone())
}

fn text(span: &SpanData, key: &str) -> String {
    match attr(span, key) {
        Some(v) => v.as_str().into_owned(),
        None => panic!("no {key} on {:?}: {:?}", span.name, span.attributes),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_request_is_one_trace_through_every_hop() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(service_kit::telemetry::otel_layer(provider.tracer("test")));
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let partner = partner(Arc::clone(&seen)).await;
    let (edge_addr, _) = common::chain(
        format!("{partner}/inventory?token=s3cret"),
        format!("{partner}/pricing"),
        format!("{partner}/recommendations"),
    )
    .await;

    let client = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap();
    let res = client
        .get(format!("http://{edge_addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = client
        .get(format!("http://{edge_addr}/checkout"))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .header("x-request-id", "trace-1")
        .header("user-agent", "trace-test/1")
        .header("request-budget-ms", "3000")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // Server spans end a moment after the answer is read.
    let mut spans = Vec::new();
    for _ in 0..200 {
        provider.force_flush().unwrap();
        spans = exporter.get_finished_spans().unwrap();
        if spans
            .iter()
            .filter(|s| s.span_kind == SpanKind::Server)
            .count()
            >= 2
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let trace = TraceId::from_hex(CALLER_TRACE).unwrap();
    for span in &spans {
        assert_eq!(span.span_context.trace_id(), trace, "an orphan: {span:#?}");
    }
    let servers: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Server)
        .collect();
    let clients: Vec<&SpanData> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Client)
        .collect();
    assert_eq!(
        servers.len(),
        2,
        "edge and checkout, no /healthz: {spans:#?}"
    );
    assert_eq!(
        clients.len(),
        4,
        "edge's call, checkout's three: {spans:#?}"
    );
    assert_eq!(spans.len(), 6, "nothing else is exported: {spans:#?}");

    let edge_server = servers
        .iter()
        .find(|s| s.parent_span_id == SpanId::from_hex(CALLER_SPAN).unwrap())
        .expect("edge's server span is the caller's child");
    let edge_client = clients
        .iter()
        .find(|s| s.parent_span_id == edge_server.span_context.span_id())
        .expect("edge's call to checkout");
    assert_eq!(text(edge_client, "budget.dependency"), "checkout");
    let checkout_server = servers
        .iter()
        .find(|s| s.parent_span_id == edge_client.span_context.span_id())
        .expect("checkout's server span is edge's call's child");
    let mut deps: Vec<String> = clients
        .iter()
        .filter(|s| s.parent_span_id == checkout_server.span_context.span_id())
        .map(|s| text(s, "budget.dependency"))
        .collect();
    deps.sort();
    assert_eq!(deps, ["inventory", "pricing", "recommendations"]);

    for server in [edge_server, checkout_server] {
        assert_eq!(server.name, "GET /checkout");
        assert_eq!(text(server, "http.route"), "/checkout");
        assert_eq!(text(server, "url.scheme"), "http");
        assert_eq!(text(server, "server.address"), "127.0.0.1");
        assert_eq!(text(server, "client.address"), "127.0.0.1");
        assert_eq!(text(server, "http.request.header.x-request-id"), "trace-1");
        assert_eq!(text(server, "budget.outcome"), "ok");
        assert!(attr(server, "code.filepath").is_none() && attr(server, "thread.id").is_none());
        assert!(attr(server, "busy_ns").is_none(), "{:?}", server.attributes);
    }
    assert_eq!(text(edge_server, "user_agent.original"), "trace-test/1");
    let inventory = clients
        .iter()
        .find(|s| text(s, "budget.dependency") == "inventory")
        .unwrap();
    assert_eq!(inventory.name, "GET");
    assert!(
        text(inventory, "url.full").ends_with("/inventory?token=REDACTED"),
        "{}",
        text(inventory, "url.full")
    );
    // Every partner call carried the trace on, from checkout's client spans.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|tp| tp.contains(CALLER_TRACE)), "{seen:?}");
}
