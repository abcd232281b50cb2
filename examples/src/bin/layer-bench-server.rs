//! Serves the same handler several ways for a side-by-side measure of the
//! server layer and the client, each on its own loopback port:
//!
//! | port | variant |
//! | --- | --- |
//! | 18081 | plain axum |
//! | 18082 | axum + tower-http's `TimeoutLayer` |
//! | 18083 | axum + `BudgetLayer` |
//! | 18084 | axum + `BudgetLayer`, the handler taking the `Budget` extractor |
//! | 18085 | plain axum, the handler making one raw reqwest call to 18089 |
//! | 18086 | axum + `BudgetLayer`, the handler making one `BudgetClient` call to 18089 |
//! | 18087 | tower-http's `TimeoutLayer` around the whole `Router` (no per-route box) |
//! | 18088 | `BudgetLayer` around the whole `Router` (no per-route box) |
//! | 18089 | the backend of the two calling variants (plain axum) |
//! | 18092 | `HeaderFloor` around the whole `Router` (no per-route box) |
//! | 18091 | axum + tower's `Identity` layer: what `Router::layer` costs for any layer |
//! | 18090 | axum + `HeaderFloor`: the least any budget layer does (reads `request-budget-ms`, appends one constant `Server-Timing`) |
//!
//! The two `-outer` routers are made ready for their state (`with_state`)
//! as `axum::serve` does for a bare `Router`: otherwise each request would
//! convert the route's handler again (an allocation that `axum::serve`'s
//! own variants never pay).
//!
//! One runtime thread, so the load generator gets the other core. Loopback
//! only; stops by itself after the first argument's seconds (default 120).
//!
//! `scripts/bench-server-layer.sh` drives it with wrk,
//! `scripts/bench-instructions.sh` under callgrind.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use budget_core::Budget;
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::server::SERVER_TIMING;
use budget_core::server::ServerConfig;
use http::{HeaderValue, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower::Service;
use tower::make::Shared;

/// The least a budget layer can do and still keep the wire contract's two
/// sides: read the caller's `request-budget-ms` and append a `Server-Timing`
/// value to the answer. No deadline, no context, no ledger: the value is a
/// constant. What it costs is the floor under any layer's cost, the budget
/// layer's included (BENCHMARKS.md).
#[derive(Clone)]
struct HeaderFloor<S>(S);

impl<S, B, R> Service<Request<B>> for HeaderFloor<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = HeaderFloorFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let millis = req
            .headers()
            .get("request-budget-ms")
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
            .and_then(|v| v.parse::<u64>().ok());
        HeaderFloorFuture {
            inner: self.0.call(req),
            millis,
        }
    }
}

pin_project! {
    struct HeaderFloorFuture<F> {
        #[pin]
        inner: F,
        millis: Option<u64>,
    }
}

impl<F, R, E> Future for HeaderFloorFuture<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut res = std::task::ready!(this.inner.poll(cx))?;
        if this.millis.is_some() {
            res.headers_mut().append(
                SERVER_TIMING,
                HeaderValue::from_static("budget;dur=1500;desc=\"ingress\""),
            );
        }
        Poll::Ready(Ok(res))
    }
}

async fn hello() -> &'static str {
    "hello"
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = match std::env::args().nth(1).as_deref() {
        None => 120,
        Some(s) => s.parse().map_err(|e| format!("seconds {s:?}: {e}"))?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let plain = Router::new().route("/", get(hello));
        let timeout = Router::new().route("/", get(hello)).layer(
            tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::GATEWAY_TIMEOUT,
                Duration::from_secs(2),
            ),
        );
        let budget = Router::new()
            .route("/", get(hello))
            .layer(ServerConfig::default().layer()?);
        let extractor = Router::new()
            .route("/", get(|_budget: Budget| async { "hello" }))
            .layer(ServerConfig::default().layer()?);
        let backend_url = "http://127.0.0.1:18089/";
        let raw = reqwest::Client::new();
        let raw_call = Router::new().route(
            "/",
            get(move || {
                let raw = raw.clone();
                async move {
                    match raw.get(backend_url).send().await {
                        Ok(res) => res.text().await.unwrap_or_default(),
                        Err(e) => e.to_string(),
                    }
                }
            }),
        );
        let client: BudgetClient = DependencyConfig::new("backend", backend_url).build()?;
        let budget_call = Router::new()
            .route(
                "/",
                get(move || {
                    let client = client.clone();
                    async move {
                        match client.get("").send().await {
                            Ok(res) => res.text().into_owned(),
                            Err(e) => e.to_string(),
                        }
                    }
                }),
            )
            .layer(ServerConfig::default().layer()?);
        // `Router::layer` wraps each route and boxes its future; a layer
        // around the whole router (as `ServiceBuilder` users write it) does
        // not.
        let timeout_outer = tower::Layer::layer(
            &tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::GATEWAY_TIMEOUT,
                Duration::from_secs(2),
            ),
            Router::new().route("/", get(hello)).with_state(()),
        );
        let budget_outer = tower::Layer::layer(
            &ServerConfig::default().layer()?,
            Router::new().route("/", get(hello)).with_state(()),
        );
        let header_floor_outer = HeaderFloor(Router::new().route("/", get(hello)).with_state(()));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 18092)).await?;
        println!("header-floor-outer on http://127.0.0.1:18092/");
        tokio::spawn(async move { axum::serve(listener, Shared::new(header_floor_outer)).await });
        let identity = Router::new()
            .route("/", get(hello))
            .layer(tower::layer::util::Identity::new());
        let header_floor = Router::new()
            .route("/", get(hello))
            .layer(tower::layer::layer_fn(HeaderFloor));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 18087)).await?;
        println!("tower-http-timeout-outer on http://127.0.0.1:18087/");
        tokio::spawn(async move { axum::serve(listener, Shared::new(timeout_outer)).await });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 18088)).await?;
        println!("budget-layer-outer on http://127.0.0.1:18088/");
        tokio::spawn(async move { axum::serve(listener, Shared::new(budget_outer)).await });
        let backend = Router::new().route("/", get(hello));
        for (name, port, app) in [
            ("plain", 18081, plain),
            ("tower-http-timeout", 18082, timeout),
            ("budget-layer", 18083, budget),
            ("budget-layer+extractor", 18084, extractor),
            ("raw-reqwest-call", 18085, raw_call),
            ("budget-client-call", 18086, budget_call),
            ("backend", 18089, backend),
            ("header-floor", 18090, header_floor),
            ("identity", 18091, identity),
        ] {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("{name} on http://127.0.0.1:{port}/");
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        Ok(())
    })
}
