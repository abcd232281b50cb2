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
    let a = queue.try_acquire(Criticality::Sheddable).unwrap();
    let b = queue.try_acquire(Criticality::Default).unwrap();
    assert_eq!((a.waited(), b.waited()), (Duration::ZERO, Duration::ZERO));
    assert!(queue.try_acquire(Criticality::Critical).is_none());
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
        let held = queue.try_acquire(Criticality::Default).unwrap();
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

/// A queue standing since 0: `x` waits from 0, `a`, `b`, `c` arrive at
/// 99 ms; the held permit is freed at 100 ms, when overload begins.
async fn overloaded_at_100ms(order: QueueOrder) -> (Log, Result<(), Refusal>) {
    let queue = queue(1, order);
    let start = Instant::now();
    let held = queue.try_acquire(Criticality::Default).unwrap();
    let log = Log::default();
    let mut tasks = line_up(
        &queue,
        &[("x", patient(Criticality::Default))],
        start,
        ms(1),
        &log,
    )
    .await;
    sleep(ms(99)).await;
    let line = ["a", "b", "c"].map(|label| (label, patient(Criticality::Default)));
    tasks.extend(line_up(&queue, &line, start, ms(1), &log).await);
    assert!(!queue.is_overloaded());
    sleep(ms(1)).await;
    assert!(queue.is_overloaded());
    drop(held);
    let mut results = join_all(tasks).await;
    assert!(results[1..].iter().all(Result::is_ok));
    assert!(!queue.is_overloaded());
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
    (log, results.swap_remove(0))
}

#[tokio::test(start_paused = true)]
async fn adaptive_turns_lifo_after_interval_without_emptying() {
    let (log, x) = overloaded_at_100ms(QueueOrder::Adaptive).await;
    // x had waited 100 ms > target when overload began: refused then.
    assert_eq!(x, Err(Refusal::new(RefusalReason::StandingQueue, ms(100))));
    assert_eq!(
        *log.lock().unwrap(),
        vec![("c", ms(100)), ("b", ms(101)), ("a", ms(102))]
    );
}

