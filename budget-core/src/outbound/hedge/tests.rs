use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use tokio::time::Instant;

use crate::budget::Budget;
use crate::client::{DependencyConfig, HedgeConfig};
use crate::ledger::Ledger;
use crate::outbound::testing::{self, Shaped, clock, config, ms, plan};
use crate::outbound::{Dependency, Finished, Timing};
use crate::retry::RetryConfig;

/// `config()` with hedging after a fixed `delay`, one hedge per call
/// allowed (the ratio's own test is separate).
fn hedged(delay: u64) -> DependencyConfig {
    let mut c = config();
    c.hedge = Some(HedgeConfig {
        ratio: 1.0,
        ..HedgeConfig::after(ms(delay))
    });
    c
}

fn dependency(config: DependencyConfig) -> Dependency {
    config.settings(None).unwrap().dependency
}

/// One call to `dep`, its attempts made by `fake`, with a budget of
/// `budget` ms: its last answer as the engine finished it.
async fn shaped(
    dep: &Dependency,
    ledger: &Ledger,
    budget: u64,
    fake: &Shaped,
) -> Finished<http::Response<Bytes>> {
    testing::run(
        dep,
        &clock(),
        plan(Timing::Budget(Budget::new(ms(budget))), ledger),
        |s| fake.attempt(s),
    )
    .await
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn hedge_a_slow_first_attempt_is_hedged_after_the_delay_and_the_first_answer_wins() {
    let dep = dependency(hedged(40));
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 1000), (200, 30)]);
    let start = Instant::now();
    let budget = Budget::new(ms(2000));
    let res = testing::run(&dep, &clock(), plan(Timing::Budget(budget), &ledger), |s| {
        fake.attempt(s)
    })
    .await
    .unwrap();
    assert_eq!(res.response.status(), StatusCode::OK);
    assert_eq!(
        start.elapsed(),
        ms(70),
        "the hedge's answer, not the first's"
    );
    // The hedge is sent 40 ms in, with what is left then.
    assert_eq!(
        fake.starts(start),
        [(ms(0), Some(ms(2000))), (ms(40), Some(ms(1960)))]
    );
    assert_eq!(
        ledger.server_timing(),
        "pricing;dur=70;desc=\"cancelled\", pricing-hedge;dur=30"
    );
    // Dropped, the first attempt makes no more progress.
    tokio::time::advance(ms(2000)).await;
    assert_eq!(fake.sent(), 2);
}

/// A hedge to a slow replica that loses the race leaves that replica
/// estimated at least as slow as it ran: it must not look fast for
/// the next choice.
#[tokio::test(start_paused = true)]
async fn hedge_a_cancelled_hedge_leaves_its_replica_at_least_as_slow_as_it_ran() {
    let mut config = hedged(40).endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
    config.retry = RetryConfig::default().max_attempts(1);
    let dep = dependency(config);
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 100), (200, 1000)]);
    let res = shaped(&dep, &ledger, 2000, &fake).await;
    assert_eq!(res.response.status(), StatusCode::OK);
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let hedged_to = &seen[1].1.endpoint;
    assert!(
        !Arc::ptr_eq(&seen[0].1.endpoint, hedged_to),
        "the hedge went to the other replica"
    );
    let estimate = hedged_to.load.estimate(Instant::now()).unwrap();
    // Sent 40 ms in, cancelled when the first answered at 100 ms.
    assert_eq!(estimate, ms(60));
}

/// A first attempt beaten by a hedge sent later counts against its
/// replica: its estimate doubles (at least to the first penalty), not
/// just to what it ran, so a replica whose slow calls hedges cut short
/// does not look as fast as the hedge delay; and it is forgotten at a
/// latency's pace, not a failure's (the replica was slow, not gone).
#[tokio::test(start_paused = true)]
async fn hedge_a_first_attempt_beaten_by_its_hedge_counts_against_its_replica() {
    let mut config = hedged(40).endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
    config.retry = RetryConfig::default().max_attempts(1);
    let dep = dependency(config);
    for endpoint in dep.endpoints.current().iter() {
        endpoint.load.observe(ms(50), Instant::now());
    }
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 1000), (200, 30)]);
    let res = shaped(&dep, &ledger, 2000, &fake).await;
    assert_eq!(res.response.status(), StatusCode::OK);
    let seen = fake.seen.lock().unwrap().clone();
    let (first, hedge) = (&seen[0].1.endpoint, &seen[1].1.endpoint);
    assert!(!Arc::ptr_eq(first, hedge));
    let now = Instant::now();
    // It ran 70 ms; twice a 50 ms estimate decayed over those 70 ms
    // is less than a failure's first penalty, 100 ms (the doubling's
    // own test is in `endpoints/load.rs`).
    assert_eq!(first.load.estimate(now), Some(ms(100)));
    // The hedge's replica learnt its faster answer.
    assert!(hedge.load.estimate(now).unwrap() < ms(50));
    // A second on, the penalty has lost a third of itself (`DECAY`, 3 s),
    // where a failure's would have lost two thirds (1 s).
    tokio::time::advance(ms(1000)).await;
    let later = first.load.estimate(Instant::now()).unwrap();
    assert!(later > ms(71) && later < ms(72), "{later:?}");
}

