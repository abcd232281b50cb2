//! The client side against docs/contract.md §2, one failure shape per test,
//! over real sockets on 127.0.0.1 (see `support`): each test checks the
//! outcome, what the server saw, and the elapsed time against the budget
//! with generous bounds (real clock; reqwest over sockets does not mix with
//! a paused clock, which the engine's own unit tests use instead). Every
//! test runs under an outer timeout.

mod support;

use std::future::Future;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::routing::get;
use budget_core::breaker::{BreakerConfig, BreakerState};
use budget_core::client::{
    BodyTooLarge, BudgetClient, CallError, CallErrorKind, DependencyConfig, HedgeConfig,
    OnUnavailable, TimeoutMode,
};
use budget_core::clock::FixedClock;
use budget_core::header::parse_grpc_timeout;
use budget_core::ledger::{Entry, Ledger, parse_server_timing};
use budget_core::problem::Problem;
use budget_core::retry::{Jitter, RetryBudgetConfig};
use budget_core::server::ServerConfig;
use budget_core::{Budget, floor::Floor};
use http::StatusCode;
use support::{Answer, Behaviour, Blackhole, Partner, Raw, eventually, ms, refused_addr};
use tokio::time::Instant;

/// Runs a test body under a 20 s outer timeout.
async fn bounded<F: Future<Output = ()>>(body: F) {
    support::bounded_by(20, body).await;
}

/// A dependency with a deterministic 20 ms -> 200 ms backoff.
fn dep(name: &str, url: &str) -> DependencyConfig {
    let mut config = DependencyConfig::new(name, url);
    config.retry.max_attempts = 3;
    config.retry.backoff.initial = ms(20);
    config.retry.backoff.max = ms(200);
    config.retry.backoff.multiplier = 2.0;
    config.retry.backoff.jitter = Jitter::None;
    config
}

fn attempts_in(ledger: &Ledger) -> Vec<String> {
    support::attempts(ledger)
        .into_iter()
        .map(|(_, outcome)| outcome)
        .collect()
}

#[tokio::test]
async fn connection_refused_fails_fast_as_a_connect_error() {
    bounded(async {
        let addr = refused_addr().await;
        let client = dep("inventory", &format!("http://{addr}/"))
            .build()
            .unwrap();
        let ledger = Ledger::new();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap_err();
        let elapsed = start.elapsed();
        assert!(err.is_connect() && !err.is_timeout(), "{err}");
        assert_eq!(err.attempts(), 3, "rule 5: a connect failure is retried");
        assert!(elapsed < ms(1000), "refused is fast: {elapsed:?}");
        assert_eq!(attempts_in(&ledger), ["connect", "connect", "connect"]);
        assert_eq!(err.problem().status, 504, "no usable answer: unavailable");
    })
    .await;
}

#[tokio::test]
async fn blackhole_times_out_at_the_connect_cap_not_the_budget() {
    bounded(async {
        let hole = Blackhole::start().await;
        let mut config = dep("inventory", &format!("http://{}/", hole.addr));
        config.connect_cap = ms(200);
        config.retry.max_attempts = 1;
        let client = config.build().unwrap();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(5000)))
            .send()
            .await
            .unwrap_err();
        let elapsed = start.elapsed();
        assert!(err.is_connect() && err.is_timeout(), "{err}");
        assert_eq!(err.kind(), CallErrorKind::ConnectTimeout);
        assert!(!err.is_budget_exhausted());
        assert!(
            elapsed >= ms(150) && elapsed < ms(2000),
            "rule 1: the connect cap (200 ms), not the 5 s budget: {elapsed:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn hang_times_out_at_the_budget() {
    bounded(async {
        let server = Raw::start(Behaviour::Silent).await;
        let client = dep("inventory", &server.url()).build().unwrap();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(600)))
            .send()
            .await
            .unwrap_err();
        let elapsed = start.elapsed();
        assert!(err.is_timeout() && err.is_budget_exhausted(), "{err}");
        assert_eq!(err.attempts(), 1, "no time left for another attempt");
        assert!(elapsed >= ms(550) && elapsed < ms(1500), "{elapsed:?}");
        assert_eq!(server.accepted(), 1);
        let problem = err.problem();
        assert_eq!(problem.status, 504);
        assert_eq!(problem.dependency.as_deref(), Some("inventory"));
    })
    .await;
}

