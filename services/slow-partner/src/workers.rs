//! The partner's finite capacity: at most N requests *per path* do their work
//! at once ([`PartnerConfig::workers`](crate::PartnerConfig::workers),
//! [`PartnerConfig::path_workers`](crate::PartnerConfig::path_workers)).
//!
//! A real server has a finite number of workers, so its latency grows with
//! load; a load test needs that, or an adaptive client concurrency limit
//! could make an overload vanish by raising its own number. Each limited
//! path has a pool: a FIFO queue (a tokio [`Semaphore`], which is fair) in
//! front of N workers. A request beyond N waits in the queue before its
//! `delay` starts, so its latency is queue wait + delay (+ jitter, drip),
//! and the wait counts toward `late` (the budget runs from arrival). A
//! request whose caller goes away while it is queued leaves the queue (its
//! handler future is dropped) and does no work.
//!
//! The reserved paths (`/stats`, `/stats/reset`, `/metrics`, `/healthz`, `/admin` and
//! everything under `/admin/`, `/events`, `/ws`, `/ingest`) never take a worker.
//!
//! Memory is bounded: a pool is made the first time its path is asked for;
//! at most [`MAX_WORKER_POOLS`] are kept. When a new path would exceed that,
//! the idle pools (nobody in work or queued) of paths that are not
//! configured in `path_workers` are forgotten (an idle pool is a fresh one:
//! all its workers are free). Only while more than that many distinct paths
//! have requests in them at once are there more pools.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::stats::{MAX_PATH_LEN, cut, whole_millis};

/// The largest worker count accepted, per path (far above any test, far
/// below tokio's semaphore limit).
pub const MAX_WORKERS: usize = 1_000_000;

/// How many path pools are kept at most (see the [module docs](self)); also
/// the most entries `path_workers` may have.
pub const MAX_WORKER_POOLS: usize = 1024;

/// Whether `path` is reserved: `/stats`, `/stats/reset`, `/metrics`, `/healthz`, `/admin`
/// and everything under `/admin/`, and the routes of their own `/events`,
/// `/ws` and `/ingest`. A reserved path never takes a worker and
/// cannot be overridden.
///
/// ```
/// assert!(slow_partner::is_reserved_path("/admin/paths/pricing"));
/// assert!(slow_partner::is_reserved_path("/events"));
/// assert!(!slow_partner::is_reserved_path("/pricing"));
/// ```
pub fn is_reserved_path(path: &str) -> bool {
    matches!(
        path,
        "/stats"
            | "/stats/reset"
            | "/metrics"
            | "/healthz"
            | "/admin"
            | "/events"
            | "/ws"
            | "/ingest"
    ) || path.starts_with("/admin/")
}

/// One limited path's capacity and queue, as `GET /stats` shows it (in
/// [`StatsSnapshot::paths`](crate::StatsSnapshot::paths)).
///
/// `in_work` and `queued` are now; the `_max` fields are high-water marks
/// since start or the last reset (a reset starts them at the current
/// values); `left_queue` and `queue_wait_ms` count since then.
///
/// # Example
///
/// ```
/// use slow_partner::PathWorkers;
///
/// let json = r#"{"workers":2,"in_work":2,"in_work_max":2,"queued":1,"queued_max":2,
///   "left_queue":0,"queue_wait_ms":{"count":4,"max":100,"sum":200}}"#;
/// let path: PathWorkers = serde_json::from_str(json).unwrap();
/// assert_eq!((path.workers, path.queued_max), (2, 2));
/// assert_eq!(path.queue_wait_ms.count, 4);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PathWorkers {
    /// How many requests of this path may do their work at once.
    pub workers: usize,
    /// Requests doing their work now (delay, jitter, drip).
    pub in_work: u64,
    /// The most requests that did their work at once (never above
    /// `workers`).
    pub in_work_max: u64,
    /// Requests waiting for a worker now.
    pub queued: u64,
    /// The most requests that waited at once.
    pub queued_max: u64,
    /// Requests whose caller went away while they were queued: they did no
    /// work and were not answered.
    pub left_queue: u64,
    /// The queue wait of each answered request of this path (0 for one
    /// that found a free worker).
    pub queue_wait_ms: QueueWait,
}

/// A summary of queue waits, in whole milliseconds.
///
/// ```
/// let wait = slow_partner::QueueWait::default();
/// assert_eq!((wait.count, wait.max, wait.sum), (0, 0, 0));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueueWait {
    /// How many waits (answered requests).
    pub count: u64,
    /// The longest wait.
    pub max: u64,
    /// All waits added up.
    pub sum: u64,
}

/// The limits and the pools of every limited path.
#[derive(Debug)]
pub(crate) struct Workers {
    default: Option<usize>,
    pools: Mutex<HashMap<String, Arc<Pool>>>,
}

impl Workers {
    /// `default` workers for every path (none: unlimited), and pools made at
    /// once (never forgotten) for the paths of `per_path`.
    pub(crate) fn new(default: Option<usize>, per_path: &BTreeMap<String, usize>) -> Self {
        let pools = per_path
            .iter()
            .map(|(path, &n)| (path.clone(), Arc::new(Pool::new(n, true))))
            .collect();
        Self {
            default,
            pools: Mutex::new(pools),
        }
    }

