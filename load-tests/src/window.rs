//! A window of a run reported on its own: the requests due in it
//! ([`Watch`]), and what came of them ([`WindowReport`]): the `burst-*`
//! scenarios watch every request of the burst, the `hang` scenarios those
//! due while the dependency hung (and time the first `2xx` after it).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::budget_table::micros_histogram;
use crate::client::{Outcome, Sample};

/// A window of a run whose requests are also reported on their own
/// ([`WindowReport`]): those due (by intended send time) from `from` up to
/// `to`; and, with a `mark`, how long after it the first `2xx` came.
#[derive(Clone, Debug, PartialEq)]
pub struct Watch {
    /// What the window is, for the report (`the burst`).
    pub what: String,
    /// It starts, from the start of the run.
    pub from: Duration,
    /// It ends (excluded).
    pub to: Duration,
    /// A time after which the first `2xx` is timed (the end of a hang).
    pub mark: Option<Duration>,
}

/// The requests due in a [`Watch`]'s window, and what came of them.
///
/// A **failure** is a request sent whose answer was not a `2xx`: an error
/// status (a refusal), a client timeout or a connection error; its latency
/// counts from the intended send time to the answer or the error, as every
/// latency here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// What the window is.
    pub what: String,
    /// Its start, seconds from the start of the run.
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// Requests due in it.
    pub requests: u64,
    /// `2xx` within the request's budget.
    pub good: u64,
    /// `2xx`, whenever they came.
    pub success: u64,
    /// Answered with an error status, by status.
    pub refused: BTreeMap<u16, u64>,
    /// No answer within the client's patience.
    pub client_timeouts: u64,
    /// A connection error.
    pub transport: u64,
    /// Never sent (the generator's in-flight cap).
    pub not_sent: u64,
    /// Failures: sent, and not a `2xx`.
    pub failures: u64,
    /// Their median latency, ms (`None`: no failure).
    pub failure_p50_ms: Option<f64>,
    /// Their p99 latency, ms.
    pub failure_p99_ms: Option<f64>,
    /// The slowest `2xx`, ms (`None`: no `2xx`).
    pub slowest_success_ms: Option<f64>,
    /// The watch's mark, seconds from the start of the run.
    pub mark_s: Option<f64>,
    /// Seconds from the mark to the first `2xx` answer of a request due at
    /// or after it (its intended send time plus its latency); `None`: no
    /// mark, or no such `2xx` in the run.
    pub first_success_after_mark_s: Option<f64>,
}

/// A window's live counters.
#[derive(Debug)]
pub(crate) struct WindowCounts {
    report: WindowReport,
    failures: Histogram<u64>,
    slowest: Option<Duration>,
    first_after_mark: Option<Duration>,
}

impl WindowCounts {
    pub(crate) fn new() -> Self {
        Self {
            report: WindowReport::default(),
            failures: micros_histogram(),
            slowest: None,
            first_after_mark: None,
        }
    }

    pub(crate) fn record(&mut self, watch: &Watch, sample: &Sample) {
        let offset = sample.scheduled.offset();
        let success = sample.outcome.is_success();
        if let Some(mark) = watch.mark
            && success
            && offset >= mark
        {
            let after = offset.saturating_add(sample.latency).saturating_sub(mark);
            self.first_after_mark = Some(self.first_after_mark.map_or(after, |f| f.min(after)));
        }
        if offset < watch.from || offset >= watch.to {
            return;
        }
        let r = &mut self.report;
        r.requests += 1;
        match sample.outcome {
            Outcome::NotSent => {
                r.not_sent += 1;
                return;
            }
            Outcome::Ok | Outcome::Degraded => {
                r.success += 1;
                r.good += u64::from(sample.is_good());
                self.slowest = Some(
                    self.slowest
                        .map_or(sample.latency, |s| s.max(sample.latency)),
                );
                return;
            }
            Outcome::Status(code) => *r.refused.entry(code).or_default() += 1,
            Outcome::ClientTimeout => r.client_timeouts += 1,
            Outcome::Transport => r.transport += 1,
        }
        r.failures += 1;
        self.failures
            .saturating_record((sample.latency.as_micros() as u64).max(1));
    }

    pub(crate) fn finish(self, watch: &Watch) -> WindowReport {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let at = |q: f64| {
            (!self.failures.is_empty()).then(|| self.failures.value_at_quantile(q) as f64 / 1000.0)
        };
        WindowReport {
            what: watch.what.clone(),
            from_s: watch.from.as_secs_f64(),
            to_s: watch.to.as_secs_f64(),
            failure_p50_ms: at(0.50),
            failure_p99_ms: at(0.99),
            slowest_success_ms: self.slowest.map(ms),
            mark_s: watch.mark.map(|m| m.as_secs_f64()),
            first_success_after_mark_s: self.first_after_mark.map(|d| d.as_secs_f64()),
            ..self.report
        }
    }
}