#[tokio::test(start_paused = true)]
async fn hedge_a_first_attempt_that_answers_first_cancels_the_hedge() {
    let dep = dependency(hedged(40));
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 100), (200, 1000)]);
    let start = Instant::now();
    let res = shaped(&dep, &ledger, 2000, &fake).await;
    assert_eq!(
        (res.response.status(), start.elapsed()),
        (StatusCode::OK, ms(100))
    );
    assert_eq!(
        ledger.server_timing(),
        "pricing-hedge;dur=60;desc=\"cancelled\", pricing;dur=100"
    );
}

#[tokio::test(start_paused = true)]
async fn hedge_an_attempt_answering_before_the_delay_sends_no_hedge() {
    let dep = dependency(hedged(40));
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(503, 30), (200, 30)]);
    let res = shaped(&dep, &ledger, 2000, &fake).await;
    // A 503 is an answer: no hedge, the retry policy's retry.
    assert_eq!((res.response.status(), res.attempts), (StatusCode::OK, 2));
    assert_eq!(
        ledger.server_timing(),
        "pricing;dur=30;desc=\"503\", pricing-wait;dur=100, pricing;dur=30"
    );
}

#[tokio::test(start_paused = true)]
async fn hedge_a_failed_attempt_waits_for_the_other_one() {
    let dep = dependency(hedged(40));
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(0, 50), (200, 100)]);
    let start = Instant::now();
    let res = shaped(&dep, &ledger, 2000, &fake).await;
    assert_eq!(
        (res.response.status(), start.elapsed()),
        (StatusCode::OK, ms(140))
    );
    assert_eq!(
        ledger.server_timing(),
        "pricing;dur=50;desc=\"connect\", pricing-hedge;dur=100"
    );
}

#[tokio::test(start_paused = true)]
async fn hedge_not_sent_when_what_is_left_would_not_cover_the_floor() {
    let mut c = hedged(40);
    c.floor = crate::floor::FloorConfig::fixed(ms(500));
    let dep = dependency(c);
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 300), (200, 10)]);
    let start = Instant::now();
    let res = shaped(&dep, &ledger, 530, &fake).await;
    // 40 ms in, 490 ms are left: below the 500 ms floor.
    assert_eq!(
        (res.response.status(), start.elapsed()),
        (StatusCode::OK, ms(300))
    );
    assert_eq!(fake.sent(), 1);
}

#[tokio::test(start_paused = true)]
async fn hedge_never_for_a_call_that_may_not_be_sent_twice_nor_in_fixed_mode() {
    let dep = dependency(hedged(40));
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 300), (200, 10)]);
    let mut once = plan(Timing::Budget(Budget::new(ms(2000))), &ledger);
    once.may_retry = false;
    testing::run(&dep, &clock(), once, |s| fake.attempt(s))
        .await
        .unwrap();
    assert_eq!(fake.sent(), 1, "a POST without a key is sent once");

    let fake = Shaped::new(&[(200, 300), (200, 10)]);
    testing::run(
        &dep,
        &clock(),
        plan(Timing::Fixed(ms(2000)), &ledger),
        |s| fake.attempt(s),
    )
    .await
    .unwrap();
    assert_eq!(
        fake.sent(),
        1,
        "fixed mode (budget mode off) does not hedge"
    );
}

#[tokio::test(start_paused = true)]
async fn hedge_the_hedge_budget_caps_hedges_at_its_ratio_of_calls() {
    let mut c = config();
    c.hedge = Some(HedgeConfig::after(ms(40))); // ratio 0.1
    let dep = dependency(c);
    let fake = Shaped::new(&[(200, 100)]);
    for _ in 0..100 {
        shaped(&dep, &Ledger::new(), 2000, &fake).await;
    }
    // Every call was slow enough for a hedge; the budget allowed 10.
    assert_eq!(fake.sent(), 110);
}

#[tokio::test(start_paused = true)]
async fn hedge_a_learned_delay_hedges_only_once_it_has_samples() {
    let mut c = config();
    c.hedge = Some(HedgeConfig {
        ratio: 1.0,
        min_samples: 5,
        ..HedgeConfig::default()
    });
    let dep = dependency(c);
    let ledger = Ledger::new();
    let go = |fake| shaped(&dep, &ledger, 2000, fake);
    let slow = Shaped::new(&[(200, 300), (200, 20)]);
    go(&slow).await;
    assert_eq!(slow.sent(), 1, "cold: no latency known, no hedge");
    let fast = Shaped::new(&[(200, 20)]);
    for _ in 0..30 {
        go(&fast).await;
    }
    tokio::time::advance(ms(200)).await;
    let slow = Shaped::new(&[(200, 300), (200, 20)]);
    let start = Instant::now();
    go(&slow).await;
    assert_eq!(slow.sent(), 2);
    // The p95 of 30 samples of 20 ms and one of 300 ms: hedged at 20 ms.
    let hedge_at = slow.starts(start)[1].0;
    assert!(hedge_at >= ms(19) && hedge_at <= ms(21), "{hedge_at:?}");
}

