//! Serves the same handler three ways for a side-by-side load test of the
//! server layer: plain axum, axum + tower-http's `TimeoutLayer`, axum +
//! `BudgetLayer`. One runtime thread, so the load generator gets the other
//! core. Loopback only; stops by itself after `--seconds` (default 120).
//!
//! `scripts/bench-server-layer.sh` drives it with wrk.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use budget_core::server::ServerConfig;
use http::StatusCode;

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
        for (name, port, app) in [
            ("plain", 18081, plain),
            ("tower-http-timeout", 18082, timeout),
            ("budget-layer", 18083, budget),
        ] {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            println!("{name} on http://127.0.0.1:{port}/");
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        Ok(())
    })
}
