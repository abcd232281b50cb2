//! A dependency's concurrency permits: which queue a call waits in, and
//! how an adaptive limit hears about the attempts (docs/contract.md §2
//! rules 8 and 11).
//!
//! In budget mode a call waits in a [`PermitQueue`]: it never gets a
//! permit once what is left could no longer cover the floor, the more
//! critical are served first, and under a standing queue the freshest are
//! served and the old ones refused at once (adaptive LIFO, CoDel). With
//! `concurrency = "auto"` the queue's size follows an [`AdaptiveLimit`]
//! fed with every attempt's latency; for a dependency with replicas, the
//! sum of each endpoint's own limit, each fed with the attempts to its
//! endpoint (docs/architecture.md, "Replicas"). In fixed mode (`--budget-mode off`,
//! the usual setup kept for comparison) a call waits in a plain FIFO
//! semaphore up to its fixed timeout.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::admission::{
    criticality::Criticality,
    limit::{AdaptiveLimit, LimitConfig, Sample},
    queue::{PermitQueue, QueueConfig, QueuePermit, Refusal, Waiter},
};
use crate::config::ConfigError;
use crate::telemetry::meter;

use super::TimeoutMode;
use super::endpoints::{Endpoint, Endpoints};

/// The permits of one dependency, shared by every clone of its client.
#[derive(Clone, Debug)]
pub(crate) enum Permits {
    /// Fixed mode: FIFO, waits up to the fixed timeout; `limit` permits.
    Fifo(Arc<Semaphore>, usize),
    /// Budget mode: the deadline-aware queue, with what sizes it and the
    /// dependency's name (for the limit's gauge).
    Queue {
        queue: PermitQueue,
        limit: Adaptive,
        name: Arc<str>,
    },
}

/// What sizes a budget-mode queue.
#[derive(Clone, Debug)]
pub(crate) enum Adaptive {
    /// A fixed number.
    Off,
    /// The dependency's adaptive limit.
    Dependency(Arc<AdaptiveLimit>),
    /// The sum of the endpoints' own adaptive limits (replicas).
    Endpoints(Endpoints),
}

impl Permits {
    /// The permits `concurrency` (and `queue`) configure in `mode` for the
    /// dependency `name`; `None` for an adaptive limit in fixed mode, which
    /// has no adaptive anything (the usual setup: no limit unless a number
    /// is configured). An adaptive limit is the sum of `endpoints`' own
    /// when they have them ([`Endpoints::limited`]).
    pub(crate) fn new(
        name: &Arc<str>,
        concurrency: &LimitConfig,
        queue: QueueConfig,
        mode: TimeoutMode,
        endpoints: Option<&Endpoints>,
    ) -> Result<Option<Self>, ConfigError> {
        concurrency
            .validate()
            .map_err(|e| within_concurrency(concurrency, e))?;
        let (initial, adaptive) = match concurrency {
            LimitConfig::Fixed(n) => (*n, None),
            LimitConfig::Adaptive(c) => (c.initial_limit(), Some(*c)),
        };
        if mode == TimeoutMode::Fixed {
            return Ok(match adaptive {
                None => Some(Permits::Fifo(Arc::new(Semaphore::new(initial)), initial)),
                Some(_) => None,
            });
        }
        let limit = match (adaptive, endpoints) {
            (None, _) => Adaptive::Off,
            (Some(_), Some(endpoints)) if endpoints.limited() => {
                Adaptive::Endpoints(endpoints.clone())
            }
            (Some(c), _) => Adaptive::Dependency(Arc::new(
                AdaptiveLimit::new(c).map_err(|e| e.within("concurrency"))?,
            )),
        };
        // An adaptive limit starts at its own first value (its first calls
        // run at the probe's limit), not at `initial`; a name not resolved
        // yet has no endpoints, and its queue one permit until it has.
        let size = match &limit {
            Adaptive::Off => initial,
            Adaptive::Dependency(l) => l.current(),
            Adaptive::Endpoints(endpoints) => endpoints.limit_total().max(1),
        };
        let queue = PermitQueue::new(size, queue).map_err(|e| e.within("queue"))?;
        Ok(Some(Permits::Queue {
            queue,
            limit,
            name: Arc::clone(name),
        }))
    }

