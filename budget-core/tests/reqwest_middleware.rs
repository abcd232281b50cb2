//! `BudgetMiddleware` in a real `reqwest-middleware` client against
//! loopback servers: the headers the dependency sees, the floor, the budget
//! as reqwest's timeout (head and body), the ledger, and a request outside
//! any budget scope (docs/contract.md §1 "Outbound", §2 rules 1 and 2, §4).

mod support;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
use budget_core::admission::criticality::Criticality;
use budget_core::client::{CallError, CallErrorKind};
use budget_core::context::RequestContext;
use budget_core::ledger::Entry;
use budget_core::{Budget, context};
use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Error, Next};
use support::{Answer, Behaviour, Partner, Raw, attempts, bounded_by, ms};
use tokio::net::TcpListener;
use tokio::time::Instant;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn client(middleware: BudgetMiddleware) -> ClientWithMiddleware {
    ClientBuilder::new(
        reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap(),
    )
    .with(middleware)
    .build()
}

fn context(budget: Duration, reserve: Duration) -> RequestContext {
    RequestContext::new(Budget::new(budget)).with_reserve(reserve)
}

/// The call's `CallError`, from the middleware's error.
fn call_error(e: &Error) -> &CallError {
    match e {
        Error::Middleware(e) => e
            .downcast_ref::<CallError>()
            .unwrap_or_else(|| panic!("not a CallError: {e:?}")),
        Error::Reqwest(e) => panic!("a reqwest error, not the middleware's: {e:?}"),
    }
}

/// §1: the dependency is told what is left less the reserve (rounded
/// down, so a few ms below 2000 - 50), and the request's criticality; the
/// ledger has the attempt with its status.
#[tokio::test]
async fn rule1_the_dependency_is_told_the_budget_less_the_reserve_and_the_ledger_has_it() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let pricing = client(BudgetMiddleware::new("pricing"));
        let cx = context(ms(2000), ms(50)).with_criticality(Criticality::Critical);
        let res = cx
            .clone()
            .scope(pricing.get(partner.url("/quote")).send())
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let seen = partner.seen();
        let told = seen[0].budget_ms.expect("request-budget-ms sent");
        assert!((1940..=1950).contains(&told), "told {told} ms");
        assert_eq!(seen[0].criticality.as_deref(), Some("critical"));
        assert_eq!(
            attempts(cx.ledger()),
            [("pricing".to_owned(), "200".to_owned())]
        );
    })
    .await;
}

/// §2 rule 2: with less left than the floor the request is not made (the
/// dependency sees nothing), the error is the client's typed `CallError`
/// (below floor, the contract's 504), and the ledger says why.
#[tokio::test]
async fn rule2_below_the_floor_no_request_is_made_and_the_error_is_a_typed_call_error() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let pricing = client(BudgetMiddleware::new("pricing").floor(ms(100)));
        let cx = context(ms(150), ms(60));
        let err = cx
            .clone()
            .scope(pricing.get(partner.url("/quote")).send())
            .await
            .unwrap_err();
        assert!(err.is_middleware(), "{err:?}");
        let call = call_error(&err);
        assert!(call.is_below_floor(), "{call}");
        assert_eq!(call.kind(), CallErrorKind::BelowFloor);
        assert_eq!(call.dependency(), "pricing");
        assert_eq!(call.problem().status, 504);
        assert_eq!(partner.hits(), 0, "a request below the floor was sent");
        let entries = cx.ledger().entries();
        assert!(
            matches!(&entries[..], [Entry::Skip { dependency, reason }]
                if dependency == "pricing"
                // 150 ms before the 60 ms reserve would have reached the
                // floor: the reserve decided it, and the note says so.
                && reason.starts_with("skipped: ")
                && reason.ends_with("ms left after the 60ms reserve < floor 100ms")),
            "{entries:?}"
        );
    })
    .await;
}

/// §2 rules 1 and 2: a dependency slower than the budget is cut off when
/// the budget (less the reserve) runs out, not when it answers; the error
/// is the client's `CallError` (the budget ran out: the contract's 504),
/// and the ledger says `timeout`.
#[tokio::test]
async fn rule1_a_slow_dependency_is_cut_off_at_the_budget() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200).after(ms(5000))]).await;
        let pricing = client(BudgetMiddleware::new("pricing"));
        let cx = context(ms(350), ms(50));
        let start = Instant::now();
        let err = cx
            .clone()
            .scope(pricing.get(partner.url("/slow")).send())
            .await
            .unwrap_err();
        let took = start.elapsed();
        let call = call_error(&err);
        assert_eq!(call.kind(), CallErrorKind::Timeout, "{call}");
        assert!(call.is_budget_exhausted(), "{call}");
        assert_eq!(call.problem().status, 504);
        assert!(
            took >= ms(290) && took < ms(1200),
            "cut off after {took:?}, budget less reserve 300 ms"
        );
        assert_eq!(partner.hits(), 1);
        assert_eq!(
            attempts(cx.ledger()),
            [("pricing".to_owned(), "timeout".to_owned())]
        );
    })
    .await;
}

