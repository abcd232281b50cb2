//! Collects a run's samples into a [`RunReport`], as they come.

use std::collections::BTreeMap;
use std::time::Duration;

use budget_core::ledger::parse_server_timing;
use hdrhistogram::Histogram;
use slow_partner::StatsSnapshot;

use super::{
    ClassReport, Latency, Outcomes, PartnerReport, RampReport, RampSeries, RampStepReport, RunInfo,
    RunReport, SecondSummary, ServiceSeries,
};
use crate::budget_table::{BudgetTable, micros_histogram, partner_calls_answered_by};
use crate::client::{Outcome, Sample};
use crate::generator::{LoadSpec, RateStep, RunTotals};
use crate::section::Sections;
use crate::window::{Watch, WindowCounts};

/// A class's live counters.
#[derive(Debug, Default)]
struct ClassCounts {
    scheduled: u64,
    success: u64,
    good: u64,
    late_answers: u64,
}

/// A second's live aggregate.
#[derive(Debug)]
struct Second {
    due: u64,
    good: u64,
    /// Answered with a `5xx`.
    refused: u64,
    latency: Histogram<u64>,
}

impl Second {
    fn new() -> Self {
        Self {
            due: 0,
            good: 0,
            refused: 0,
            // 2 significant digits are plenty for a per-second p99.
            latency: coarse_histogram(),
        }
    }
}

/// Collects a run's samples into a [`RunReport`].
#[derive(Debug)]
pub struct Recorder {
    outcomes: Outcomes,
    latency: Histogram<u64>,
    good: u64,
    full_good: u64,
    success_after_budget: u64,
    late_answers: u64,
    classes: BTreeMap<&'static str, ClassCounts>,
    table: BudgetTable,
    partner_calls_on_time: u64,
    seconds: Vec<Second>,
    ramp: Vec<(RateStep, Second)>,
    watch: Option<(Watch, WindowCounts)>,
}

