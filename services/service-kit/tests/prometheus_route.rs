//! `service_kit::prometheus`: the `/metrics` route serves the Prometheus
//! text of the process-wide recorder, outside the budget layer, with every
//! `*_seconds` histogram in budget-core's `SECONDS_BUCKETS`, and a second
//! install reuses the first. A binary of its own, since a global recorder is
//! set once per process.

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::server::ServerConfig;
use budget_core::telemetry::semconv::*;
use http::{Request, StatusCode};
use service_kit::prometheus;
use tower::ServiceExt;

async fn get_with_budget(app: &Router, path: &str, budget: &str) -> StatusCode {
    let req = Request::get(path)
        .header("request-budget-ms", budget)
        .body(Body::empty())
        .unwrap();
    app.clone().oneshot(req).await.unwrap().status()
}

/// The line of `rendered` that starts with `prefix`, with its value.
fn value(rendered: &str, prefix: &str) -> Option<f64> {
    rendered
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "current_thread")]
async fn the_metrics_route_serves_the_prometheus_text_and_installs_once() {
    let first: Router = prometheus::prometheus_router().unwrap();
    let again: Router = prometheus::prometheus_router().expect("a second install reuses the first");
    drop(again);
    let app = Router::new()
        .route("/work", get(|| async { "ok" }))
        .layer(ServerConfig::default().layer().unwrap())
        .merge(first);

    assert_eq!(get_with_budget(&app, "/work", "1500").await, 200);
    assert_eq!(get_with_budget(&app, "/work", "x").await, 400);
    let res = app
        .clone()
        .oneshot(
            Request::get(prometheus::METRICS_PATH)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(
        !res.headers().contains_key("server-timing"),
        "/metrics is outside the budget layer"
    );
    let body = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(
        text.contains(&format!("# TYPE {METRIC_INGRESS_SECONDS} histogram")),
        "{text}"
    );
    assert!(
        text.contains(&format!("# HELP {METRIC_MALFORMED_TOTAL}")),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("{METRIC_INGRESS_SECONDS}_bucket{{le=\"2\"}}")
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("{METRIC_INGRESS_SECONDS}_bucket{{le=\"1\"}}")
        ),
        Some(0.0)
    );
    assert_eq!(value(&text, METRIC_MALFORMED_TOTAL), Some(1.0));
}
