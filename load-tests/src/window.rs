//! A window of a run reported on its own: the requests due in it
//! ([`Watch`]), and what came of them ([`WindowReport`]): the `burst-*`
//! scenarios watch every request of the burst, the `hang` scenarios those
//! due while the dependency hung (and time the first `2xx` after it).
//!
//! For the requests refused with an error status, the window also reports
//! how long each waited in checkout's permit queues before its refusal
//! ([`checkout_queue_ms`]: the `checkout.<dependency>-queue` steps of its
//! answer's `Server-Timing`, summed): a refusal at arrival waits nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use budget_core::ledger::parse_server_timing;

use crate::budget_table::{CHECKOUT_HOP, QUEUE_SUFFIX, micros_histogram};
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
    /// The refused requests' (answered with an error status) time in
    /// checkout's permit queues, median, ms ([`checkout_queue_ms`]; `None`:
    /// no refusal).
    #[serde(default)]
    pub refused_queue_p50_ms: Option<f64>,
    /// Their 99th percentile, ms.
    #[serde(default)]
    pub refused_queue_p99_ms: Option<f64>,
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
    refused_queue: Histogram<u64>,
    slowest: Option<Duration>,
    first_after_mark: Option<Duration>,
}

impl WindowCounts {
    pub(crate) fn new() -> Self {
        Self {
            report: WindowReport::default(),
            failures: micros_histogram(),
            refused_queue: micros_histogram(),
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
            Outcome::Status(code) => {
                *r.refused.entry(code).or_default() += 1;
                let queue = checkout_queue_ms(sample.server_timing.as_deref());
                // Recorded in µs plus 1 (the histogram's least value is 1),
                // read back less 1: no wait is 0.
                self.refused_queue
                    .saturating_record(((queue * 1000.0) as u64).saturating_add(1));
            }
            Outcome::ClientTimeout => r.client_timeouts += 1,
            Outcome::Transport => r.transport += 1,
        }
        r.failures += 1;
        self.failures
            .saturating_record((sample.latency.as_micros() as u64).max(1));
    }

    pub(crate) fn finish(self, watch: &Watch) -> WindowReport {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let at = |h: &Histogram<u64>, q: f64| {
            (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
        };
        WindowReport {
            what: watch.what.clone(),
            from_s: watch.from.as_secs_f64(),
            to_s: watch.to.as_secs_f64(),
            failure_p50_ms: at(&self.failures, 0.50),
            failure_p99_ms: at(&self.failures, 0.99),
            refused_queue_p50_ms: at(&self.refused_queue, 0.50).map(less_one_micro),
            refused_queue_p99_ms: at(&self.refused_queue, 0.99).map(less_one_micro),
            slowest_success_ms: self.slowest.map(ms),
            mark_s: watch.mark.map(|m| m.as_secs_f64()),
            first_success_after_mark_s: self.first_after_mark.map(|d| d.as_secs_f64()),
            ..self.report
        }
    }
}

/// A refused request's queue time as recorded (µs plus 1, in ms) less
/// the 1 µs.
fn less_one_micro(ms: f64) -> f64 {
    (ms - 0.001).max(0.0)
}

/// How long one answer waited in checkout's permit queues, ms: the sum of
/// the `checkout.<dependency>-queue` steps of its `Server-Timing`
/// ([`QUEUE_SUFFIX`]), 0 when it has none (or no `Server-Timing`).
///
/// ```
/// use load_tests::window::checkout_queue_ms;
///
/// let st = "budget;dur=2000;desc=\"ingress\", checkout.pricing-queue;dur=12, \
///           checkout.inventory-queue;dur=3, checkout.pricing;dur=50, edge-queue;dur=40";
/// assert_eq!(checkout_queue_ms(Some(st)), 15.0);
/// assert_eq!(checkout_queue_ms(Some("checkout.pricing;dur=50")), 0.0);
/// assert_eq!(checkout_queue_ms(None), 0.0);
/// ```
pub fn checkout_queue_ms(server_timing: Option<&str>) -> f64 {
    let Some(value) = server_timing else {
        return 0.0;
    };
    let prefix = format!("{CHECKOUT_HOP}.");
    parse_server_timing(value)
        .iter()
        .filter(|m| m.name.starts_with(&prefix) && m.name.ends_with(QUEUE_SUFFIX))
        .filter_map(|m| m.dur)
        .filter(|d| d.is_finite() && *d > 0.0)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::Scheduled;

    #[test]
    fn refused_requests_queue_times_are_their_checkout_queue_steps_and_0_without_any() {
        let now = tokio::time::Instant::now();
        let sample = |index, outcome, st: Option<&str>| Sample {
            scheduled: Scheduled {
                index,
                intended: now,
                run_start: now,
            },
            outcome,
            latency: Duration::from_millis(10),
            budget: Duration::from_secs(2),
            class: None,
            server_timing: st.map(str::to_owned),
        };
        let watch = Watch {
            what: "the burst".into(),
            from: Duration::ZERO,
            to: Duration::from_secs(1),
            mark: None,
        };
        let mut counts = WindowCounts::new();
        // 98 refused at arrival (no queue step), 2 after 40 ms in the
        // queue; a 2xx's queue time is not a refusal's.
        for i in 0..98 {
            counts.record(&watch, &sample(i, Outcome::Status(503), None));
        }
        let queued = "checkout.pricing-queue;dur=30, checkout.inventory-queue;dur=10";
        for i in 98..100 {
            counts.record(&watch, &sample(i, Outcome::Status(504), Some(queued)));
        }
        let slow = "checkout.pricing-queue;dur=900";
        counts.record(&watch, &sample(100, Outcome::Ok, Some(slow)));
        let r = counts.finish(&watch);
        assert_eq!(r.refused_queue_p50_ms, Some(0.0));
        let p99 = r.refused_queue_p99_ms.unwrap();
        assert!((39.9..=40.1).contains(&p99), "{p99}");
        assert_eq!((r.good, r.failures), (1, 100));
        let none = WindowCounts::new().finish(&watch);
        assert_eq!(none.refused_queue_p50_ms, None);
    }
}