/// §2 rule 1: the timeout covers the body: a dependency that answers at
/// once and then drips its body past the budget is cut off at the budget.
#[tokio::test]
async fn rule1_the_budget_bounds_the_body_too() {
    bounded_by(10, async {
        // 100 bytes, one every 30 ms: 3 s of body.
        let raw = Raw::start(Behaviour::Drip { pause: ms(30) }).await;
        let pricing = client(BudgetMiddleware::new("pricing"));
        let cx = context(ms(400), ms(0));
        let start = Instant::now();
        let body = cx
            .clone()
            .scope(async {
                let res = pricing.get(raw.url()).send().await.unwrap();
                assert_eq!(res.status(), 200);
                res.bytes().await
            })
            .await;
        let took = start.elapsed();
        let err = body.unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        assert!(took >= ms(390) && took < ms(1500), "cut off after {took:?}");
    })
    .await;
}

/// §2 rule 1: a timeout the request already had, shorter than the
/// budget, is kept, and the dependency is told that shorter time.
#[tokio::test]
async fn rule1_the_request_s_own_shorter_timeout_is_kept() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200).after(ms(5000))]).await;
        let pricing = client(BudgetMiddleware::new("pricing"));
        let cx = context(ms(5000), ms(0));
        let start = Instant::now();
        let err = cx
            .scope(pricing.get(partner.url("/slow")).timeout(ms(250)).send())
            .await
            .unwrap_err();
        let took = start.elapsed();
        assert_eq!(call_error(&err).kind(), CallErrorKind::Timeout, "{err}");
        assert!(took >= ms(240) && took < ms(1200), "cut off after {took:?}");
        assert_eq!(partner.seen()[0].budget_ms, Some(250));
    })
    .await;
}

/// The middleware's attempt timeout (a client-wide timeout, which a
/// request's own timeout would replace in reqwest) bounds the request and
/// is what the dependency is told.
#[tokio::test]
async fn rule1_the_attempt_timeout_caps_the_budget_sent() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let pricing = client(BudgetMiddleware::new("pricing").attempt_timeout(ms(700)));
        let cx = context(ms(5000), ms(0));
        cx.scope(pricing.get(partner.url("/quote")).send())
            .await
            .unwrap();
        assert_eq!(partner.seen()[0].budget_ms, Some(700));
    })
    .await;
}

/// Outside any budget scope the request goes as it came: no budget or
/// criticality header, no timeout (a 400 ms answer is waited for).
#[tokio::test]
async fn outside_a_budget_scope_the_request_passes_untouched() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(200).after(ms(400))]).await;
        let pricing = client(BudgetMiddleware::new("pricing").floor(ms(100)));
        assert!(context::current().is_none());
        let res = pricing.get(partner.url("/quote")).send().await.unwrap();
        assert_eq!(res.status(), 200);
        let seen = partner.seen();
        assert_eq!(seen[0].budget_ms, None);
        assert_eq!(seen[0].criticality, None);
    })
    .await;
}

/// Retries in an outer retry middleware: each attempt passes through the
/// budget middleware again, so a retry is told what is left at that
/// moment and is recorded as an attempt of its own.
#[tokio::test]
async fn each_retry_of_an_outer_retry_middleware_is_told_what_is_left() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(503), Answer::status(200)]).await;
        let pricing = ClientBuilder::new(
            reqwest::Client::builder()
                .tls_backend_rustls()
                .build()
                .unwrap(),
        )
        .with(retry_once_after_200ms)
        .with(BudgetMiddleware::new("pricing"))
        .build();
        let cx = context(ms(2000), ms(0));
        let res = cx
            .clone()
            .scope(pricing.get(partner.url("/quote")).send())
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let told: Vec<u64> = partner.seen().iter().filter_map(|s| s.budget_ms).collect();
        assert_eq!(told.len(), 2);
        assert!(
            told[1] + 200 <= told[0],
            "the retry was told {told:?}: not less the 200 ms wait"
        );
        assert_eq!(
            attempts(cx.ledger()),
            [
                ("pricing".to_owned(), "503".to_owned()),
                ("pricing".to_owned(), "200".to_owned())
            ]
        );
    })
    .await;
}

