//! gRPC through a real Envoy (docs/contract.md §1 "Through Envoy", §2
//! "Envoy in the path"): a tonic call through `GrpcBudgetLayer`, Envoy
//! (HTTP/2 to the upstream), then the slow partner's gRPC face, all on
//! 127.0.0.1. `grpc-timeout` comes out of Envoy as it went in (less
//! Envoy's time), capped by `grpc_timeout_header_max`; Envoy's own
//! timeouts (its route's, answered `UNAVAILABLE`, and the stream's,
//! `DEADLINE_EXCEEDED`) are named as Envoy's in the ledger and metrics,
//! apart from the partner's own `UNAVAILABLE` and from the call the
//! engine cancelled at its budget.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use budget_core::Budget;
use budget_core::context::RequestContext;
use budget_core::grpc::GrpcBudgetLayer;
use budget_core::header::parse_grpc_timeout;
use budget_core::ledger::Ledger;
use common::{attempts, attempts_with, envoy, logged, seen_at_least, with_metrics};
use envoy_sidecar::Sidecar;
use envoy_sidecar::config::{self, Hop};
use partner_grpc::CallRequest;
use partner_grpc::partner_client::PartnerClient;
use slow_partner::FaultMode;
use test_support::{bounded, partner};
use tower::ServiceBuilder;

/// One `Partner/Call` of `query` on `/inventory` through `envoy`'s hop,
/// inside a request of `budget` (reserve 20 ms): its status code and
/// reply body, and the request's ledger.
async fn call(
    envoy: &Sidecar,
    query: &str,
    budget: Duration,
) -> (Result<String, tonic::Status>, Ledger) {
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", envoy.listener("hop")))
            .unwrap()
            .connect_lazy();
    let channel = ServiceBuilder::new()
        .layer(GrpcBudgetLayer::new("partner"))
        .service(channel);
    let mut client = PartnerClient::new(channel);
    let cx = RequestContext::new(Budget::new(budget)).with_reserve(Duration::from_millis(20));
    let ledger = cx.ledger().clone();
    let request = CallRequest {
        path: "/inventory".into(),
        query: query.into(),
    };
    let answer = cx
        .scope(async move { client.call(request).await })
        .await
        .map(|reply| reply.into_inner().body);
    (answer, ledger)
}

/// The budget the partner read, from its reply.
fn budget_read(body: &str) -> u64 {
    let answer: serde_json::Value = serde_json::from_str(body).unwrap();
    answer["budget_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no budget in {body}"))
}

/// Envoy's hop over HTTP/2 to `upstream`, its route timeout `route`, its
/// `grpc_timeout_header_max` `cap` when given, logging each request.
async fn hop(upstream: &SocketAddr, route: Duration, cap: Option<Duration>) -> Sidecar {
    let mut hop = Hop::new([*upstream]).http2().route_timeout(route);
    if let Some(cap) = cap {
        hop = hop.grpc_timeout_header_max(cap);
    }
    envoy(&logged(&config::hop(&hop), "grpc-hop")).await
}

/// `grpc-timeout` as a pass-through Envoy in front saw it come from the
/// client (an Envoy without `grpc_timeout_header_max` passes it on as it
/// is) and as the Envoy under test sent it on (its access log shows the
/// request as it left: `grpc-timeout` rewritten).
async fn in_and_out(front: &Sidecar, envoy: &Sidecar) -> (Duration, Duration) {
    let came = &seen_at_least(front, "grpc-hop", 1).await[0];
    let left = &seen_at_least(envoy, "grpc-hop", 1).await[0];
    (grpc_timeout(&came["grpc"]), grpc_timeout(&left["grpc"]))
}

/// A `grpc-timeout` value.
fn grpc_timeout(value: &str) -> Duration {
    parse_grpc_timeout(value.as_bytes()).unwrap_or_else(|e| panic!("{value}: {e}"))
}

const MS: Duration = Duration::from_millis(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_timeout_crosses_envoy_less_its_time_and_is_capped_by_the_route() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        for (cap, capped_to) in [
            // Envoy takes `grpc-timeout` as its timeout, uncapped, and
            // passes it on less its time (within 2 ms), written in whole
            // ms rounded up (at most 1 ms more, as gRPC rounds a deadline).
            (Duration::ZERO, None),
            // Capped at 500 ms: the partner reads Envoy's 500, not the budget.
            (Duration::from_millis(500), Some(Duration::from_millis(500))),
        ] {
            let envoy = hop(&partner.addr(), Duration::ZERO, Some(cap)).await;
            let front = hop(&envoy.listener("hop"), Duration::ZERO, None).await;
            let (answer, ledger) = call(&front, "delay=5ms", Duration::from_secs(2)).await;
            let read = Duration::from_millis(budget_read(&answer.unwrap()));
            let (came, left) = in_and_out(&front, &envoy).await;
            assert!(
                came <= Duration::from_millis(2000 - 20) && came > Duration::from_millis(1900),
                "the layer's reserve and time off 2 s: {came:?}"
            );
            let want = capped_to.unwrap_or(came);
            assert!(
                left <= want + MS && left + 2 * MS >= want,
                "in {came:?}, out {left:?}"
            );
            assert!(
                read <= left && read + 2 * MS >= left,
                "out {left:?}, read {read:?}"
            );
            let outcomes = attempts(&ledger, "partner");
            assert!(
                outcomes.len() == 1 && outcomes[0].starts_with("200 (upstream "),
                "{outcomes:?}"
            );
        }
        partner.shutdown().await;
    })
    .await;
}

#[test]
fn envoy_s_grpc_timeouts_stay_apart_from_unavailable_and_cancelled() {
    let (codes, outcomes, rendered) = with_metrics(|handle| async move {
        let partner = partner(FaultMode::Normal).await;
        let at = partner.addr();
        let route = hop(&at, Duration::from_millis(150), None).await;
        let stream = hop(&at, Duration::ZERO, Some(Duration::from_millis(150))).await;
        let open = hop(&at, Duration::ZERO, None).await;
        let budget = Duration::from_millis(900);
        let mut codes = Vec::new();
        let mut outcomes = Vec::new();
        for (envoy, query, budget) in [
            // Envoy's route timeout: its UNAVAILABLE.
            (&route, "delay=2s", budget),
            // The grpc-timeout Envoy capped, run out: its DEADLINE_EXCEEDED.
            (&stream, "delay=2s", budget),
            // The partner's own UNAVAILABLE, carried.
            (&route, "status=503", budget),
            // Nothing of Envoy's in the way: the engine stops at the budget.
            (&open, "delay=2s", Duration::from_millis(250)),
        ] {
            let (answer, ledger) = call(envoy, query, budget).await;
            codes.push(answer.unwrap_err().code());
            outcomes.extend(attempts(&ledger, "partner"));
        }
        partner.shutdown().await;
        (codes, outcomes, handle.render())
    });
    use tonic::Code;
    assert_eq!(
        codes,
        [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::Unavailable,
            Code::DeadlineExceeded
        ]
    );
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
    assert_eq!(outcomes[0], "envoy UT: upstream request timeout (grpc-14)");
    assert_eq!(outcomes[1], "envoy: max stream duration reached (grpc-4)");
    assert!(
        outcomes[2].starts_with("grpc-14 (upstream "),
        "{outcomes:?}"
    );
    assert_eq!(outcomes[3], "timeout");
    for outcome in [
        "envoy-upstream-timeout",
        "envoy-stream-duration",
        "grpc-14",
        "timeout",
    ] {
        assert_eq!(
            attempts_with(&rendered, "partner", outcome),
            1,
            "{outcome}: {rendered}"
        );
    }
}
