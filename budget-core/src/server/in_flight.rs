//! The in-flight limit: a request at the limit waits for a slot while the
//! wait fits in its budget, and is refused when it does not.
//!
//! The slots are a [`PermitQueue`] (the client's permit queue, one set of
//! rules for both sides, see [`crate::admission::queue`]), so at the limit:
//!
//! - a request waits in line with `give_up_at = deadline - floor`, the
//!   last instant at which what its budget has left still covers the
//!   ingress floor; it never gets a slot after that and is refused then
//!   (the queue's rule 1), its handler never run;
//! - the more critical are served first (`critical`, then `default`, then
//!   `sheddable`; rule 2): under overload the `sheddable` wait longest, so
//!   they are the ones whose budgets run out in line;
//! - a request whose predicted wait (the queue measures how long a slot
//!   is held) plus the floor does not fit in its budget is refused at
//!   arrival, and a line fed faster than it drains and deeper than its
//!   requests can afford stands and admits only short waits, the others
//!   refused at arrival (the queue's rules 1 and 4). Both are requests
//!   over the concurrency limit: `503` with `Retry-After`
//!   (docs/contract.md §3); one whose budget came down to the floor in
//!   line is `504`.
//!
//! The limit is fixed (`max_in_flight = 256`) or adaptive
//! (`max_in_flight = "auto"`: an [`AdaptiveLimit`] fed with every answered
//! request's latency, see [`crate::admission::limit`], whose value sets the
//! queue's size; like Envoy's adaptive concurrency filter, it admits 3
//! requests at once until one has answered, their latency the first
//! no-queue one, or for 50 ms from the first request that found it full,
//! then `initial`).
//!
//! A request that finds a free slot under a fixed limit takes it with one
//! uncontended lock (an adaptive limit also reads the slots in use for its
//! sample, and hears the answer); no limit (the default) adds one untaken
//! branch. A waiting request's wait lives in its response future
//! ([`ResponseFuture`](crate::server::ResponseFuture)): nothing is spawned
//! and no other request is held up.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tokio::time::Instant;

use crate::admission::{
    criticality::Criticality,
    limit::{AdaptiveLimit, Sample},
    queue::{PermitQueue, QueueConfig, QueuePermit, Refusal, RefusalReason, Waiter},
};
use crate::budget::whole_millis;
use crate::problem::{Problem, ProblemKind};

/// How many requests a service works on at once, shared by every clone of
/// the layer's services.
#[derive(Debug)]
pub(crate) struct InFlight {
    slots: PermitQueue,
    adaptive: Option<AdaptiveLimit>,
}

/// A request waiting for a slot: a slot, or why none came.
pub(crate) type SlotWait = Pin<Box<dyn Future<Output = Result<InFlightGuard, NoSlot>> + Send>>;

/// A request at the limit got no slot: the queue's refusal and what the
/// answer to it says.
#[derive(Debug)]
pub(crate) struct NoSlot {
    refusal: Refusal,
    /// The limit when it was refused.
    limit: usize,
    floor: Duration,
    retry_after: Duration,
}

impl NoSlot {
    /// Whether the request is refused for the service's limit (a standing
    /// line, or a predicted wait its budget cannot cover: `503` with
    /// `Retry-After`, as docs/contract.md §3 answers a request over the
    /// concurrency limit) rather than because its budget came down to the
    /// floor while it waited (`504`).
    pub(crate) fn is_overload(&self) -> bool {
        matches!(
            self.refusal.reason(),
            RefusalReason::StandingQueue | RefusalReason::PredictedWait
        )
    }

    /// The limit when it was refused.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The ingress floor the request's budget had to cover.
    pub(crate) fn floor(&self) -> Duration {
        self.floor
    }

    /// How long it waited in line.
    pub(crate) fn waited(&self) -> Duration {
        self.refusal.waited()
    }