#[tokio::test(start_paused = true)]
async fn fifo_stays_fifo_under_overload_and_still_refuses_the_standing() {
    let (log, x) = overloaded_at_100ms(QueueOrder::Fifo).await;
    assert_eq!(x, Err(Refusal::new(RefusalReason::StandingQueue, ms(100))));
    assert_eq!(labels(&log), ["a", "b", "c"]);
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
        let held = queue.try_acquire(Default).unwrap();
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
async fn a_critical_waiter_stands_an_interval_where_the_others_stand_target() {
    let config = QueueConfig {
        order: QueueOrder::Adaptive,
        target: ms(5),
        interval: ms(200),
    };
    let queue = PermitQueue::new(1, config).unwrap();
    let start = Instant::now();
    let _held = queue.try_acquire(Criticality::Default).unwrap();
    let spawn = |criticality| {
        let queue = queue.clone();
        tokio::spawn(async move {
            let refusal = queue.acquire(patient(criticality)).await.unwrap_err();
            (start.elapsed(), refusal.reason())
        })
    };
    let first = spawn(Criticality::Critical); // opens the line at 0 ms
    sleep(ms(150)).await;
    let critical = spawn(Criticality::Critical);
    let sheddable = spawn(Criticality::Sheddable);
    let standing = RefusalReason::StandingQueue;
    // Overloaded from 200 ms: the first critical has stood its interval;
    // the sheddable one, in line since 150 ms, its target long ago.
    assert_eq!(first.await.unwrap(), (ms(200), standing));
    assert_eq!(sheddable.await.unwrap(), (ms(200), standing));
    // The critical one that came with it stands a whole interval.
    assert_eq!(critical.await.unwrap(), (ms(350), standing));
}

#[tokio::test(start_paused = true)]
async fn standing_queue_refuses_at_target_once_overloaded_not_before() {
    let queue = queue(1, QueueOrder::Adaptive);
    let start = Instant::now();
    let held = queue.try_acquire(Criticality::Default).unwrap();
    let refused_at = Arc::new(Mutex::new(Vec::new()));
    let spawn = |label: &'static str| {
        let (queue, refused_at) = (queue.clone(), Arc::clone(&refused_at));
        tokio::spawn(async move {
            let refusal = queue
                .acquire(patient(Criticality::Default))
                .await
                .unwrap_err();
            refused_at
                .lock()
                .unwrap()
                .push((label, start.elapsed(), refusal));
        })
    };
    let mut tasks = vec![spawn("w0")];
    sleep(ms(98)).await;
    tasks.push(spawn("w1")); // arrives at 98 ms
    sleep(ms(1)).await;
    // 99 ms: w0 has waited far more than target, but the queue is not yet
    // overloaded.
    assert_eq!(queue.waiting(), 2);
    assert!(!queue.is_overloaded());
    sleep(ms(2)).await;
    tasks.push(spawn("w2")); // arrives at 101 ms, the queue overloaded
    for task in tasks {
        task.await.unwrap();
    }
    let standing = |waited| Refusal::new(RefusalReason::StandingQueue, waited);
    assert_eq!(
        *refused_at.lock().unwrap(),
        vec![
            ("w0", ms(100), standing(ms(100))),
            ("w1", ms(103), standing(ms(5))),
            ("w2", ms(106), standing(ms(5))),
        ]
    );
    assert_eq!(
        standing(ms(5)).to_string(),
        "no permit: standing queue after 5ms"
    );
    // The queue emptied at 106 ms: a new waiter may wait past target again.
    assert!(!queue.is_overloaded());
    let late = tokio::spawn({
        let queue = queue.clone();
        async move {
            queue
                .acquire(patient(Criticality::Sheddable))
                .await
                .map(|p| p.waited())
        }
    });
    sleep(ms(50)).await;
    assert_eq!(queue.waiting(), 1);
    drop(held);
    assert_eq!(late.await.unwrap(), Ok(ms(50)));
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn standing_queue_refuses_every_class_when_due_together() {
    let queue = queue(1, QueueOrder::Adaptive);
    let held = queue.try_acquire(Criticality::Default).unwrap();
    let mut line: Vec<_> = [
        Criticality::Critical,
        Criticality::Sheddable,
        Criticality::Default,
    ]
    .into_iter()
    .map(|c| Box::pin(queue.acquire(patient(c))))
    .collect();
    for waiter in &mut line {
        assert!(poll_once(waiter).is_pending());
    }
    tokio::time::advance(ms(100)).await;
    // The permit comes back at the instant overload begins: every waiter is
    // due (waited 100 ms > 5 ms), so none gets it.
    drop(held);
    for waiter in &mut line {
        let Poll::Ready(Err(refusal)) = poll_once(waiter) else {
            panic!("a due waiter is refused");
        };
        assert_eq!(refusal, Refusal::new(RefusalReason::StandingQueue, ms(100)));
    }
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_waiter_before_its_grant_leaves_the_line() {
    let queue = queue(1, QueueOrder::Fifo);
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
    let mut last = Box::pin(queue.acquire(patient(Criticality::Default)));
    assert!(poll_once(&mut last).is_pending());
    drop(held);
    drop(last);
    assert_eq!((queue.in_use(), queue.waiting()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_spawned_waiter_leaves_the_line() {
    let queue = queue(1, QueueOrder::Adaptive);
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
    let held = queue.try_acquire(Criticality::Default).unwrap();
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
    let mut held: Vec<_> = (0..3)
        .map(|_| queue.try_acquire(Criticality::Default).unwrap())
        .collect();
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
    assert!(queue.try_acquire(Criticality::Critical).is_none());
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
                        RefusalReason::StandingQueue => {
                            // Due before give_up_at (or at it), told up to
                            // the timer resolution later.
                            assert!(Instant::now() < give_up_at + ms(1));
                            assert!(refusal.waited() >= config.target);
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
