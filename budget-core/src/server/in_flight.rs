//! The in-flight limit: overload protection that answers instead of queueing.
//!
//! The limit is fixed (`max_in_flight = 256`) or adaptive
//! (`max_in_flight = "auto"`: an [`AdaptiveLimit`] fed with every answered
//! request's latency, see [`crate::admission::limit`]; like Envoy's
//! adaptive concurrency filter, it admits 3 requests at once until one has
//! answered, their latency the first no-queue one, or for 50 ms from its
//! first refusal, then `initial`).
//! A `sheddable` request is admitted only below three quarters of the
//! limit, so that at the limit the least critical are refused first
//! (docs/contract.md §2 rule 11) and the last quarter is kept for
//! `default` and `critical` work.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http::StatusCode;
use tokio::time::Instant;

use crate::admission::{AdaptiveLimit, Criticality, Sample};

/// How many requests a service works on at once, shared by every clone of
/// the layer's services.
#[derive(Debug)]
pub(crate) struct InFlight {
    limit: AtomicUsize,
    count: AtomicUsize,
    adaptive: Option<AdaptiveLimit>,
}

impl InFlight {
    /// A fixed limit.
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicUsize::new(limit),
            count: AtomicUsize::new(0),
            adaptive: None,
        })
    }

    /// A limit that follows `adaptive`.
    pub(crate) fn adaptive(adaptive: AdaptiveLimit) -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicUsize::new(adaptive.current()),
            count: AtomicUsize::new(0),
            adaptive: Some(adaptive),
        })
    }

    /// The limit now.
    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }

    /// A slot, or `None` at the limit (a `sheddable` request: at three
    /// quarters of it). Lock-free: the count may pass the limit for an
    /// instant between the add and the undo, never admitting more than
    /// `limit`.
    pub(crate) fn try_acquire(self: &Arc<Self>, criticality: Criticality) -> Option<InFlightGuard> {
        let limit = self.limit();
        let admit = match criticality {
            Criticality::Sheddable => (limit - limit / 4).max(1),
            _ => limit,
        };
        let before = self.count.fetch_add(1, Ordering::AcqRel);
        if before >= admit {
            self.count.fetch_sub(1, Ordering::AcqRel);
            self.on_full();
            return None;
        }
        Some(InFlightGuard {
            in_flight: Arc::clone(self),
            started: self.adaptive.as_ref().map(|_| Instant::now()),
            at_start: before + 1,
            sample: Sample::Dropped,
        })
    }

    /// A request was refused at the limit: an adaptive limit's first
    /// requests are held at the probe's limit for 50 ms at most from the
    /// first refusal ([`AdaptiveLimit::on_full`]); a timer ends the hold
    /// and stores the limit then. Lock-free once the hold is over.
    fn on_full(self: &Arc<Self>) {
        let Some(adaptive) = &self.adaptive else {
            return;
        };
        if let Some(end) = adaptive.on_full(Instant::now()) {
            let in_flight = Arc::clone(self);
            AdaptiveLimit::at_hold_end(end, move || {
                if let Some(adaptive) = &in_flight.adaptive {
                    adaptive.on_full(end);
                    in_flight.limit.store(adaptive.current(), Ordering::Release);
                }
            });
        }
    }

    /// Requests in flight now.
    #[cfg(test)]
    pub(crate) fn current(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

/// One admitted request; its slot frees when the response future is done
/// or dropped. An adaptive limit hears how it went then: a request
/// dropped at its deadline (or by its caller) is a drop.
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    in_flight: Arc<InFlight>,
    /// When it was admitted; only kept for an adaptive limit.
    started: Option<Instant>,
    at_start: usize,
    sample: Sample,
}

