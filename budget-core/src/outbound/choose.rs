//! Which replica an attempt goes to (docs/architecture.md, "Replicas"):
//! the least loaded endpoint (its peak-EWMA latency times its calls in
//! flight plus one, as tower's `PeakEwma` and Linkerd weigh it), of all
//! of them in a set of up to [`FULL_SCAN`] (Envoy's least-request full
//! scan), of two drawn at random beyond (power of two choices).
//! **Budget-aware**: an endpoint whose latency estimate does not fit in
//! what is left is not chosen while another fits. A retry goes to another
//! endpoint than the attempt that failed, a hedge to another than the
//! first attempt, when there is one. An endpoint whose breaker is open is
//! passed over (outlier ejection) and probed on the breaker's schedule
//! when chosen again. An endpoint at its own adaptive limit is passed
//! over while another is below its own. A call that waited for a
//! concurrency permit is given its endpoint again when it gets one
//! (`outbound/admission.rs`).
//!
//! With one endpoint (the URL as it is) the choice is its breaker alone,
//! as before there were replicas.

use std::cmp::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::Dependency;
use crate::breaker::{BreakerPermit, CircuitOpen};
use crate::outbound::endpoints::{Endpoint, InFlight, ResolveError};

/// Up to how many endpoints the choice compares them all; beyond, two
/// drawn at random.
///
/// Power of two choices exists for sets too large to scan and for many
/// clients sharing stale load figures; a client's own calls in flight are
/// never stale, and this choice reads every endpoint's estimate anyway
/// (for the one a cold endpoint counts as). In a small set two random
/// draws leave the choice to chance: with three replicas and one of them
/// slow or just failed, two draws in three pair it with one of the
/// others, and the call goes to that one however many calls it already
/// has while the third is idle. The least loaded of all sends it to the
/// third (`BENCHMARKS.md`, "Replicas": with one replica of three dark and
/// just after, p99 120-121 and 117-118 ms where two draws gave 125-132
/// and 124-128, in runs taken in turn). Eight covers the replica sets
/// this project runs and most a service has; past it, two draws keep many
/// clients from all sending their next call to the same lowest estimate
/// (the herd Linkerd's and Finagle's choice avoids).
pub(crate) const FULL_SCAN: usize = 8;

/// The endpoint an attempt goes to, and its breaker's permit.
#[derive(Debug)]
pub(crate) struct Chosen {
    pub(crate) endpoint: Arc<Endpoint>,
    pub(crate) breaker: Option<BreakerPermit>,
    /// Chosen among several: its load is kept and shown.
    pub(crate) balanced: bool,
}

impl Chosen {
    /// The endpoint's label when it was chosen among several (for the
    /// ledger and the attempt's log line).
    pub(crate) fn shown(&self) -> Option<&Arc<str>> {
        self.balanced.then_some(&self.endpoint.label)
    }

    /// Counts the attempt in flight to the endpoint, when balanced or
    /// limited on its own.
    pub(crate) fn start(&self) -> Option<InFlight> {
        (self.balanced || self.endpoint.limit.is_some()).then(|| self.endpoint.start())
    }
}

/// Why no endpoint was chosen.
#[derive(Debug)]
pub(crate) enum NotChosen {
    /// Every endpoint's circuit is open (the one with the soonest
    /// reopening).
    Open(CircuitOpen),
    /// The dependency's host name gave no endpoints.
    Resolve(ResolveError),
}

/// The endpoint of a dependency that is one endpoint (`None` when it has
/// replicas: see [`first`]).
pub(crate) fn only(dep: &Dependency) -> Option<Result<Chosen, NotChosen>> {
    dep.endpoints
        .only()
        .map(|only| alone(Arc::clone(only)).map_err(NotChosen::Open))
}

/// The first attempt's endpoint: the set for the call (a name resolved
/// first when it never was, within the budget), then [`pick`].
pub(crate) async fn first(
    dep: &Dependency,
    remaining: Option<Duration>,
) -> Result<Chosen, NotChosen> {
    if let Some(only) = dep.endpoints.only() {
        return alone(Arc::clone(only)).map_err(NotChosen::Open);
    }
    let until = remaining.and_then(|r| Instant::now().checked_add(r));
    let set = dep
        .endpoints
        .for_call(until)
        .await
        .map_err(NotChosen::Resolve)?;
    pick(dep, &set, remaining, None)
}

/// A later attempt's endpoint (a retry, a hedge): another than `avoid`
/// when another will take it.
pub(crate) fn next(
    dep: &Dependency,
    remaining: Option<Duration>,
    avoid: Option<&Endpoint>,
) -> Result<Chosen, NotChosen> {
    if let Some(only) = dep.endpoints.only() {
        return alone(Arc::clone(only)).map_err(NotChosen::Open);
    }
    pick(dep, &dep.endpoints.current(), remaining, avoid)
}

fn alone(only: Arc<Endpoint>) -> Result<Chosen, CircuitOpen> {
    let breaker = match &only.breaker {
        Some(breaker) => Some(breaker.try_acquire()?),
        None => None,
    };
    Ok(Chosen {
        endpoint: only,
        breaker,
        balanced: false,
    })
}