#[tokio::test]
async fn a_dripping_body_times_out_within_the_budget() {
    bounded(async {
        let server = Raw::start(Behaviour::Drip { pause: ms(100) }).await;
        let client = dep("inventory", &server.url()).build().unwrap();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(500)))
            .send()
            .await
            .unwrap_err();
        let elapsed = start.elapsed();
        // The head arrived at once; the body is part of the attempt.
        assert!(err.is_timeout() && err.is_budget_exhausted(), "{err}");
        assert!(elapsed >= ms(450) && elapsed < ms(1500), "{elapsed:?}");
        assert_eq!(server.accepted(), 1);
    })
    .await;
}

#[tokio::test]
async fn a_body_over_max_body_is_a_final_body_error() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200).body(vec![b'x'; 10_000])]).await;
        let mut config = dep("inventory", &partner.url("/"));
        config.max_body = 1000;
        let client = config.build().unwrap();
        let err = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::Body);
        assert_eq!(err.attempts(), 1, "a body failure is final");
        let source = std::error::Error::source(&err).unwrap();
        assert_eq!(
            source
                .downcast_ref::<BodyTooLarge>()
                .map(BodyTooLarge::limit),
            Some(1000)
        );
        assert_eq!(partner.hits(), 1);
    })
    .await;
}

#[tokio::test]
async fn a_reset_mid_response_is_retried_then_reported() {
    bounded(async {
        let server = Raw::start(Behaviour::ResetMidResponse).await;
        let client = dep("inventory", &server.url()).build().unwrap();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(3000)))
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::Reset, "{err}");
        assert_eq!(err.attempts(), 3);
        assert_eq!(server.accepted(), 3);
        assert!(start.elapsed() < ms(2000));
        assert_eq!(err.problem().status, 504, "no usable answer: unavailable");
    })
    .await;
}

#[tokio::test]
async fn status_503_then_200_is_retried_with_a_shrinking_budget_header() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(503).after(ms(50)),
            Answer::status(200).body("done"),
        ])
        .await;
        let mut config = dep("pricing", &partner.url("/pricing?script=503@250ms,200@400ms"));
        config.grpc_timeout = true;
        let client = config.build().unwrap();
        let ledger = Ledger::new();
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .reserve(ms(10))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text(), "done");
        assert_eq!(res.attempts(), 2);
        let seen = partner.seen();
        assert_eq!(seen.len(), 2);
        // The base URL's query is kept, exactly.
        assert_eq!(seen[0].uri, "/pricing?script=503@250ms,200@400ms");
        let first = seen[0].budget_ms.unwrap();
        let second = seen[1].budget_ms.unwrap();
        assert!(first <= 1990 && first > 1800, "budget less the reserve: {first}");
        assert!(
            second + 50 <= first,
            "rewritten per attempt, shrinking by the 50 ms attempt and the wait: {first} -> {second}"
        );
        for s in &seen {
            let grpc = parse_grpc_timeout(s.grpc_timeout.as_deref().unwrap().as_bytes()).unwrap();
            assert_eq!(grpc, ms(s.budget_ms.unwrap()), "same value in both headers");
        }
        assert_eq!(attempts_in(&ledger), ["503", "200"]);
        assert!(
            ledger.server_timing().contains("pricing-wait;dur=2"),
            "{}",
            ledger.server_timing()
        );
    })
    .await;
}

#[tokio::test]
async fn retry_after_1s_inside_a_3s_budget_waits_and_retries() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(429).retry_after("1"),
            Answer::status(200),
        ])
        .await;
        let client = dep("pricing", &partner.url("/")).build().unwrap();
        let start = Instant::now();
        let res = client
            .get("")
            .budget(Budget::new(ms(3000)))
            .send()
            .await
            .unwrap();
        let elapsed = start.elapsed();
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 2));
        assert!(!res.passes_up());
        assert!(elapsed >= ms(950) && elapsed < ms(2500), "{elapsed:?}");
        assert_eq!(partner.hits(), 2);
    })
    .await;
}

