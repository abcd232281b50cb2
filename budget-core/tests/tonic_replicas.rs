//! A balanced `GrpcBudgetLayer` over `EndpointChannels`, real tonic
//! channels to real tonic servers on loopback (the echo of
//! `grpc_support`): calls are spread over the replicas, the ledger says
//! which answered, a replica that refuses its connections costs a retry on
//! another and is then passed over, and a call made outside any request
//! still reaches a replica (docs/architecture.md, "Replicas").

mod grpc_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use budget_core::Budget;
use budget_core::breaker::BreakerConfig;
use budget_core::client::DependencyConfig;
use budget_core::context::RequestContext;
use budget_core::grpc::GrpcBudgetLayer;
use budget_core::ledger::Ledger;
use bytes::Bytes;
use grpc_support::{Echo, Raw, attempts, serve_echo};
use tonic::transport::Channel;
use tower::ServiceBuilder;

/// The balanced layer over `urls`, with its channels, as a tonic client's
/// service.
fn balanced(
    urls: &[String],
) -> impl tower::Service<
    http::Request<tonic::body::Body>,
    Response = http::Response<tonic::body::Body>,
    Error = Box<dyn std::error::Error + Send + Sync>,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let mut config = DependencyConfig::new("echo", &urls[0]);
    config.endpoints = urls.to_vec();
    config.breaker = Some(breaker(2));
    config.retry.max_attempts = 3;
    let (layer, channels) =
        GrpcBudgetLayer::balanced(&config, None, |uri| Channel::builder(uri).connect_lazy())
            .unwrap();
    ServiceBuilder::new().layer(layer).service(channels)
}

/// One call of `/test.Echo/Echo` on `service`, inside a request with 1 s
/// when `in_budget`.
async fn call<S>(service: S, in_budget: bool) -> (Result<Bytes, tonic::Status>, Ledger)
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Box<dyn std::error::Error + Send + Sync>,
        > + Send
        + 'static,
    S::Future: Send,
{
    let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    let ledger = cx.ledger().clone();
    let call = async move {
        let mut grpc = tonic::client::Grpc::new(service);
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::from_static("/test.Echo/Echo");
        grpc.unary(tonic::Request::new(Bytes::new()), path, Raw)
            .await
            .map(tonic::Response::into_inner)
    };
    let answer = if in_budget {
        cx.scope(call).await
    } else {
        call.await
    };
    (answer, ledger)
}

#[tokio::test]
async fn calls_are_spread_over_the_replicas_and_the_ledger_says_which_answered() {
    let (a, b) = (Echo::default(), Echo::default());
    let addrs = [serve_echo(a.clone()).await, serve_echo(b.clone()).await];
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let service = balanced(&urls);
    // Ten at a time: the calls in flight weigh in the choice.
    let mut answers = Vec::new();
    for _ in 0..4 {
        let mut wave = tokio::task::JoinSet::new();
        for _ in 0..10 {
            wave.spawn(call(service.clone(), true));
        }
        answers.extend(wave.join_all().await);
    }
    for (answer, ledger) in answers {
        assert!(answer.is_ok(), "{answer:?}");
        let tried = attempts(&ledger);
        assert_eq!(tried.len(), 1, "{tried:?}");
        assert!(
            addrs.iter().any(|a| tried[0] == format!("200 from {a}")),
            "{tried:?}"
        );
    }
    let hits = [
        a.calls.load(Ordering::SeqCst),
        b.calls.load(Ordering::SeqCst),
    ];
    assert_eq!(hits[0] + hits[1], 40);
    assert!(
        hits[0] >= 5 && hits[1] >= 5,
        "both replicas serve: {hits:?}"
    );
    // Outside any request, the layer passes the call through and the
    // channels send it to a replica in turn.
    let (answer, ledger) = call(service.clone(), false).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert!(attempts(&ledger).is_empty());
    let after = a.calls.load(Ordering::SeqCst) + b.calls.load(Ordering::SeqCst);
    assert_eq!(after, 41);
}

#[tokio::test]
async fn a_refusing_replica_costs_one_retry_on_another_and_is_then_passed_over() {
    let dead = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let live = Echo::default();
    let addr = serve_echo(live.clone()).await;
    let urls = vec![format!("http://{dead}"), format!("http://{addr}")];
    let service = balanced(&urls);
    let mut retried = 0;
    for _ in 0..30 {
        let (answer, ledger) = call(service.clone(), true).await;
        assert!(answer.is_ok(), "{answer:?} {ledger:?}");
        let tried = attempts(&ledger);
        assert_eq!(
            tried.last().unwrap(),
            &format!("200 from {addr}"),
            "{tried:?}"
        );
        if tried.len() > 1 {
            retried += 1;
            assert!(tried[0].ends_with(&format!("from {dead}")), "{tried:?}");
        }
    }
    assert!(
        (1..=5).contains(&retried),
        "the dead replica is passed over: {retried}"
    );
    assert_eq!(live.calls.load(Ordering::SeqCst), 30);
}

/// A host name is every address it resolves to, as over HTTP: `localhost`
/// (127.0.0.1, and ::1 where the machine has it, where nothing listens:
/// a retry on the other; with one address, one endpoint, and the ledger
/// names no replica).
#[tokio::test]
async fn a_host_name_is_its_addresses() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let mut config = DependencyConfig::new("echo", format!("http://localhost:{}", addr.port()));
    config.breaker = Some(breaker(2));
    config.retry.max_attempts = 3;
    let (layer, channels) =
        GrpcBudgetLayer::balanced(&config, None, |uri| Channel::builder(uri).connect_lazy())
            .unwrap();
    let service = ServiceBuilder::new().layer(layer).service(channels);
    for _ in 0..5 {
        let (answer, ledger) = call(service.clone(), true).await;
        assert!(answer.is_ok(), "{answer:?} {ledger:?}");
        let tried = attempts(&ledger);
        let last = tried.last().unwrap();
        assert!(
            *last == format!("200 from {addr}") || (last == "200" && tried.len() == 1),
            "{tried:?}"
        );
    }
    assert_eq!(echo.calls.load(Ordering::SeqCst), 5);
}

/// The default breaker, opened by `failure_threshold` failures.
fn breaker(failure_threshold: u32) -> BreakerConfig {
    let mut breaker = BreakerConfig::default();
    breaker.failure_threshold = failure_threshold;
    breaker
}