/// The least loaded of `set`'s endpoints that fit `remaining` (all of
/// them when none fits; two drawn at random past [`FULL_SCAN`]), `avoid`
/// last; an endpoint whose breaker refuses is dropped and the choice made
/// again.
fn pick(
    dep: &Dependency,
    set: &[Arc<Endpoint>],
    remaining: Option<Duration>,
    avoid: Option<&Endpoint>,
) -> Result<Chosen, NotChosen> {
    if let [one] = set {
        return alone(Arc::clone(one)).map_err(NotChosen::Open);
    }
    let candidates = Candidates::new(set, remaining, avoid);
    let mut open: Option<CircuitOpen> = None;
    let mut left: Vec<usize> = (0..set.len()).collect();
    let mut rng = rand::rng();
    while !left.is_empty() {
        let i = candidates.least_loaded(&candidates.pool(&left), &mut rng);
        let endpoint = Arc::clone(&set[i]);
        let breaker = match &endpoint.breaker {
            Some(breaker) => match breaker.try_acquire() {
                Ok(permit) => Some(permit),
                Err(refused) => {
                    open = Some(match open {
                        Some(soonest) if soonest.retry_after() <= refused.retry_after() => soonest,
                        _ => refused,
                    });
                    left.retain(|&j| j != i);
                    continue;
                }
            },
            None => None,
        };
        return Ok(Chosen {
            endpoint,
            breaker,
            balanced: true,
        });
    }
    Err(match open {
        Some(open) => NotChosen::Open(open),
        // Only a set that was never resolved is empty.
        None => NotChosen::Resolve(ResolveError::no_endpoints(dep.endpoints.name())),
    })
}

/// The endpoints one choice is made among, with their latency estimates
/// now.
struct Candidates<'a> {
    set: &'a [Arc<Endpoint>],
    estimates: Vec<Option<Duration>>,
    /// The fastest estimate: a cold endpoint's.
    fastest: Option<Duration>,
    remaining: Option<Duration>,
    avoid: Option<&'a Endpoint>,
}

impl<'a> Candidates<'a> {
    fn new(
        set: &'a [Arc<Endpoint>],
        remaining: Option<Duration>,
        avoid: Option<&'a Endpoint>,
    ) -> Self {
        let now = Instant::now();
        let estimates: Vec<Option<Duration>> = set.iter().map(|e| e.load.estimate(now)).collect();
        // A cold endpoint (no answer yet) is taken as the fastest of the
        // others: tried at once, even one call after another, and not
        // flooded, since its calls in flight count in its load as in
        // theirs (as the average, the least loaded of all would never try
        // it while the others are idle).
        let fastest = estimates.iter().flatten().min().copied();
        Self {
            set,
            estimates,
            fastest,
            remaining,
            avoid,
        }
    }

    fn estimate(&self, i: usize) -> Duration {
        self.estimates[i].or(self.fastest).unwrap_or(Duration::ZERO)
    }

    /// Of `left`, the endpoints to choose among: not `avoid` (unless it
    /// is the only one), those whose estimate fits what is left (unless
    /// none does), those below their own limit (unless none is: a replica
    /// at its knee queues the call at the partner; another may take it at
    /// once).
    fn pool(&self, left: &[usize]) -> Vec<usize> {
        let avoided = |i: &usize| self.avoid.is_some_and(|a| std::ptr::eq(a, &*self.set[*i]));
        let others: Vec<usize> = left.iter().copied().filter(|i| !avoided(i)).collect();
        let pool = if others.is_empty() {
            left.to_vec()
        } else {
            others
        };
        let fitting: Vec<usize> = match self.remaining {
            Some(remaining) => pool
                .iter()
                .copied()
                .filter(|&i| self.estimate(i) <= remaining)
                .collect(),
            None => Vec::new(),
        };
        let pool = if fitting.is_empty() { pool } else { fitting };
        let room: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| self.set[i].has_room())
            .collect();
        if room.is_empty() { pool } else { room }
    }

    /// The load, and the calls in flight where loads tie (every endpoint
    /// cold, say: all estimated at zero).
    fn load(&self, i: usize) -> (f64, usize) {
        let in_flight = self.set[i].outstanding();
        (
            self.estimate(i).as_secs_f64() * (in_flight as f64 + 1.0),
            in_flight,
        )
    }

    /// The least loaded of `pool` (not empty): of all of them up to
    /// [`FULL_SCAN`], those that tie each as likely (the k-th tie seen
    /// replaces the pick with probability 1/k); of two drawn at random
    /// beyond.
    fn least_loaded(&self, pool: &[usize], rng: &mut impl Rng) -> usize {
        match pool.len() {
            1 => pool[0],
            n if n <= FULL_SCAN => {
                let (mut best, mut least, mut ties) = (pool[0], self.load(pool[0]), 1_u32);
                for &j in &pool[1..] {
                    let this = self.load(j);
                    match this.partial_cmp(&least) {
                        Some(Ordering::Less) => (best, least, ties) = (j, this, 1),
                        Some(Ordering::Equal) => {
                            ties = ties.saturating_add(1);
                            if rng.random_range(0..ties) == 0 {
                                best = j;
                            }
                        }
                        _ => {}
                    }
                }
                best
            }
            n => {
                let a = rng.random_range(0..n);
                let mut b = rng.random_range(0..n - 1);
                if b >= a {
                    b += 1;
                }
                let (a, b) = (pool[a], pool[b]);
                if self.load(b) < self.load(a) { b } else { a }
            }
        }
    }
}

#[cfg(test)]
mod tests;