#[tokio::test]
async fn retry_after_1s_inside_a_500ms_budget_passes_the_429_up_at_once() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(429).retry_after("1")]).await;
        let client = dep("pricing", &partner.url("/")).build().unwrap();
        let start = Instant::now();
        let res = client
            .get("")
            .budget(Budget::new(ms(500)))
            .send()
            .await
            .unwrap();
        let elapsed = start.elapsed();
        assert!(elapsed < ms(400), "no sleep: {elapsed:?}");
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(res.passes_up());
        assert_eq!(res.retry_after(), Some(ms(1000)));
        assert_eq!(res.attempts(), 1);
        assert_eq!(partner.hits(), 1);
        let deferred = res.deferred().unwrap();
        assert_eq!(
            (deferred.status, deferred.retry_after_ms),
            (429, Some(1000))
        );
        // Or through `?`: the same status and wait.
        let err = res.error_for_status().unwrap_err();
        let problem = Problem::from(&err);
        assert_eq!((problem.status, problem.retry_after_ms), (429, Some(1000)));
    })
    .await;
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_read_with_the_wall_clock() {
    bounded(async {
        // 08:49:38 asked for, the client's clock at 08:49:37: one second.
        let date =
            httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_778));
        let partner = Partner::start(vec![
            Answer::status(503).retry_after(&date),
            Answer::status(200),
        ])
        .await;
        let config = dep("pricing", &partner.url("/"));
        let clock = |secs| FixedClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        let client = BudgetClient::builder(config.clone())
            .wall_clock(clock(784_111_777))
            .build()
            .unwrap();
        let start = Instant::now();
        let res = client
            .get("")
            .budget(Budget::new(ms(3000)))
            .send()
            .await
            .unwrap();
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 2));
        assert!(start.elapsed() >= ms(950), "{:?}", start.elapsed());

        // A minute earlier, the date is 61 s away: above retry_after_max,
        // passed up at once.
        let partner = Partner::start(vec![Answer::status(503).retry_after(&date)]).await;
        let client = BudgetClient::builder(dep("pricing", &partner.url("/")))
            .wall_clock(clock(784_111_717))
            .build()
            .unwrap();
        let start = Instant::now();
        let res = client
            .get("")
            .budget(Budget::new(ms(3000)))
            .send()
            .await
            .unwrap();
        assert!(start.elapsed() < ms(500));
        assert!(res.passes_up());
        assert_eq!(res.retry_after(), Some(Duration::from_secs(61)));
        assert_eq!(partner.hits(), 1);
    })
    .await;
}

#[tokio::test]
async fn post_without_idempotency_key_is_sent_once_and_with_one_is_retried() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(503)]).await;
        let client = dep("orders", &partner.url("/orders")).build().unwrap();
        let res = client
            .post("")
            .json(&serde_json::json!({ "sku": 7 }))
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!(
            (res.status(), res.attempts()),
            (StatusCode::SERVICE_UNAVAILABLE, 1)
        );
        assert_eq!(partner.hits(), 1, "rule 4: a POST is not retried");

        let partner = Partner::start(vec![Answer::status(503), Answer::status(201)]).await;
        let client = dep("orders", &partner.url("/orders")).build().unwrap();
        let res = client
            .post("")
            .header("idempotency-key", "order-42")
            .json(&serde_json::json!({ "sku": 7 }))
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!((res.status(), res.attempts()), (StatusCode::CREATED, 2));
        assert_eq!(partner.hits(), 2);
        assert!(partner.seen().iter().all(|s| s.method == "POST"));
    })
    .await;
}

#[tokio::test]
async fn the_retry_budget_caps_retries_when_the_dependency_always_fails() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(503)]).await;
        let mut config = dep("pricing", &partner.url("/"));
        config.retry.backoff.initial = ms(1);
        config.retry.backoff.max = ms(1);
        let mut retry_budget = RetryBudgetConfig::default();
        retry_budget.ratio = 0.2;
        retry_budget.min_per_sec = 0;
        retry_budget.ttl = Duration::from_secs(10);
        config.retry_budget = Some(retry_budget);
        let client = config.build().unwrap();
        let calls = 50;
        for _ in 0..calls {
            let res = client
                .get("")
                .budget(Budget::new(ms(2000)))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 503);
        }
        let hits = partner.hits();
        assert!(
            hits as f64 <= calls as f64 * 1.2 && hits >= calls,
            "rule 9: attempts/requests <= 1 + ratio: {hits} for {calls}"
        );
    })
    .await;
}