/// A per-second (or per-step) latency histogram: 2 significant digits.
fn coarse_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("static bounds are valid")
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self {
            outcomes: Outcomes::default(),
            latency: micros_histogram(),
            good: 0,
            full_good: 0,
            success_after_budget: 0,
            late_answers: 0,
            classes: BTreeMap::new(),
            table: BudgetTable::new(),
            partner_calls_on_time: 0,
            seconds: Vec::new(),
            ramp: Vec::new(),
            watch: None,
        }
    }

    /// An empty recorder for `spec`: with per-step counters when it is a
    /// ramp.
    pub fn for_spec(spec: &LoadSpec) -> Self {
        let mut r = Self::new();
        r.ramp = spec
            .steps()
            .iter()
            .map(|&step| (step, Second::new()))
            .collect();
        r
    }

    /// The same recorder, also reporting the requests of `watch`'s window
    /// on their own ([`RunReport::window`]).
    pub fn watching(mut self, watch: Option<Watch>) -> Self {
        self.watch = watch.map(|w| (w, WindowCounts::new()));
        self
    }

    /// Adds one request.
    pub fn record(&mut self, sample: &Sample) {
        self.outcomes.add(sample.outcome);
        let second = sample.scheduled.offset().as_secs() as usize;
        if self.seconds.len() <= second {
            self.seconds.resize_with(second + 1, Second::new);
        }
        if let Some((watch, counts)) = &mut self.watch {
            counts.record(watch, sample);
        }
        let sec = &mut self.seconds[second];
        sec.due += 1;
        let mut step_end = Duration::ZERO;
        let offset = sample.scheduled.offset();
        let mut step = None;
        for (rate_step, counts) in &mut self.ramp {
            step_end = step_end.saturating_add(rate_step.duration);
            if offset < step_end {
                step = Some(counts);
                break;
            }
        }
        if let Some(st) = step.as_mut() {
            st.due += 1;
        }
        let mut class = sample.class.map(|c| self.classes.entry(c).or_default());
        if let Some(c) = class.as_mut() {
            c.scheduled += 1;
        }
        if sample.outcome == Outcome::NotSent {
            return;
        }
        let answered = matches!(
            sample.outcome,
            Outcome::Ok | Outcome::Degraded | Outcome::Status(_)
        );
        if answered && sample.latency > sample.budget {
            self.late_answers += 1;
            if let Some(c) = class.as_mut() {
                c.late_answers += 1;
            }
        }
        if let Some(c) = class.as_mut() {
            c.success += u64::from(sample.outcome.is_success());
            c.good += u64::from(sample.is_good());
        }
        let micros = (sample.latency.as_micros() as u64).max(1);
        self.latency.saturating_record(micros);
        sec.latency.saturating_record(micros);
        let refused = matches!(sample.outcome, Outcome::Status(code) if code >= 500);
        sec.refused += u64::from(refused);
        if let Some(st) = step.as_mut() {
            st.latency.saturating_record(micros);
            st.good += u64::from(sample.is_good());
            st.refused += u64::from(refused);
        }
        if sample.is_good() {
            self.good += 1;
            sec.good += 1;
            if sample.outcome == Outcome::Ok {
                self.full_good += 1;
            }
        } else if sample.outcome.is_success() {
            self.success_after_budget += 1;
        }
        if let Some(timing) = &sample.server_timing {
            let metrics = parse_server_timing(timing);
            let to_ms = |d: Duration| d.as_secs_f64() * 1000.0;
            self.partner_calls_on_time +=
                partner_calls_answered_by(&metrics, to_ms(sample.latency), to_ms(sample.budget));
            self.table.record_metrics(&metrics);
        }
    }

    /// Partner calls the ledgers show answered by the client's deadline.
    pub fn partner_calls_answered_by_deadline(&self) -> u64 {
        self.partner_calls_on_time
    }

    /// The report of the run.
    pub fn finish(
        self,
        run: RunInfo,
        totals: RunTotals,
        partner: Option<&StatsSnapshot>,
    ) -> RunReport {
        let window = run.spec.duration().as_secs_f64();
        let ramp = self.ramp_report();
        let classes = self.class_reports();
        let timeline = self.timeline();
        RunReport {
            ramp,
            window: self.watch.map(|(w, c)| c.finish(&w)),
            services: ServiceSeries::default(),
            sections: Sections::default(),
            scenario: run.scenario,
            mode: run.mode,
            description: run.description,
            rate_per_s: run.spec.rate(),
            duration_s: window,
            arrivals: run.spec.arrivals(),
            budget_ms: run.budgets.max().as_millis() as u64,
            budgets: run.budgets,
            patience: run.patience,
            scheduled: totals.scheduled,
            sent: totals.sent,
            good: self.good,
            goodput_per_s: self.good as f64 / window,
            full_goodput_per_s: self.full_good as f64 / window,
            success_after_budget: self.success_after_budget,
            late_answers: self.late_answers,
            classes,
            latency_ms: Latency::of(&self.latency),
            generator_max_lag_ms: totals.max_lag.as_secs_f64() * 1000.0,
            listen_overflows: None,
            wall_s: totals.elapsed.as_secs_f64(),
            load_average: run.load_average,
            partner: partner.map(|s| PartnerReport::new(s, self.partner_calls_on_time)),
            steps: self.table.summaries(),
            timeline,
            outcomes: self.outcomes,
        }
    }

    /// The per-step and per-second report of a load with steps; `None`
    /// without steps.
    fn ramp_report(&self) -> Option<RampReport> {
        if self.ramp.is_empty() {
            return None;
        }
        let mut from = Duration::ZERO;
        let steps = self
            .ramp
            .iter()
            .enumerate()
            .map(|(i, (step, c))| {
                let to = from.saturating_add(step.duration);
                let r = RampStepReport {
                    step: i,
                    factor: step.factor,
                    rate_per_s: step.rate,
                    from_s: from.as_secs_f64(),
                    to_s: to.as_secs_f64(),
                    due: c.due,
                    good: c.good,
                    refused: c.refused,
                    goodput_per_s: c.good as f64 / step.duration.as_secs_f64(),
                    p99_ms: p99_ms(&c.latency),
                };
                from = to;
                r
            })
            .collect();
        Some(RampReport {
            steps,
            series: RampSeries {
                second: (0..self.seconds.len() as u64).collect(),
                offered_per_s: self.seconds.iter().map(|s| s.due).collect(),
                goodput_per_s: self.seconds.iter().map(|s| s.good).collect(),
                p99_ms: self.seconds.iter().map(|s| p99_ms(&s.latency)).collect(),
                services: ServiceSeries::default(),
            },
        })
    }

    /// Per class of request, in name order.
    fn class_reports(&self) -> Vec<ClassReport> {
        self.classes
            .iter()
            .map(|(name, c)| {
                let share = |n: u64| {
                    if c.scheduled == 0 {
                        0.0
                    } else {
                        n as f64 / c.scheduled as f64
                    }
                };
                ClassReport {
                    class: (*name).to_owned(),
                    scheduled: c.scheduled,
                    success: c.success,
                    good: c.good,
                    late_answers: c.late_answers,
                    success_share: share(c.success),
                    good_share: share(c.good),
                }
            })
            .collect()
    }

    /// Per second of the run.
    fn timeline(&self) -> Vec<SecondSummary> {
        self.seconds
            .iter()
            .enumerate()
            .map(|(i, s)| SecondSummary {
                second: i as u64,
                due: s.due,
                good: s.good,
                p99_ms: p99_ms(&s.latency),
            })
            .collect()
    }
}

/// A histogram's p99 in ms (µs recorded); `None` when it is empty.
fn p99_ms(h: &Histogram<u64>) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(0.99) as f64 / 1000.0)
}