/// reqwest-retry's `RetryTransientMiddleware` outside, as its docs place
/// it: every retry passes through the budget middleware again (told what
/// is left, recorded), and `BudgetMiddleware::new` makes one attempt per
/// pass, so the attempts are the retry middleware's, not multiplied.
#[tokio::test]
async fn reqwest_retry_outside_retries_each_attempt_through_the_budget() {
    bounded_by(10, async {
        let partner = Partner::start(vec![
            Answer::status(503),
            Answer::status(503),
            Answer::status(200),
        ])
        .await;
        let pricing = with_reqwest_retry(BudgetMiddleware::new("pricing"), 5);
        let cx = context(ms(2000), ms(0));
        let res = cx
            .clone()
            .scope(pricing.get(partner.url("/quote")).send())
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let told: Vec<u64> = partner.seen().iter().filter_map(|s| s.budget_ms).collect();
        assert_eq!(told.len(), 3, "{told:?}");
        assert!(told.windows(2).all(|w| w[1] < w[0]), "{told:?}");
        let outcomes: Vec<String> = attempts(cx.ledger()).into_iter().map(|(_, o)| o).collect();
        assert_eq!(outcomes, ["503", "503", "200"]);
    })
    .await;
}

/// A retry that would go with less than the floor left is refused by the
/// budget middleware with a `CallError`, which reqwest-retry reads as
/// fatal: it stops there instead of sleeping and sending again, and the
/// caller's `?` (through reqwest-retry's own wrapper) gets the contract's
/// 504.
#[tokio::test]
async fn reqwest_retry_stops_when_the_budget_middleware_refuses_a_retry() {
    bounded_by(10, async {
        let partner = Partner::start(vec![Answer::status(503).after(ms(150))]).await;
        let pricing = with_reqwest_retry(BudgetMiddleware::new("pricing").floor(ms(150)), 5);
        let cx = context(ms(300), ms(0));
        let err = cx
            .clone()
            .scope(pricing.get(partner.url("/quote")).send())
            .await
            .unwrap_err();
        let call = CallError::from(err);
        assert_eq!(call.kind(), CallErrorKind::BelowFloor, "{call}");
        assert_eq!(call.problem().status, 504);
        assert_eq!(partner.hits(), 1, "a retry below the floor was sent");
    })
    .await;
}

/// `BudgetMiddleware` inside reqwest-retry's retry middleware, retrying
/// transient failures up to `retries` times after 10 to 20 ms.
fn with_reqwest_retry(budget: BudgetMiddleware, retries: u32) -> ClientWithMiddleware {
    use reqwest_retry::{RetryTransientMiddleware, policies::ExponentialBackoff};
    let policy = ExponentialBackoff::builder()
        .retry_bounds(ms(10), ms(20))
        .build_with_max_retries(retries);
    ClientBuilder::new(
        reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap(),
    )
    .with(RetryTransientMiddleware::new_with_policy(policy))
    .with(budget)
    .build()
}

/// A stand-in for a retry middleware: a `503` is sent again once, 200 ms
/// later.
fn retry_once_after_200ms<'a>(
    req: Request,
    extensions: &'a mut Extensions,
    next: Next<'a>,
) -> Pin<Box<dyn Future<Output = reqwest_middleware::Result<Response>> + Send + 'a>> {
    Box::pin(async move {
        let again = req.try_clone().expect("a body that can be sent again");
        let res = next.clone().run(req, extensions).await?;
        if res.status() != 503 {
            return Ok(res);
        }
        tokio::time::sleep(ms(200)).await;
        next.run(again, extensions).await
    })
}

/// Serves the `traceparent` each request carries as the body (`-` when it
/// has none).
async fn trace_echo() -> String {
    let app = Router::new().fallback(|headers: HeaderMap| async move {
        headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-")
            .to_owned()
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/")
}

/// As a `BudgetClient` call does: the caller's `traceparent` is passed on
/// when the request has none, and a request's own is kept.
#[tokio::test]
async fn the_caller_s_trace_context_is_passed_on_unless_the_request_has_one() {
    bounded_by(10, async {
        let url = trace_echo().await;
        let pricing = client(BudgetMiddleware::new("pricing"));
        let mut inbound = HeaderMap::new();
        inbound.insert("traceparent", TRACEPARENT.parse().unwrap());
        let cx = context(ms(2000), ms(0)).with_inbound_trace(&inbound);
        let (passed, own) = cx
            .scope(async {
                let passed = pricing.get(&url).send().await.unwrap();
                let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
                let kept = pricing
                    .get(&url)
                    .header("traceparent", own)
                    .send()
                    .await
                    .unwrap();
                (
                    passed.text().await.unwrap(),
                    (own, kept.text().await.unwrap()),
                )
            })
            .await;
        assert_eq!(passed, TRACEPARENT);
        assert_eq!(own.0, own.1);
    })
    .await;
}