#[tokio::test]
async fn the_breaker_opens_after_n_failures_then_probes_after_open_for() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(503),
            Answer::status(503),
            Answer::status(503),
            Answer::status(200),
        ])
        .await;
        let mut config = dep("pricing", &partner.url("/"));
        config.retry.max_attempts = 1;
        let mut breaker = BreakerConfig::default();
        breaker.failure_threshold = 3;
        breaker.open_for = ms(300);
        config.breaker = Some(breaker);
        let client = config.build().unwrap();
        let call = || client.get("").budget(Budget::new(ms(1000))).send();
        for _ in 0..3 {
            assert_eq!(call().await.unwrap().status(), 503);
        }
        let ledger = Ledger::new();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(1000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap_err();
        assert!(start.elapsed() < ms(100));
        assert!(err.is_circuit_open() && err.is_unavailable(), "{err}");
        assert!(err.retry_after().unwrap() <= ms(300));
        let problem = err.problem();
        assert_eq!(problem.status, 503);
        assert!(problem.retry_after_ms.is_some());
        assert_eq!(
            ledger.entries(),
            [Entry::skip("pricing", "skipped: circuit open")]
        );
        assert_eq!(partner.hits(), 3, "refused without a connection");

        tokio::time::sleep(ms(350)).await;
        let probe = call().await.unwrap();
        assert_eq!(probe.status(), 200);
        assert_eq!(client.breaker().unwrap().state(), BreakerState::Closed);
        assert_eq!(partner.hits(), 4);
    })
    .await;
}

#[tokio::test]
async fn with_a_concurrency_limit_of_1_the_second_call_pays_for_its_wait() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200).after(ms(300))]).await;
        let mut config = dep("inventory", &partner.url("/"));
        config.concurrency = Some(1.into());
        // One call queued behind one slow call is no standing queue here
        // (rule 11's own tests are the call engine's).
        config.queue.interval = Duration::from_secs(60);
        let client = config.build().unwrap();
        let (first_ledger, second_ledger) = (Ledger::new(), Ledger::new());
        let budget = Budget::new(ms(2000));
        let first = client
            .get("")
            .budget(budget)
            .ledger(first_ledger.clone())
            .send();
        let second = client
            .get("")
            .budget(budget)
            .ledger(second_ledger.clone())
            .send();
        let (a, b) = tokio::join!(first, second);
        assert_eq!(a.unwrap().status(), 200);
        assert_eq!(b.unwrap().status(), 200);
        let mut sent: Vec<u64> = partner
            .seen()
            .iter()
            .map(|s| s.budget_ms.unwrap())
            .collect();
        sent.sort_unstable();
        assert!(
            sent[0] + 250 <= sent[1],
            "the second call's header is smaller by its permit wait: {sent:?}"
        );
        let queued: Vec<_> = [&first_ledger, &second_ledger]
            .iter()
            .flat_map(|l| l.entries())
            .filter_map(|e| match e {
                Entry::Local { name, duration, .. } if name == "inventory-queue" => Some(duration),
                _ => None,
            })
            .collect();
        assert_eq!(queued.len(), 1, "only the second call waited");
        assert!(queued[0] >= ms(250), "{queued:?}");
    })
    .await;
}

/// Queued work, on the client side: a call queued for a concurrency
/// permit gives up when what is left reaches the floor; it is never sent,
/// not even once the permit comes free.
#[tokio::test]
async fn a_call_whose_permit_comes_too_late_is_never_sent() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200).after(ms(1500))]).await;
        let mut config = dep("inventory", &partner.url("/"));
        config.concurrency = Some(1.into());
        config.queue.interval = Duration::from_secs(60);
        config.floor = Floor::new(ms(200)).into();
        let client = config.build().unwrap();
        let first = client.get("").budget(Budget::new(ms(3000))).send();
        let second = async {
            // After the first holds the permit.
            tokio::time::sleep(ms(100)).await;
            let ledger = Ledger::new();
            let start = Instant::now();
            let result = client
                .get("")
                .budget(Budget::new(ms(500)))
                .ledger(ledger.clone())
                .send()
                .await;
            (result, start.elapsed(), ledger)
        };
        let (a, (b, waited, ledger)) = tokio::join!(first, second);
        assert_eq!(a.unwrap().status(), 200);
        let err = b.unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::NoPermit, "{err}");
        assert!(
            waited >= ms(250) && waited < ms(1200),
            "gave up near 500 - 200 ms, long before the permit freed: {waited:?}"
        );
        assert!(
            ledger
                .server_timing()
                .contains("skipped: no concurrency permit"),
            "{}",
            ledger.server_timing()
        );
        tokio::time::sleep(ms(300)).await;
        assert_eq!(partner.seen().len(), 1, "only the first call was sent");
    })
    .await;
}

