//! The acceptance test of the adaptive limit, after Envoy's: a closed loop
//! of 100 callers against a simulated partner with `W` workers, under the
//! paused clock.
//!
//! Each call takes a client permit (a semaphore resized to the limit as
//! calls finish), then waits for one of the partner's `W` workers and holds
//! it for the service time `S`: its latency is queue wait plus `S`. Every
//! answer goes to [`AdaptiveLimit::on_sample`]. The clock only moves when
//! every task waits, so 60 simulated seconds take a fraction of a real one
//! and give the same figures on every run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio::time::sleep;

use super::*;

const CALLERS: usize = 100;
const RUN: Duration = Duration::from_secs(60);
const LAST: Duration = Duration::from_secs(10);
const TICK: Duration = Duration::from_millis(10);

/// The partner: `W` workers, a service time that can change, a count of
/// calls waiting for a worker.
struct Partner {
    workers: Semaphore,
    service_ms: AtomicU64,
    waiting: AtomicUsize,
}

impl Partner {
    async fn call(&self) {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let worker = self.workers.acquire().await.expect("never closed");
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        sleep(Duration::from_millis(
            self.service_ms.load(Ordering::SeqCst),
        ))
        .await;
        drop(worker);
    }
}

/// The client's permits: as many in circulation as the limit says, resized
/// when a call gives its permit back.
struct Permits {
    semaphore: Semaphore,
    circulating: Mutex<usize>,
    in_flight: AtomicUsize,
}

