//! Which replica an attempt goes to (docs/architecture.md, "Replicas"):
//! power of two choices over each endpoint's load (its peak-EWMA latency
//! times its calls in flight plus one, as tower's `PeakEwma` and Linkerd
//! weigh it), **budget-aware**: an endpoint whose latency estimate does
//! not fit in what is left is not chosen while another fits. A retry goes
//! to another endpoint than the attempt that failed, a hedge to another
//! than the first attempt, when there is one. An endpoint whose breaker is
//! open is passed over (outlier ejection) and probed on the breaker's
//! schedule when chosen again. An endpoint at its own adaptive limit is
//! passed over while another is below its own.
//!
//! With one endpoint (the URL as it is) the choice is its breaker alone,
//! as before there were replicas.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use super::Dependency;
use crate::breaker::{BreakerPermit, CircuitOpen};
use crate::client::endpoints::{Endpoint, InFlight, ResolveError};

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

/// Power of two choices among `set`'s endpoints that fit `remaining`
/// (all of them when none fits), `avoid` last; an endpoint whose breaker
/// refuses is dropped and the choice made again.
fn pick(
    dep: &Dependency,
    set: &[Arc<Endpoint>],
    remaining: Option<Duration>,
    avoid: Option<&Endpoint>,
) -> Result<Chosen, NotChosen> {
    if let [one] = set {
        return alone(Arc::clone(one)).map_err(NotChosen::Open);
    }
    let now = Instant::now();
    let estimates: Vec<Option<Duration>> = set.iter().map(|e| e.load.estimate(now)).collect();
    // A cold endpoint (no answer yet) is taken as the average of the
    // others: neither flooded nor starved.
    let warm: Vec<Duration> = estimates.iter().flatten().copied().collect();
    let average = match u32::try_from(warm.len()) {
        Ok(n) if n > 0 => warm.iter().sum::<Duration>() / n,
        _ => Duration::ZERO,
    };
    let estimate = |i: usize| estimates[i].unwrap_or(average);
    let mut open: Option<CircuitOpen> = None;
    let mut left: Vec<usize> = (0..set.len()).collect();
    let mut rng = rand::rng();
    while !left.is_empty() {
        let avoided = |i: &usize| avoid.is_some_and(|a| std::ptr::eq(a, &*set[*i]));
        let others: Vec<usize> = left.iter().copied().filter(|i| !avoided(i)).collect();
        let pool = if others.is_empty() {
            left.clone()
        } else {
            others
        };
        let fitting: Vec<usize> = match remaining {
            Some(remaining) => pool
                .iter()
                .copied()
                .filter(|&i| estimate(i) <= remaining)
                .collect(),
            None => Vec::new(),
        };
        let pool = if fitting.is_empty() { pool } else { fitting };
        // Below its own limit, when it has one (a replica at its knee
        // queues the call at the partner; another may take it at once).
        let room: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&i| set[i].has_room())
            .collect();
        let pool = if room.is_empty() { pool } else { room };
        let cost = |i: usize| {
            let in_flight = set[i].outstanding() as f64 + 1.0;
            estimate(i).as_secs_f64() * in_flight
        };
        let i = match pool.len() {
            1 => pool[0],
            n => {
                let a = rng.random_range(0..n);
                let mut b = rng.random_range(0..n - 1);
                if b >= a {
                    b += 1;
                }
                let (a, b) = (pool[a], pool[b]);
                if cost(b) < cost(a) { b } else { a }
            }
        };
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

#[cfg(test)]
mod tests;