#[tokio::test]
async fn dropping_the_call_closes_the_connection_and_stops_retrying() {
    bounded(async {
        let server = Raw::start(Behaviour::Silent).await;
        let client = dep("inventory", &server.url()).build().unwrap();
        let call = client.get("").budget(Budget::new(ms(5000))).send();
        assert!(tokio::time::timeout(ms(300), call).await.is_err());
        assert!(
            eventually(ms(2000), || server.closed() == 1).await,
            "the server saw the connection close"
        );
        tokio::time::sleep(ms(300)).await;
        assert_eq!(server.accepted(), 1, "no attempt after the drop");
    })
    .await;
}

#[tokio::test]
async fn an_idle_pooled_connection_is_closed_after_pool_idle_timeout() {
    bounded(async {
        let server = Raw::start(Behaviour::KeepAlive).await;
        let mut config = dep("inventory", &server.url());
        config.pool_idle_timeout = ms(200);
        let short = config.build().unwrap();
        let long = dep("inventory", &server.url()).build().unwrap();
        for client in [&short, &long] {
            let answer = client.get("").budget(Budget::new(ms(2000))).send().await;
            assert_eq!(answer.unwrap().status(), StatusCode::OK);
        }
        assert_eq!(server.accepted(), 2, "one connection per client");
        assert!(
            eventually(ms(5000), || server.closed() == 1).await,
            "the client with a 200 ms pool idle timeout closed its idle connection"
        );
        // The other keeps its connection for the default 60 s.
        tokio::time::sleep(ms(500)).await;
        assert_eq!(server.closed(), 1);
        let again = long.get("").budget(Budget::new(ms(2000))).send().await;
        assert_eq!(again.unwrap().status(), StatusCode::OK);
        assert_eq!(server.accepted(), 2, "the idle connection was reused");
    })
    .await;
}

/// hyper's pool checks for idle connections every `pool_idle_timeout`:
/// an idle connection is closed between once and twice the timeout after
/// its last use, and is never reused once idle for longer than it (see
/// `DependencyConfig::pool_idle_timeout`).
#[tokio::test]
async fn an_idle_pooled_connection_closes_between_one_and_two_pool_idle_timeouts() {
    bounded(async {
        let timeout = ms(600);
        let server = Raw::start(Behaviour::KeepAlive).await;
        let mut config = dep("inventory", &server.url());
        config.pool_idle_timeout = timeout;
        let client = config.build().unwrap();
        let answer = client.get("").budget(Budget::new(ms(2000))).send().await;
        assert_eq!(answer.unwrap().status(), StatusCode::OK);
        let last_use = tokio::time::Instant::now();
        assert!(eventually(ms(5000), || server.closed() == 1).await);
        let idle = last_use.elapsed();
        assert!(
            idle >= timeout && idle <= timeout * 2 + ms(300),
            "closed {idle:?} after its last use"
        );

        // Idle a little longer than the timeout, whether or not the pool
        // has checked yet: the next call takes a new connection.
        let answer = client.get("").budget(Budget::new(ms(2000))).send().await;
        assert_eq!(answer.unwrap().status(), StatusCode::OK);
        tokio::time::sleep(timeout + ms(100)).await;
        let answer = client.get("").budget(Budget::new(ms(2000))).send().await;
        assert_eq!(answer.unwrap().status(), StatusCode::OK);
        assert_eq!(
            server.accepted(),
            3,
            "no connection reused after its idle timeout"
        );
    })
    .await;
}