impl Permits {
    fn new(limit: usize) -> Self {
        Self {
            semaphore: Semaphore::new(limit),
            circulating: Mutex::new(limit),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// Waits for a permit; the calls in flight, this one included.
    async fn acquire(&self) -> usize {
        self.semaphore
            .acquire()
            .await
            .expect("never closed")
            .forget();
        self.in_flight.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Gives a permit back, and resizes the permits to `limit`.
    fn release(&self, limit: usize) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        let mut circulating = self.circulating.lock().unwrap();
        if *circulating > limit {
            *circulating -= 1;
            let extra = (*circulating - limit).min(self.semaphore.available_permits());
            *circulating -= self.semaphore.forget_permits(extra);
        } else {
            self.semaphore.add_permits(1);
        }
        if *circulating < limit {
            self.semaphore.add_permits(limit - *circulating);
            *circulating = limit;
        }
    }
}

/// What the last [`LAST`] of a run looked like.
#[derive(Debug)]
struct Figures {
    limit_mean: f64,
    limit_min: usize,
    limit_max: usize,
    waiting_mean: f64,
    waiting_max: usize,
    calls: usize,
    /// The limit's mean over each 5 s of the run.
    trace: Vec<f64>,
}

/// Runs [`CALLERS`] callers against `workers` for [`RUN`]; the service time
/// is 50 ms, or `slow_ms` from halfway on.
async fn run(workers: usize, slow_ms: Option<u64>, config: AdaptiveLimitConfig) -> Figures {
    let limit = Arc::new(AdaptiveLimit::new(config).unwrap());
    let partner = Arc::new(Partner {
        workers: Semaphore::new(workers),
        service_ms: AtomicU64::new(50),
        waiting: AtomicUsize::new(0),
    });
    let permits = Arc::new(Permits::new(limit.current()));
    let start = Instant::now();
    let end = start + RUN;
    let last_from = end - LAST;
    let late_calls = Arc::new(AtomicUsize::new(0));

    let mut callers = Vec::new();
    for _ in 0..CALLERS {
        let (limit, partner, permits) = (limit.clone(), partner.clone(), permits.clone());
        let late_calls = late_calls.clone();
        callers.push(tokio::spawn(async move {
            while Instant::now() < end {
                let in_flight = permits.acquire().await;
                let sent = Instant::now();
                partner.call().await;
                let now = Instant::now();
                let next = limit.on_sample(now, now - sent, in_flight, Sample::Success);
                permits.release(next);
                if now >= last_from && now < end {
                    late_calls.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    if let Some(slow_ms) = slow_ms {
        let partner = partner.clone();
        tokio::spawn(async move {
            sleep(RUN / 2).await;
            partner.service_ms.store(slow_ms, Ordering::SeqCst);
        });
    }

    let (mut limits, mut waiting, mut trace, mut bucket) = (vec![], vec![], vec![], vec![]);
    while Instant::now() < end {
        sleep(TICK).await;
        let current = limit.current();
        bucket.push(current as f64);
        if bucket.len() == 500 {
            trace.push(bucket.iter().sum::<f64>() / bucket.len() as f64);
            bucket.clear();
        }
        if Instant::now() > last_from {
            limits.push(current);
            waiting.push(partner.waiting.load(Ordering::SeqCst));
        }
    }
    for caller in callers {
        caller.await.unwrap();
    }
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
    Figures {
        limit_mean: mean(&limits),
        limit_min: *limits.iter().min().unwrap(),
        limit_max: *limits.iter().max().unwrap(),
        waiting_mean: mean(&waiting),
        waiting_max: *waiting.iter().max().unwrap(),
        calls: late_calls.load(Ordering::SeqCst),
        trace,
    }
}

/// The assertions every run shares: the limit's mean over the last 10 s is
/// within `[W, 2W]`, the partner's queue stays below `W` (without a limit
/// it would hold `100 - W` calls), and the partner is kept busy (at least
/// 90 % of the calls its workers can answer in 10 s).
fn check(workers: usize, service: Duration, figures: &Figures) {
    let Figures {
        limit_mean,
        limit_min,
        limit_max,
        waiting_mean,
        waiting_max,
        calls,
        trace,
    } = figures;
    println!(
        "W = {workers}, S = {service:?}, last 10 s: limit mean {limit_mean:.2} \
         (min {limit_min}, max {limit_max}), partner queue mean {waiting_mean:.2} \
         (max {waiting_max}), {calls} calls; limit per 5 s: {trace:.1?}"
    );
    let w = workers as f64;
    assert!(
        (w..=2.0 * w).contains(&figures.limit_mean),
        "W = {workers}: {figures:?}"
    );
    assert!(figures.waiting_max < workers, "W = {workers}: {figures:?}");
    let capacity = w * LAST.as_secs_f64() / service.as_secs_f64();
    assert!(
        figures.calls as f64 >= 0.9 * capacity,
        "W = {workers}: {} calls of {capacity}",
        figures.calls
    );
}

/// Also: in the last 10 s the limit never leaves `[W, 2W]`.
fn check_steady(workers: usize, service: Duration, figures: &Figures) {
    check(workers, service, figures);
    assert!(figures.limit_min >= workers && figures.limit_max <= 2 * workers);
}

#[tokio::test(start_paused = true)]
async fn the_limit_converges_near_8_workers() {
    let figures = run(8, None, AdaptiveLimitConfig::default()).await;
    check_steady(8, Duration::from_millis(50), &figures);
}

#[tokio::test(start_paused = true)]
async fn the_limit_converges_near_32_workers() {
    let figures = run(32, None, AdaptiveLimitConfig::default()).await;
    check_steady(32, Duration::from_millis(50), &figures);
}

#[tokio::test(start_paused = true)]
async fn the_limit_settles_near_8_workers_again_after_a_10x_slowdown() {
    let figures = run(8, Some(500), AdaptiveLimitConfig::default()).await;
    check_steady(8, Duration::from_millis(500), &figures);
}

#[tokio::test(start_paused = true)]
async fn the_limit_settles_near_32_workers_again_after_a_10x_slowdown() {
    let figures = run(32, Some(500), AdaptiveLimitConfig::default()).await;
    check_steady(32, Duration::from_millis(500), &figures);
}

#[tokio::test(start_paused = true)]
async fn probes_every_10_s_keep_the_limit_near_the_workers() {
    let config = AdaptiveLimitConfig {
        probe_interval: Duration::from_secs(10),
        probe_jitter: 0.0,
        ..Default::default()
    };
    for workers in [8, 32] {
        let figures = run(workers, None, config).await;
        check(workers, Duration::from_millis(50), &figures);
        assert_eq!(figures.limit_min, 3, "a probe ran in the last 10 s");
    }
    // A probe that comes after the slowdown measures the slower partner.
    let figures = run(32, Some(500), config).await;
    check(32, Duration::from_millis(500), &figures);
}