    /// The limit now.
    pub(crate) fn limit(&self) -> usize {
        match self {
            Permits::Fifo(_, limit) => *limit,
            Permits::Queue { queue, .. } => queue.limit(),
        }
    }

    /// A permit: at once when one is free; otherwise waiting until
    /// `give_up_at`, or less when the queue refuses earlier.
    pub(crate) async fn acquire(
        &self,
        give_up_at: Instant,
        criticality: Criticality,
    ) -> Result<Permit, (Duration, Option<Refusal>)> {
        if let Permits::Queue {
            limit: Adaptive::Endpoints(endpoints),
            ..
        } = self
        {
            // The set may have changed since the last answer (a name
            // resolved again).
            self.resize(endpoints.limit_total().max(1));
        }
        if let Some(permit) = self.try_acquire() {
            return Ok(permit);
        }
        let start = Instant::now();
        self.on_full(start);
        match self {
            Permits::Fifo(semaphore, _) => {
                let acquired =
                    tokio::time::timeout_at(give_up_at, Arc::clone(semaphore).acquire_owned())
                        .await;
                let waited = start.elapsed();
                match acquired {
                    // The semaphore is never closed: an error is a timeout.
                    Ok(Ok(permit)) => Ok(Permit::fifo(permit, Some(waited))),
                    _ => Err((waited, None)),
                }
            }
            Permits::Queue { queue, .. } => {
                match queue.acquire(Waiter::new(give_up_at, criticality)).await {
                    Ok(permit) => {
                        let waited = permit.waited();
                        Ok(Permit::queued(permit, Some(waited)))
                    }
                    Err(refusal) => Err((refusal.waited(), Some(refusal))),
                }
            }
        }
    }

    /// A permit if one is free now, without waiting: the fast path of
    /// [`acquire`](Self::acquire), and all a hedge asks (it never waits).
    pub(crate) fn try_acquire(&self) -> Option<Permit> {
        match self {
            Permits::Fifo(semaphore, _) => Arc::clone(semaphore)
                .try_acquire_owned()
                .ok()
                .map(|permit| Permit::fifo(permit, None)),
            Permits::Queue { queue, .. } => queue
                .try_acquire()
                .map(|permit| Permit::queued(permit, None)),
        }
    }

    /// Tells the adaptive limit how an attempt to `endpoint` went (it
    /// started with `in_flight` permits in use, or calls in flight to the
    /// endpoint when the limit is the endpoints', had `budget` and took
    /// `took`), and resizes the queue.
    pub(crate) fn sample(
        &self,
        endpoint: &Endpoint,
        took: Duration,
        in_flight: usize,
        sample: Sample,
        budget: Option<Duration>,
    ) {
        let Permits::Queue { queue, limit, .. } = self else {
            return;
        };
        let now = Instant::now();
        let (next, growth) = match limit {
            Adaptive::Off => return,
            Adaptive::Dependency(limit) => (
                limit.on_sample_within(now, took, in_flight, sample, budget),
                limit.growth(),
            ),
            Adaptive::Endpoints(endpoints) => {
                let Some(own) = &endpoint.limit else { return };
                own.on_sample_within(now, took, in_flight, sample, budget);
                (endpoints.limit_total().max(1), growth_of(endpoints))
            }
        };
        // The growth first: resizing hands permits out, and the waiters
        // left are judged by the prediction it makes.
        queue.set_growth(growth);
        self.resize(next);
    }

    /// A call found every permit taken at `now`: tells an adaptive limit,
    /// whose first calls are held at the probe's limit for a short while
    /// at most ([`AdaptiveLimit::on_full`]). The call that starts that
    /// hold sets a timer for its end, which ends it and resizes the queue,
    /// so that the calls waiting then get their permits even if no other
    /// call comes. Lock-free once the hold is over.
    fn on_full(&self, now: Instant) {
        let Permits::Queue { limit, .. } = self else {
            return;
        };
        match limit {
            Adaptive::Off => {}
            Adaptive::Dependency(limit) => {
                if let Some(end) = limit.on_full(now) {
                    let (permits, limit) = (self.clone(), Arc::clone(limit));
                    AdaptiveLimit::at_hold_end(end, move || {
                        limit.on_full(end);
                        permits.resize(limit.current());
                    });
                }
            }
            // Every endpoint's first calls are held together: the queue is
            // full when all of them are.
            Adaptive::Endpoints(endpoints) => {
                let ends = endpoints
                    .current()
                    .iter()
                    .filter_map(|e| e.limit.as_ref()?.on_full(now))
                    .max();
                if let Some(end) = ends {
                    let (permits, endpoints) = (self.clone(), endpoints.clone());
                    AdaptiveLimit::at_hold_end(end, move || {
                        for endpoint in endpoints.current().iter() {
                            if let Some(limit) = &endpoint.limit {
                                limit.on_full(end);
                            }
                        }
                        permits.resize(endpoints.limit_total().max(1));
                    });
                }
            }
        }
    }

