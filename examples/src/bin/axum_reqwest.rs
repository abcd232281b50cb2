//! axum + reqwest: the smallest budget-aware service.
//!
//! An axum server behind `BudgetLayer` whose handler calls one dependency
//! through `BudgetClient`. The caller says how long it will wait
//! (`request-budget-ms: 1000`); the handler's call to `pricing` is sent
//! what is left less the per-hop reserve, and every attempt is written
//! into the `Server-Timing` ledger of the answer.
//!
//! Both servers listen on `127.0.0.1:0`; the program sends one request,
//! prints the answer and the ledger, and exits.
//!
//! ```sh
//! cargo run -p budget-examples --bin axum_reqwest
//! ```

use std::error::Error;
use std::net::SocketAddr;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::{Router, routing::get};
use budget_core::Budget;
use budget_core::client::{BudgetClient, CallError, DependencyConfig};
use budget_core::header::REQUEST_BUDGET_MS;
use budget_core::server::{SERVER_TIMING, ServerConfig};

/// The dependency: says which budget it was given.
async fn pricing(headers: HeaderMap) -> String {
    let given = headers
        .get(REQUEST_BUDGET_MS)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("no");
    format!("price 42 (pricing was given {given} ms)")
}

/// The handler: `budget` is what the caller is still willing to wait; the
/// call spends it (no budget argument: it reads the request's context). A
/// `CallError` answers as a `504`/`503`/`429`/`502` problem.
async fn checkout(
    budget: Budget,
    State(pricing): State<BudgetClient>,
) -> Result<String, CallError> {
    let price = pricing.get("").send().await?.error_for_status()?;
    Ok(format!(
        "{}; checkout has {} ms left",
        price.text(),
        budget.remaining().as_millis()
    ))
}

/// Serves `app` on a loopback port of its own.
async fn serve(app: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let dependency = serve(Router::new().route("/pricing", get(pricing))).await?;

    let pricing =
        DependencyConfig::new("pricing", format!("http://{dependency}/pricing")).build()?;
    let app = Router::new()
        .route("/checkout", get(checkout))
        .with_state(pricing)
        .layer(ServerConfig::default().layer()?);
    let addr = serve(app).await?;

    let res = reqwest::Client::new()
        .get(format!("http://{addr}/checkout"))
        .header(REQUEST_BUDGET_MS, "1000")
        .send()
        .await?;
    let status = res.status();
    let ledger = res
        .headers()
        .get(SERVER_TIMING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    println!("GET /checkout (request-budget-ms: 1000) -> {status}");
    println!("{}", res.text().await?);
    println!("ledger (Server-Timing):");
    for entry in ledger.split(", ") {
        println!("  {entry}");
    }
    if !status.is_success() {
        return Err(format!("checkout answered {status}").into());
    }
    Ok(())
}
