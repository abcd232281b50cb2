//! Helpers shared by the integration tests: a partner on loopback, clients
//! with bounded timeouts, and a bound on every test.

#![allow(dead_code)] // each test binary uses its own subset

use std::future::Future;
use std::time::Duration;

use slow_partner::{PartnerConfig, PartnerHandle, StatsSnapshot};

/// No test may take longer than this, whatever goes wrong.
pub const TEST_BOUND: Duration = Duration::from_secs(30);

/// Runs `test` with [`TEST_BOUND`] as its limit.
pub async fn bounded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("the test ran past its bound")
}

/// A loopback config on a free port, with a short shutdown grace.
pub fn config() -> PartnerConfig {
    PartnerConfig::new("127.0.0.1:0".parse().unwrap())
        .with_shutdown_grace(Duration::from_millis(500))
}

/// A partner on a free loopback port, with an admin listener.
pub async fn partner() -> PartnerHandle {
    slow_partner::spawn(config().with_admin_listen("127.0.0.1:0".parse().unwrap()))
        .await
        .expect("the partner starts")
}

/// A client whose every request gives up after 10 s.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_rustls()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// `GET /stats` on the admin listener, parsed.
pub async fn stats(partner: &PartnerHandle) -> StatsSnapshot {
    client()
        .get(partner.admin_url("/stats").unwrap())
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls the partner's stats until `done` holds (at most 5 s).
pub async fn stats_until(
    partner: &PartnerHandle,
    done: impl Fn(&StatsSnapshot) -> bool,
) -> StatsSnapshot {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stats = partner.stats();
        if done(&stats) || tokio::time::Instant::now() > deadline {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// grpcio for the tests that call from outside (budget-core's test helper).
#[path = "../../../../budget-core/tests/grpc_support/python.rs"]
mod python;

#[allow(unused_imports)] // each test binary uses its own subset
pub use python::python;

/// `method` on the admin endpoint `path` with `body`: the status, the
/// `content-type` and the JSON answer.
pub async fn admin(
    partner: &PartnerHandle,
    method: reqwest::Method,
    path: &str,
    body: &str,
) -> (reqwest::StatusCode, Option<String>, serde_json::Value) {
    let response = client()
        .request(method, partner.admin_url(path).unwrap())
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, content_type, response.json().await.unwrap())
}

/// Asserts an admin endpoint's refusal: a `400` problem+json naming
/// `parameter`, with a detail; `context` says which input it was.
pub fn assert_bad_request(
    (status, content_type, problem): &(reqwest::StatusCode, Option<String>, serde_json::Value),
    parameter: &str,
    context: &str,
) {
    assert_eq!(*status, reqwest::StatusCode::BAD_REQUEST, "{context}");
    assert_eq!(
        content_type.as_deref(),
        Some("application/problem+json"),
        "{context}"
    );
    assert_eq!(problem["parameter"], parameter, "{context}: {problem}");
    assert_eq!(problem["status"], 400);
    assert!(problem["detail"].as_str().is_some_and(|d| !d.is_empty()));
}