    /// Sets the queue's size to an adaptive limit's `next` value (and its
    /// gauge), if it changed.
    fn resize(&self, next: usize) {
        if let Permits::Queue { queue, name, .. } = self
            && next != queue.limit()
        {
            queue.set_limit(next);
            meter::concurrency_limit(name, next);
        }
    }

    /// With an adaptive limit, the permits in use now (the attempt about
    /// to start included), or the calls in flight to `endpoint` when the
    /// limit is the endpoints' (counted from [`Endpoint::start`]), for its
    /// sample; `None` otherwise, without touching the queue's lock.
    pub(crate) fn adaptive_in_flight(&self, endpoint: &Endpoint) -> Option<usize> {
        match self {
            Permits::Queue {
                queue,
                limit: Adaptive::Dependency(_),
                ..
            } => Some(queue.in_use()),
            Permits::Queue {
                limit: Adaptive::Endpoints(_),
                ..
            } => Some(endpoint.outstanding()),
            _ => None,
        }
    }

    /// Whether the limit is the endpoints' own.
    pub(crate) fn per_endpoint(&self) -> bool {
        matches!(
            self,
            Permits::Queue {
                limit: Adaptive::Endpoints(_),
                ..
            }
        )
    }

    /// Permits in use now (budget mode's queue; the fixed-mode semaphore
    /// is not counted).
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        match self {
            Permits::Fifo(..) => 0,
            Permits::Queue { queue, .. } => queue.in_use(),
        }
    }
}

/// How often the sum of the endpoints' limits doubles while all of them
/// are in their slow start (the slowest's period); `None` when one is not.
fn growth_of(endpoints: &Endpoints) -> Option<Duration> {
    let set = endpoints.current();
    let mut slowest = None;
    for limit in set.iter().filter_map(|e| e.limit.as_ref()) {
        slowest = Some(limit.growth()?.max(slowest.unwrap_or_default()));
    }
    slowest
}

/// A fixed limit's error names `concurrency`; an adaptive table's fields
/// are named inside it (`concurrency.min`).
fn within_concurrency(concurrency: &LimitConfig, e: ConfigError) -> ConfigError {
    match concurrency {
        LimitConfig::Fixed(_) => e,
        LimitConfig::Adaptive(_) => e.within("concurrency"),
    }
}

/// One call's permit, held through its retries and backoff; how long the
/// call queued for it (`None`: one was free at once).
#[derive(Debug)]
pub(crate) struct Permit {
    _held: Held,
    pub(crate) waited: Option<Duration>,
}