impl InFlightGuard {
    /// The handler answered `status`: a `503` or `429` is a sign of
    /// overload (a drop), another `5xx` says nothing about this service's
    /// load, anything else is latency to learn from.
    pub(crate) fn answered(&mut self, status: StatusCode) {
        self.sample = match status.as_u16() {
            429 | 503 => Sample::Dropped,
            s if s >= 500 => Sample::Ignore,
            _ => Sample::Success,
        };
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.in_flight.count.fetch_sub(1, Ordering::AcqRel);
        if let (Some(adaptive), Some(started)) = (&self.in_flight.adaptive, self.started) {
            let now = Instant::now();
            let next = adaptive.on_sample(
                now,
                now.saturating_duration_since(started),
                self.at_start,
                self.sample,
            );
            self.in_flight.limit.store(next, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::admission::AdaptiveLimitConfig;

    #[test]
    fn admits_up_to_the_limit_and_frees_on_drop() {
        let in_flight = InFlight::new(2);
        let a = in_flight.try_acquire(Criticality::Default).expect("first");
        let b = in_flight.try_acquire(Criticality::Default).expect("second");
        assert!(
            in_flight.try_acquire(Criticality::Critical).is_none(),
            "third is refused"
        );
        assert_eq!(in_flight.current(), 2);
        drop(a);
        let c = in_flight
            .try_acquire(Criticality::Default)
            .expect("a slot came free");
        drop((b, c));
        assert_eq!(in_flight.current(), 0);
    }

    #[test]
    fn rule11_sheddable_requests_are_refused_first_the_last_quarter_is_kept() {
        let in_flight = InFlight::new(8);
        let shed: Vec<_> = (0..8)
            .filter_map(|_| in_flight.try_acquire(Criticality::Sheddable))
            .collect();
        assert_eq!(shed.len(), 6, "sheddable stop at 3/4 of the limit");
        let rest: Vec<_> = (0..3)
            .filter_map(|_| in_flight.try_acquire(Criticality::Default))
            .collect();
        assert_eq!(rest.len(), 2, "default work gets the last quarter");
        assert!(in_flight.try_acquire(Criticality::Critical).is_none());
        drop(rest);
        assert!(in_flight.try_acquire(Criticality::Critical).is_some());
        assert!(
            InFlight::new(1)
                .try_acquire(Criticality::Sheddable)
                .is_some()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_adaptive_limit_admits_initial_50ms_after_its_first_refusal_with_no_answer() {
        let in_flight =
            InFlight::adaptive(AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap());
        let first: Vec<_> = (0..3)
            .map(|_| in_flight.try_acquire(Criticality::Default).unwrap())
            .collect();
        assert!(
            in_flight.try_acquire(Criticality::Default).is_none(),
            "the probe's 3"
        );
        tokio::time::sleep(Duration::from_millis(49)).await;
        assert!(
            in_flight.try_acquire(Criticality::Default).is_none(),
            "held for 50 ms"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(in_flight.limit(), 10, "`initial` once the hold is over");
        let more: Vec<_> = (0..7)
            .map(|_| in_flight.try_acquire(Criticality::Default).unwrap())
            .collect();
        assert!(in_flight.try_acquire(Criticality::Default).is_none());
        drop((first, more));
    }

    #[tokio::test(start_paused = true)]
    async fn an_adaptive_limit_hears_every_answer_and_moves() {
        let config = AdaptiveLimitConfig {
            initial: Some(10),
            ..Default::default()
        };
        let in_flight = InFlight::adaptive(AdaptiveLimit::new(config).unwrap());
        // The first requests run at the probe's limit (3), as Envoy
        // measures its first min-RTT at `min_concurrency`: their answers
        // are the no-queue latency. From the first answer on the limit is
        // `initial`.
        assert_eq!(in_flight.limit(), 3);
        for answered in 1..=3 {
            let mut guard = in_flight.try_acquire(Criticality::Default).unwrap();
            tokio::time::advance(Duration::from_millis(20)).await;
            guard.answered(StatusCode::OK);
            drop(guard);
            assert_eq!(in_flight.limit(), 10, "after {answered} answers");
        }
        // A request dropped unanswered (at its deadline) is a drop: the
        // limit is cut by the drop factor (0.9).
        let guard = in_flight.try_acquire(Criticality::Default).unwrap();
        tokio::time::advance(Duration::from_millis(20)).await;
        drop(guard);
        assert_eq!(in_flight.limit(), 9);
        assert_eq!(in_flight.current(), 0);
    }
}
