//! The loopback `pricing` dependency and the two checks of the README's
//! example (`super`, the README's own text).

use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::time::Instant;

use super::app;

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

pub(crate) async fn checks() -> Result<Vec<String>, Box<dyn Error>> {
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
    let fast = serve(app(&format!("http://{partner}/pricing"))?).await?;
    let slow = serve(app(&format!("http://{partner}/slow-pricing"))?).await?;
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