#[tokio::test]
async fn below_the_floor_no_connection_is_made() {
    bounded(async {
        let server = Raw::start(Behaviour::Silent).await;
        let mut config = dep("recommendations", &server.url());
        config.floor = Floor::new(ms(1000)).into();
        let client = config.build().unwrap();
        let ledger = Ledger::new();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(500)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap_err();
        assert!(start.elapsed() < ms(100));
        assert!(err.is_below_floor(), "{err}");
        assert_eq!(err.attempts(), 0);
        let problem = err.problem();
        assert_eq!((problem.status, problem.floor_ms), (504, Some(1000)));
        let entries = ledger.entries();
        let [Entry::Skip { dependency, reason }] = entries.as_slice() else {
            panic!("{entries:?}");
        };
        assert_eq!(dependency, "recommendations");
        assert!(reason.starts_with("skipped: 4") || reason.starts_with("skipped: 5"));
        assert!(reason.ends_with("ms < floor 1000ms"), "{reason}");
        tokio::time::sleep(ms(200)).await;
        assert_eq!(server.accepted(), 0);
    })
    .await;
}

#[tokio::test]
async fn send_optional_skips_an_unavailable_optional_dependency() {
    bounded(async {
        let server = Raw::start(Behaviour::Silent).await;
        let mut config = dep("recommendations", &server.url());
        config.floor = Floor::new(ms(1000)).into();
        config.on_unavailable = OnUnavailable::Skip;
        let client = config.build().unwrap();
        let got = client
            .get("")
            .budget(Budget::new(ms(500)))
            .send_optional()
            .await
            .unwrap();
        assert!(got.skipped().is_some());
        // It says why, as the ledger does.
        let skipped = got.skipped().unwrap();
        let reason = skipped.reason();
        assert!(
            reason.starts_with("skipped: 4") || reason.starts_with("skipped: 500ms"),
            "{reason}"
        );
        assert!(reason.ends_with("ms < floor 1000ms"), "{reason}");
        assert_eq!(skipped.to_string(), skipped.reason());
        assert!(skipped.error().is_below_floor());
        // The fallback value, served by the caller.
        let recs: Vec<String> = got
            .into_response()
            .and_then(|r| r.json().ok())
            .unwrap_or_default();
        assert!(recs.is_empty());
        assert_eq!(server.accepted(), 0);

        // With `fail`, the same call is an error.
        config.on_unavailable = OnUnavailable::Fail;
        let err = config
            .build()
            .unwrap()
            .get("")
            .budget(Budget::new(ms(500)))
            .send_optional()
            .await
            .unwrap_err();
        assert!(err.is_below_floor());
    })
    .await;
}

#[tokio::test]
async fn fixed_mode_sends_no_budget_and_times_each_attempt_out_on_its_own() {
    bounded(async {
        let server = Raw::start(Behaviour::Silent).await;
        let mut config = dep("inventory", &server.url());
        config.mode = TimeoutMode::Fixed;
        config.fixed_timeout = ms(300);
        config.retry.max_attempts = 2;
        let client = config.build().unwrap();
        let start = Instant::now();
        // No budget anywhere: fixed mode does not need one.
        let err = client.get("").send().await.unwrap_err();
        let elapsed = start.elapsed();
        assert!(err.is_timeout() && !err.is_budget_exhausted(), "{err}");
        assert_eq!(err.attempts(), 2);
        assert!(elapsed >= ms(600) && elapsed < ms(2000), "{elapsed:?}");
        assert_eq!(server.accepted(), 2);

        let partner = Partner::start(vec![Answer::status(200)]).await;
        let mut config = dep("inventory", &partner.url("/"));
        config.mode = TimeoutMode::Fixed;
        config.build().unwrap().get("").send().await.unwrap();
        assert_eq!(partner.seen()[0].budget_ms, None, "nothing forwarded");
    })
    .await;
}

#[tokio::test]
async fn without_any_budget_a_budget_mode_call_is_a_typed_error() {
    bounded(async {
        let server = Raw::start(Behaviour::Silent).await;
        let client = dep("inventory", &server.url()).build().unwrap();
        let err = client.get("").send().await.unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::NoBudget);
        assert_eq!(server.accepted(), 0);
    })
    .await;
}

