//! What both adapters do around one outbound request, written once: the
//! floor check and its skip note, the budget headers, the caller's trace
//! context, the attempt's window and its ledger entry.
//!
//! The rules are the client's (docs/contract.md §1 "Outbound", §2 rules 1
//! and 2, §4), on the same pieces: [`Budget::less`](crate::Budget::less)
//! for the reserve, [`Floor::check`] and [`BelowFloor`]'s text for the
//! refusal, [`encode_ms`] for `request-budget-ms`,
//! [`Criticality::header_value`](crate::admission::criticality::Criticality::header_value)
//! for `request-criticality`, and [`Outcome`]'s text for the attempt's
//! ledger entry.

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

use crate::Budget;
use crate::admission::criticality::REQUEST_CRITICALITY;
use crate::budget::whole_millis;
use crate::context::RequestContext;
use crate::floor::{BelowFloor, Floor};
use crate::header::{REQUEST_BUDGET_MS, encode_ms};
use crate::ledger::{Entry, Ledger};
use crate::retry::{Outcome, TransportKind};
use crate::telemetry::carry;

/// What an adapter knows of its dependency: the name its ledger entries
/// carry, and its floor.
#[derive(Clone, Debug)]
pub(crate) struct Outbound {
    dependency: Arc<str>,
    floor: Floor,
}

/// A request that was not made: the floor's refusal, and the skip note the
/// ledger got for it.
#[derive(Debug)]
pub(crate) struct Refused {
    pub(crate) below: BelowFloor,
    /// Kept by the reqwest middleware's `CallError`.
    #[cfg_attr(not(feature = "reqwest-middleware"), allow(dead_code))]
    pub(crate) note: String,
}

/// A request on its way: its window (until when it may take, how long that
/// is) and where its attempt is recorded.
#[derive(Debug)]
pub(crate) struct Sent {
    dependency: Arc<str>,
    ledger: Ledger,
    started: Instant,
    deadline: Instant,
    limit: Duration,
}

impl Outbound {
    /// A dependency called `dependency`, with no floor.
    pub(crate) fn new(dependency: Arc<str>) -> Self {
        Self {
            dependency,
            floor: Floor::default(),
        }
    }

    /// The same, with `floor`.
    pub(crate) fn with_floor(mut self, floor: Floor) -> Self {
        self.floor = floor;
        self
    }

    /// The dependency's name.
    pub(crate) fn dependency(&self) -> &Arc<str> {
        &self.dependency
    }

    /// The dependency's floor.
    pub(crate) fn floor(&self) -> Floor {
        self.floor
    }

    /// One request made inside `cx`. What is left of the budget less the
    /// reserve is checked against the floor (rule 2): below it the request
    /// is refused and the ledger says why (`skipped: 30ms < floor 50ms`).
    /// Otherwise the request may take what is left, or `cap` when that is
    /// shorter (rule 1), and `headers` say so: `request-budget-ms` is that
    /// window, rounded down (a stale value is replaced), and
    /// `request-criticality` the request's, unless the caller set one.
    pub(crate) fn admit(
        &self,
        cx: &RequestContext,
        headers: &mut HeaderMap,
        cap: Option<Duration>,
    ) -> Result<Sent, Refused> {
        let started = Instant::now();
        let left = cx.budget().less(cx.reserve()).remaining_at(started);
        if let Err(below) = self.floor.check(left) {
            let note = below.skip_note();
            tracing::debug!(dependency = %self.dependency, %note, "dependency call not made");
            cx.ledger()
                .record(Entry::skip(&*self.dependency, note.as_str()));
            return Err(Refused { below, note });
        }
        let limit = cap.map_or(left, |cap| cap.min(left));
        headers.insert(REQUEST_BUDGET_MS, encode_ms(limit));
        if !headers.contains_key(REQUEST_CRITICALITY) {
            headers.insert(REQUEST_CRITICALITY, cx.criticality().header_value());
        }
        // The caller's trace context, when the request has none (no span
        // of ours to inject).
        carry::propagate(&tracing::Span::none(), headers, cx.inbound_trace());
        Ok(Sent {
            dependency: Arc::clone(&self.dependency),
            ledger: cx.ledger().clone(),
            started,
            deadline: Budget::starting_at(started, limit).deadline(),
            limit,
        })
    }
}

impl Sent {
    /// How long the request may take: the budget its headers carry.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// When the request must have ended.
    #[cfg_attr(not(feature = "tower-client"), allow(dead_code))]
    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Records the attempt in the request's ledger, with its duration so
    /// far and `outcome` as the ledger writes it (`200`, `timeout`), and
    /// logs it as the client's attempts are logged.
    pub(crate) fn record(&self, outcome: &Outcome) {
        let took = self.started.elapsed();
        tracing::debug!(
            dependency = %self.dependency,
            attempt = 1,
            %outcome,
            duration_ms = whole_millis(took),
            budget_sent_ms = whole_millis(self.limit),
            "dependency attempt"
        );
        self.ledger.record(Entry::attempt(
            &*self.dependency,
            1,
            took,
            outcome.to_string(),
        ));
    }
}