    /// The queue's reason, for the ledger (`expired`, `standing queue`).
    pub(crate) fn reason(&self) -> &'static str {
        self.refusal.reason().as_str()
    }

    /// The problem answered, `remaining` left of the budget (docs/contract.md
    /// §3): `overloaded` (`503`) for a standing line or a predicted wait
    /// the budget cannot cover, `below-floor` (`504`) when the budget came
    /// down to the floor in line.
    pub(crate) fn problem(&self, remaining: Duration) -> Problem {
        let (limit, floor) = (self.limit, self.floor);
        let waited = whole_millis(self.refusal.waited());
        let reason = self.refusal.reason();
        if self.is_overload() {
            let why = match self.refusal.prediction() {
                Some(p) => p.against(reason, floor, remaining).to_string(),
                // Overtaken in a standing line for longer than it may wait.
                None => format!("{reason}: waited {waited}ms"),
            };
            return Problem::new(
                ProblemKind::Overloaded,
                format!("no in-flight slot (limit {limit}): {why}: overloaded"),
            )
            .with_retry_after(self.retry_after);
        }
        // Every other reason, the ones to come included (the enum is
        // `#[non_exhaustive]`), is about the waiter's budget: it came down
        // to the floor while the request waited.
        let detail = if reason == RefusalReason::Expired {
            format!(
                "waited {waited}ms for an in-flight slot (limit {limit}) \
                 until only the floor of {}ms was left: the request was not started",
                whole_millis(floor)
            )
        } else {
            format!(
                "no in-flight slot (limit {limit}) within the budget \
                 ({}ms left, floor {}ms): {}: the request was not started",
                whole_millis(remaining),
                whole_millis(floor),
                self.refusal
            )
        };
        Problem::new(ProblemKind::BelowFloor, detail)
            .with_remaining(remaining)
            .with_floor(floor)
    }
}

impl InFlight {
    /// A fixed limit of `limit` slots (at least 1).
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            slots: slots(limit),
            adaptive: None,
        })
    }

    /// A limit that follows `adaptive`.
    pub(crate) fn adaptive(adaptive: AdaptiveLimit) -> Arc<Self> {
        Arc::new(Self {
            slots: slots(adaptive.current()),
            adaptive: Some(adaptive),
        })
    }

    /// The limit now.
    pub(crate) fn limit(&self) -> usize {
        self.slots.limit()
    }

    /// A slot if one is free and nobody waits for one, or `None`: one
    /// uncontended lock.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<InFlightGuard> {
        match self.slots.try_acquire() {
            Some(permit) => Some(self.guard(permit)),
            None => {
                self.on_full();
                None
            }
        }
    }

    /// Waits in line for a slot until `give_up_at` (or less when the queue
    /// stands): the future a request at the limit polls in its response
    /// future. Allocates once, as the queue's own waiter does. `floor` and
    /// `retry_after` are for the answer to a refusal ([`NoSlot`]).
    pub(crate) fn wait(
        self: &Arc<Self>,
        give_up_at: Instant,
        criticality: Criticality,
        floor: Duration,
        retry_after: Duration,
    ) -> SlotWait {
        let in_flight = Arc::clone(self);
        Box::pin(async move {
            match in_flight
                .slots
                .acquire(Waiter::new(give_up_at, criticality))
                .await
            {
                Ok(permit) => Ok(in_flight.guard(permit)),
                Err(refusal) => Err(NoSlot {
                    refusal,
                    limit: in_flight.limit(),
                    floor,
                    retry_after,
                }),
            }
        })
    }

    /// The guard of a slot just taken.
    fn guard(self: &Arc<Self>, permit: QueuePermit) -> InFlightGuard {
        let adaptive = self.adaptive.as_ref().map(|_| {
            Box::new(Adaptive {
                in_flight: Arc::clone(self),
                started: Instant::now(),
                at_start: self.slots.in_use(),
                sample: Sample::Dropped,
            })
        });
        InFlightGuard { adaptive, permit }
    }

    /// A request found every slot taken: an adaptive limit's first
    /// requests are held at the probe's limit for 10 ms at most from the
    /// first of these ([`AdaptiveLimit::on_full`]); a timer ends the hold
    /// and sizes the queue then, so that the requests waiting get their
    /// slots even if no other request comes. Lock-free once the hold is
    /// over.
    fn on_full(self: &Arc<Self>) {
        let Some(adaptive) = &self.adaptive else {
            return;
        };
        if let Some(end) = adaptive.on_full(Instant::now()) {
            let in_flight = Arc::clone(self);
            AdaptiveLimit::at_hold_end(end, move || {
                if let Some(adaptive) = &in_flight.adaptive {
                    adaptive.on_full(end);
                    in_flight.resize(adaptive.current());
                }
            });
        }
    }

    /// Sets the queue's size to an adaptive limit's `next` value, if it
    /// changed.
    fn resize(&self, next: usize) {
        if next != self.slots.limit() {
            self.slots.set_limit(next);
        }
    }

    /// Slots held now.
    #[cfg(test)]
    pub(crate) fn current(&self) -> usize {
        self.slots.in_use()
    }
}

