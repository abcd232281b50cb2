//! A background job: calls made outside any request, each with a budget of
//! its own.
//!
//! A call outside a request has no caller's budget to spend. Give it one
//! explicitly (`.budget(Budget::new(..))`, here with a `Ledger` to see
//! where the time went), or give the dependency a `default_budget`, and
//! every such call spends a fresh budget of that much under the same
//! rules: the budget is sent on, retries are paid from it, and a slow
//! dependency is given up on when it runs out. Without either, the call is
//! the typed error `NoBudget`.
//!
//! The dependency listens on `127.0.0.1:0`; the program exits by itself.
//!
//! ```sh
//! cargo run -p budget-examples --bin background_job
//! ```

use std::error::Error;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::{Router, routing::get};
use budget_core::Budget;
use budget_core::client::DependencyConfig;
use budget_core::header::REQUEST_BUDGET_MS;
use budget_core::ledger::Ledger;
use tokio::time::Instant;

/// The dependency: says which budget it was given; `/slow` takes 1 s.
async fn report(headers: HeaderMap) -> String {
    let given = headers
        .get(REQUEST_BUDGET_MS)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("no");
    format!("report built (given {given} ms)")
}

async fn slow(headers: HeaderMap) -> String {
    tokio::time::sleep(Duration::from_secs(1)).await;
    report(headers).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/report", get(report))
        .route("/slow", get(slow));
    tokio::spawn(async move { axum::serve(listener, app).await });

    // 1. One budget for this run of the job, given to the call, and a
    //    ledger that records its attempts.
    let reports = DependencyConfig::new("reports", format!("http://{addr}")).build()?;
    let ledger = Ledger::new();
    let res = reports
        .get("/report")
        .budget(Budget::new(Duration::from_millis(800)))
        .ledger(ledger.clone())
        .send()
        .await?;
    println!("with .budget(800 ms): {} {}", res.status(), res.text());
    println!("  ledger: {}", ledger.server_timing());

    // 2. A default budget for every call made outside a request.
    let mut reports = DependencyConfig::new("reports", format!("http://{addr}"));
    reports.default_budget = Some(Duration::from_millis(300));
    let reports = reports.build()?;
    let res = reports.get("/report").send().await?;
    println!(
        "with default_budget 300 ms: {} {}",
        res.status(),
        res.text()
    );

    // 3. The same default budget against a dependency that takes 1 s: the
    //    job stops waiting when its budget runs out.
    let start = Instant::now();
    match reports.get("/slow").send().await {
        Err(e) => println!(
            "/slow with default_budget 300 ms: gave up after {} ms: {e}",
            start.elapsed().as_millis()
        ),
        Ok(res) => return Err(format!("/slow answered {} within 300 ms", res.status()).into()),
    }

    // 4. Neither: the call is not made.
    let no_budget = DependencyConfig::new("reports", format!("http://{addr}")).build()?;
    match no_budget.get("/report").send().await {
        Err(e) => println!("without a budget: not made: {e}"),
        Ok(res) => return Err(format!("made without a budget: {}", res.status()).into()),
    }
    Ok(())
}