/// The kind of a transport failure, from the I/O error in its source
/// chain: a connection refused or unreachable is `connect`, one reset,
/// aborted or closed early `reset`, an I/O timeout `timeout`; anything
/// else `other`.
pub(crate) fn failure_kind(error: &(dyn StdError + 'static)) -> TransportKind {
    let mut source = Some(error);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::HostUnreachable
                | io::ErrorKind::NetworkUnreachable
                | io::ErrorKind::AddrNotAvailable => return TransportKind::Connect,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => return TransportKind::Reset,
                io::ErrorKind::TimedOut => return TransportKind::Timeout,
                _ => {}
            }
        }
        source = err.source();
    }
    TransportKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::criticality::Criticality;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn context(budget: u64, reserve: u64) -> RequestContext {
        RequestContext::new(Budget::new(ms(budget))).with_reserve(ms(reserve))
    }

    /// docs/contract.md §1: the header is what is left less the reserve,
    /// and the criticality goes beside it.
    #[tokio::test(start_paused = true)]
    async fn rule1_the_headers_say_what_is_left_less_the_reserve() {
        let cx = context(500, 20).with_criticality(Criticality::Critical);
        tokio::time::advance(ms(100)).await;
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_BUDGET_MS, "99999".parse().unwrap());
        let sent = Outbound::new("pricing".into())
            .admit(&cx, &mut headers, None)
            .unwrap();
        assert_eq!(sent.limit(), ms(380));
        assert_eq!(sent.deadline(), Instant::now() + ms(380));
        assert_eq!(headers[REQUEST_BUDGET_MS], "380");
        assert_eq!(headers[REQUEST_CRITICALITY], "critical");
    }

    /// A cap shortens the window and the header with it; it never
    /// lengthens them. The caller's own criticality stays.
    #[tokio::test(start_paused = true)]
    async fn rule1_a_cap_shortens_the_window_and_the_caller_s_criticality_stays() {
        let cx = context(500, 0);
        let mut headers = HeaderMap::new();
        headers.insert(REQUEST_CRITICALITY, "sheddable".parse().unwrap());
        let outbound = Outbound::new("pricing".into());
        let sent = outbound.admit(&cx, &mut headers, Some(ms(120))).unwrap();
        assert_eq!(sent.limit(), ms(120));
        assert_eq!(headers[REQUEST_BUDGET_MS], "120");
        assert_eq!(headers[REQUEST_CRITICALITY], "sheddable");
        let sent = outbound.admit(&cx, &mut headers, Some(ms(9000))).unwrap();
        assert_eq!(sent.limit(), ms(500));
    }

    /// docs/contract.md §2 rule 2: below the floor, no request, and the
    /// ledger says why; the headers are left as they were.
    #[tokio::test(start_paused = true)]
    async fn rule2_below_the_floor_the_request_is_refused_and_the_ledger_says_why() {
        let cx = context(80, 50);
        let mut headers = HeaderMap::new();
        let refused = Outbound::new("pricing".into())
            .with_floor(Floor::new(ms(50)))
            .admit(&cx, &mut headers, None)
            .unwrap_err();
        assert_eq!(refused.below.remaining(), ms(30));
        assert_eq!(refused.note, "skipped: 30ms < floor 50ms");
        assert!(headers.is_empty());
        assert_eq!(
            cx.ledger().server_timing(),
            "pricing;desc=\"skipped: 30ms < floor 50ms\""
        );
    }

    /// With no floor, a spent budget is still refused: nothing can be
    /// done in no time.
    #[tokio::test(start_paused = true)]
    async fn rule2_a_spent_budget_is_refused_without_a_floor() {
        let cx = context(10, 0);
        tokio::time::advance(ms(10)).await;
        let refused = Outbound::new("pricing".into())
            .admit(&cx, &mut HeaderMap::new(), None)
            .unwrap_err();
        assert_eq!(refused.note, "skipped: no budget left");
    }

    /// docs/contract.md §4: one attempt entry, its duration, its outcome.
    #[tokio::test(start_paused = true)]
    async fn the_attempt_is_one_ledger_entry_with_its_outcome() {
        let cx = context(1000, 0);
        let sent = Outbound::new("pricing".into())
            .admit(&cx, &mut HeaderMap::new(), None)
            .unwrap();
        tokio::time::advance(ms(40)).await;
        sent.record(&Outcome::Transport(TransportKind::Timeout));
        assert_eq!(
            cx.ledger().server_timing(),
            "pricing;dur=40;desc=\"timeout\""
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] io::Error);

    #[test]
    fn a_failure_s_kind_is_read_from_the_io_error_in_its_chain() {
        let kind = |k| failure_kind(&Outer(io::Error::from(k)));
        assert_eq!(
            kind(io::ErrorKind::ConnectionRefused),
            TransportKind::Connect
        );
        assert_eq!(kind(io::ErrorKind::ConnectionReset), TransportKind::Reset);
        assert_eq!(kind(io::ErrorKind::TimedOut), TransportKind::Timeout);
        assert_eq!(kind(io::ErrorKind::PermissionDenied), TransportKind::Other);
    }
}