/// The queue of `limit` slots, with the queue's default rules (one set of
/// rules for the client's permits and the server's slots).
fn slots(limit: usize) -> PermitQueue {
    PermitQueue::new(limit.max(1), QueueConfig::default())
        .expect("a limit of at least 1 and the default config are valid")
}

/// One admitted request; its slot frees when the response future is done
/// or dropped. An adaptive limit hears how it went then: a request
/// dropped at its deadline (or by its caller) is a drop.
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    /// Only with an adaptive limit; boxed, so that the guard a fixed limit
    /// holds (and the response future that holds it, limit or not) stays
    /// small.
    adaptive: Option<Box<Adaptive>>,
    /// Dropped after `adaptive` has sized the queue.
    permit: QueuePermit,
}

/// What an adaptive limit learns from one request.
#[derive(Debug)]
struct Adaptive {
    in_flight: Arc<InFlight>,
    /// When it got its slot (a wait in line is not its latency).
    started: Instant,
    /// Slots held when it got its own, itself included.
    at_start: usize,
    /// How it went; a drop until it is answered.
    sample: Sample,
}

impl InFlightGuard {
    /// How long the request waited in line for its slot (zero when one
    /// was free).
    pub(crate) fn waited(&self) -> Duration {
        self.permit.waited()
    }

    /// The handler answered `status`: a `503` or `429` is a sign of
    /// overload (a drop), another `5xx` says nothing about this service's
    /// load, anything else is latency to learn from.
    pub(crate) fn answered(&mut self, status: StatusCode) {
        if let Some(adaptive) = &mut self.adaptive {
            adaptive.sample = match status.as_u16() {
                429 | 503 => Sample::Dropped,
                s if s >= 500 => Sample::Ignore,
                _ => Sample::Success,
            };
        }
    }
}