#[derive(Debug)]
enum Held {
    Fifo(#[allow(dead_code)] OwnedSemaphorePermit),
    Queue(#[allow(dead_code)] QueuePermit),
}

impl Permit {
    fn fifo(permit: OwnedSemaphorePermit, waited: Option<Duration>) -> Self {
        Self {
            _held: Held::Fifo(permit),
            waited,
        }
    }

    fn queued(permit: QueuePermit, waited: Option<Duration>) -> Self {
        Self {
            _held: Held::Queue(permit),
            waited,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::limit::FIRST_HOLD;

    fn adaptive() -> Permits {
        let name: Arc<str> = Arc::from("partner");
        let auto = LimitConfig::Adaptive(Default::default());
        Permits::new(
            &name,
            &auto,
            QueueConfig::default(),
            TimeoutMode::Budget,
            None,
        )
        .unwrap()
        .unwrap()
    }

    /// Item 1 of the adaptive limit's docs: the first calls are held at
    /// the probe's 3 for `FIRST_HOLD` (10 ms) at most; a timer ends the
    /// hold, so calls already waiting get their permits with no answer and
    /// no other call.
    #[tokio::test(start_paused = true)]
    async fn calls_waiting_behind_the_first_three_start_at_the_hold_s_end_with_no_answer() {
        let permits = adaptive();
        let held: Vec<_> = (0..3).map(|_| permits.try_acquire().unwrap()).collect();
        assert!(permits.try_acquire().is_none());
        let far = Instant::now() + Duration::from_secs(10);
        let waiters: Vec<_> = (0..7)
            .map(|_| {
                let permits = permits.clone();
                tokio::spawn(async move { permits.acquire(far, Criticality::Default).await })
            })
            .collect();
        let mut granted = Vec::new();
        for waiter in waiters {
            let permit = waiter.await.unwrap().expect("a permit at the hold's end");
            assert_eq!(permit.waited, Some(FIRST_HOLD));
            granted.push(permit);
        }
        assert_eq!((permits.limit(), permits.in_use()), (10, 10));
        drop((held, granted));
    }

    /// Without any call waiting, nothing arms the hold: the first three
    /// run at 3 until an answer, as before.
    #[tokio::test(start_paused = true)]
    async fn no_call_waiting_no_hold() {
        let permits = adaptive();
        let _held = permits.try_acquire().unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(permits.limit(), 3);
    }

    /// A dependency of two replicas with adaptive limits of their own.
    fn replicas() -> (Permits, Endpoints) {
        let auto = LimitConfig::Adaptive(Default::default());
        let mut config = crate::client::DependencyConfig::new("partner", "http://127.0.0.1:9/");
        config.endpoints = vec![
            "http://127.0.0.1:9001".into(),
            "http://127.0.0.1:9002".into(),
        ];
        config.concurrency = Some(auto);
        let dep = config.settings(None).unwrap().dependency;
        (dep.permits.unwrap(), dep.endpoints)
    }

    /// Each replica's limit hears only its own attempts; the queue is
    /// their sum.
    #[tokio::test(start_paused = true)]
    async fn the_queue_of_replicas_is_the_sum_of_their_own_limits() {
        let (permits, endpoints) = replicas();
        let set = endpoints.current();
        assert_eq!(permits.limit(), 3 + 3);
        let ms50 = Duration::from_millis(50);
        let budget = Some(Duration::from_secs(2));
        for in_flight in 1..=3 {
            permits.sample(&set[0], ms50, in_flight, Sample::Success, budget);
        }
        let first = set[0].limit.as_ref().unwrap().current();
        assert_eq!(first, 10, "`initial` once its first three answered");
        assert_eq!(set[1].limit.as_ref().unwrap().current(), 3);
        assert_eq!(permits.limit(), first + 3);
        // A replica that refuses its connections cuts its own limit.
        tokio::time::advance(Duration::from_millis(200)).await;
        permits.sample(
            &set[0],
            Duration::from_millis(1),
            10,
            Sample::Dropped,
            budget,
        );
        let cut = set[0].limit.as_ref().unwrap().current();
        assert!(cut < first, "{cut}");
        assert_eq!(set[1].limit.as_ref().unwrap().current(), 3);
        assert_eq!(permits.limit(), cut + 3);
        // In flight is the endpoint's own count.
        let _going = set[1].start();
        assert_eq!(permits.adaptive_in_flight(&set[1]), Some(1));
        assert_eq!(permits.adaptive_in_flight(&set[0]), Some(0));
    }

    /// The first calls of every replica are held together, and the timer
    /// that ends the hold resizes the queue to the replicas' `initial`s.
    #[tokio::test(start_paused = true)]
    async fn replicas_first_calls_are_held_then_every_replica_opens() {
        let (permits, _endpoints) = replicas();
        let held: Vec<_> = (0..6).map(|_| permits.try_acquire().unwrap()).collect();
        let far = Instant::now() + Duration::from_secs(10);
        let waiter = {
            let permits = permits.clone();
            tokio::spawn(async move { permits.acquire(far, Criticality::Default).await })
        };
        let permit = waiter.await.unwrap().expect("a permit at the hold's end");
        assert_eq!(permit.waited, Some(FIRST_HOLD));
        assert_eq!(permits.limit(), 20);
        drop((held, permit));
    }
}
