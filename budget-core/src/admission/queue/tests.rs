//! Paused-clock tests of the rules in the [module docs](super).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn queue(limit: usize, order: QueueOrder) -> PermitQueue {
    let config = QueueConfig {
        order,
        ..QueueConfig::default()
    };
    PermitQueue::new(limit, config).unwrap()
}

/// A waiter that will not give up during the test.
fn patient(criticality: Criticality) -> Waiter {
    Waiter::new(Instant::now() + Duration::from_secs(10), criticality)
}

/// Polls `future` once, outside any task (its wake-ups go nowhere).
fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
    Pin::new(future).poll(&mut cx)
}

/// Yields until `done` holds (spawned tasks run meanwhile; the paused
/// clock does not move while tasks are runnable).
async fn until(mut done: impl FnMut() -> bool) {
    for _ in 0..1_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached");
}

type Log = Arc<Mutex<Vec<(&'static str, Duration)>>>;

/// Queues `waiters` in the given order, one task each. A task that gets a
/// permit logs its label and the time since `start`, holds the permit for
/// `hold`, and returns `Ok(())`; a refused one returns its refusal.
async fn line_up(
    queue: &PermitQueue,
    waiters: &[(&'static str, Waiter)],
    start: Instant,
    hold: Duration,
    log: &Log,
) -> Vec<JoinHandle<Result<(), Refusal>>> {
    let mut tasks = Vec::new();
    for &(label, waiter) in waiters {
        let before = queue.waiting();
        let (queue2, log) = (queue.clone(), Arc::clone(log));
        tasks.push(tokio::spawn(async move {
            let permit = queue2.acquire(waiter).await?;
            log.lock().unwrap().push((label, start.elapsed()));
            sleep(hold).await;
            drop(permit);
            Ok(())
        }));
        until(|| queue.waiting() == before + 1).await;
    }
    tasks
}

async fn join_all(tasks: Vec<JoinHandle<Result<(), Refusal>>>) -> Vec<Result<(), Refusal>> {
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}

fn labels(log: &Log) -> Vec<&'static str> {
    log.lock()
        .unwrap()
        .iter()
        .map(|(label, _)| *label)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn new_refuses_a_zero_limit_and_a_bad_config_naming_the_field() {
    let err = PermitQueue::new(0, QueueConfig::default()).unwrap_err();
    assert_eq!(err.field(), "limit");
    assert_eq!(
        err.to_string(),
        "invalid config: `limit` must be at least 1"
    );
    let bad = QueueConfig {
        interval: Duration::ZERO,
        ..QueueConfig::default()
    };
    assert_eq!(PermitQueue::new(4, bad).unwrap_err().field(), "interval");
}

#[tokio::test(start_paused = true)]
async fn try_acquire_takes_free_permits_and_waited_is_zero() {
    let queue = queue(2, QueueOrder::Adaptive);
    let a = queue.try_acquire().unwrap();
    let b = queue.try_acquire().unwrap();
    assert_eq!((a.waited(), b.waited()), (Duration::ZERO, Duration::ZERO));
    assert!(queue.try_acquire().is_none());
    assert_eq!(queue.in_use(), 2);
    drop(a);
    assert_eq!(queue.in_use(), 1);
    let free = queue.acquire(patient(Criticality::Default)).await.unwrap();
    assert_eq!(free.waited(), Duration::ZERO);
    drop((b, free));
    assert_eq!(queue.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn fifo_serves_the_oldest_first() {
    let queue = queue(1, QueueOrder::Fifo);
    let start = Instant::now();
    let held = queue.try_acquire().unwrap();
    let log = Log::default();
    let line = [
        ("a", patient(Criticality::Default)),
        ("b", patient(Criticality::Default)),
        ("c", patient(Criticality::Default)),
    ];
    let tasks = line_up(&queue, &line, start, ms(1), &log).await;
    sleep(ms(2)).await;
    drop(held);
    assert!(join_all(tasks).await.iter().all(Result::is_ok));
    assert_eq!(
        *log.lock().unwrap(),
        vec![("a", ms(2)), ("b", ms(3)), ("c", ms(4))]
    );
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn lifo_serves_the_newest_first() {
    let queue = queue(1, QueueOrder::Lifo);
    let start = Instant::now();
    let held = queue.try_acquire().unwrap();
    let log = Log::default();
    let line = [
        ("a", patient(Criticality::Default)),
        ("b", patient(Criticality::Default)),
        ("c", patient(Criticality::Default)),
    ];
    let tasks = line_up(&queue, &line, start, ms(1), &log).await;
    drop(held);
    assert!(join_all(tasks).await.iter().all(Result::is_ok));
    assert_eq!(
        *log.lock().unwrap(),
        vec![("c", ms(0)), ("b", ms(1)), ("a", ms(2))]
    );
}

#[tokio::test(start_paused = true)]
async fn adaptive_is_fifo_while_the_queue_keeps_emptying() {
    let queue = queue(1, QueueOrder::Adaptive);
    let start = Instant::now();
    let log = Log::default();
    // Two spells of 90 ms with waiters (180 ms in all), the queue empty in
    // between: never `interval` (100 ms) without emptying.
    for round in [["a", "b", "c"], ["d", "e", "f"]] {
        let held = queue.try_acquire().unwrap();
        let line = round.map(|label| (label, patient(Criticality::Default)));
        let tasks = line_up(&queue, &line, start, ms(1), &log).await;
        sleep(ms(89)).await;
        assert!(!queue.is_overloaded());
        sleep(ms(1)).await;
        drop(held);
        assert!(join_all(tasks).await.iter().all(Result::is_ok));
        assert_eq!(queue.waiting(), 0);
    }
    assert_eq!(labels(&log), ["a", "b", "c", "d", "e", "f"]);
    let times: Vec<_> = log.lock().unwrap().iter().map(|(_, t)| *t).collect();
    assert_eq!(times, [90, 91, 92, 183, 184, 185].map(ms));
}

/// A queue whose permits have been held `hold` each: `limit` permits
/// taken and returned after `hold`, so that the measured hold is `hold`.
async fn measured(limit: usize, order: QueueOrder, hold: Duration) -> PermitQueue {
    let queue = queue(limit, order);
    let permits: Vec<_> = (0..limit).map(|_| queue.try_acquire().unwrap()).collect();
    sleep(hold).await;
    drop(permits);
    assert_eq!(queue.hold(), Some(hold));
    queue
}

/// How one arrival ended: its label, when (since the test's start) and
/// how long it waited, or its refusal.
type Ends = Arc<Mutex<Vec<(usize, Duration, Result<Duration, Refusal>)>>>;

/// `count` waiters arriving one after another at `start` (no time passes
/// between them), each giving up `give_up` after arriving and holding a
/// permit for `hold`; returns once each has queued or been refused.
async fn arrive(
    queue: &PermitQueue,
    count: usize,
    give_up: Duration,
    hold: Duration,
    ends: &Ends,
) -> Vec<JoinHandle<()>> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..count {
        let before = queue.waiting();
        let refused_before = ends.lock().unwrap().len();
        let (queue2, ends2) = (queue.clone(), Arc::clone(ends));
        let task = tokio::spawn(async move {
            let waiter = Waiter::new(Instant::now() + give_up, Criticality::Default);
            let result = queue2.acquire(waiter).await;
            let at = start.elapsed();
            match result {
                Ok(permit) => {
                    ends2.lock().unwrap().push((i, at, Ok(permit.waited())));
                    sleep(hold).await;
                    drop(permit);
                }
                Err(refusal) => ends2.lock().unwrap().push((i, at, Err(refusal))),
            }
        });
        until(|| queue.waiting() == before + 1 || ends.lock().unwrap().len() > refused_before)
            .await;
        tasks.push(task);
    }
    tasks
}

#[tokio::test(start_paused = true)]
async fn a_burst_whose_predicted_wait_fits_is_served_whole_in_order() {
    // 8 permits held 50 ms each: 160 a second. 300 at once with 10 s to
    // wait: the last one's wait, 1.875 s, fits; the queue stands 1.9 s
    // without emptying, far past `interval`, and refuses nobody.
    let queue = measured(8, QueueOrder::Adaptive, ms(50)).await;
    let ends = Ends::default();
    let tasks = arrive(&queue, 300, Duration::from_secs(10), ms(50), &ends).await;
    for task in tasks {
        task.await.unwrap();
    }
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), 300);
    for &(i, at, ref result) in ends.iter() {
        let waited = result.as_ref().expect("every waiter served");
        // Oldest first, 8 every 50 ms: the order a FIFO of predicted waits
        // promised.
        assert_eq!(*waited, ms(50) * (i / 8) as u32, "waiter {i}");
        assert_eq!(at, *waited);
    }
    assert!(!queue.is_overloaded());
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_newcomer_whose_predicted_wait_does_not_fit_is_refused_at_arrival() {
    // The same burst with 1 s to wait: the first 8 take the free permits,
    // waiter `i` after them is predicted `ceil((i - 7) / 8)` rounds of
    // 50 ms, so waiters 8 to 159 (at most 950 ms) queue, and the rest,
    // predicted 1 s with 152 ahead, are refused at once, their wait and
    // the rate on the refusal.
    let queue = measured(8, QueueOrder::Adaptive, ms(50)).await;
    let ends = Ends::default();
    let tasks = arrive(&queue, 300, Duration::from_secs(1), ms(50), &ends).await;
    for task in tasks {
        task.await.unwrap();
    }
    let ends = ends.lock().unwrap();
    let (served, refused): (Vec<_>, Vec<_>) = ends.iter().partition(|(_, _, r)| r.is_ok());
    assert_eq!(served.len(), 160);
    assert!(served.iter().all(|&&(i, _, _)| i < 160));
    for &&(i, at, ref result) in &refused {
        let refusal = result.as_ref().unwrap_err();
        assert_eq!(
            refusal.reason(),
            RefusalReason::PredictedWait,
            "waiter {i}: {refusal}"
        );
        assert_eq!((at, refusal.waited()), (Duration::ZERO, Duration::ZERO));
        let prediction = refusal.prediction().expect("a prediction");
        assert_eq!(prediction.ahead(), 152, "every one behind the same 152");
        assert_eq!(prediction.wait(), Duration::from_secs(1));
        assert_eq!(prediction.per_second(), 160.0);
    }
    // Every admitted waiter got its permit before it gave up.
    assert!(served.iter().all(|(_, at, _)| *at < Duration::from_secs(1)));
}

/// A limit above the partner's workers comes back in rounds of short holds
/// and a few long ones (10 permits on 8 workers of 50 ms: eight after
/// 55 ms, two after 105). The hold is the round's mean, so the long holds,
/// which come back last, do not make the partner look slower than it is
/// just when the queue decides whom to refuse (a moving average that gave
/// each return a fifth read 75 ms here, and 133 permits a second for 154).
#[tokio::test(start_paused = true)]
async fn the_hold_is_a_round_s_mean_not_its_last_long_holds() {
    let queue = queue(10, QueueOrder::Fifo);
    for _ in 0..3 {
        let mut permits = (0..10)
            .map(|_| queue.try_acquire().unwrap())
            .collect::<Vec<_>>()
            .into_iter();
        sleep(ms(55)).await;
        permits.by_ref().take(8).for_each(drop);
        sleep(ms(50)).await;
        drop(permits);
    }
    assert_eq!(queue.hold(), Some(ms(65)));
    // What a newcomer is told: ten permits every 65 ms.
    let held: Vec<_> = (0..10).map(|_| queue.try_acquire().unwrap()).collect();
    let waiter = Waiter::new(Instant::now() + ms(1), Criticality::Default);
    let refusal = queue.acquire(waiter).await.unwrap_err();
    let rate = refusal.prediction().unwrap().per_second();
    assert!((rate - 10.0 / 0.065).abs() < 0.5, "{rate}");
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn the_prediction_follows_a_drain_rate_that_changes() {
    // One permit held 10 ms: five queued, the sixth is predicted 60 ms.
    let queue = measured(1, QueueOrder::Fifo, ms(10)).await;
    let held = queue.try_acquire().unwrap();
    let ends = Ends::default();
    let tasks = arrive(&queue, 5, ms(250), ms(100), &ends).await;
    let sixth = Waiter::new(Instant::now() + ms(59), Criticality::Default);
    let refusal = queue.acquire(sixth).await.unwrap_err();
    assert_eq!(refusal.reason(), RefusalReason::PredictedWait);
    assert_eq!(refusal.prediction().map(|p| p.wait()), Some(ms(60)));
    // The partner slows down: every permit is now held 100 ms. At 100 ms
    // the measured hold is 55 ms (the mean of the 10 ms and the 100 ms),
    // and with 150 ms left waiters 4 and 3 (four and three holds, 220 and
    // 165 ms) are refused then, for their prediction, not at their give-up
    // instant; waiter 2 (110 ms) stays. At 200 ms the hold is 70 ms (10,
    // 100, 100), and with 50 ms left waiter 2 is refused for its
    // prediction too, where a queue that waited for the give-up instant
    // would have held it to 250 ms.
    sleep(ms(100)).await;
    drop(held);
    assert_eq!(queue.hold(), Some(ms(55)));
    for task in tasks {
        task.await.unwrap();
    }
    let ends = ends.lock().unwrap();
    let mut outcome: Vec<_> = ends
        .iter()
        .map(|(i, at, r)| (*i, *at, r.as_ref().map_err(Refusal::reason).copied()))
        .collect();
    outcome.sort_by_key(|(i, _, _)| *i);
    let predicted = RefusalReason::PredictedWait;
    assert_eq!(
        outcome,
        [
            (0, ms(100), Ok(ms(100))),
            (1, ms(200), Ok(ms(200))),
            (2, ms(200), Err(predicted)),
            (3, ms(100), Err(predicted)),
            (4, ms(100), Err(predicted)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_growing_limit_counts_its_doublings_in_the_prediction() {
    // 10 permits held 50 ms, just taken, 290 waiting: at 10 a time the
    // next one waits 30 rounds, 1.5 s (291 permits to come back); with the
    // limit doubling every 100 ms (10, 20, 40, 80, 160 serve 310 in 5
    // rounds), the first round at 50 ms and four more, 450 ms.
    let queue = measured(10, QueueOrder::Fifo, ms(50)).await;
    let held: Vec<_> = (0..10).map(|_| queue.try_acquire().unwrap()).collect();
    let ends = Ends::default();
    let tasks = arrive(&queue, 290, Duration::from_secs(10), ms(1), &ends).await;
    let newcomer = || Waiter::new(Instant::now() + ms(400), Criticality::Default);
    let flat = queue.acquire(newcomer()).await.unwrap_err();
    assert_eq!(flat.prediction().map(|p| p.wait()), Some(ms(1500)));
    queue.set_growth(Some(ms(100)));
    let growing = queue.acquire(newcomer()).await.unwrap_err();
    assert_eq!(growing.prediction().map(|p| p.wait()), Some(ms(450)));
    queue.set_growth(None);
    drop(held);
    for task in tasks {
        task.await.unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_queue_fed_faster_than_it_drains_stands_and_admits_only_short_waits() {
    // One permit held 10 ms (100 a second); a newcomer every 2 ms (500 a
    // second) with 1 s to wait, for 400 ms. The queue deepens past a
    // quarter of a second of wait (25 ahead) at about 62 ms and has not
    // emptied for `interval` at 100 ms: from then on it stands, and a
    // newcomer predicted to wait more than 250 ms is refused at once.
    let queue = measured(1, QueueOrder::Adaptive, ms(10)).await;
    let start = Instant::now();
    let ends = Ends::default();
    let mut tasks = Vec::new();
    let mut standing_seen = None;
    for _ in 0..200 {
        tasks.extend(arrive(&queue, 1, Duration::from_secs(1), ms(10), &ends).await);
        if standing_seen.is_none() && queue.is_overloaded() {
            standing_seen = Some(start.elapsed());
        }
        sleep(ms(2)).await;
    }
    // The first newcomer took the free permit; the queue has not been
    // empty since the second, at 2 ms.
    assert_eq!(standing_seen, Some(ms(102)));
    assert!(queue.is_overloaded());
    // Arrivals stop: the queue drains and stops standing.
    for task in tasks {
        task.await.unwrap();
    }
    sleep(ms(100)).await;
    assert!(!queue.is_overloaded());
    let ends = ends.lock().unwrap();
    let reasons: Vec<_> = ends
        .iter()
        .filter_map(|(_, _, r)| r.as_ref().err().map(Refusal::reason))
        .collect();
    let standing = reasons
        .iter()
        .filter(|r| **r == RefusalReason::StandingQueue)
        .count();
    assert!(
        standing > 100,
        "{standing} refused as standing of {}",
        reasons.len()
    );
    // Refused at arrival (waited zero), or once newer waiters had
    // overtaken it for more than a quarter of its second (served newest
    // first while the queue stands): nobody admitted waited out its budget.
    let mut overtaken = 0;
    for (i, _, result) in ends.iter() {
        if let Err(refusal) = result {
            assert_ne!(refusal.reason(), RefusalReason::Expired, "waiter {i}");
            if !refusal.waited().is_zero() {
                assert_eq!(refusal.reason(), RefusalReason::StandingQueue);
                assert!(refusal.waited() > ms(250), "waiter {i}: {refusal:?}");
                // Checked when a permit comes back: at most a hold late.
                assert!(refusal.waited() <= ms(260), "waiter {i}: {refusal:?}");
                overtaken += 1;
            }
        }
    }
    assert!(overtaken > 0, "the oldest waiters are overtaken");
    let served = ends.iter().filter(|(_, _, r)| r.is_ok()).count();
    // The permit was never idle while someone waited: 400 ms of arrivals
    // and their drain at 100 a second.
    assert!(served >= 40, "{served} served");
}

/// When a waiter came (since the test's start) and how it ended: served
/// after that wait, or refused.
type Arrival = (Duration, Result<Duration, Refusal>);

#[tokio::test(start_paused = true)]
async fn a_queue_that_stands_longer_than_sustained_lets_newcomers_wait_less_and_less() {
    // As above, one permit held 10 ms and a newcomer every 2 ms with 1 s
    // to wait, but for 6 s: the queue stands from about 100 ms on. Up to
    // 2 s (`sustained`) a waiter overtaken by newer ones is refused once
    // it has waited a quarter of its second; after that, the share
    // shrinks as 2 s / how long it has stood: at 5 s of standing, a
    // waiter waits at most 100 ms.
    let queue = measured(1, QueueOrder::Adaptive, ms(10)).await;
    let start = Instant::now();
    // Per arrival: when it came (since `start`) and how it ended.
    let ends: Arc<Mutex<Vec<Arrival>>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..3_000 {
        let (queue, ends) = (queue.clone(), Arc::clone(&ends));
        let came = start.elapsed();
        tasks.push(tokio::spawn(async move {
            let waiter = Waiter::new(
                Instant::now() + Duration::from_secs(1),
                Criticality::Default,
            );
            match queue.acquire(waiter).await {
                Ok(permit) => {
                    ends.lock().unwrap().push((came, Ok(permit.waited())));
                    sleep(ms(10)).await;
                    drop(permit);
                }
                Err(refusal) => ends.lock().unwrap().push((came, Err(refusal))),
            }
        }));
        sleep(ms(2)).await;
    }
    for task in tasks {
        task.await.unwrap();
    }
    let ends = ends.lock().unwrap();
    // The longest wait of those that came between `from` and `to`, ms:
    // served, or overtaken and refused.
    let longest = |from: u64, to: u64, served: bool| {
        ends.iter()
            .filter(|(came, _)| (ms(from)..ms(to)).contains(came))
            .filter_map(|(_, r)| match r {
                Ok(waited) if served => Some(*waited),
                Err(refusal) if !served => Some(refusal.waited()),
                _ => None,
            })
            .max()
            .unwrap_or_default()
    };
    let burst = longest(1_000, 1_700, false);
    assert!(burst > ms(250) && burst <= ms(260), "{burst:?}");
    // Those that came from 5.1 s on found a queue that had stood 5 s: 2/5
    // of a quarter of what they could wait, 100 ms, at most a hold late.
    let sustained = longest(5_100, 6_000, false).max(longest(5_100, 6_000, true));
    assert!(sustained > ms(20) && sustained <= ms(110), "{sustained:?}");
    // Nobody waited out their budget, and the permit was never idle while
    // someone waited: 6 s at 100 a second.
    assert!(
        ends.iter()
            .all(|(_, r)| r.as_ref().err().map(Refusal::reason) != Some(RefusalReason::Expired))
    );
    let served = ends.iter().filter(|(_, r)| r.is_ok()).count();
    assert!(served >= 595, "{served} served");
}

#[tokio::test(start_paused = true)]
async fn higher_criticality_is_served_first_then_the_order_within_a_class() {
    use Criticality::{Critical, Default, Sheddable};
    for (order, want) in [
        (QueueOrder::Fifo, ["c1", "c2", "d1", "d2", "s1", "s2"]),
        (QueueOrder::Lifo, ["c2", "c1", "d2", "d1", "s2", "s1"]),
        (QueueOrder::Adaptive, ["c1", "c2", "d1", "d2", "s1", "s2"]),
    ] {
        let queue = queue(1, order);
        let start = Instant::now();
        let held = queue.try_acquire().unwrap();
        let log = Log::default();
        let line = [
            ("s1", patient(Sheddable)),
            ("d1", patient(Default)),
            ("c1", patient(Critical)),
            ("s2", patient(Sheddable)),
            ("d2", patient(Default)),
            ("c2", patient(Critical)),
        ];
        let tasks = line_up(&queue, &line, start, ms(1), &log).await;
        drop(held);
        assert!(join_all(tasks).await.iter().all(Result::is_ok));
        assert_eq!(labels(&log), want, "{order:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiter_is_refused_expired_exactly_at_give_up_at() {
    let queue = queue(1, QueueOrder::Adaptive);
    let start = Instant::now();
    let held = queue.try_acquire().unwrap();
    let give_up_at = start + ms(30);
    let waiter = tokio::spawn({
        let queue = queue.clone();
        async move {
            let result = queue
                .acquire(Waiter::new(give_up_at, Criticality::Critical))
                .await;
            (result.map(|permit| permit.waited()), Instant::now())
        }
    });
    sleep_until(give_up_at - Duration::from_micros(1)).await;
    assert_eq!(queue.waiting(), 1);
    let (result, at) = waiter.await.unwrap();
    assert_eq!(at, give_up_at);
    let refusal = result.unwrap_err();
    assert_eq!(refusal, Refusal::new(RefusalReason::Expired, ms(30)));
    assert_eq!(refusal.to_string(), "no permit: expired after 30ms");
    // The permit freed just after goes back to the pool.
    drop(held);
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_permit_freed_at_give_up_at_skips_the_expired_waiter() {
    let queue = queue(1, QueueOrder::Fifo);
    let start = Instant::now();
    let held = queue.try_acquire().unwrap();
    // `w` is first in line and gives up at 30 ms; `v` is behind it.
    let mut w = Box::pin(queue.acquire(Waiter::new(start + ms(30), Criticality::Default)));
    let mut v = Box::pin(queue.acquire(patient(Criticality::Default)));
    assert!(poll_once(&mut w).is_pending());
    assert!(poll_once(&mut v).is_pending());
    // At 30 ms the permit comes back before `w`'s own timer is looked at.
    tokio::time::advance(ms(30)).await;
    drop(held);
    let Poll::Ready(Ok(permit)) = poll_once(&mut v) else {
        panic!("the live waiter gets the permit");
    };
    assert_eq!(permit.waited(), ms(30));
    let Poll::Ready(refused) = poll_once(&mut w) else {
        panic!("the expired waiter is told");
    };
    assert_eq!(
        refused.unwrap_err(),
        Refusal::new(RefusalReason::Expired, ms(30))
    );
    assert_eq!((queue.in_use(), queue.waiting()), (1, 0));
    drop(permit);
    assert_eq!(queue.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_waiter_already_past_give_up_at_is_refused_at_once_even_with_a_free_permit() {
    let queue = queue(1, QueueOrder::Adaptive);
    sleep(ms(10)).await;
    for give_up_at in [Instant::now(), Instant::now() - ms(5)] {
        let refusal = queue
            .acquire(Waiter::new(give_up_at, Criticality::Critical))
            .await
            .unwrap_err();
        assert_eq!(
            refusal,
            Refusal::new(RefusalReason::Expired, Duration::ZERO)
        );
    }
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn without_a_measured_hold_everyone_queues_until_give_up() {
    // No permit has come back yet: no prediction, so a newcomer queues
    // even with a short budget, and is refused only at its give-up instant.
    let queue = queue(1, QueueOrder::Adaptive);
    let held = queue.try_acquire().unwrap();
    let start = Instant::now();
    let refusal = queue
        .acquire(Waiter::new(start + ms(20), Criticality::Default))
        .await
        .unwrap_err();
    assert_eq!(refusal, Refusal::new(RefusalReason::Expired, ms(20)));
    assert_eq!(queue.hold(), None);
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_waiter_before_its_grant_leaves_the_line() {
    let queue = queue(1, QueueOrder::Fifo);
    let held = queue.try_acquire().unwrap();
    let mut first = Box::pin(queue.acquire(patient(Criticality::Default)));
    let mut second = Box::pin(queue.acquire(patient(Criticality::Default)));
    assert!(poll_once(&mut first).is_pending());
    assert!(poll_once(&mut second).is_pending());
    assert_eq!(queue.waiting(), 2);
    drop(first);
    assert_eq!(queue.waiting(), 1);
    drop(held);
    assert_eq!(queue.in_use(), 1);
    let Poll::Ready(Ok(permit)) = poll_once(&mut second) else {
        panic!("the permit reaches the next waiter");
    };
    drop(permit);
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_waiter_after_a_grant_raced_passes_the_permit_on() {
    let queue = queue(1, QueueOrder::Fifo);
    let held = queue.try_acquire().unwrap();
    let mut first = Box::pin(queue.acquire(patient(Criticality::Default)));
    let mut second = Box::pin(queue.acquire(patient(Criticality::Default)));
    assert!(poll_once(&mut first).is_pending());
    assert!(poll_once(&mut second).is_pending());
    sleep(ms(2)).await;
    // The permit is handed to `first`, which is cancelled before it reads
    // the grant.
    drop(held);
    assert_eq!((queue.in_use(), queue.waiting()), (1, 1));
    drop(first);
    assert_eq!((queue.in_use(), queue.waiting()), (1, 0));
    let Poll::Ready(Ok(permit)) = poll_once(&mut second) else {
        panic!("the permit reaches the next waiter");
    };
    assert_eq!(permit.waited(), ms(2));
    drop(permit);
    // With nobody left, a cancelled grant goes back to the pool.
    let held = queue.try_acquire().unwrap();
    let mut last = Box::pin(queue.acquire(patient(Criticality::Default)));
    assert!(poll_once(&mut last).is_pending());
    drop(held);
    drop(last);
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_spawned_waiter_leaves_the_line() {
    let queue = queue(1, QueueOrder::Adaptive);
    let held = queue.try_acquire().unwrap();
    let task = tokio::spawn({
        let queue = queue.clone();
        async move { queue.acquire(patient(Criticality::Default)).await.is_ok() }
    });
    until(|| queue.waiting() == 1).await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_eq!(queue.waiting(), 0);
    drop(held);
    assert_eq!(queue.in_use(), 0);
}

#[tokio::test(start_paused = true)]
async fn set_limit_grow_wakes_waiters_at_once_most_critical_first() {
    let queue = queue(1, QueueOrder::Adaptive);
    let held = queue.try_acquire().unwrap();
    let mut sheddable = Box::pin(queue.acquire(patient(Criticality::Sheddable)));
    let mut default = Box::pin(queue.acquire(patient(Criticality::Default)));
    let mut critical = Box::pin(queue.acquire(patient(Criticality::Critical)));
    for waiter in [&mut sheddable, &mut default, &mut critical] {
        assert!(poll_once(waiter).is_pending());
    }
    queue.set_limit(3);
    assert_eq!((queue.in_use(), queue.waiting()), (3, 1));
    let Poll::Ready(Ok(_critical)) = poll_once(&mut critical) else {
        panic!("the critical waiter gets a new permit");
    };
    let Poll::Ready(Ok(_default)) = poll_once(&mut default) else {
        panic!("the default waiter gets the other");
    };
    assert!(poll_once(&mut sheddable).is_pending());
    queue.set_limit(4);
    let Poll::Ready(Ok(_sheddable)) = poll_once(&mut sheddable) else {
        panic!("the sheddable waiter gets the fourth");
    };
    assert_eq!((queue.limit(), queue.in_use(), queue.waiting()), (4, 4, 0));
    drop(held);
    assert_eq!(queue.in_use(), 3);
}

#[tokio::test(start_paused = true)]
async fn set_limit_shrink_never_revokes_and_grants_only_below_the_new_limit() {
    let queue = queue(3, QueueOrder::Adaptive);
    let mut held: Vec<_> = (0..3).map(|_| queue.try_acquire().unwrap()).collect();
    queue.set_limit(1);
    assert_eq!((queue.limit(), queue.in_use()), (1, 3));
    let mut waiter = Box::pin(queue.acquire(patient(Criticality::Critical)));
    assert!(poll_once(&mut waiter).is_pending());
    held.pop();
    assert_eq!(queue.in_use(), 2);
    assert!(poll_once(&mut waiter).is_pending());
    held.pop();
    assert_eq!(queue.in_use(), 1);
    assert!(poll_once(&mut waiter).is_pending());
    assert!(queue.try_acquire().is_none());
    held.pop();
    let Poll::Ready(Ok(_granted)) = poll_once(&mut waiter) else {
        panic!("granted once in use is below the new limit");
    };
    assert_eq!((queue.in_use(), queue.waiting()), (1, 0));
    queue.set_limit(0);
    assert_eq!(queue.limit(), 1);
}

/// How one stress waiter ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Granted,
    Refused,
    Cancelled,
}

/// Random waiters (arrival, give-up, hold, criticality, cancellation) on a
/// paused clock; asserts the invariants of the module docs throughout and
/// at the end.
async fn stress(seed: u64, limit: usize, order: QueueOrder, change_limit: bool) {
    const WAITERS: usize = 80;
    const MAX_LIMIT: usize = 4;
    let config = QueueConfig {
        order,
        target: ms(5),
        interval: ms(20),
        standing_share: DEFAULT_STANDING_SHARE,
        sustained: DEFAULT_SUSTAINED,
    };
    let queue = PermitQueue::new(limit, config).unwrap();
    let held = Arc::new(AtomicUsize::new(0));
    let mut rng = StdRng::seed_from_u64(seed);
    let criticalities = [
        Criticality::Sheddable,
        Criticality::Default,
        Criticality::Critical,
    ];
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        let arrive = Duration::from_micros(rng.random_range(0..60_000));
        let give_up = Duration::from_micros(rng.random_range(0..40_000));
        let hold = Duration::from_micros(rng.random_range(0..8_000));
        let cancel = rng
            .random_bool(0.3)
            .then(|| Duration::from_micros(rng.random_range(0..30_000)));
        let criticality = criticalities[rng.random_range(0..3)];
        let (queue, held) = (queue.clone(), Arc::clone(&held));
        tasks.push(tokio::spawn(async move {
            sleep(arrive).await;
            let give_up_at = Instant::now() + give_up;
            let acquire = queue.acquire(Waiter::new(give_up_at, criticality));
            let result = match cancel {
                Some(after) => match tokio::time::timeout(after, acquire).await {
                    Ok(result) => result,
                    Err(_) => return End::Cancelled,
                },
                None => acquire.await,
            };
            match result {
                Ok(permit) => {
                    assert!(
                        Instant::now() < give_up_at,
                        "granted at its give-up instant"
                    );
                    let now_held = held.fetch_add(1, Ordering::SeqCst) + 1;
                    let bound = if change_limit { MAX_LIMIT } else { limit };
                    assert!(now_held <= bound, "{now_held} held, bound {bound}");
                    assert!(queue.in_use() <= bound);
                    sleep(hold).await;
                    held.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                    End::Granted
                }
                Err(refusal) => {
                    match refusal.reason() {
                        // Refused at give_up_at, up to tokio's 1 ms timer
                        // resolution (the instants here are not whole ms).
                        RefusalReason::Expired => {
                            let late = Instant::now() - give_up_at;
                            assert!(late < ms(1), "refused {late:?} after give_up_at");
                        }
                        // Refused at arrival with its prediction, or
                        // overtaken for more than the standing share of
                        // what it could wait: before giving up either way.
                        RefusalReason::StandingQueue => {
                            assert!(Instant::now() < give_up_at);
                            if refusal.waited().is_zero() {
                                assert!(refusal.prediction().is_some());
                            } else {
                                let share = give_up.mul_f64(DEFAULT_STANDING_SHARE);
                                assert!(refusal.waited() > share.max(DEFAULT_TARGET));
                                assert!(refusal.prediction().is_none());
                            }
                        }
                        // At arrival, or once the prediction stopped
                        // fitting: before giving up, never after.
                        RefusalReason::PredictedWait => {
                            assert!(Instant::now() < give_up_at);
                            let p = refusal.prediction().expect("a prediction");
                            assert!(p.wait() >= give_up_at - Instant::now());
                        }
                    }
                    End::Refused
                }
            }
        }));
    }
    let changer = change_limit.then(|| {
        let queue = queue.clone();
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        tokio::spawn(async move {
            for _ in 0..20 {
                sleep(Duration::from_micros(rng.random_range(0..5_000))).await;
                queue.set_limit(rng.random_range(1..=MAX_LIMIT));
            }
        })
    });
    let mut ends = Vec::new();
    for task in tasks {
        ends.push(task.await.unwrap());
    }
    if let Some(changer) = changer {
        changer.await.unwrap();
    }
    assert_eq!(ends.len(), WAITERS);
    assert_eq!(held.load(Ordering::SeqCst), 0);
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0), "{ends:?}");
    // A queue that refused newcomers stands on for an interval (rule 4).
    sleep(config.interval).await;
    assert!(!queue.is_overloaded());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_waiters_never_exceed_the_limit_nor_lose_a_permit(
        seed in any::<u64>(),
        limit in 1usize..4,
        order in prop_oneof![
            Just(QueueOrder::Fifo),
            Just(QueueOrder::Lifo),
            Just(QueueOrder::Adaptive),
        ],
        change_limit in any::<bool>(),
    ) {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(stress(seed, limit, order, change_limit));
    }
}

/// The lock under real threads: no time passes that matters (give-up
/// instants and the interval are far away), so this checks the counting
/// only.
/// One holder of a permit in the two-thread test, counted while alive.
struct Holding(Arc<AtomicUsize>);

impl Holding {
    fn new(held: &Arc<AtomicUsize>) -> Self {
        assert!(held.fetch_add(1, Ordering::SeqCst) < 3, "over the limit");
        Self(Arc::clone(held))
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_threads_never_exceed_the_limit_nor_lose_a_permit() {
    const LIMIT: usize = 3;
    // Real time passes here: an interval of an hour keeps the standing-queue
    // rule out of a counting test.
    let config = QueueConfig {
        order: QueueOrder::Adaptive,
        target: Duration::from_secs(1800),
        interval: Duration::from_secs(3600),
        standing_share: DEFAULT_STANDING_SHARE,
        sustained: DEFAULT_SUSTAINED,
    };
    let queue = PermitQueue::new(LIMIT, config).unwrap();
    let held = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (queue, held) = (queue.clone(), Arc::clone(&held));
            tokio::spawn(async move {
                let criticality = [Criticality::Sheddable, Criticality::Critical][i % 2];
                let waiter = Waiter::new(Instant::now() + Duration::from_secs(600), criticality);
                let permit = queue.acquire(waiter).await.unwrap();
                // Counted down on drop too: an abort while holding must
                // not leave the count up.
                let holding = Holding::new(&held);
                for _ in 0..(i % 3) {
                    tokio::task::yield_now().await;
                }
                drop(holding);
                drop(permit);
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        if i % 7 == 0 {
            task.abort();
        }
        match task.await {
            Ok(()) => {}
            Err(e) => assert!(e.is_cancelled()),
        }
    }
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}