/// Dropped before the guard's permit (the field order), so the queue is
/// sized before the slot goes back to it.
impl Drop for Adaptive {
    fn drop(&mut self) {
        if let Some(adaptive) = &self.in_flight.adaptive {
            let now = Instant::now();
            let next = adaptive.on_sample(
                now,
                now.saturating_duration_since(self.started),
                self.at_start,
                self.sample,
            );
            self.in_flight.slots.set_growth(adaptive.growth());
            self.in_flight.resize(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::limit::{AdaptiveLimitConfig, FIRST_HOLD};

    const FLOOR: Duration = Duration::from_millis(50);
    const RETRY_AFTER: Duration = Duration::from_secs(1);

    /// The response future holds an `Option<InFlightGuard>` whether a
    /// limit is configured or not: it stays within 56 bytes (the counter it
    /// replaced was 40; a queue permit now carries the instant it was
    /// handed out, 16 bytes, for the queue's measured hold).
    #[test]
    fn a_guard_is_small() {
        assert!(std::mem::size_of::<Option<InFlightGuard>>() <= 56);
    }

    #[test]
    fn admits_up_to_the_limit_and_frees_on_drop() {
        let in_flight = InFlight::new(2);
        let a = in_flight.try_acquire().expect("first");
        let b = in_flight.try_acquire().expect("second");
        assert!(in_flight.try_acquire().is_none(), "third is refused");
        assert_eq!(in_flight.current(), 2);
        drop(a);
        let c = in_flight.try_acquire().expect("a slot came free");
        drop((b, c));
        assert_eq!(in_flight.current(), 0);
    }

    /// No slot is kept back: with the queue serving the more critical
    /// first, `sheddable` requests may use every free slot.
    #[test]
    fn sheddable_requests_take_every_free_slot() {
        let in_flight = InFlight::new(4);
        let shed: Vec<_> = (0..5).filter_map(|_| in_flight.try_acquire()).collect();
        assert_eq!(shed.len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_gets_the_slot_freed_and_says_how_long_it_waited() {
        let in_flight = InFlight::new(1);
        let held = in_flight.try_acquire().unwrap();
        let far = Instant::now() + Duration::from_secs(5);
        let (slot, ()) = tokio::join!(
            in_flight.wait(far, Criticality::Default, FLOOR, RETRY_AFTER),
            async {
                tokio::time::sleep(Duration::from_millis(40)).await;
                drop(held);
            }
        );
        let slot = slot.expect("the freed slot");
        assert_eq!(slot.waited(), Duration::from_millis(40));
        assert_eq!(in_flight.current(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_is_refused_at_its_give_up_instant() {
        let in_flight = InFlight::new(1);
        let _held = in_flight.try_acquire().unwrap();
        let start = Instant::now();
        let refusal = in_flight
            .wait(
                start + Duration::from_millis(30),
                Criticality::Critical,
                FLOOR,
                RETRY_AFTER,
            )
            .await
            .unwrap_err();
        assert_eq!(refusal.reason(), "expired");
        assert!(
            !refusal.is_overload(),
            "the budget's refusal, not overload's"
        );
        assert_eq!(refusal.waited(), Duration::from_millis(30));
        assert_eq!(start.elapsed(), Duration::from_millis(30));
        let problem = refusal.problem(FLOOR);
        assert_eq!(problem.status, 504);
        assert_eq!(
            problem.detail,
            "waited 30ms for an in-flight slot (limit 1) until only \
             the floor of 50ms was left: the request was not started"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_adaptive_limit_admits_initial_at_the_hold_s_end_after_its_first_refusal() {
        let in_flight =
            InFlight::adaptive(AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap());
        let first: Vec<_> = (0..3).map(|_| in_flight.try_acquire().unwrap()).collect();
        assert!(in_flight.try_acquire().is_none(), "the probe's 3");
        tokio::time::sleep(FIRST_HOLD - Duration::from_millis(1)).await;
        assert!(in_flight.try_acquire().is_none(), "held for the first hold");
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(in_flight.limit(), 10, "`initial` once the hold is over");
        let more: Vec<_> = (0..7).map(|_| in_flight.try_acquire().unwrap()).collect();
        assert!(in_flight.try_acquire().is_none());
        drop((first, more));
    }

    /// Requests already waiting when the hold ends get the new slots with
    /// no answer and no other request.
    #[tokio::test(start_paused = true)]
    async fn waiters_get_the_slots_the_hold_s_end_adds() {
        let in_flight =
            InFlight::adaptive(AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap());
        let _first: Vec<_> = (0..3).map(|_| in_flight.try_acquire().unwrap()).collect();
        assert!(in_flight.try_acquire().is_none());
        let far = Instant::now() + Duration::from_secs(5);
        let waiters: Vec<_> = (0..7)
            .map(|_| tokio::spawn(in_flight.wait(far, Criticality::Default, FLOOR, RETRY_AFTER)))
            .collect();
        for waiter in waiters {
            let slot = waiter.await.unwrap().expect("a slot at the hold's end");
            assert_eq!(slot.waited(), FIRST_HOLD);
        }
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
            let mut guard = in_flight.try_acquire().unwrap();
            tokio::time::advance(Duration::from_millis(20)).await;
            guard.answered(StatusCode::OK);
            drop(guard);
            assert_eq!(in_flight.limit(), 10, "after {answered} answers");
        }
        // A request dropped unanswered (at its deadline) is a drop: the
        // limit is cut by the drop factor (0.9).
        let guard = in_flight.try_acquire().unwrap();
        tokio::time::advance(Duration::from_millis(20)).await;
        drop(guard);
        assert_eq!(in_flight.limit(), 9);
        assert_eq!(in_flight.current(), 0);
    }
}