/// A call outside any request (a warm-up, a background job, a spawned
/// task) spends the dependency's `default_budget`: the partner is sent it,
/// and a silent one is given up when it runs out, as within a request.
#[tokio::test]
async fn outside_a_request_a_call_spends_the_dependency_s_default_budget() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let mut config = dep("inventory", &partner.url("/"));
        config.default_budget = Some(ms(800));
        let client = config.build().unwrap();
        let job = tokio::spawn(async move { client.get("").send().await.map(|r| r.status()) });
        assert_eq!(job.await.unwrap().unwrap(), 200);
        let sent = partner.seen()[0].budget_ms.expect("a budget forwarded");
        assert!(sent <= 800 && sent > 700, "{sent}");

        let server = Raw::start(Behaviour::Silent).await;
        let mut config = dep("inventory", &server.url());
        config.default_budget = Some(ms(300));
        let client = config.build().unwrap();
        let start = Instant::now();
        let err = client.get("").send().await.unwrap_err();
        assert!(err.is_budget_exhausted(), "{err}");
        let elapsed = start.elapsed();
        assert!(elapsed >= ms(300) && elapsed < ms(600), "{elapsed:?}");
    })
    .await;
}

/// `forward = false` (a third-party API): the dependency is sent no budget
/// and no criticality, and the call still ends when the budget does.
#[tokio::test]
async fn a_dependency_that_is_not_forwarded_gets_no_budget_header_and_the_budget_still_holds() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let mut config = dep("weather", &partner.url("/"));
        config.forward = false;
        config.grpc_timeout = true;
        let client = config.build().unwrap();
        let res = client
            .get("")
            .budget(Budget::new(ms(800)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let seen = &partner.seen()[0];
        assert_eq!(
            (seen.budget_ms, &seen.grpc_timeout, &seen.criticality),
            (None, &None, &None),
            "nothing of the chain's headers"
        );

        let server = Raw::start(Behaviour::Silent).await;
        let mut config = dep("weather", &server.url());
        config.forward = false;
        let client = config.build().unwrap();
        let start = Instant::now();
        let err = client
            .get("")
            .budget(Budget::new(ms(300)))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_budget_exhausted(), "{err}");
        assert!(start.elapsed() < ms(600), "{:?}", start.elapsed());
    })
    .await;
}

/// A front service with the budget layer, calling `dependency` from its
/// handler with no budget argument.
async fn front(dependency: BudgetClient) -> String {
    let mut config = ServerConfig::default();
    config.reserve = ms(5);
    let app = Router::new()
        .route(
            "/",
            get(move || {
                let dependency = dependency.clone();
                async move {
                    let res = dependency.get("").send().await?.error_for_status()?;
                    Ok::<_, CallError>(res.text().into_owned())
                }
            }),
        )
        .layer(config.layer().unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/")
}

/// A handler that makes 1 000 calls: the response's `Server-Timing` stays
/// within the ledger's 4 KiB, keeps the ingress budget and the last call,
/// and says how many calls it left out.
#[tokio::test]
async fn a_handler_making_a_thousand_calls_answers_a_bounded_server_timing() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let dependency = dep("inventory", &partner.url("/")).build().unwrap();
        let app = Router::new()
            .route(
                "/",
                get(move || {
                    let dependency = dependency.clone();
                    async move {
                        for _ in 0..1000 {
                            dependency.get("").send().await?;
                        }
                        Ok::<_, CallError>("done")
                    }
                }),
            )
            .layer(ServerConfig::default().layer().unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(format!("http://{addr}/"))
            .header("request-budget-ms", "20000")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let header = res.headers()["server-timing"].to_str().unwrap().to_owned();
        assert!(header.len() <= 4096, "{} bytes", header.len());
        let metrics = parse_server_timing(&header);
        assert_eq!(metrics[0].name, "budget", "{header}");
        assert_eq!(metrics.len(), 65, "64 entries and the marker: {header}");
        let marker = metrics.iter().find(|m| m.name == "ledger").unwrap();
        assert_eq!(
            marker.desc.as_deref(),
            Some("+937 more"),
            "1 001 entries, 64 kept"
        );
        assert_eq!(metrics.last().unwrap().name, "inventory");
        assert_eq!(partner.hits(), 1000);
    })
    .await;
}

