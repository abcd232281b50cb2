//! The server layer's cost per request, side by side with plain axum and
//! with tower-http's `TimeoutLayer`, through `oneshot` on one Router (no
//! sockets: this isolates the middleware's own cost, the strictest view).
//!
//! `cargo bench -p budget-core --features server --bench server_layer`

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::Budget;
use budget_core::server::ServerConfig;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{Request, StatusCode};
use tower::ServiceExt;

async fn plain() -> &'static str {
    "ok"
}

async fn with_budget(budget: Budget) -> &'static str {
    std::hint::black_box(budget.remaining());
    "ok"
}

fn request() -> Request<Body> {
    Request::builder()
        .uri("/")
        .header("request-budget-ms", "1500")
        .body(Body::empty())
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let plain_app = Router::new().route("/", get(plain));
    #[allow(deprecated)]
    let timeout_app = Router::new().route("/", get(plain)).layer(
        tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            Duration::from_secs(2),
        ),
    );
    // Any layer at all: what axum charges for wrapping a route (a boxed,
    // cloned service and a boxed future per request), whatever it does.
    let noop_app = Router::new()
        .route("/", get(plain))
        .layer(tower::util::MapResponseLayer::new(|res| res));
    let layer = ServerConfig::default().layer().unwrap();
    let budget_app = Router::new().route("/", get(plain)).layer(layer.clone());
    let budget_extract_app = Router::new().route("/", get(with_budget)).layer(layer);

    let mut group = c.benchmark_group("server_layer");
    for (name, app) in [
        ("plain_axum", plain_app),
        ("noop_layer", noop_app),
        ("tower_http_timeout", timeout_app),
        ("budget_layer", budget_app),
        ("budget_layer_and_extractor", budget_extract_app),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| {
                let app = app.clone();
                async move {
                    let res = app.oneshot(request()).await.unwrap();
                    assert_eq!(res.status(), 200);
                    res
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
