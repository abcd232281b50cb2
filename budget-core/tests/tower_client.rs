//! `OutboundBudgetLayer` around hyper-util's legacy `Client` against
//! loopback servers: the headers the dependency sees, the floor, the
//! budget as the request's deadline, the ledger, and a request outside any
//! budget scope (docs/contract.md §1 "Outbound", §2 rules 1 and 2, §4).
//! The exact deadline is pinned with a paused clock and no socket.

mod support;

use std::convert::Infallible;
use std::error::Error as StdError;
use std::time::Duration;

use budget_core::adapters::tower::OutboundBudgetLayer;
use budget_core::admission::criticality::Criticality;
use budget_core::client::{AttemptTimedOut, CallError, CallErrorKind};
use budget_core::context::RequestContext;
use budget_core::floor::BelowFloor;
use budget_core::ledger::Entry;
use budget_core::{Budget, context};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use support::{
    Answer, Behaviour, Partner, Raw, attempts, bounded_by, eventually, ms, refused_addr,
};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

type BoxError = Box<dyn StdError + Send + Sync>;

fn http() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url).body(Full::default()).unwrap()
}

fn context(budget: Duration, reserve: Duration) -> RequestContext {
    RequestContext::new(Budget::new(budget)).with_reserve(reserve)
}

/// §1: the dependency is told what is left less the reserve (rounded
/// down, so a few ms below 2000 - 50) and the request's criticality; the
/// ledger has the attempt with its status.
#[tokio::test]
async fn rule1_the_dependency_is_told_the_budget_less_the_reserve_and_the_ledger_has_it() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(503)]).await;
        let pricing = OutboundBudgetLayer::new("pricing").layer(http());
        let cx = context(ms(2000), ms(50)).with_criticality(Criticality::Sheddable);
        let res = cx
            .clone()
            .scope(pricing.oneshot(get(&partner.url("/quote"))))
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        let seen = partner.seen();
        let told = seen[0].budget_ms.expect("request-budget-ms sent");
        assert!((1940..=1950).contains(&told), "told {told} ms");
        assert_eq!(seen[0].criticality.as_deref(), Some("sheddable"));
        assert_eq!(
            attempts(cx.ledger()),
            [("pricing".to_owned(), "503".to_owned())]
        );
    })
    .await;
}

/// As a `BudgetClient` call does: the caller's `traceparent` is passed on
/// when the request has none, and a request's own is kept.
#[tokio::test]
async fn the_caller_s_trace_context_is_passed_on_unless_the_request_has_one() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let pricing = OutboundBudgetLayer::new("pricing").layer(http());
        let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let mut inbound = http::HeaderMap::new();
        inbound.insert("traceparent", caller.parse().unwrap());
        let cx = context(ms(2000), ms(0)).with_inbound_trace(&inbound);
        let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        cx.scope(async {
            pricing
                .clone()
                .oneshot(get(&partner.url("/a")))
                .await
                .unwrap();
            let mut req = get(&partner.url("/b"));
            req.headers_mut()
                .insert("traceparent", own.parse().unwrap());
            pricing.oneshot(req).await.unwrap();
        })
        .await;
        let seen: Vec<_> = partner.seen().into_iter().map(|s| s.traceparent).collect();
        assert_eq!(seen, [Some(caller.to_owned()), Some(own.to_owned())]);
    })
    .await;
}

/// §2 rule 2: with less left than the floor the inner client is not
/// called (the dependency sees nothing), the error is the client's
/// `CallError` (its source the `BelowFloor`), and the ledger says why.
#[tokio::test]
async fn rule2_below_the_floor_no_request_is_made_and_the_error_is_below_floor() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let pricing = OutboundBudgetLayer::new("pricing")
            .floor(ms(100))
            .layer(http());
        let cx = context(ms(150), ms(60));
        let err: BoxError = cx
            .clone()
            .scope(pricing.oneshot(get(&partner.url("/quote"))))
            .await
            .unwrap_err();
        let call = err
            .downcast_ref::<CallError>()
            .unwrap_or_else(|| panic!("not a CallError: {err:?}"));
        assert_eq!(call.kind(), CallErrorKind::BelowFloor);
        let below = std::error::Error::source(call)
            .and_then(|s| s.downcast_ref::<BelowFloor>())
            .unwrap_or_else(|| panic!("not BelowFloor: {call:?}"));
        assert_eq!(below.floor(), ms(100));
        assert!(below.remaining() <= ms(90), "{below}");
        assert_eq!(partner.hits(), 0, "a request below the floor was sent");
        let entries = cx.ledger().entries();
        assert!(
            matches!(&entries[..], [Entry::Skip { dependency, reason }]
                if dependency == "pricing"
                && reason == &format!("skipped: {below}")),
            "{entries:?}"
        );
    })
    .await;
}

