//! With no OpenTelemetry layer at all (no OTLP endpoint set: the binaries'
//! default), a caller's W3C trace context still crosses every hop: edge and
//! checkout pass `traceparent` and `tracestate` on unchanged, so a tracing
//! partner behind them joins the caller's trace.

mod common;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trace_context_passes_through_hops_that_do_not_export() {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .fallback(|State(seen): State<Seen>, headers: HeaderMap| async move {
            let get = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
            seen.lock()
                .unwrap()
                .push((get("traceparent"), get("tracestate")));
            axum::Json(serde_json::json!({"ok": true}))
        })
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let partner = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (edge_addr, _) = common::chain(
        format!("{partner}/inventory"),
        format!("{partner}/pricing"),
        format!("{partner}/recommendations"),
    )
    .await;

    let client = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap();
    let res = client
        .get(format!("http://{edge_addr}/checkout"))
        .header("traceparent", TRACEPARENT)
        .header("tracestate", "vendor=abc")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let got = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(got.len(), 3, "inventory, pricing, recommendations");
    for (traceparent, tracestate) in &got {
        assert_eq!(traceparent.as_deref(), Some(TRACEPARENT));
        assert_eq!(tracestate.as_deref(), Some("vendor=abc"));
    }

    // Without a caller's context, nothing is made up, and no empty header.
    let res = client
        .get(format!("http://{edge_addr}/checkout"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let got = seen.lock().unwrap().clone();
    assert_eq!(got, vec![(None, None); 3]);
}
