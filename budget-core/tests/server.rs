//! The server side against docs/contract.md §§1, 3 and 4: a real axum
//! `Router` driven through `oneshot` (paused clock) and through a real
//! server on 127.0.0.1:0 with a real reqwest client.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::ledger::{Entry, Ledger, parse_server_timing};
use budget_core::problem::Problem;
use budget_core::server::{BudgetEvent, BudgetLayer, ServerConfig};
use budget_core::{Budget, context};
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::time::Instant;
use tower::ServiceExt;

fn config() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.default_budget = Duration::from_millis(2000);
    config.max_budget = Duration::from_millis(10_000);
    config.floor = Duration::from_millis(50);
    config.reserve = Duration::from_millis(5);
    config
}

/// A handler answering with the budget it was given, in ms.
async fn echo_budget(budget: Budget) -> String {
    budget.original().as_millis().to_string()
}

fn app(layer: BudgetLayer<impl budget_core::server::OnBudgetEvent>) -> Router {
    Router::new().route("/", get(echo_budget)).layer(layer)
}

fn get_with(headers: &[(&str, &[u8])]) -> Request<Body> {
    let mut req = Request::builder().uri("/");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.body(Body::empty()).unwrap()
}

async fn text(res: Response<Body>) -> String {
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

async fn budget_seen(headers: &[(&str, &[u8])]) -> (StatusCode, String) {
    let res = app(config().layer().unwrap())
        .oneshot(get_with(headers))
        .await
        .unwrap();
    (res.status(), text(res).await)
}

#[tokio::test(start_paused = true)]
async fn contract_1_every_inbound_format_is_read() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("request-budget-ms", b"1500", "1500"),
        ("grpc-timeout", b"750m", "750"),
        ("grpc-timeout", b"2S", "2000"),
        ("x-envoy-expected-rq-timeout-ms", b"900", "900"),
        ("connect-timeout-ms", b"1200", "1200"),
        ("request-timeout-ms", b"800", "800"),
        ("x-request-timeout-ms", b"600", "600"),
    ];
    for (name, value, want) in cases {
        let (status, body) = budget_seen(&[(name, value)]).await;
        assert_eq!(status, 200, "{name}");
        assert_eq!(body, *want, "{name}: {}", String::from_utf8_lossy(value));
    }
}

#[tokio::test(start_paused = true)]
async fn contract_1_the_smallest_of_two_formats_wins() {
    let (_, body) = budget_seen(&[("request-budget-ms", b"1500"), ("grpc-timeout", b"300m")]).await;
    assert_eq!(body, "300");
    let (_, body) = budget_seen(&[("request-budget-ms", b"200"), ("grpc-timeout", b"3S")]).await;
    assert_eq!(body, "200");
}

#[tokio::test(start_paused = true)]
async fn contract_1_no_header_gets_the_default() {
    assert_eq!(budget_seen(&[]).await, (StatusCode::OK, "2000".into()));
}

#[tokio::test(start_paused = true)]
async fn contract_1_a_huge_budget_is_clamped_to_the_maximum() {
    let (status, body) = budget_seen(&[("request-budget-ms", b"9999999999")]).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "10000"));
    let (_, body) = budget_seen(&[("grpc-timeout", b"99999999H")]).await;
    assert_eq!(body, "10000");
}

