use std::collections::HashMap;

use super::*;
use crate::breaker::{BreakerConfig, Verdict};
use crate::client::DependencyConfig;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

const THREE: [&str; 3] = [
    "http://127.0.0.1:9001",
    "http://127.0.0.1:9002",
    "http://127.0.0.1:9003",
];

fn dependency(endpoints: &[&str], breaker: bool) -> Dependency {
    let mut c = DependencyConfig::new("pricing", "http://127.0.0.1:9000/pricing")
        .endpoints(endpoints.iter().copied());
    if breaker {
        c = c.breaker(BreakerConfig::default().failure_threshold(1));
    }
    c.settings(None).unwrap().dependency
}

fn set(dep: &Dependency) -> Arc<[Arc<Endpoint>]> {
    dep.endpoints.current()
}

/// `dep`'s endpoints, each having answered once in its latency (ms).
fn warm(dep: &Dependency, latencies: &[u64]) -> Arc<[Arc<Endpoint>]> {
    let (endpoints, now) = (set(dep), Instant::now());
    for (endpoint, &latency) in endpoints.iter().zip(latencies) {
        endpoint.load.observe(ms(latency), now);
    }
    endpoints
}

/// Which endpoint (by port) `n` choices went to.
fn spread(dep: &Dependency, n: usize, remaining: Option<Duration>) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for _ in 0..n {
        let chosen = next(dep, remaining, None).unwrap();
        *seen.entry(chosen.endpoint.label.to_string()).or_default() += 1;
    }
    seen
}

/// Which endpoint `n` choices went to, each kept in flight (as under
/// load), with the calls still in flight.
fn spread_in_flight(dep: &Dependency, n: usize) -> (HashMap<String, usize>, Vec<InFlight>) {
    let mut seen = HashMap::new();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let chosen = next(dep, None, None).unwrap();
        *seen.entry(chosen.endpoint.label.to_string()).or_default() += 1;
        held.push(chosen.endpoint.start());
    }
    (seen, held)
}

#[tokio::test(start_paused = true)]
async fn one_endpoint_is_chosen_alone_and_not_balanced() {
    let dep = DependencyConfig::new("a", "http://127.0.0.1:9000/x")
        .settings(None)
        .unwrap()
        .dependency;
    let chosen = first(&dep, Some(ms(100))).await.unwrap();
    assert!(!chosen.balanced);
    assert!(chosen.shown().is_none());
    assert!(chosen.endpoint.target.is_none(), "the URL as it is");
}

