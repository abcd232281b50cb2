//! The whole chain's `/metrics` as an SRE reads it: after a few `200`s, a
//! `504` (a hanging partner) and a `429` passed up, the RED series show
//! each, the budget counters were there at 0 before their first event, and
//! `promtool check metrics` (Prometheus' own linter) finds nothing to
//! say. Edge, checkout and the partner run in this one process, so the one
//! Prometheus recorder holds all their series.

mod common;

use slow_partner::PartnerConfig;

/// The value of the series `line_start` (name and labels, exactly as
/// rendered) in `text`.
fn value(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn red_metrics_show_every_outcome_and_promtool_finds_nothing() {
    let partner = slow_partner::spawn(PartnerConfig::new("127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let (edge_addr, _) = common::chain(
        partner.url("/inventory"),
        partner.url("/pricing?delay=5s"),
        partner.url("/recommendations"),
    )
    .await;
    // A second checkout, whose pricing answers 429 (its edge is not used).
    let (_, throttled_addr) = common::chain(
        partner.url("/inventory"),
        partner.url("/pricing?status=429&retry_after=30"),
        partner.url("/recommendations"),
    )
    .await;

    let client = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap();
    let scrape = || async {
        client
            .get(format!("http://{edge_addr}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    // Before any failure: the budget counters are there, at 0.
    let before = scrape().await;
    assert_eq!(
        value(&before, "budget_expired_total"),
        Some(0.0),
        "{before}"
    );
    assert_eq!(value(&before, "budget_shed_total"), Some(0.0));
    assert_eq!(
        value(&before, "budget_below_floor_total{dependency=\"pricing\"}"),
        Some(0.0),
        "{before}"
    );

    // A 504: pricing hangs past the 800 ms budget.
    let res = client
        .get(format!("http://{edge_addr}/checkout"))
        .header("request-budget-ms", "800")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
    // A 429 passed up by the second checkout.
    let res = client
        .get(format!("http://{throttled_addr}/checkout"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    // A 404.
    let res = client
        .get(format!("http://{edge_addr}/nowhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);

    let text = scrape().await;
    let count = |route: &str, status: u16| {
        value(
            &text,
            &format!(
                "http_server_request_duration_seconds_count{{http_route=\"{route}\",http_request_method=\"GET\",http_response_status_code=\"{status}\"}}"
            ),
        )
        .unwrap_or(0.0)
    };
    // Edge's 504 and checkout's, the 429, the 404 (no route: empty).
    assert!(count("/checkout", 504) >= 2.0, "{text}");
    assert_eq!(count("/checkout", 429), 1.0, "{text}");
    assert_eq!(count("", 404), 1.0, "{text}");
    // The client side: pricing's attempts by outcome, in seconds.
    assert!(
        text.contains("http_client_request_duration_seconds_count{dependency=\"pricing\",http_request_method=\"GET\",outcome=\"429\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE budget_ingress_seconds histogram"),
        "{text}"
    );
    assert!(
        text.contains("budget_ingress_seconds_bucket{le=\"1.5\"}"),
        "{text}"
    );

    // Prometheus' own linter, on the real scrape.
    service_kit::assert_promtool_clean(&text);
}
