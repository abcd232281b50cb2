//! The server's `max_in_flight` (docs/contract.md §2 rule 11 and §3): at
//! the limit a request waits for a slot while what its budget has left
//! still covers the ingress floor, the more critical first, and is refused
//! when it no longer does, its handler never run. Through `oneshot` on a
//! paused clock, and one burst through a real server and real clients.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::ledger::{Metric, parse_server_timing};
use budget_core::problem::Problem;
use budget_core::server::{BudgetEvent, BudgetLayer, OnBudgetEvent, ServerConfig};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::BodyExt;
use tokio::time::Instant;
use tower::ServiceExt;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A floor of 50 ms, budgets up to 10 s, at most `limit` requests at once.
fn limited(limit: usize) -> ServerConfig {
    let mut config = ServerConfig::default();
    config.default_budget = ms(2000);
    config.max_budget = ms(10_000);
    config.floor = ms(50);
    config.reserve = ms(5);
    config.max_in_flight = Some(limit.into());
    config
}

/// When each handler started, and with which `request-criticality`.
type Starts = Arc<Mutex<Vec<(String, Instant)>>>;

/// A router behind `layer` whose handler notes when it starts and works
/// `work` (or the request's `x-work-ms`) before answering.
fn working<E: OnBudgetEvent>(layer: BudgetLayer<E>, work: Duration) -> (Router, Starts) {
    let starts = Starts::default();
    let s = starts.clone();
    let router = Router::new()
        .route(
            "/",
            get(move |headers: HeaderMap| async move {
                let criticality = headers
                    .get("request-criticality")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("default")
                    .to_owned();
                s.lock().unwrap().push((criticality, Instant::now()));
                let work = headers
                    .get("x-work-ms")
                    .and_then(|v| v.to_str().ok()?.parse().ok())
                    .map_or(work, ms);
                tokio::time::sleep(work).await;
                "done"
            }),
        )
        .layer(layer);
    (router, starts)
}

fn get_with(headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = Request::builder().uri("/");
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.body(Body::empty()).unwrap()
}