/// §2 rule 1: a dependency slower than the budget is cut off when the
/// budget (less the reserve) runs out, not when it answers: the error is
/// a `CallError` of kind `Timeout`, the ledger says `timeout`, and the
/// connection is closed
/// (the request is dropped, not left running).
#[tokio::test]
async fn rule1_a_silent_dependency_is_cut_off_at_the_budget_and_its_connection_closed() {
    bounded_by(10, async {
        let raw = Raw::start(Behaviour::Silent).await;
        let pricing = OutboundBudgetLayer::new("pricing").layer(http());
        let cx = context(ms(350), ms(50));
        let start = Instant::now();
        let err = cx
            .clone()
            .scope(pricing.oneshot(get(&raw.url())))
            .await
            .unwrap_err();
        let took = start.elapsed();
        let elapsed = timed_out(&err);
        assert!(elapsed.limit() <= ms(300) && elapsed.limit() > ms(250));
        assert!(
            took >= ms(290) && took < ms(1200),
            "cut off after {took:?}, budget less reserve 300 ms"
        );
        assert_eq!(
            attempts(cx.ledger()),
            [("pricing".to_owned(), "timeout".to_owned())]
        );
        assert!(
            eventually(ms(2000), || raw.closed() == 1).await,
            "the connection of the dropped request stayed open"
        );
    })
    .await;
}

/// A failure of the inner client is its own error, boxed, and the ledger
/// names its kind (`connect` for a refused connection).
#[tokio::test]
async fn a_refused_connection_is_the_client_s_error_and_connect_in_the_ledger() {
    bounded_by(10, async {
        let addr = refused_addr().await;
        let pricing = OutboundBudgetLayer::new("pricing").layer(http());
        let cx = context(ms(2000), ms(0));
        let err = cx
            .clone()
            .scope(pricing.oneshot(get(&format!("http://{addr}/"))))
            .await
            .unwrap_err();
        let hyper_err = err
            .downcast_ref::<hyper_util::client::legacy::Error>()
            .unwrap_or_else(|| panic!("not the client's error: {err:?}"));
        assert!(hyper_err.is_connect(), "{hyper_err:?}");
        assert_eq!(
            attempts(cx.ledger()),
            [("pricing".to_owned(), "connect".to_owned())]
        );
    })
    .await;
}

/// Outside any budget scope the request goes as it came: no budget or
/// criticality header, no deadline (a 400 ms answer is waited for), no
/// refusal whatever the floor.
#[tokio::test]
async fn outside_a_budget_scope_the_request_passes_untouched() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200).after(ms(400))]).await;
        let pricing = OutboundBudgetLayer::new("pricing")
            .floor(ms(10_000))
            .layer(http());
        assert!(context::current().is_none());
        let res = pricing.oneshot(get(&partner.url("/quote"))).await.unwrap();
        assert_eq!(res.status(), 200);
        let seen = partner.seen();
        assert_eq!(seen[0].budget_ms, None);
        assert_eq!(seen[0].criticality, None);
    })
    .await;
}

/// §2 rule 1, to the millisecond on a paused clock (no socket): a client
/// that never answers is given exactly what is left less the reserve.
#[tokio::test(start_paused = true)]
async fn rule1_the_deadline_is_what_is_left_less_the_reserve_to_the_millisecond() {
    let never = tower::service_fn(|_: Request<()>| {
        std::future::pending::<Result<Response<()>, Infallible>>()
    });
    let pricing = OutboundBudgetLayer::new("pricing").layer(never);
    let cx = context(ms(500), ms(100));
    tokio::time::advance(ms(40)).await;
    let start = Instant::now();
    let err = cx
        .clone()
        .scope(pricing.oneshot(Request::new(())))
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), ms(360));
    assert_eq!(timed_out(&err).limit(), ms(360));
    assert_eq!(
        cx.ledger().server_timing(),
        "pricing;dur=360;desc=\"timeout\""
    );
}

/// The attempt's timeout inside the `CallError` of a request cut off when
/// its budget ran out.
fn timed_out(err: &BoxError) -> &AttemptTimedOut {
    let call = err
        .downcast_ref::<CallError>()
        .unwrap_or_else(|| panic!("not a CallError: {err:?}"));
    assert_eq!(call.kind(), CallErrorKind::Timeout);
    std::error::Error::source(call)
        .and_then(|s| s.downcast_ref::<AttemptTimedOut>())
        .unwrap_or_else(|| panic!("no AttemptTimedOut in {call:?}"))
}