    /// No limit anywhere.
    #[cfg(test)]
    pub(crate) fn unlimited() -> Self {
        Self::new(None, &BTreeMap::new())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Pool>>> {
        // A map of pools stays consistent even if a holder panicked.
        self.pools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pool of `path`; `None` when the path is unlimited or reserved.
    pub(crate) fn pool(&self, path: &str) -> Option<Arc<Pool>> {
        if is_reserved_path(path) {
            return None;
        }
        let key = cut(path, MAX_PATH_LEN);
        let mut pools = self.lock();
        if let Some(pool) = pools.get(key) {
            return Some(Arc::clone(pool));
        }
        let workers = self.default?;
        if pools.len() >= MAX_WORKER_POOLS {
            // Only the map holds an idle pool: nobody waits for or holds
            // one of its workers, or is about to.
            pools.retain(|_, pool| pool.pinned || Arc::strong_count(pool) > 1);
        }
        let pool = Arc::new(Pool::new(workers, false));
        pools.insert(key.to_owned(), Arc::clone(&pool));
        Some(pool)
    }

    /// Every pool's counters, by path.
    pub(crate) fn snapshot(&self) -> BTreeMap<String, PathWorkers> {
        self.lock()
            .iter()
            .map(|(path, pool)| (path.clone(), pool.snapshot()))
            .collect()
    }

    /// Forgets the idle pools that are not configured and restarts the
    /// others' high-water marks and summaries from now.
    pub(crate) fn reset(&self) {
        let mut pools = self.lock();
        pools.retain(|_, pool| pool.pinned || Arc::strong_count(pool) > 1);
        for pool in pools.values() {
            pool.reset();
        }
    }
}

/// One path's workers and queue.
#[derive(Debug)]
pub(crate) struct Pool {
    workers: usize,
    semaphore: Arc<Semaphore>,
    /// Configured in `path_workers`: never forgotten.
    pinned: bool,
    counters: Mutex<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    in_work: u64,
    in_work_max: u64,
    queued: u64,
    queued_max: u64,
    left_queue: u64,
    waits: u64,
    wait_max: Duration,
    wait_sum: Duration,
}

impl Pool {
    fn new(workers: usize, pinned: bool) -> Self {
        Self {
            workers,
            // `workers` is validated to be at most MAX_WORKERS, far below
            // the semaphore's limit.
            semaphore: Arc::new(Semaphore::new(workers.min(Semaphore::MAX_PERMITS))),
            pinned,
            counters: Mutex::new(Counters::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        // Plain counters stay consistent even if a holder panicked.
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (first in, first out) for a free worker and takes it. Dropping
    /// the future while it waits leaves the queue.
    pub(crate) async fn take(self: Arc<Self>) -> Worker {
        let queued_at = Instant::now();
        let permit = match Arc::clone(&self.semaphore).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let queued = Queued::enter(Arc::clone(&self));
                let permit = Arc::clone(&self.semaphore)
                    .acquire_owned()
                    .await
                    .expect("a pool's semaphore is never closed");
                queued.leave_for_work();
                permit
            }
        };
        let mut counters = self.lock();
        counters.in_work += 1;
        counters.in_work_max = counters.in_work_max.max(counters.in_work);
        drop(counters);
        Worker {
            pool: self,
            wait: queued_at.elapsed(),
            _permit: permit,
        }
    }

    fn snapshot(&self) -> PathWorkers {
        let c = self.lock();
        PathWorkers {
            workers: self.workers,
            in_work: c.in_work,
            in_work_max: c.in_work_max,
            queued: c.queued,
            queued_max: c.queued_max,
            left_queue: c.left_queue,
            queue_wait_ms: QueueWait {
                count: c.waits,
                max: whole_millis(c.wait_max),
                sum: whole_millis(c.wait_sum),
            },
        }
    }

    fn reset(&self) {
        let mut c = self.lock();
        *c = Counters {
            in_work: c.in_work,
            in_work_max: c.in_work,
            queued: c.queued,
            queued_max: c.queued,
            ..Counters::default()
        };
    }
}

/// A place in a pool's queue; leaving without a worker (the future was
/// dropped) counts in `left_queue`.
struct Queued {
    pool: Option<Arc<Pool>>,
}

impl Queued {
    fn enter(pool: Arc<Pool>) -> Self {
        let mut c = pool.lock();
        c.queued += 1;
        c.queued_max = c.queued_max.max(c.queued);
        drop(c);
        Self { pool: Some(pool) }
    }

    fn leave_for_work(mut self) {
        if let Some(pool) = self.pool.take() {
            pool.lock().queued -= 1;
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let mut c = pool.lock();
            c.queued -= 1;
            c.left_queue += 1;
        }
    }
}

/// A worker held by one request, for as long as its work lasts; dropping
/// it frees the worker for the next in the queue.
#[derive(Debug)]
pub(crate) struct Worker {
    pool: Arc<Pool>,
    wait: Duration,
    _permit: OwnedSemaphorePermit,
}

impl Worker {
    /// How long the request waited in the queue.
    pub(crate) fn wait(&self) -> Duration {
        self.wait
    }

    /// The request is answered: its queue wait joins the summary.
    pub(crate) fn answered(&self) {
        let mut c = self.pool.lock();
        c.waits += 1;
        c.wait_max = c.wait_max.max(self.wait);
        c.wait_sum = c.wait_sum.saturating_add(self.wait);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let mut c = self.pool.lock();
        c.in_work = c.in_work.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn one_path(path: &str, n: usize) -> Workers {
        Workers::new(None, &BTreeMap::from([(path.to_owned(), n)]))
    }

    #[test]
    fn unlimited_and_reserved_paths_have_no_pool() {
        assert!(Workers::unlimited().pool("/p").is_none());
        let workers = Workers::new(Some(2), &BTreeMap::new());
        for path in [
            "/stats",
            "/stats/reset",
            "/metrics",
            "/healthz",
            "/admin",
            "/admin/x",
        ] {
            assert!(workers.pool(path).is_none(), "{path}");
        }
        assert!(workers.pool("/p").is_some());
        assert!(workers.pool("/statsx").is_some());
    }

    #[test]
    fn a_configured_path_overrides_the_default_and_is_listed_at_once() {
        let workers = Workers::new(Some(5), &BTreeMap::from([("/pricing".to_owned(), 1)]));
        assert_eq!(workers.snapshot()["/pricing"].workers, 1);
        assert_eq!(workers.pool("/pricing").unwrap().workers, 1);
        assert_eq!(workers.pool("/other").unwrap().workers, 5);
        assert!(
            one_path("/a", 1).pool("/b").is_none(),
            "no default: unlimited"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_is_first_in_first_out_and_waits_are_summed() {
        let workers = one_path("/p", 1);
        let first = workers.pool("/p").unwrap().take().await;
        assert_eq!(first.wait(), Duration::ZERO);
        let second = tokio::spawn(workers.pool("/p").unwrap().take());
        tokio::time::sleep(MS).await;
        let third = tokio::spawn(workers.pool("/p").unwrap().take());
        tokio::time::sleep(MS).await;
        let snap = &workers.snapshot()["/p"];
        assert_eq!((snap.in_work, snap.queued, snap.queued_max), (1, 2, 2));

        tokio::time::sleep(98 * MS).await;
        first.answered();
        drop(first);
        let second = second.await.unwrap();
        assert_eq!(second.wait(), 100 * MS, "the first queued goes first");
        assert!(!third.is_finished());
        tokio::time::sleep(50 * MS).await;
        second.answered();
        drop(second);
        let third = third.await.unwrap();
        assert_eq!(third.wait(), 149 * MS);
        third.answered();
        let snap = &workers.snapshot()["/p"];
        assert_eq!((snap.in_work, snap.in_work_max, snap.queued), (1, 1, 0));
        assert_eq!(
            snap.queue_wait_ms,
            QueueWait {
                count: 3,
                max: 149,
                sum: 249
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_while_queued_leaves_the_queue() {
        let workers = one_path("/p", 1);
        let held = workers.pool("/p").unwrap().take().await;
        let queued = tokio::spawn(workers.pool("/p").unwrap().take());
        tokio::time::sleep(MS).await;
        queued.abort();
        assert!(queued.await.unwrap_err().is_cancelled());
        let snap = &workers.snapshot()["/p"];
        assert_eq!((snap.queued, snap.queued_max, snap.left_queue), (0, 1, 1));
        drop(held);
        let next = workers.pool("/p").unwrap().take().await;
        assert_eq!(next.wait(), Duration::ZERO, "the worker is free again");
    }

    #[tokio::test(start_paused = true)]
    async fn reset_restarts_the_marks_from_now_and_forgets_idle_paths() {
        let workers = Workers::new(Some(2), &BTreeMap::from([("/kept".to_owned(), 1)]));
        let busy = workers.pool("/busy").unwrap().take().await;
        busy.answered();
        drop(workers.pool("/idle").unwrap().take().await);
        workers.reset();
        let snap = workers.snapshot();
        assert_eq!(snap.keys().collect::<Vec<_>>(), ["/busy", "/kept"]);
        assert_eq!(snap["/busy"].in_work, 1);
        assert_eq!(snap["/busy"].in_work_max, 1);
        assert_eq!(snap["/busy"].queue_wait_ms, QueueWait::default());
    }

    #[tokio::test(start_paused = true)]
    async fn the_pools_are_bounded_by_forgetting_idle_ones() {
        let workers = Workers::new(Some(1), &BTreeMap::from([("/kept".to_owned(), 1)]));
        let busy = workers.pool("/busy").unwrap().take().await;
        for i in 0..MAX_WORKER_POOLS + 10 {
            drop(workers.pool(&format!("/{i}")).unwrap().take().await);
        }
        let snap = workers.snapshot();
        assert!(snap.len() <= MAX_WORKER_POOLS, "{}", snap.len());
        assert!(snap.contains_key("/kept") && snap.contains_key("/busy"));
        drop(busy);
    }
}