#[tokio::test(start_paused = true)]
async fn of_two_the_one_with_less_load_is_chosen_every_time() {
    let dep = dependency(&THREE[..2], false);
    let now = Instant::now();
    set(&dep)[0].load.observe(ms(10), now);
    set(&dep)[1].load.observe(ms(100), now);
    let seen = spread(&dep, 50, Some(ms(1000)));
    assert_eq!(seen.get("127.0.0.1:9001"), Some(&50), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn calls_in_flight_count_in_the_load() {
    let dep = dependency(&THREE[..2], false);
    let now = Instant::now();
    let endpoints = set(&dep);
    endpoints[0].load.observe(ms(10), now);
    endpoints[1].load.observe(ms(30), now);
    // 10 ms x 5 in flight costs more than 30 ms x 1.
    let _held: Vec<_> = (0..4).map(|_| endpoints[0].start()).collect();
    let chosen = next(&dep, None, None).unwrap();
    assert_eq!(&*chosen.endpoint.label, "127.0.0.1:9002");
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_that_does_not_fit_what_is_left_is_not_chosen_while_another_fits() {
    let dep = dependency(&THREE[..2], false);
    let now = Instant::now();
    let endpoints = set(&dep);
    // By load alone 9002 wins (500 ms x 1 < 50 ms x 20) ...
    endpoints[0].load.observe(ms(50), now);
    endpoints[1].load.observe(ms(500), now);
    let _held: Vec<_> = (0..19).map(|_| endpoints[0].start()).collect();
    assert_eq!(
        &*next(&dep, Some(ms(2000)), None).unwrap().endpoint.label,
        "127.0.0.1:9002"
    );
    // ... but with 300 ms left only 9001's latency fits.
    assert_eq!(
        &*next(&dep, Some(ms(300)), None).unwrap().endpoint.label,
        "127.0.0.1:9001"
    );
    // When none fits, load decides again.
    assert_eq!(
        &*next(&dep, Some(ms(20)), None).unwrap().endpoint.label,
        "127.0.0.1:9002"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_goes_to_another_endpoint_than_the_one_that_failed() {
    let dep = dependency(&THREE[..2], false);
    let now = Instant::now();
    let endpoints = set(&dep);
    endpoints[0].load.observe(ms(10), now);
    endpoints[1].load.observe(ms(100), now);
    for _ in 0..20 {
        let chosen = next(&dep, Some(ms(1000)), Some(&endpoints[0])).unwrap();
        assert_eq!(&*chosen.endpoint.label, "127.0.0.1:9002");
    }
    // With one endpoint there is no other: it is chosen again.
    let one = dependency(&THREE[..1], false);
    let only = Arc::clone(&set(&one)[0]);
    assert_eq!(next(&one, None, Some(&only)).unwrap().endpoint, only);
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_whose_breaker_is_open_is_passed_over_and_all_open_is_circuit_open() {
    let dep = dependency(&THREE[..2], true);
    let endpoints = set(&dep);
    endpoints[0].load.observe(ms(10), Instant::now());
    endpoints[1].load.observe(ms(100), Instant::now());
    // One failure opens 9001's breaker (failure_threshold 1).
    let chosen = next(&dep, None, None).unwrap();
    assert_eq!(&*chosen.endpoint.label, "127.0.0.1:9001");
    chosen.breaker.unwrap().record(Verdict::Failure);
    for _ in 0..10 {
        let chosen = next(&dep, None, None).unwrap();
        assert_eq!(&*chosen.endpoint.label, "127.0.0.1:9002");
    }
    let chosen = next(&dep, None, None).unwrap();
    chosen.breaker.unwrap().record(Verdict::Failure);
    match next(&dep, None, None) {
        Err(NotChosen::Open(open)) => assert!(open.retry_after() > Duration::ZERO),
        other => panic!("expected every circuit open, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_cold_endpoint_is_taken_as_the_fastest_and_gets_its_share() {
    let dep = dependency(&THREE, false);
    warm(&dep, &[40, 60]);
    // 9003 is cold: taken as 40 ms, as fast as 9001, so with no calls in
    // flight it is as likely as 9001 (and 9002 never).
    let idle = spread(&dep, 2000, None);
    assert_eq!(idle.get("127.0.0.1:9002"), None, "{idle:?}");
    let cold = idle.get("127.0.0.1:9003").copied().unwrap_or(0);
    assert!((850..=1150).contains(&cold), "{idle:?}");
    // With every call kept in flight, each endpoint takes calls until its
    // load (estimate times calls in flight plus one) passes the others':
    // shares of 1/40 : 1/60 : 1/40, 37.5 %, 25 % and 37.5 %. Not flooded.
    let (seen, _held) = spread_in_flight(&dep, 300);
    let cold = seen.get("127.0.0.1:9003").copied().unwrap_or(0);
    assert!((105..=120).contains(&cold), "{seen:?}");
    assert!((70..=80).contains(&seen["127.0.0.1:9002"]), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn every_endpoint_cold_the_calls_go_round_by_their_calls_in_flight() {
    // No estimate anywhere: every load is zero, and the calls in flight
    // decide, so a burst on a cold dependency is spread, not piled on one.
    let dep = dependency(&THREE, false);
    let (seen, _held) = spread_in_flight(&dep, 30);
    assert!(seen.values().all(|&n| n == 10), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn of_three_the_least_loaded_is_chosen_not_a_random_pair_s_better() {
    // 9003 was just outrun by a hedge (its estimate doubled), 9001 has
    // four calls in flight, 9002 none. Two random draws would pair 9003
    // with 9001 one time in three and send the call to 9001 behind its
    // four; the least loaded of all is 9002 every time.
    let dep = dependency(&THREE, false);
    let endpoints = warm(&dep, &[50, 50, 50]);
    endpoints[2].load.outrun(ms(60), Instant::now());
    let _busy: Vec<_> = (0..4).map(|_| endpoints[0].start()).collect();
    let seen = spread(&dep, 300, Some(ms(2000)));
    assert_eq!(seen.get("127.0.0.1:9002"), Some(&300), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_slow_replica_gets_little_traffic_and_the_rest_is_shared() {
    let dep = dependency(&THREE, false);
    warm(&dep, &[50, 50, 500]);
    let seen = spread(&dep, 3000, Some(ms(2000)));
    assert_eq!(seen.get("127.0.0.1:9003"), None, "{seen:?}");
    let (a, b) = (seen["127.0.0.1:9001"], seen["127.0.0.1:9002"]);
    assert!(a.abs_diff(b) < 300, "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn an_idle_slow_replica_is_tried_again_once_its_estimate_has_decayed() {
    let dep = dependency(&THREE[..2], false);
    let endpoints = set(&dep);
    endpoints[0].load.observe(ms(1000), Instant::now());
    endpoints[1].load.observe(ms(50), Instant::now());
    assert_eq!(
        &*next(&dep, None, None).unwrap().endpoint.label,
        "127.0.0.1:9002"
    );
    // 9002 answers steadily in 50 ms; 9001, unasked, decays by e every
    // `DECAY` (3 s): below 50 ms after 3 s x ln 20, about 9 s.
    for (steps, chosen) in [(80, "127.0.0.1:9002"), (20, "127.0.0.1:9001")] {
        for _ in 0..steps {
            tokio::time::advance(ms(100)).await;
            endpoints[1].load.observe(ms(50), Instant::now());
        }
        assert_eq!(&*next(&dep, None, None).unwrap().endpoint.label, chosen);
    }
}

fn limited(endpoints: &[&str]) -> Dependency {
    use crate::admission::limit::{AdaptiveLimitConfig, LimitConfig};
    DependencyConfig::new("pricing", "http://127.0.0.1:9000/pricing")
        .endpoints(endpoints.iter().copied())
        .concurrency(LimitConfig::Adaptive(AdaptiveLimitConfig::default()))
        .settings(None)
        .unwrap()
        .dependency
}

#[tokio::test(start_paused = true)]
async fn an_endpoint_at_its_own_limit_is_passed_over_while_another_has_room() {
    let dep = limited(&THREE[..2]);
    let now = Instant::now();
    let endpoints = set(&dep);
    // By load alone 9001 wins every time (10 ms x 3 < 100 ms x 1) ...
    endpoints[0].load.observe(ms(10), now);
    endpoints[1].load.observe(ms(100), now);
    let own = endpoints[0].limit.as_ref().expect("a limit of its own");
    assert_eq!(own.current(), 3, "the probe's limit before any answer");
    let held: Vec<_> = (0..2).map(|_| endpoints[0].start()).collect();
    assert_eq!(spread(&dep, 20, None).get("127.0.0.1:9001"), Some(&20));
    // ... until it has its limit's 3 in flight.
    let third = endpoints[0].start();
    assert_eq!(spread(&dep, 20, None).get("127.0.0.1:9002"), Some(&20));
    // With both full, load decides again.
    let _other: Vec<_> = (0..3).map(|_| endpoints[1].start()).collect();
    assert_eq!(
        &*next(&dep, None, None).unwrap().endpoint.label,
        "127.0.0.1:9001"
    );
    drop((held, third));
}

#[tokio::test(start_paused = true)]
async fn only_replicas_have_limits_of_their_own() {
    use crate::admission::limit::{AdaptiveLimitConfig, LimitConfig};
    let auto = LimitConfig::Adaptive(AdaptiveLimitConfig::default());
    let build = |c: DependencyConfig| c.settings(None).unwrap().dependency;
    let one = build(DependencyConfig::new("a", "http://127.0.0.1:9000/x").concurrency(auto));
    assert!(one.endpoints.only().unwrap().limit.is_none());
    assert!(!one.permits.as_ref().unwrap().per_endpoint());
    let fixed = build(
        DependencyConfig::new("a", "http://127.0.0.1:9000/x")
            .endpoints(THREE)
            .concurrency(8),
    );
    assert!(set(&fixed).iter().all(|e| e.limit.is_none()));
    let off = build(
        DependencyConfig::new("a", "http://127.0.0.1:9000/x")
            .endpoints(THREE)
            .concurrency(auto)
            .mode(crate::client::TimeoutMode::Fixed),
    );
    assert!(set(&off).iter().all(|e| e.limit.is_none()));
    let replicas = limited(&THREE);
    assert!(set(&replicas).iter().all(|e| e.limit.is_some()));
    let permits = replicas.permits.as_ref().unwrap();
    assert!(permits.per_endpoint());
    assert_eq!(permits.limit(), 9, "three endpoints at the probe's 3");
}

#[tokio::test(start_paused = true)]
async fn past_the_full_scan_two_are_drawn_at_random() {
    // Ten endpoints, one four times faster: the least loaded of all
    // would take every call; two drawn at random take it only when it is
    // drawn, about one time in five.
    let many: Vec<String> = (0..10)
        .map(|i| format!("http://127.0.0.1:{}", 9001 + i))
        .collect();
    assert!(many.len() > FULL_SCAN);
    let dep = dependency(&many.iter().map(String::as_str).collect::<Vec<_>>(), false);
    let mut latencies = [40; 10];
    latencies[0] = 10;
    warm(&dep, &latencies);
    let fast = spread(&dep, 2000, None)
        .get("127.0.0.1:9001")
        .copied()
        .unwrap_or(0);
    assert!((250..=550).contains(&fast), "{fast} of 2000");
}