/// docs/contract.md §3, criticality: read at ingress, forwarded on every
/// downstream call; absent or unknown is `default`.
#[tokio::test]
async fn the_request_criticality_is_read_at_ingress_and_forwarded() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let url = front(
            dep("inventory", &partner.url("/inventory"))
                .build()
                .unwrap(),
        )
        .await;
        let http = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap();
        for sent in [Some("Critical"), Some("sheddable"), None, Some("urgent")] {
            let mut req = http.get(&url).header("request-budget-ms", "1000");
            if let Some(value) = sent {
                req = req.header("request-criticality", value);
            }
            assert_eq!(req.send().await.unwrap().status(), 200);
        }
        let forwarded: Vec<_> = partner
            .seen()
            .into_iter()
            .map(|s| s.criticality.unwrap_or_default())
            .collect();
        assert_eq!(forwarded, ["critical", "sheddable", "default", "default"]);
    })
    .await;
}

#[tokio::test]
async fn inside_a_budget_aware_handler_the_call_spends_the_request_budget() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200).body("stock: 7")]).await;
        let url = front(
            dep("inventory", &partner.url("/inventory"))
                .build()
                .unwrap(),
        )
        .await;
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(&url)
            .header("request-budget-ms", "1000")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
        assert_eq!(res.text().await.unwrap(), "stock: 7");
        let sent = partner.seen()[0].budget_ms.unwrap();
        assert!(
            sent <= 995 && sent > 800,
            "1000 less the 5 ms reserve, less time spent: {sent}"
        );
        let metrics = parse_server_timing(&timing);
        let names: Vec<_> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["budget", "inventory"], "{timing}");
    })
    .await;
}

#[tokio::test]
async fn a_handler_questions_a_call_error_into_the_contract_problem() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200)]).await;
        let mut config = dep("inventory", &partner.url("/"));
        config.floor = Floor::new(ms(2000)).into();
        let url = front(config.build().unwrap()).await;
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(&url)
            .header("request-budget-ms", "500")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 504);
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let timing = res.headers()["server-timing"].to_str().unwrap().to_owned();
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(problem.dependency.as_deref(), Some("inventory"));
        assert_eq!(problem.floor_ms, Some(2000));
        assert!(timing.contains("inventory;desc=\"skipped: "), "{timing}");
        assert_eq!(partner.hits(), 0);

        // The dependency's own 503 with a wait too long: passed up as is.
        let partner = Partner::start(vec![Answer::status(503).retry_after("30")]).await;
        let url = front(dep("inventory", &partner.url("/")).build().unwrap()).await;
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(&url)
            .header("request-budget-ms", "2000")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        assert_eq!(res.headers()["retry-after"], "30");
        assert_eq!(partner.hits(), 1);
    })
    .await;
}

#[tokio::test]
async fn a_hedge_answers_for_a_slow_first_attempt_on_a_real_socket() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(200).body("slow").after(ms(3000)),
            Answer::status(200).body("fast").after(ms(20)),
        ])
        .await;
        let mut config = dep("pricing", &partner.url("/pricing"));
        let mut hedge = HedgeConfig::after(ms(100));
        hedge.ratio = 1.0;
        config.hedge = Some(hedge);
        let client = config.build().unwrap();
        let ledger = Ledger::new();
        let start = Instant::now();
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        let took = start.elapsed();
        assert_eq!((res.status(), res.text()), (StatusCode::OK, "fast".into()));
        assert!(took >= ms(120) && took < ms(1000), "{took:?}");
        let seen = partner.seen();
        assert_eq!(seen.len(), 2);
        let (first, second) = (seen[0].budget_ms.unwrap(), seen[1].budget_ms.unwrap());
        assert!(
            second + 100 <= first,
            "the hedge carries what is left: {first} -> {second}"
        );
        let names: Vec<_> = parse_server_timing(&ledger.server_timing())
            .into_iter()
            .map(|m| (m.name, m.desc))
            .collect();
        assert_eq!(
            names,
            [
                ("pricing".to_owned(), Some("cancelled".to_owned())),
                ("pricing-hedge".to_owned(), None)
            ]
        );
    })
    .await;
}
