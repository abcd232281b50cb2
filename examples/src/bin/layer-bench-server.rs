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
//!
//! One runtime thread, so the load generator gets the other core. Loopback
//! only; stops by itself after the first argument's seconds (default 120).
//!
//! `scripts/bench-server-layer.sh` drives it with wrk,
//! `scripts/bench-instructions.sh` under callgrind.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use budget_core::Budget;
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::server::ServerConfig;
use http::StatusCode;
use tower::make::Shared;

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
            Router::new().route("/", get(hello)),
        );
        let budget_outer = tower::Layer::layer(
            &ServerConfig::default().layer()?,
            Router::new().route("/", get(hello)),
        );
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
        ] {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("{name} on http://127.0.0.1:{port}/");
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        Ok(())
    })
}
