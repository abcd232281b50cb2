//! The HTTP client's pass of the [call engine](crate::outbound): an
//! attempt is a buffered `http::Response<Bytes>`, and the call's answer a
//! [`BudgetResponse`].

use std::sync::Arc;

use bytes::Bytes;

use super::config::Settings;
use super::response::BudgetResponse;
use crate::clock::WallClock;
use crate::outbound::error::CallError;
use crate::outbound::{Call, Plan, Transport};

/// Runs one call through the engine over `transport` and reads its last
/// answer as a [`BudgetResponse`]: the response, the attempts made, its
/// `Retry-After`, and whether that wait is passed up to the caller.
pub(crate) async fn run<T>(
    settings: &Settings,
    clock: &dyn WallClock,
    plan: Plan,
    transport: &T,
) -> Result<BudgetResponse, CallError>
where
    T: Transport<Answer = http::Response<Bytes>>,
{
    let dep = &settings.dependency;
    let finished = Call {
        dep,
        clock,
        plan,
        transport,
    }
    .run()
    .await?;
    Ok(BudgetResponse::new(
        finished.response,
        Arc::clone(&dep.name),
        finished.attempts,
        finished.outcome.retry_after(),
        finished.decision.passes_up(&finished.outcome),
    ))
}

#[cfg(test)]
mod envoy;

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    use http::StatusCode;
    use http::header::RETRY_AFTER;

    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::admission::criticality::Criticality;
    use crate::breaker::BreakerConfig;
    use crate::budget::Budget;
    use crate::floor::Floor;
    use crate::ledger::{Entry, Ledger};
    use crate::outbound::AttemptSpec;
    use crate::outbound::Timing;
    use crate::outbound::attempt::Tried;
    use crate::outbound::error::CallErrorKind;
    use crate::outbound::permits::Permit;
    use crate::outbound::testing::{Shaped, clock, config, ms, plan, response};
    use crate::retry::{Jitter, RetryBudgetConfig};

    /// One call through `settings`' dependency, its attempts made by
    /// `attempt`.
    async fn run<A, F>(
        settings: &Settings,
        clock: &dyn WallClock,
        plan: Plan,
        attempt: A,
    ) -> Result<BudgetResponse, CallError>
    where
        A: Fn(AttemptSpec) -> F + Sync,
        F: std::future::Future<Output = Tried<http::Response<Bytes>>> + Send,
    {
        super::run(
            settings,
            clock,
            plan,
            &crate::outbound::testing::Fake(attempt),
        )
        .await
    }

    /// A fake dependency: each attempt takes `took`, answers the next
    /// status of `script` (the last repeats), and records what it was told.
    struct Fake {
        script: Vec<u16>,
        took: Duration,
        seen: Mutex<Vec<AttemptSpec>>,
    }

    impl Fake {
        fn new(script: &[u16], took: Duration) -> Self {
            Self {
                script: script.to_vec(),
                took,
                seen: Mutex::new(Vec::new()),
            }
        }

        async fn attempt(&self, spec: AttemptSpec) -> Tried<http::Response<Bytes>> {
            let i = {
                let mut seen = self.seen.lock().unwrap();
                seen.push(spec);
                seen.len() - 1
            };
            tokio::time::sleep(self.took).await;
            let status = self.script[i.min(self.script.len() - 1)];
            if status == 0 {
                std::future::pending::<()>().await;
            }
            response(status)
        }

        fn seen(&self) -> Vec<AttemptSpec> {
            self.seen.lock().unwrap().clone()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn rule1_the_header_is_what_is_left_at_each_attempt_and_shrinks() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[503, 503, 200], ms(50));
        let budget = Budget::new(ms(2000)).less(ms(5));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 3));
        let sent: Vec<_> = fake.seen().iter().map(|s| s.budget.unwrap()).collect();
        // 1995; after 50 ms + 100 ms backoff: 1845; after 50 + 200: 1595.
        assert_eq!(sent, [ms(1995), ms(1845), ms(1595)]);
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=50;desc=\"503\", pricing-wait;dur=100, pricing;dur=50;desc=\"503\", \
             pricing-wait;dur=200, pricing;dur=50"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule1_an_attempt_is_limited_to_what_is_left_net_of_the_reserve() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[0], Duration::ZERO); // hangs
        let start = Instant::now();
        let budget = Budget::new(ms(700)).less(ms(20));
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        assert_eq!(start.elapsed(), ms(680));
        assert!(err.is_timeout() && err.is_budget_exhausted());
        assert_eq!(err.attempts(), 1);
        assert_eq!(err.problem().status, 504);
        assert_eq!(
            err.to_string(),
            "call to `pricing` ran out of budget after 1 attempt"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule5_an_attempt_timeout_with_budget_left_is_retried_and_the_header_says_the_cap() {
        let mut c = config();
        c.retry.attempt_timeout = Some(ms(300));
        c.retry.backoff.jitter = crate::retry::Jitter::None;
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[0, 200], ms(10)); // the first attempt hangs
        let start = Instant::now();
        let budget = Budget::new(ms(2000));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!((res.status(), res.attempts()), (StatusCode::OK, 2));
        // 300 ms cap + 100 ms backoff + 10 ms: not the whole 2 s budget.
        assert_eq!(start.elapsed(), ms(410));
        let sent: Vec<_> = fake.seen().iter().map(|s| s.budget.unwrap()).collect();
        assert_eq!(sent, [ms(300), ms(300)], "each attempt is told its cap");
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=300;desc=\"timeout\", pricing-wait;dur=100, pricing;dur=10"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule1_the_attempt_cap_never_lengthens_an_attempt_past_the_budget() {
        let mut c = config();
        c.retry.attempt_timeout = Some(ms(5000));
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[0], Duration::ZERO);
        let start = Instant::now();
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(400))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        assert_eq!(start.elapsed(), ms(400));
        assert!(err.is_budget_exhausted());
        assert_eq!(fake.seen()[0].budget, Some(ms(400)));
    }

    #[tokio::test(start_paused = true)]
    async fn rule2_below_the_floor_no_attempt_is_made_and_the_ledger_says_why() {
        let mut c = config();
        c.floor = Floor::new(ms(1000)).into();
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[200], Duration::ZERO);
        let budget = Budget::new(ms(855)).less(ms(5));
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        assert!(err.is_below_floor() && err.is_unavailable());
        assert!(fake.seen().is_empty());
        assert_eq!(
            ledger.entries(),
            [Entry::skip("pricing", "skipped: 850ms < floor 1000ms")]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_a_learned_floor_refuses_below_the_observed_latency_and_says_why() {
        let mut c = config();
        c.floor = crate::floor::FloorConfig::auto();
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[200], ms(400));
        for _ in 0..20 {
            let ledger = Ledger::new();
            let timing = Timing::Budget(Budget::new(ms(2000)));
            run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await
            .unwrap();
        }
        tokio::time::advance(crate::floor::REFRESH).await;
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(300)));
        let err = run(&settings, &clock(), plan(timing, &ledger), |s| {
            fake.attempt(s)
        })
        .await
        .unwrap_err();
        assert!(err.is_below_floor());
        assert_eq!(fake.seen().len(), 20, "no attempt below the learned floor");
        assert_eq!(
            ledger.entries(),
            [Entry::skip(
                "pricing",
                "skipped: 300ms < floor 400ms (p95 400ms x 1)"
            )]
        );
        assert_eq!(err.problem().floor_ms, Some(400));
    }

    #[tokio::test(start_paused = true)]
    async fn rule2_a_retry_refused_after_its_backoff_is_noted_like_the_first_call() {
        let mut c = config();
        c.floor = crate::floor::FloorConfig::Learned(crate::floor::LearnedFloorConfig {
            min_samples: 1,
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let crate::floor::DependencyFloor::Learned(learned) = &settings.dependency.floor else {
            unreachable!("configured learned")
        };
        let learned = Arc::clone(learned);
        // While the call backs off (10 ms attempt, then 100 ms), other
        // calls learn that the partner now takes 900 ms.
        tokio::spawn(async move {
            tokio::time::sleep(ms(50)).await;
            for _ in 0..10 {
                learned.observe(ms(900));
            }
        });
        let fake = Fake::new(&[503, 200], ms(10));
        let ledger = Ledger::new();
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(1000))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        // The last outcome is the answer; the refused retry is in the
        // ledger as a refused first call would be.
        assert_eq!(
            (res.status(), res.attempts()),
            (StatusCode::SERVICE_UNAVAILABLE, 1)
        );
        assert_eq!(fake.seen().len(), 1);
        assert_eq!(
            ledger.server_timing(),
            "pricing;dur=10;desc=\"503\", pricing-wait;dur=100, \
             pricing;desc=\"skipped: 890ms < floor 900ms (p95 900ms x 1)\""
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule3_backoff_never_sleeps_past_the_deadline_and_keeps_the_floor() {
        let mut c = config();
        c.floor = Floor::new(ms(300)).into();
        c.retry.backoff.initial = ms(400);
        c.retry.max_attempts = 10;
        let settings = c.settings(None).unwrap();
        let ledger = Ledger::new();
        let fake = Fake::new(&[503], ms(100));
        let start = Instant::now();
        let budget = Budget::new(ms(1000));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        // t=0..100 attempt 1; 400 ms wait + 300 floor fits in 900: wait;
        // t=500..600 attempt 2; 800 ms wait + 300 does not fit in 400: stop.
        assert_eq!(res.attempts(), 2);
        assert_eq!(start.elapsed(), ms(600));
        assert!(
            !res.passes_up(),
            "our own backoff did not fit, not the server's wait"
        );
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    }

    /// `config()` (3 attempts, 100 ms of backoff without jitter) over two
    /// replicas.
    fn two_replicas() -> Settings {
        config()
            .endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"])
            .settings(None)
            .unwrap()
    }

    /// One call of `settings` with 2 s to `fake`, answered `200`: when each
    /// attempt started, from the call's start, and whether the ledger
    /// holds a backoff wait.
    async fn retried(settings: &Settings, fake: &Shaped) -> (Vec<Duration>, bool) {
        let ledger = Ledger::new();
        let start = Instant::now();
        let res = run(
            settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(2000))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let starts = fake.starts(start).into_iter().map(|(at, _)| at).collect();
        let waited = ledger
            .entries()
            .iter()
            .any(|e| matches!(e, Entry::Wait { .. }));
        (starts, waited)
    }

    #[tokio::test(start_paused = true)]
    async fn rule7_an_attempt_that_reached_no_replica_is_retried_on_another_at_once() {
        // The first attempt's connection is refused after 1 ms.
        let fake = Shaped::new(&[(0, 1), (200, 30)]);
        assert_eq!(
            retried(&two_replicas(), &fake).await,
            (vec![ms(0), ms(1)], false)
        );
        // To the other replica, sent what is left then.
        let seen = fake.seen.lock().unwrap().clone();
        assert!(!Arc::ptr_eq(&seen[0].1.endpoint, &seen[1].1.endpoint));
        assert_eq!(seen[1].1.budget, Some(ms(1999)));
    }

    #[tokio::test(start_paused = true)]
    async fn rule7_a_retry_after_an_answer_or_a_timeout_waits_its_backoff_with_replicas_too() {
        // A 503 after 1 ms reached its replica: the backoff's 100 ms.
        assert_eq!(
            retried(&two_replicas(), &Shaped::new(&[(503, 1), (200, 30)])).await,
            (vec![ms(0), ms(101)], true)
        );
        // So did an attempt cut at its 50 ms cap.
        let mut c = config().endpoints(["http://127.0.0.1:9001", "http://127.0.0.1:9002"]);
        c.retry.attempt_timeout = Some(ms(50));
        let capped = c.settings(None).unwrap();
        assert_eq!(
            retried(&capped, &Shaped::new(&[(200, 5000), (200, 30)])).await,
            (vec![ms(0), ms(150)], true)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule7_a_refused_connect_to_the_only_endpoint_waits_its_backoff() {
        let settings = config().settings(None).unwrap();
        assert_eq!(
            retried(&settings, &Shaped::new(&[(0, 1), (200, 30)])).await,
            (vec![ms(0), ms(101)], true)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule7_the_backoff_is_told_the_previous_wait() {
        // The test-only decorrelated jitter draws the second wait from
        // [100 ms, 3 x the first wait]; the first from [100, 300]. A second
        // wait above 300 ms shows the loop handed the first one on.
        let mut c = config();
        c.retry.backoff.jitter = Jitter::Decorrelated;
        let settings = c.settings(None).unwrap();
        let mut longest_second = Duration::ZERO;
        for _ in 0..30 {
            let fake = Shaped::new(&[(503, 10)]);
            let start = Instant::now();
            let ledger = Ledger::new();
            let timing = Timing::Fixed(ms(1000));
            let res = run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await
            .unwrap();
            assert_eq!(res.attempts(), 3);
            let starts: Vec<Duration> = fake.starts(start).into_iter().map(|(at, _)| at).collect();
            let first = starts[1] - starts[0] - ms(10);
            let second = starts[2] - starts[1] - ms(10);
            assert!((ms(100)..=ms(300)).contains(&first), "{first:?}");
            assert!(
                second >= ms(100) && second <= first * 3,
                "{first:?} {second:?}"
            );
            longest_second = longest_second.max(second);
        }
        assert!(longest_second > ms(300), "{longest_second:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn rule6_a_retry_after_that_does_not_fit_is_passed_up_without_sleeping() {
        let settings = config().settings(None).unwrap();
        let ledger = Ledger::new();
        let start = Instant::now();
        let budget = Budget::new(ms(500));
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |_| async {
                let mut res = response(429)?;
                res.headers_mut()
                    .insert(RETRY_AFTER, http::HeaderValue::from_static("1"));
                Ok(res)
            },
        )
        .await
        .unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert!(res.passes_up());
        assert_eq!(res.retry_after(), Some(ms(1000)));
        let p = res.deferred().unwrap();
        assert_eq!((p.status, p.retry_after_ms), (429, Some(1000)));
    }

    #[tokio::test(start_paused = true)]
    async fn rule8_the_permit_wait_is_paid_from_the_budget_and_bounded_by_it() {
        let mut c = config();
        c.concurrency = Some(1.into());
        c.floor = Floor::new(ms(200)).into();
        // No standing-queue refusal within this test (rule 11 has its own).
        c.queue.interval = Duration::from_secs(60);
        let settings = c.settings(None).unwrap();
        let holder = hold(&settings).await;
        let ledger = Ledger::new();
        let fake = Fake::new(&[200], Duration::ZERO);
        let start = Instant::now();
        let budget = Budget::new(ms(1000));
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        // Waited until only the floor was left, not a moment more.
        assert_eq!(start.elapsed(), ms(800));
        assert_eq!(err.kind(), CallErrorKind::NoPermit);
        assert!(err.is_unavailable() && err.is_budget_exhausted());
        assert!(fake.seen().is_empty());
        assert_eq!(
            ledger.server_timing(),
            "pricing-queue;dur=800, pricing;desc=\"skipped: no concurrency permit in 800ms\""
        );

        // Freed after 300 ms: the call goes on with 700 ms left, and says so.
        let ledger = Ledger::new();
        let budget = Budget::new(ms(1000));
        tokio::spawn(async move {
            tokio::time::sleep(ms(300)).await;
            drop(holder);
        });
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(budget), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(fake.seen()[0].budget, Some(ms(700)));
        assert_eq!(
            ledger.server_timing(),
            "pricing-queue;dur=300, pricing;dur=0"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule8_the_permit_is_held_through_backoff() {
        let mut c = config();
        c.concurrency = Some(1.into());
        let settings = c.settings(None).unwrap();
        let permits = settings.dependency.permits.clone().unwrap();
        let fake = Fake::new(&[503, 200], ms(10));
        let free_during_backoff = AtomicU32::new(0);
        let ledger = Ledger::new();
        let res = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(2000))), &ledger),
            |s| {
                if s.number == 2 && permits.in_use() == 0 {
                    free_during_backoff.fetch_add(1, Ordering::Relaxed);
                }
                fake.attempt(s)
            },
        )
        .await
        .unwrap();
        assert_eq!(res.attempts(), 2);
        assert_eq!(free_during_backoff.load(Ordering::Relaxed), 0);
        assert_eq!(permits.in_use(), 0, "released at the end");
    }

    /// Takes the dependency's one permit, as another call would.
    async fn hold(settings: &Settings) -> Permit {
        let far = Instant::now() + Duration::from_secs(3600);
        settings
            .dependency
            .permits
            .as_ref()
            .unwrap()
            .acquire(far, Criticality::Default)
            .await
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn rule11_a_call_whose_predicted_wait_does_not_fit_is_refused_at_once() {
        let mut c = config();
        c.concurrency = Some(1.into());
        let settings = c.settings(None).unwrap();
        // The queue learns that its one permit is held 500 ms.
        let first = hold(&settings).await;
        tokio::time::sleep(ms(500)).await;
        drop(first);
        let _holder = hold(&settings).await;
        let ledger = Ledger::new();
        let fake = Fake::new(&[200], Duration::ZERO);
        let start = Instant::now();
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Budget(Budget::new(ms(300))), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        // A wait of one hold (500 ms) cannot fit in 300 ms: refused at
        // arrival, not at the deadline less the floor.
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(err.kind(), CallErrorKind::NoPermit);
        assert!(!err.is_budget_exhausted());
        assert_eq!(err.retry_after(), None);
        assert!(fake.seen().is_empty());
        assert_eq!(
            ledger.server_timing(),
            "pricing;desc=\"skipped: expected wait 500ms + floor 0ms > 300ms left (0 queued, 2.0/s)\""
        );
        let detail = err.problem().detail;
        assert!(
            detail.ends_with(": expected wait 500ms + floor 0ms > 300ms left (0 queued, 2.0/s)"),
            "{detail}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule11_a_freed_permit_goes_to_the_more_critical_waiter() {
        let mut c = config();
        c.concurrency = Some(1.into());
        let settings = Arc::new(c.settings(None).unwrap());
        let holder = hold(&settings).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, criticality) in [
            Criticality::Sheddable,
            Criticality::Default,
            Criticality::Critical,
        ]
        .into_iter()
        .enumerate()
        {
            let (settings, order) = (Arc::clone(&settings), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep(ms(i as u64)).await;
                let mut plan = plan(Timing::Budget(Budget::new(ms(2000))), &Ledger::new());
                plan.criticality = criticality;
                let fake = Fake::new(&[200], ms(10));
                let res = run(&settings, &clock(), plan, |s| fake.attempt(s)).await;
                order.lock().unwrap().push(criticality);
                res.map(|r| r.status())
            }));
        }
        tokio::time::sleep(ms(20)).await;
        drop(holder);
        for task in tasks {
            assert_eq!(task.await.unwrap().unwrap(), StatusCode::OK);
        }
        assert_eq!(
            *order.lock().unwrap(),
            [
                Criticality::Critical,
                Criticality::Default,
                Criticality::Sheddable
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule9_the_retry_budget_is_deposited_once_per_call() {
        let mut c = config();
        c.retry_budget = Some(RetryBudgetConfig {
            min_per_sec: 0,
            ratio: 0.5,
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[503], Duration::ZERO);
        let ledger = Ledger::new();
        for _ in 0..10 {
            let timing = Timing::Budget(Budget::new(ms(10_000)));
            let _ = run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await;
        }
        // 10 calls deposit 5 retries: 15 attempts, not 30.
        assert_eq!(fake.seen().len(), 15);
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_mode_sends_no_budget_and_gives_each_attempt_the_fixed_timeout() {
        let mut c = config();
        c.mode = crate::client::TimeoutMode::Fixed;
        c.fixed_timeout = ms(1000);
        c.floor = Floor::new(ms(60_000)).into(); // ignored in fixed mode
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[0], Duration::ZERO); // hangs
        let ledger = Ledger::new();
        let start = Instant::now();
        let err = run(
            &settings,
            &clock(),
            plan(Timing::Fixed(ms(1000)), &ledger),
            |s| fake.attempt(s),
        )
        .await
        .unwrap_err();
        // 3 x 1000 ms + 100 + 200 ms backoff, whatever a budget would say.
        assert_eq!(start.elapsed(), ms(3300));
        assert_eq!(err.attempts(), 3);
        assert!(err.is_timeout() && !err.is_budget_exhausted());
        assert_eq!(err.problem().status, 504);
        assert!(fake.seen().iter().all(|s| s.budget.is_none()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_breaker_opened_by_failures_refuses_before_any_attempt() {
        let mut c = config();
        c.retry.max_attempts = 1;
        c.breaker = Some(BreakerConfig {
            failure_threshold: 2,
            open_for: ms(5000),
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let fake = Fake::new(&[503], Duration::ZERO);
        let ledger = Ledger::new();
        for _ in 0..2 {
            let timing = Timing::Budget(Budget::new(ms(1000)));
            let res = run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            })
            .await
            .unwrap();
            assert_eq!(res.status(), 503);
        }
        let timing = Timing::Budget(Budget::new(ms(1000)));
        let err = run(&settings, &clock(), plan(timing, &ledger), |s| {
            fake.attempt(s)
        })
        .await
        .unwrap_err();
        assert!(err.is_circuit_open());
        assert_eq!(err.retry_after(), Some(ms(5000)));
        assert_eq!(fake.seen().len(), 2);
        let p = err.problem();
        assert_eq!((p.status, p.retry_after_ms), (503, Some(5000)));
    }

    /// The breaker's silence rule through the engine: a 200 ms dependency
    /// that stops answering, called one call at a time, two a second, with
    /// 2 s budgets (the breaker module's "A dependency that stops
    /// answering").
    #[tokio::test(start_paused = true)]
    async fn a_dependency_that_stops_answering_is_refused_at_once_after_three_timeouts() {
        let mut c = config();
        c.breaker = Some(BreakerConfig {
            failure_threshold: 20,
            open_for: ms(1000),
            ..Default::default()
        });
        let settings = c.settings(None).unwrap();
        let hanging = AtomicBool::new(false);
        let sent = Mutex::new(Vec::new());
        let attempt = |spec: AttemptSpec| {
            sent.lock().unwrap().push(spec);
            let hang = hanging.load(Ordering::Relaxed);
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(ms(200)).await;
                response(200)
            }
        };
        // One call; how long it took and how it ended, paced at 2 a second.
        let call = || async {
            let start = Instant::now();
            let ledger = Ledger::new();
            let timing = Timing::Budget(Budget::new(ms(2000)));
            let res = run(&settings, &clock(), plan(timing, &ledger), attempt).await;
            let took = start.elapsed();
            tokio::time::sleep(ms(500).saturating_sub(took)).await;
            (took, res, ledger.server_timing())
        };
        for _ in 0..5 {
            assert_eq!(call().await.1.unwrap().status(), StatusCode::OK);
        }
        let breaker = settings.dependency.endpoints.breaker().unwrap();
        assert_eq!(breaker.typical_latency(), Some(ms(200)));

        hanging.store(true, Ordering::Relaxed);
        for _ in 0..3 {
            let (took, res, _) = call().await;
            assert_eq!(took, ms(2000), "each waits out its budget");
            assert!(res.unwrap_err().is_timeout());
        }
        // From now on: refused at once, but for one probe at a time, which
        // gets the silence limit (800 ms) rather than the whole budget.
        let probes_before = sent.lock().unwrap().len();
        let mut refused = 0;
        for _ in 0..10 {
            let (took, res, timing) = call().await;
            let err = res.unwrap_err();
            if err.is_circuit_open() {
                assert_eq!(took, Duration::ZERO);
                assert_eq!(err.problem().status, 503);
                assert!(
                    timing.starts_with("pricing;desc=\"skipped: circuit open (no answer for "),
                    "{timing}"
                );
                refused += 1;
            } else {
                assert!(err.is_timeout(), "{err}");
                assert!(took <= ms(1000), "the probe ends early: {took:?}");
            }
        }
        let probes: Vec<AttemptSpec> = sent.lock().unwrap()[probes_before..].to_vec();
        assert!(refused >= 7, "{refused} of 10 refused at once");
        assert!(!probes.is_empty() && probes.len() <= 3, "{probes:?}");
        assert!(
            probes.iter().all(|p| p.budget == Some(ms(800))),
            "{probes:?}"
        );

        // Back: within open_for plus one probe limit, a call succeeds.
        hanging.store(false, Ordering::Relaxed);
        let back = Instant::now();
        loop {
            let (_, res, _) = call().await;
            if res.is_ok() {
                break;
            }
        }
        assert!(back.elapsed() <= ms(2000), "{:?}", back.elapsed());
        assert_eq!(breaker.state(), crate::breaker::BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_call_makes_no_further_attempt() {
        let settings = config().settings(None).unwrap();
        let fake = Fake::new(&[503], ms(10));
        let ledger = Ledger::new();
        let timing = Timing::Budget(Budget::new(ms(5000)));
        // Dropped during the first backoff (10 ms attempt + 100 ms wait).
        let cut = tokio::time::timeout(
            ms(50),
            run(&settings, &clock(), plan(timing, &ledger), |s| {
                fake.attempt(s)
            }),
        )
        .await;
        assert!(cut.is_err());
        tokio::time::sleep(ms(10_000)).await;
        assert_eq!(fake.seen().len(), 1);
    }
}