#[tokio::test(start_paused = true)]
async fn contract_1_each_malformed_form_is_a_400_naming_the_header() {
    let cases: &[(&str, &[u8])] = &[
        ("request-budget-ms", b"-5"),
        ("request-budget-ms", b"+5"),
        ("request-budget-ms", b"1 0"),
        ("request-budget-ms", b"1.5"),
        ("request-budget-ms", b""),
        ("request-budget-ms", b"12345678901"),
        ("request-budget-ms", b"12\xc3\xa9"),
        ("grpc-timeout", b"5x"),
        ("grpc-timeout", b"123456789m"),
        ("grpc-timeout", b"100"),
        ("x-envoy-expected-rq-timeout-ms", b"abc"),
        ("connect-timeout-ms", b"-1"),
        ("request-timeout-ms", b"1e3"),
        ("x-request-timeout-ms", b" "),
    ];
    for (name, value) in cases {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let router = Router::new()
            .route(
                "/",
                get(move || async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    "ran"
                }),
            )
            .layer(config().layer().unwrap());
        let res = router.oneshot(get_with(&[(name, value)])).await.unwrap();
        let shown = String::from_utf8_lossy(value);
        assert_eq!(res.status(), 400, "{name}: {shown:?}");
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        assert!(res.headers().contains_key("server-timing"));
        let problem: Problem = serde_json::from_str(&text(res).await).unwrap();
        assert_eq!(problem.status, 400);
        assert_eq!(problem.header.as_deref(), Some(*name), "{shown:?}");
        assert!(problem.detail.contains(name), "{}", problem.detail);
        assert_eq!(calls.load(Ordering::SeqCst), 0, "handler ran for {shown:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn contract_1_use_default_policy_ignores_the_bad_header() {
    let mut config = config();
    config.on_malformed = budget_core::header::OnMalformed::UseDefault;
    let res = app(config.layer().unwrap())
        .oneshot(get_with(&[("request-budget-ms", b"-5")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(text(res).await, "2000");
}

/// The malformed header ignored is a ledger note, not a silent default.
#[tokio::test(start_paused = true)]
async fn contract_1_a_malformed_header_ignored_is_noted_in_the_ledger() {
    let mut config = config();
    config.on_malformed = budget_core::header::OnMalformed::UseDefault;
    let res = app(config.layer().unwrap())
        .oneshot(get_with(&[
            ("request-budget-ms", b"1500"),
            ("x-envoy-expected-rq-timeout-ms", b"30s"),
        ]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
    assert_eq!(
        timing,
        "budget;dur=1500;desc=\"ingress\", budget;desc=\"ignored: malformed \
         `x-envoy-expected-rq-timeout-ms` header \\\"30s\\\": non-digit character 's'\""
    );
    assert_eq!(text(res).await, "1500");
}

/// Through Envoy: its route timeout (`x-envoy-expected-rq-timeout-ms`)
/// shorter than the caller's budget wins, and the ledger says it cut the
/// budget and what the caller had sent; no note when Envoy's is the
/// larger, or the only one.
#[tokio::test(start_paused = true)]
async fn contract_1_envoy_s_route_timeout_that_cuts_the_budget_is_a_ledger_finding() {
    let timing = |headers: &[(&str, &[u8])]| {
        let req = get_with(headers);
        async move {
            let res = app(config().layer().unwrap()).oneshot(req).await.unwrap();
            let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
            (timing, text(res).await)
        }
    };
    let cut = timing(&[
        ("request-budget-ms", b"1983"),
        ("x-envoy-expected-rq-timeout-ms", b"300"),
    ])
    .await;
    assert_eq!(
        cut,
        (
            "budget;dur=300;desc=\"ingress\", budget;desc=\"cut to 300ms by \
             x-envoy-expected-rq-timeout-ms: request-budget-ms said 1983ms\""
                .to_owned(),
            "300".to_owned()
        )
    );
    let grpc = timing(&[
        ("grpc-timeout", b"2S"),
        ("x-envoy-expected-rq-timeout-ms", b"300"),
    ])
    .await;
    assert!(grpc.0.ends_with("grpc-timeout said 2000ms\""), "{}", grpc.0);
    for quiet in [
        &[
            ("request-budget-ms", &b"250"[..]),
            ("x-envoy-expected-rq-timeout-ms", b"300"),
        ][..],
        &[("x-envoy-expected-rq-timeout-ms", &b"300"[..])][..],
    ] {
        let (timing, _) = timing(quiet).await;
        assert!(!timing.contains("cut to"), "{timing}");
    }
}

#[tokio::test(start_paused = true)]
async fn contract_3_below_the_floor_on_arrival_is_shed_with_504_and_the_handler_never_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let shed = Arc::new(AtomicUsize::new(0));
    let (c, s) = (calls.clone(), shed.clone());
    let layer = config()
        .layer()
        .unwrap()
        .on_event(move |e: &BudgetEvent<'_>| {
            if matches!(e, BudgetEvent::Shed { .. }) {
                s.fetch_add(1, Ordering::SeqCst);
            }
        });
    let router = Router::new()
        .route(
            "/",
            get(move || async move {
                c.fetch_add(1, Ordering::SeqCst);
                "ran"
            }),
        )
        .layer(layer);
    let res = router
        .oneshot(get_with(&[("request-budget-ms", b"49")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
    let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
    assert!(
        timing.starts_with("budget;dur=49;desc=\"ingress\""),
        "{timing}"
    );
    let problem: Problem = serde_json::from_str(&text(res).await).unwrap();
    assert_eq!(
        (problem.remaining_ms, problem.floor_ms),
        (Some(49), Some(50))
    );
    assert_eq!(
        problem.detail,
        "49ms < floor 50ms: the request was not started"
    );
    assert!(!problem.retryable);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(shed.load(Ordering::SeqCst), 1);
}

/// A budget of zero, no floor: the detail says so with its number.
#[tokio::test(start_paused = true)]
async fn contract_3_a_zero_budget_is_shed_and_the_detail_names_it() {
    let mut config = config();
    config.floor = Duration::ZERO;
    let layer = config.layer().unwrap();
    let res = app(layer)
        .oneshot(get_with(&[("request-budget-ms", b"0")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
    let problem: Problem = serde_json::from_str(&text(res).await).unwrap();
    assert_eq!(
        problem.detail,
        "no budget left: the request came with 0ms and was not started"
    );
    assert_eq!((problem.remaining_ms, problem.floor_ms), (Some(0), Some(0)));
}

/// Sets a flag when dropped: proves the handler's future was dropped.
struct DropGuard(Arc<AtomicUsize>);
impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn slow_router(work: Duration, dropped: Arc<AtomicUsize>, finished: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/",
        get(move || async move {
            let _guard = DropGuard(dropped);
            tokio::time::sleep(work).await;
            finished.fetch_add(1, Ordering::SeqCst);
            "done"
        }),
    )
}

#[tokio::test(start_paused = true)]
async fn contract_3_a_handler_slower_than_the_budget_is_dropped_at_the_deadline_with_504() {
    let (dropped, finished, expired) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let e = expired.clone();
    let layer = config()
        .layer()
        .unwrap()
        .on_event(move |ev: &BudgetEvent<'_>| {
            if matches!(ev, BudgetEvent::Expired { .. }) {
                e.fetch_add(1, Ordering::SeqCst);
            }
        });
    let router =
        slow_router(Duration::from_secs(10), dropped.clone(), finished.clone()).layer(layer);
    let start = Instant::now();
    let res = router
        .oneshot(get_with(&[("request-budget-ms", b"300")]))
        .await
        .unwrap();
    // The paused clock makes this exact: the answer comes at the deadline.
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(res.status(), 504);
    assert!(res.headers().contains_key("server-timing"));
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "handler future dropped");
    assert_eq!(finished.load(Ordering::SeqCst), 0, "handler never finished");
    assert_eq!(expired.load(Ordering::SeqCst), 1);
    let problem: Problem = serde_json::from_str(&text(res).await).unwrap();
    assert_eq!(problem.type_uri, "urn:budget:problem:budget-expired");
}

#[tokio::test(start_paused = true)]
async fn contract_3_on_a_tie_the_deadline_wins() {
    let (dropped, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let router = slow_router(Duration::from_millis(300), dropped, finished.clone())
        .layer(config().layer().unwrap());
    let res = router
        .oneshot(get_with(&[("request-budget-ms", b"300")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
}

#[tokio::test(start_paused = true)]
async fn a_handler_just_inside_the_budget_answers() {
    let (dropped, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let router = slow_router(Duration::from_millis(299), dropped, finished.clone())
        .layer(config().layer().unwrap());
    let res = router
        .oneshot(get_with(&[("request-budget-ms", b"300")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(finished.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn extractors_read_budget_option_budget_and_the_ledger() {
    async fn with_ledger(budget: Option<Budget>, ledger: Ledger) -> String {
        ledger.record(Entry::local("db", Duration::from_millis(7), None));
        // The context's scope carries the same budget the extractor gave.
        let scoped = context::current_budget().map(|b| b.deadline());
        assert_eq!(scoped, budget.map(|b| b.deadline()));
        format!("{}", budget.is_some())
    }
    async fn optional(budget: Option<Budget>) -> String {
        format!("{}", budget.is_some())
    }
    let router = Router::new()
        .route("/", get(with_ledger))
        .layer(config().layer().unwrap())
        .route("/bare", get(optional))
        .route("/strict", get(echo_budget));

    let res = router.clone().oneshot(get_with(&[])).await.unwrap();
    assert_eq!(res.status(), 200);
    let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
    assert_eq!(text(res).await, "true");
    let metrics = parse_server_timing(&timing);
    assert_eq!(metrics[0].name, "budget");
    assert_eq!(metrics[1].name, "db");
    assert_eq!(metrics[1].dur, Some(7.0));

    let bare = Request::builder().uri("/bare").body(Body::empty()).unwrap();
    let res = router.clone().oneshot(bare).await.unwrap();
    assert_eq!(text(res).await, "false");

    let strict = Request::builder()
        .uri("/strict")
        .body(Body::empty())
        .unwrap();
    let res = router.oneshot(strict).await.unwrap();
    assert_eq!(res.status(), 500);
    assert!(text(res).await.contains("BudgetLayer"));
}

#[tokio::test(start_paused = true)]
async fn the_inner_service_error_type_is_kept_and_errors_pass_through() {
    use tower::{Layer, service_fn};
    let svc = config()
        .layer()
        .unwrap()
        .layer(service_fn(|_req: Request<Body>| async {
            Err::<Response<Body>, _>("boom")
        }));
    let err = svc.oneshot(get_with(&[])).await.unwrap_err();
    assert_eq!(err, "boom");
}

#[tokio::test(start_paused = true)]
async fn contract_4_server_timing_is_on_200_400_and_504() {
    for (headers, want) in [
        (&[][..], 200u16),
        (&[("grpc-timeout", &b"1Y"[..])][..], 400),
        (&[("request-budget-ms", &b"1"[..])][..], 504),
    ] {
        let res = app(config().layer().unwrap())
            .oneshot(get_with(headers))
            .await
            .unwrap();
        assert_eq!(res.status(), want);
        assert!(
            res.headers().contains_key("server-timing"),
            "no Server-Timing on {want}"
        );
    }
}

/// A real server on a loopback port, a real reqwest client, real time.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}/")
}

#[tokio::test]
async fn real_server_reads_headers_and_answers_504_within_the_budget() {
    let (dropped, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let slow = slow_router(Duration::from_secs(30), dropped.clone(), finished.clone())
        .layer(config().layer().unwrap());
    let fast = app(config().layer().unwrap());
    let (slow_url, fast_url) = (serve(slow).await, serve(fast).await);
    let client = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap();

    let res = client
        .get(&fast_url)
        .header("grpc-timeout", "1500m")
        .header("request-budget-ms", "1700")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().contains_key("server-timing"));
    assert_eq!(res.text().await.unwrap(), "1500");

    let start = Instant::now();
    let res = client
        .get(&slow_url)
        .header("request-budget-ms", "300")
        .send()
        .await
        .unwrap();
    let took = start.elapsed();
    assert_eq!(res.status(), 504);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    // Generous sanity bounds: never before the deadline, well before the 30 s of work.
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(finished.load(Ordering::SeqCst), 0);

    let res = client
        .get(&fast_url)
        .header("request-budget-ms", "1.5")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let problem: Problem = res.json().await.unwrap();
    assert_eq!(problem.header.as_deref(), Some("request-budget-ms"));
}

/// Work queued behind a concurrency limit inside the
/// layer (tower's `GlobalConcurrencyLimitLayer`), whose budget runs out while it
/// waits, is dropped before it starts: a `504` at its deadline, and the
/// handler never runs for it, not even once the permit comes free.
#[tokio::test(start_paused = true)]
async fn queued_work_whose_budget_runs_out_is_dropped_before_it_starts() {
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let router = Router::new()
        .route(
            "/",
            get(move || async move {
                s.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                "done"
            }),
        )
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(1))
        .layer(config().layer().unwrap());
    let first = tokio::spawn(
        router
            .clone()
            .oneshot(get_with(&[("request-budget-ms", b"5000")])),
    );
    while started.load(Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    let queued_at = Instant::now();
    let res = router
        .clone()
        .oneshot(get_with(&[("request-budget-ms", b"300")]))
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
    assert!(
        queued_at.elapsed() <= Duration::from_millis(300),
        "answered at its own deadline, not when the permit came free: {:?}",
        queued_at.elapsed()
    );
    let problem: Problem = serde_json::from_str(&text(res).await).unwrap();
    assert_eq!(problem.status, 504);
    assert_eq!(started.load(Ordering::SeqCst), 1, "it never started");

    assert_eq!(first.await.unwrap().unwrap().status(), 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        1,
        "nor after the permit came free"
    );
}
