//! A service that answers the public (docs/contract.md §4): the budget
//! layer's `trust_inbound = false` and `server_timing` switches, over a
//! real axum server on 127.0.0.1:0 and a real reqwest client.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use budget_core::context;
use budget_core::ledger::{Entry, Ledger};
use budget_core::server::{LedgerLayer, ServerConfig, ServerTiming};
use http::{HeaderName, HeaderValue};

/// The budget and criticality the handler was given, after recording a
/// ledger entry (so that a shown ledger has more than the ingress) and
/// setting a `Server-Timing` of its own.
async fn seen() -> ([(&'static str, &'static str); 1], String) {
    let cx = context::current().expect("inside the budget layer");
    cx.ledger()
        .record(Entry::skip("recommendations", "skipped: circuit open"));
    let budget = cx.budget().original().as_millis();
    (
        [("server-timing", "handler;dur=1")],
        format!("{budget} {:?}", cx.criticality()),
    )
}

/// Sleeps past any budget the tests give.
async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(5)).await;
    "late"
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn start(config: ServerConfig) -> SocketAddr {
    let app = Router::new()
        .route("/", get(seen))
        .route("/slow", get(slow))
        .layer(config.layer().unwrap());
    serve(app).await
}

fn base() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.default_budget = Duration::from_millis(300);
    config.floor = Duration::from_millis(50);
    config
}

/// [`base`] with `change` made.
fn base_with(change: impl FnOnce(&mut ServerConfig)) -> ServerConfig {
    let mut config = base();
    change(&mut config);
    config
}

async fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap()
        .get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    tokio::time::timeout(Duration::from_secs(10), req.send())
        .await
        .expect("an answer within 10 s")
        .unwrap()
}

fn server_timing(res: &reqwest::Response) -> Vec<String> {
    res.headers()
        .get_all("server-timing")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn an_untrusted_caller_gets_the_default_budget_and_criticality_whatever_it_sends() {
    let trusted = start(base()).await;
    let public = start(base_with(|c| c.trust_inbound = false)).await;
    let sent = [
        ("request-budget-ms", "60"),
        ("grpc-timeout", "70m"),
        ("request-criticality", "critical"),
    ];
    let res = get_with(trusted, "/", &sent).await;
    assert_eq!(res.text().await.unwrap(), "60 Critical");
    let res = get_with(public, "/", &sent).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "300 Default");
    // Below the floor from a trusted caller is shed; from the public it is
    // not read at all.
    let tiny = [("request-budget-ms", "10")];
    assert_eq!(get_with(trusted, "/", &tiny).await.status(), 504);
    assert_eq!(get_with(public, "/", &tiny).await.status(), 200);
    // Nor is a malformed budget header an error it could provoke.
    let bad = [("request-budget-ms", "-1")];
    assert_eq!(get_with(trusted, "/", &bad).await.status(), 400);
    let res = get_with(public, "/", &bad).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.unwrap(), "300 Default");
}

#[tokio::test]
async fn never_means_no_server_timing_on_any_answer() {
    let shown = start(base()).await;
    let hidden = start(base_with(|c| c.server_timing = ServerTiming::Never)).await;
    // The handler's answer: the ledger and the handler's own header.
    let res = get_with(shown, "/", &[]).await;
    let timing = server_timing(&res);
    assert!(
        timing.iter().any(|v| v.contains("recommendations")),
        "{timing:?}"
    );
    assert!(timing.iter().any(|v| v == "handler;dur=1"), "{timing:?}");
    let res = get_with(hidden, "/", &[]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(server_timing(&res), Vec::<String>::new());
    // The layer's own answers: expired (504), shed (504), malformed (400).
    for (path, headers, status) in [
        ("/slow", &[][..], 504),
        ("/", &[("request-budget-ms", "10")][..], 504),
        ("/", &[("request-budget-ms", "x")][..], 400),
    ] {
        let res = get_with(shown, path, headers).await;
        assert_eq!(res.status(), status, "{path} {headers:?}");
        assert!(!server_timing(&res).is_empty(), "{path} {headers:?}");
        let res = get_with(hidden, path, headers).await;
        assert_eq!(res.status(), status, "{path} {headers:?}");
        assert_eq!(server_timing(&res), Vec::<String>::new(), "{path}");
        let body = res.text().await.unwrap();
        assert!(body.contains("urn:budget:problem:"), "{body}");
    }
}

#[tokio::test]
async fn when_shows_the_ledger_only_to_requests_with_the_marker() {
    let marker = ServerTiming::when(
        HeaderName::from_static("x-budget-debug"),
        HeaderValue::from_static("s3cret"),
    );
    let addr = start(base_with(|c| c.server_timing = marker)).await;
    let res = get_with(addr, "/", &[("x-budget-debug", "s3cret")]).await;
    let timing = server_timing(&res);
    assert!(
        timing.iter().any(|v| v.contains("budget;dur=300")),
        "{timing:?}"
    );
    for wrong in [&[][..], &[("x-budget-debug", "guess")][..]] {
        let res = get_with(addr, "/", wrong).await;
        assert_eq!(res.status(), 200);
        assert_eq!(server_timing(&res), Vec::<String>::new(), "{wrong:?}");
    }
    // The expired answer follows the same rule.
    let res = get_with(addr, "/slow", &[("x-budget-debug", "s3cret")]).await;
    assert_eq!(res.status(), 504);
    assert!(!server_timing(&res).is_empty());
    let res = get_with(addr, "/slow", &[]).await;
    assert_eq!(res.status(), 504);
    assert!(server_timing(&res).is_empty());
}

#[tokio::test]
async fn the_ledger_layer_hides_its_ledger_the_same_way() {
    let handler = |ledger: Ledger| async move {
        ledger.record(Entry::skip("pricing", "skipped: circuit open"));
        "ok"
    };
    let shown = serve(
        Router::new()
            .route("/", get(handler))
            .layer(LedgerLayer::default()),
    )
    .await;
    let hidden = serve(
        Router::new()
            .route("/", get(handler))
            .layer(LedgerLayer::default().server_timing(ServerTiming::Never)),
    )
    .await;
    assert_eq!(
        server_timing(&get_with(shown, "/", &[]).await),
        ["pricing;desc=\"skipped: circuit open\""]
    );
    assert!(server_timing(&get_with(hidden, "/", &[]).await).is_empty());
}