/// `n` requests sent at once with `budget_ms` and the criticality
/// `criticality(i)`; each answer with the instant it came.
async fn burst(
    router: &Router,
    n: usize,
    budget_ms: &str,
    criticality: impl Fn(usize) -> &'static str,
) -> Vec<(Response<Body>, Instant)> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let req = get_with(&[
                ("request-budget-ms", budget_ms),
                ("request-criticality", criticality(i)),
            ]);
            let router = router.clone();
            tokio::spawn(async move {
                let res = router.oneshot(req).await.unwrap();
                (res, Instant::now())
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// The request's `Server-Timing` entries.
fn ledger(res: &Response<Body>) -> Vec<Metric> {
    parse_server_timing(res.headers()["server-timing"].to_str().unwrap())
}

/// The `budget-queue` entry of a request that waited for its slot.
fn queue_entry(res: &Response<Body>) -> Option<Metric> {
    ledger(res).into_iter().find(|m| m.name == "budget-queue")
}

async fn problem(res: Response<Body>) -> Problem {
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

fn rank(criticality: &str) -> u8 {
    match criticality {
        "critical" => 2,
        "default" => 1,
        _ => 0,
    }
}

/// Wait when the wait fits: 300 requests at once with 10 s each at a server
/// answering 8 at a time in 50 ms (1.9 s for all of them) are all served;
/// none is refused, and once the 8 free slots are taken the slots go to the
/// critical first, then the default, then the sheddable, each class in
/// arrival order. Each queued request's ledger says how long it waited.
#[tokio::test(start_paused = true)]
async fn a_burst_that_the_budgets_cover_is_served_whole_most_critical_first() {
    let (router, starts) = working(limited(8).layer().unwrap(), ms(50));
    let kinds = ["sheddable", "default", "critical"];
    let start = Instant::now();
    let answers = burst(&router, 300, "10000", |i| kinds[i % 3]).await;

    let mut queued = 0;
    for (res, _) in &answers {
        assert_eq!(res.status(), StatusCode::OK);
        if let Some(wait) = queue_entry(res) {
            let waited = wait.dur.expect("a duration");
            assert!(waited > 0.0 && waited % 50.0 == 0.0, "{waited}");
            assert_eq!(wait.desc, None);
            queued += 1;
        }
    }
    assert_eq!(queued, 300 - 8, "all but the first 8 waited");
    let took = start.elapsed();
    assert!(
        took >= ms(1900) && took < ms(1910),
        "38 rounds of 50 ms: {took:?}"
    );

    let starts = starts.lock().unwrap();
    assert_eq!(starts.len(), 300);
    let ranks: Vec<u8> = starts[8..].iter().map(|(c, _)| rank(c)).collect();
    let mut sorted = ranks.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(ranks, sorted, "served most critical first");
    // The critical ones did not wait for the sheddable: the last critical
    // request started within the first 14 rounds (100 critical, 8 slots).
    let last_critical = starts.iter().rfind(|(c, _)| c == "critical").unwrap().1;
    assert!(
        last_critical - start <= ms(13 * 50),
        "{:?}",
        last_critical - start
    );
}

/// Refuse when it does not fit: a waiter gets no slot once what its budget
/// has left is down to the floor (250 ms budgets, floor 50 ms: at 200 ms),
/// and is refused as soon as the line predicts it will not get one. At a
/// limit of 4 with 100 ms of work, 8 of 20 start (at 0 and 100 ms). At
/// 100 ms the line knows a slot is held 100 ms: those still waiting that
/// would need a second round of 4 (another 100 ms, with 100 ms to their
/// give-up instant) are refused then for the prediction; the rest wait,
/// and any not served by 200 ms is refused then exactly, when only the
/// floor is left. A predicted refusal is a request over the limit, `503`
/// `overloaded` with `Retry-After`; one whose budget came down to the
/// floor is `504` `below-floor` (not retryable, what was left and the
/// floor in the problem); both have their wait in the ledger, and no
/// refused handler ever runs, not even once slots free.
#[tokio::test(start_paused = true)]
async fn a_waiter_is_refused_when_only_the_floor_is_left_and_never_runs() {
    let shed = Arc::new(AtomicUsize::new(0));
    let counter = shed.clone();
    let layer = limited(4)
        .layer()
        .unwrap()
        .on_event(move |e: &BudgetEvent<'_>| {
            if matches!(e, BudgetEvent::Shed { .. }) {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
    let (router, starts) = working(layer, ms(100));
    let start = Instant::now();
    let answers = burst(&router, 20, "250", |_| "default").await;

    let (mut served, mut predicted, mut expired) = (0, 0, 0);
    for (res, at) in answers {
        if res.status() == StatusCode::OK {
            served += 1;
            continue;
        }
        let wait = queue_entry(&res).expect("the wait in the ledger");
        let desc = wait.desc.clone();
        if at - start == ms(100) {
            // Over the limit and predicted not to fit: `503` with
            // `Retry-After`, as a request over the limit is answered.
            predicted += 1;
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(res.headers().contains_key("retry-after"));
            assert_eq!(wait.dur, Some(100.0));
            assert_eq!(desc.as_deref(), Some("predicted wait"));
            let problem = problem(res).await;
            assert_eq!(problem.type_uri, "urn:budget:problem:overloaded");
            assert!(problem.retryable);
            let detail = &problem.detail;
            assert!(
                detail.starts_with("no in-flight slot (limit 4): expected wait ")
                    && detail.contains("+ floor 50ms > 150ms left (")
                    && detail.ends_with("queued, 40/s): overloaded"),
                "{detail}"
            );
        } else {
            expired += 1;
            assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
            assert_eq!(at - start, ms(200), "refused when only the floor was left");
            assert_eq!(wait.dur, Some(200.0));
            assert_eq!(desc.as_deref(), Some("expired"));
            let problem = problem(res).await;
            assert_eq!(problem.type_uri, "urn:budget:problem:below-floor");
            assert!(!problem.retryable);
            assert_eq!(problem.floor_ms, Some(50));
            assert_eq!(problem.remaining_ms, Some(50));
            assert_eq!(
                problem.detail,
                "waited 200ms for an in-flight slot (limit 4) until only the floor \
                 of 50ms was left: the request was not started"
            );
        }
    }
    assert_eq!((served, predicted + expired), (8, 12));
    assert!(predicted >= 4, "{predicted} refused for the prediction");
    assert_eq!(shed.load(Ordering::SeqCst), expired);
    tokio::time::sleep(ms(1000)).await;
    assert_eq!(starts.lock().unwrap().len(), 8, "no refused handler ran");
}

/// A slot that comes before the give-up instant, however close to it, is
/// taken: a 151 ms budget with a 50 ms floor gives up at 101 ms, and the
/// slot freed at 100 ms is its.
#[tokio::test(start_paused = true)]
async fn a_slot_that_comes_just_in_time_is_taken() {
    let (router, starts) = working(limited(1).layer().unwrap(), ms(100));
    let first = tokio::spawn(
        router
            .clone()
            .oneshot(get_with(&[("request-budget-ms", "500")])),
    );
    tokio::task::yield_now().await;
    let start = Instant::now();
    let res = router
        .clone()
        .oneshot(get_with(&[
            ("request-budget-ms", "151"),
            ("x-work-ms", "10"),
        ]))
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        StatusCode::OK,
        "the slot came at 100 ms, 1 ms before its give-up"
    );
    assert_eq!(start.elapsed(), ms(110));
    let entries = ledger(&res);
    assert_eq!(entries[0].dur, Some(151.0));
    assert_eq!(entries[1].name, "budget-queue");
    assert_eq!(entries[1].dur, Some(100.0));
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(starts.lock().unwrap().len(), 2);
}

/// A waiter whose caller goes away (its response future dropped) leaves
/// the line at once: the slot freed next goes to the waiter behind it, and
/// the handler of the one that left never runs.
#[tokio::test(start_paused = true)]
async fn a_waiter_dropped_by_its_caller_leaves_the_line() {
    let (router, starts) = working(limited(1).layer().unwrap(), ms(100));
    let start = Instant::now();
    let holder = tokio::spawn(router.clone().oneshot(get_with(&[("x-work-ms", "100")])));
    tokio::task::yield_now().await;
    let gone = tokio::spawn(
        router
            .clone()
            .oneshot(get_with(&[("request-criticality", "critical")])),
    );
    tokio::task::yield_now().await;
    let next = tokio::spawn(
        router
            .clone()
            .oneshot(get_with(&[("request-criticality", "sheddable")])),
    );
    tokio::task::yield_now().await;
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    let res = next.await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        queue_entry(&res).unwrap().dur,
        Some(100.0),
        "the slot freed at 100 ms"
    );
    assert_eq!(start.elapsed(), ms(200));
    assert_eq!(holder.await.unwrap().unwrap().status(), StatusCode::OK);
    let starts = starts.lock().unwrap();
    let who: Vec<&str> = starts.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(
        who,
        ["default", "sheddable"],
        "the critical one left before its turn"
    );
}

/// Overload is still `503`: a line fed faster than it drains and deeper
/// than its requests can afford stands, and a newcomer predicted to wait
/// more than a quarter of what it can wait is refused at once with `503`
/// `overloaded` and `Retry-After`, as at the client's permit queues; one
/// in line overtaken for longer than that is refused then, the same way. One
/// slot, 100 ms of work, a request every 10 ms with 1 s budgets for 1.5 s:
/// ten times what the slot serves.
#[tokio::test(start_paused = true)]
async fn a_line_fed_faster_than_it_drains_refuses_newcomers_at_once_as_overload() {
    let mut config = limited(1);
    config.overload_retry_after = ms(1500);
    let (router, _starts) = working(config.layer().unwrap(), ms(100));
    let mut tasks = Vec::new();
    for _ in 0..150 {
        let router = router.clone();
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let res = router
                .oneshot(get_with(&[("request-budget-ms", "1000")]))
                .await
                .unwrap();
            (res, sent.elapsed())
        }));
        tokio::time::sleep(ms(10)).await;
    }
    let (mut ok, mut overloaded, mut standing, mut overtaken) = (0, 0, 0, 0);
    for task in tasks {
        let (res, took) = task.await.unwrap();
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                overloaded += 1;
                assert_eq!(res.headers()["retry-after"], "2");
                // Refused at arrival by the standing line, or (a request
                // over the limit too) for a predicted wait that does not
                // fit; or, served newest first while the line stands,
                // overtaken for more than a quarter of what it could wait.
                let desc = queue_entry(&res).unwrap().desc;
                let problem = problem(res).await;
                assert_eq!(problem.type_uri, "urn:budget:problem:overloaded");
                assert!(problem.retryable);
                assert_eq!(problem.retry_after_ms, Some(1500));
                let expected = match desc.as_deref() {
                    Some("standing queue") if took.is_zero() => {
                        standing += 1;
                        "no in-flight slot (limit 1): standing queue: expected wait "
                    }
                    Some("standing queue") => {
                        overtaken += 1;
                        // A quarter of the 960 ms it could wait (1 s less the floor).
                        assert!(took >= ms(240), "overtaken after {took:?}");
                        // Checked when the slot comes back: a hold late at most.
                        assert!(took <= ms(350), "overtaken after {took:?}");
                        "no in-flight slot (limit 1): standing queue: waited "
                    }
                    Some("predicted wait") => {
                        assert_eq!(took, Duration::ZERO, "refused at arrival");
                        "no in-flight slot (limit 1): expected wait "
                    }
                    other => panic!("refused for {other:?}"),
                };
                assert!(problem.detail.starts_with(expected), "{}", problem.detail);
            }
            StatusCode::GATEWAY_TIMEOUT => {}
            other => panic!("unexpected {other}"),
        }
    }
    // The slot served about one request in ten, never idle.
    assert!(ok >= 14, "{ok} served");
    assert!(overloaded >= 50, "{overloaded} refused as overload");
    assert!(standing >= 50, "{standing} refused by the standing line");
    // Served newest first, the oldest in line are overtaken and refused
    // then, a quarter into what they could wait, not at its end.
    assert!(overtaken >= 5, "{overtaken} overtaken");
}