/// Two replicas, hedged after the learned p95 (one hedge per call
/// allowed), whose latencies so far are `latencies` and whose replicas
/// are estimated at `first` and `other` ms: the first attempt goes to
/// the one at `first` (the other is given calls in flight enough to be
/// the more loaded).
fn learned_race(latencies: &[u64], first: u64, other: u64) -> Dependency {
    let mut config = config().endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
    config.retry = RetryConfig::default().max_attempts(1);
    config.hedge = Some(HedgeConfig {
        ratio: 1.0,
        ..HedgeConfig::default()
    });
    let dep = dependency(config);
    let hedging = dep.hedge.as_ref().unwrap();
    for &latency in latencies {
        hedging.observe(ms(latency));
    }
    let set = dep.endpoints.current();
    set[0].load.observe(ms(first), Instant::now());
    set[1].load.observe(ms(other), Instant::now());
    dep
}

/// 200 answers of 45 to 55 ms, evenly: a partner whose slowest answers
/// are a few milliseconds past its p95.
fn tight() -> Vec<u64> {
    (0..200).map(|i| 45 + i % 11).collect()
}

/// Calls in flight to the second replica, enough that the first attempt
/// goes to the first.
fn busy(dep: &Dependency) -> Vec<crate::outbound::endpoints::InFlight> {
    let second = Arc::clone(&dep.endpoints.current()[1]);
    (0..20).map(|_| second.start()).collect()
}

#[tokio::test(start_paused = true)]
async fn hedge_a_first_attempt_as_late_as_the_dependency_gets_is_not_hedged_before_it_outlives_its_replica()
 {
    let dep = learned_race(&tight(), 60, 50);
    let _busy = busy(&dep);
    let delay = dep.hedge.as_ref().unwrap().delay().unwrap();
    assert_eq!(delay, ms(55), "the p95 of 45 to 55 ms");
    // Past the delay, within its replica's 60 ms: it answers first, no
    // hedge is sent.
    let ledger = Ledger::new();
    let fake = Shaped::new(&[(200, 58), (200, 45)]);
    let res = shaped(&dep, &ledger, 2000, &fake).await;
    assert_eq!(res.response.status(), StatusCode::OK);
    assert_eq!(
        fake.sent(),
        1,
        "no hedge for an answer due within its replica's estimate"
    );
    assert!(
        Arc::ptr_eq(
            &fake.seen.lock().unwrap()[0].1.endpoint,
            &dep.endpoints.current()[0]
        ),
        "the first attempt went to the replica estimated at 60 ms"
    );

    // Stuck: hedged once it has run its replica's estimate, not at the
    // delay.
    let dep = learned_race(&tight(), 60, 50);
    let _busy = busy(&dep);
    let fake = Shaped::new(&[(200, 1000), (200, 45)]);
    let start = Instant::now();
    let res = shaped(&dep, &Ledger::new(), 2000, &fake).await;
    assert_eq!(res.response.status(), StatusCode::OK);
    // The replica's 60 ms estimate, decayed over the 55 ms of the delay:
    // 58.9 ms (the timer's next millisecond).
    let hedge_at = fake.starts(start)[1].0;
    assert!(hedge_at > ms(58) && hedge_at <= ms(60), "{hedge_at:?}");
    assert_eq!(start.elapsed(), hedge_at + ms(45), "the hedge's answer");
}

#[tokio::test(start_paused = true)]
async fn hedge_a_replica_known_slow_is_hedged_at_the_delay() {
    // The first attempt's replica is estimated 200 ms, the other 50: a
    // hedge sent at 55 ms answers at about 105, before the first's 200.
    let dep = learned_race(&tight(), 200, 50);
    let _busy = busy(&dep);
    let fake = Shaped::new(&[(200, 1000), (200, 45)]);
    let start = Instant::now();
    shaped(&dep, &Ledger::new(), 2000, &fake).await;
    assert_eq!(fake.starts(start)[1].0, ms(55));
}

#[tokio::test(start_paused = true)]
async fn hedge_latencies_with_a_tail_are_hedged_at_the_delay() {
    // 3 % of the answers take 500 ms: a first attempt still running at
    // the p95 may well be one of them, and a hedge can win.
    let latencies: Vec<u64> = (0..200)
        .map(|i| if i % 33 == 0 { 500 } else { 50 })
        .collect();
    let dep = learned_race(&latencies, 60, 50);
    let _busy = busy(&dep);
    let delay = dep.hedge.as_ref().unwrap().delay().unwrap();
    assert_eq!(delay, ms(50));
    let fake = Shaped::new(&[(200, 1000), (200, 45)]);
    let start = Instant::now();
    shaped(&dep, &Ledger::new(), 2000, &fake).await;
    assert_eq!(fake.starts(start)[1].0, delay);
}
