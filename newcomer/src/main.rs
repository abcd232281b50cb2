//! The newcomer test: budget-core/README.md's example, as someone who has
//! just read the README would run it, against a `pricing` dependency this
//! program starts on loopback.
//!
//! Two checks, and the exit code says whether both held:
//!
//! 1. pricing answers at once: `GET /checkout` is `200` with its price;
//! 2. pricing takes 3 s and the caller says it waits 1 s
//!    (`request-budget-ms: 1000`): the answer is a `504` problem+json in
//!    about 1 s, not a 200 after 3 s.

use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio::time::Instant;

// ---- budget-core/README.md's example, as it stands there ----------------

use axum::{Router, extract::State, routing::get};
use budget_core::Budget;
use budget_core::client::{BudgetClient, CallError, DependencyConfig};
use budget_core::server::ServerConfig;

async fn checkout(
    budget: Budget,
    State(pricing): State<BudgetClient>,
) -> Result<String, CallError> {
    // `budget` is what the caller is still willing to wait. The client sends
    // what is left less a per-hop reserve, does not call below the
    // dependency's floor, and pays retries from the same budget; a
    // `CallError` answers as the contract's 504/503/429/502 problem.
    let price = pricing
        .get("")
        .send()
        .await?
        .error_for_status()?
        .text()
        .into_owned();
    Ok(format!(
        "{price} ({} ms left)",
        budget.remaining().as_millis()
    ))
}

/// The README's `main` up to `axum::serve`, with pricing's URL given.
fn app(pricing_url: String) -> Result<Router, Box<dyn Error>> {
    let pricing = DependencyConfig::new("pricing", pricing_url).build()?;
    let layer = ServerConfig::default().layer()?;
    let app = Router::new()
        .route("/checkout", get(checkout))
        .with_state(pricing)
        .layer(layer);
    Ok(app)
}

// ---- the loopback dependency and the two checks ---------------------------

/// Serves `app` on a loopback port of its own.
async fn serve(app: Router) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// One `GET /checkout` with a 1 s budget: status, content type, body, time.
async fn ask(addr: SocketAddr) -> Result<(u16, String, String, Duration), Box<dyn Error>> {
    let start = Instant::now();
    let res = reqwest::Client::new()
        .get(format!("http://{addr}/checkout"))
        .header("request-budget-ms", "1000")
        .timeout(Duration::from_secs(10))
        .send()
        .await?;
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = res.text().await?;
    Ok((status, content_type, body, start.elapsed()))
}

async fn checks() -> Result<Vec<String>, Box<dyn Error>> {
    let partner = Router::new()
        .route("/pricing", get(|| async { "42.00 EUR" }))
        .route(
            "/slow-pricing",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                "42.00 EUR, late"
            }),
        );
    let partner = serve(partner).await?;
    let fast = serve(app(format!("http://{partner}/pricing"))?).await?;
    let slow = serve(app(format!("http://{partner}/slow-pricing"))?).await?;
    let mut failed = Vec::new();

    let (status, _, body, took) = ask(fast).await?;
    println!("fast pricing: {status} in {} ms: {body}", took.as_millis());
    if status != 200 || !body.starts_with("42.00 EUR (") {
        failed.push(format!(
            "fast pricing: expected 200 with the price, got {status} {body}"
        ));
    }

    let (status, content_type, body, took) = ask(slow).await?;
    println!(
        "3 s pricing, 1 s budget: {status} ({content_type}) in {} ms: {body}",
        took.as_millis()
    );
    if status != 504 || content_type != "application/problem+json" {
        failed.push(format!(
            "slow pricing: expected a 504 problem+json, got {status} {content_type}"
        ));
    }
    if !(Duration::from_millis(900)..Duration::from_millis(1500)).contains(&took) {
        failed.push(format!("slow pricing: expected about 1 s, took {took:?}"));
    }
    Ok(failed)
}

#[tokio::main]
async fn main() -> ExitCode {
    match checks().await {
        Ok(failed) if failed.is_empty() => {
            println!("newcomer: the README's example holds");
            ExitCode::SUCCESS
        }
        Ok(failed) => {
            for f in failed {
                eprintln!("newcomer: FAILED: {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("newcomer: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