/// `max_in_flight = "auto"` reads from TOML and sizes the line with the
/// adaptive limit's value: the probe's 3 for the first requests, a fourth
/// waits (it is not refused) and gets the slot the end of the 10 ms hold
/// adds; a bad table names its field.
#[tokio::test(start_paused = true)]
async fn an_adaptive_limit_sizes_the_line() {
    let auto: ServerConfig = toml::from_str("max_in_flight = \"auto\"\nfloor = \"50ms\"").unwrap();
    let (router, starts) = working(auto.layer().unwrap(), ms(1000));
    let start = Instant::now();
    let answers = burst(&router, 4, "5000", |_| "default").await;
    for (res, _) in &answers {
        assert_eq!(res.status(), StatusCode::OK);
    }
    let starts = starts.lock().unwrap();
    let late: Vec<_> = starts.iter().map(|(_, at)| *at - start).collect();
    assert_eq!(late, [ms(0), ms(0), ms(0), ms(10)]);
    assert_eq!(queue_entry(&answers[3].0).unwrap().dur, Some(10.0));

    let bad = toml::from_str::<ServerConfig>("max_in_flight = { min = 0 }").unwrap();
    assert_eq!(bad.layer().unwrap_err().field(), "max_in_flight.min");
    let mut zero = limited(1);
    zero.max_in_flight = Some(0.into());
    assert_eq!(zero.layer().unwrap_err().field(), "max_in_flight");
}

/// The same over the wire: a real server on loopback with
/// `max_in_flight = 4` and 50 ms of work, 40 reqwest requests at once with
/// 10 s budgets: every one is answered `200`, those that waited say so in
/// `Server-Timing`.
#[tokio::test]
async fn a_real_burst_at_a_small_limit_is_answered_whole() {
    let router = Router::new()
        .route(
            "/",
            get(|| async {
                tokio::time::sleep(ms(50)).await;
                "done"
            }),
        )
        .layer(limited(4).layer().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });

    let client = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap();
    let calls: Vec<_> = (0..40)
        .map(|_| {
            let req = client.get(&url).header("request-budget-ms", "10000");
            tokio::spawn(async move { req.send().await.unwrap() })
        })
        .collect();
    let mut waited = 0;
    for call in calls {
        let res = call.await.unwrap();
        assert_eq!(res.status(), 200);
        let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
        if timing.contains("budget-queue;dur=") {
            waited += 1;
        }
        assert_eq!(res.text().await.unwrap(), "done");
    }
    assert!(
        waited >= 40 - 4,
        "at most 4 found a free slot: {waited} waited"
    );
}
