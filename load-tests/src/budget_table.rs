//! The budget table of a run: every answer's `Server-Timing` ledger,
//! aggregated per step.
//!
//! Edge's answer carries one ledger for both hops (`docs/contract.md`
//! §4): edge's `budget` (ingress) and `checkout` (its
//! attempt), then checkout's metrics prefixed `checkout.`:
//! `checkout.budget` (ingress), `checkout.inventory`, `checkout.pricing`
//! (one metric per attempt, `desc` = the status when not `2xx`),
//! `checkout.pricing-wait` (a backoff), `checkout.pricing-queue` (the wait
//! for a concurrency permit), `checkout.recommendations;desc="skipped: ..."`.
//! [`BudgetTable::record`] reads one such value; each metric name becomes a
//! row (a [`StepSummary`]), in the order names were first seen:
//!
//! - **ingress** rows (`desc="ingress"`): the budget that hop started
//!   with, as percentiles;
//! - **call** rows: every metric with a duration is an attempt; per answer,
//!   attempts beyond the first are **retries**; a metric without a duration
//!   whose `desc` starts with `skipped` is a **skip**;
//! - **wait** (`-wait`) and **queue** (`-queue`) rows: time spent not
//!   calling;
//! - the **share of budget**: per answer, the step's durations over the
//!   answer's first ingress budget (edge's), averaged over the answers that
//!   have the step;
//! - **notes**: how often each `desc` was seen (`503`, `timeout`, a skip
//!   reason with its numbers blanked: `skipped: #ms < floor #ms`).
//!
//! ```
//! use load_tests::budget_table::BudgetTable;
//!
//! let mut table = BudgetTable::new();
//! table.record("budget;dur=2000;desc=\"ingress\", checkout;dur=400, checkout.pricing;dur=100;desc=\"503\", \
//!               checkout.pricing-wait;dur=20, checkout.pricing;dur=200, \
//!               checkout.recommendations;desc=\"skipped: 850ms < floor 1000ms\"");
//! let pricing = table.step("checkout.pricing").unwrap();
//! assert_eq!((pricing.calls, pricing.retries), (2, 1));
//! assert_eq!(pricing.mean_share_of_budget, Some(0.15));
//! assert_eq!(table.step("checkout.recommendations").unwrap().skips, 1);
//! ```

use std::collections::{BTreeMap, HashMap};

use budget_core::ledger::{INGRESS_DESC, INGRESS_METRIC, Metric, WAIT_SUFFIX, parse_server_timing};
use comfy_table::presets::ASCII_MARKDOWN;
use comfy_table::{CellAlignment, Table};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The suffix of a concurrency-permit wait (`pricing-queue`), as
/// `budget_core::client` writes it.
pub const QUEUE_SUFFIX: &str = "-queue";

/// The hop whose metrics are the partner's calls: edge prefixes checkout's
/// metrics with `checkout.`.
pub const CHECKOUT_HOP: &str = "checkout";

/// What kind of step a metric name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// A hop's budget on arrival.
    Ingress,
    /// A downstream call: attempts, and skips.
    Call,
    /// A backoff wait before a retry.
    Wait,
    /// A wait for a concurrency permit.
    Queue,
}

impl StepKind {
    /// The kind of metric `m`.
    pub fn of(m: &Metric) -> Self {
        if m.desc.as_deref() == Some(INGRESS_DESC) {
            StepKind::Ingress
        } else if m.name.ends_with(WAIT_SUFFIX) {
            StepKind::Wait
        } else if m.name.ends_with(QUEUE_SUFFIX) {
            StepKind::Queue
        } else {
            StepKind::Call
        }
    }
}

/// One row of the budget table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    /// The metric name (`checkout.pricing`).
    pub name: String,
    /// What it is.
    pub kind: StepKind,
    /// Answers whose ledger has this step.
    pub requests: u64,
    /// Metrics of this name with a duration (attempts, waits, ...).
    pub calls: u64,
    /// Median duration, ms (for ingress rows: the budget).
    pub p50_ms: Option<f64>,
    /// 90th percentile, ms.
    pub p90_ms: Option<f64>,
    /// 99th percentile, ms.
    pub p99_ms: Option<f64>,
    /// Largest, ms.
    pub max_ms: Option<f64>,
    /// Attempts beyond the first in one answer, summed.
    pub retries: u64,
    /// Answers with at least one retry of this step.
    pub requests_retried: u64,
    /// Metrics without a duration whose `desc` starts with `skipped`.
    pub skips: u64,
    /// Mean over answers of (this step's time / edge's ingress budget).
    pub mean_share_of_budget: Option<f64>,
    /// How often each `desc` appeared (numbers of skip reasons blanked).
    pub notes: BTreeMap<String, u64>,
}

/// The live aggregate of one step.
#[derive(Debug)]
struct Step {
    name: String,
    kind: StepKind,
    /// Microseconds.
    durations: Histogram<u64>,
    requests: u64,
    retries: u64,
    requests_retried: u64,
    skips: u64,
    share_sum: f64,
    share_n: u64,
    notes: BTreeMap<String, u64>,
}

/// The largest duration kept in a histogram, microseconds (one hour).
const MAX_MICROS: u64 = 3_600_000_000;

/// A new microsecond histogram, 1 us to an hour, 3 significant digits.
pub(crate) fn micros_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("static bounds are valid")
}

impl Step {
    fn new(name: &str, kind: StepKind) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            durations: micros_histogram(),
            requests: 0,
            retries: 0,
            requests_retried: 0,
            skips: 0,
            share_sum: 0.0,
            share_n: 0,
            notes: BTreeMap::new(),
        }
    }

    fn summary(&self) -> StepSummary {
        let h = &self.durations;
        let q = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0);
        StepSummary {
            name: self.name.clone(),
            kind: self.kind,
            requests: self.requests,
            calls: h.len(),
            p50_ms: q(0.50),
            p90_ms: q(0.90),
            p99_ms: q(0.99),
            max_ms: (!h.is_empty()).then(|| h.max() as f64 / 1000.0),
            retries: self.retries,
            requests_retried: self.requests_retried,
            skips: self.skips,
            mean_share_of_budget: (self.share_n > 0).then(|| self.share_sum / self.share_n as f64),
            notes: self.notes.clone(),
        }
    }
}

/// Per-answer tallies of one step.
#[derive(Default)]
struct InAnswer {
    attempts: u64,
    ms: f64,
}

/// The budget table of a run, built answer by answer.
#[derive(Debug, Default)]
pub struct BudgetTable {
    steps: Vec<Step>,
    index: HashMap<String, usize>,
    answers: u64,
}

impl BudgetTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one answer's `Server-Timing` value.
    pub fn record(&mut self, server_timing: &str) {
        self.record_metrics(&parse_server_timing(server_timing));
    }

    /// Adds one answer's parsed ledger.
    pub fn record_metrics(&mut self, metrics: &[Metric]) {
        self.answers += 1;
        let budget = metrics
            .iter()
            .find(|m| m.name == INGRESS_METRIC && StepKind::of(m) == StepKind::Ingress)
            .and_then(|m| m.dur)
            .filter(|b| *b > 0.0);
        let mut seen: Vec<(usize, InAnswer)> = Vec::new();
        for m in metrics {
            let kind = StepKind::of(m);
            let i = match self.index.get(&m.name) {
                Some(&i) => i,
                None => {
                    self.steps.push(Step::new(&m.name, kind));
                    self.index.insert(m.name.clone(), self.steps.len() - 1);
                    self.steps.len() - 1
                }
            };
            let step = &mut self.steps[i];
            let tally = match seen.iter_mut().find(|(j, _)| *j == i) {
                Some((_, t)) => t,
                None => {
                    seen.push((i, InAnswer::default()));
                    &mut seen.last_mut().expect("just pushed").1
                }
            };
            if let Some(ms) = m.dur {
                let micros = (ms * 1000.0).round().max(1.0) as u64;
                step.durations.saturating_record(micros.min(MAX_MICROS));
                tally.attempts += 1;
                tally.ms += ms;
            }
            match m.desc.as_deref() {
                None | Some(INGRESS_DESC) => {}
                Some(desc) => {
                    let skipped = m.dur.is_none() && desc.starts_with("skipped");
                    if skipped {
                        step.skips += 1;
                    }
                    *step.notes.entry(note(desc)).or_default() += 1;
                }
            }
        }
        for (i, tally) in seen {
            let step = &mut self.steps[i];
            step.requests += 1;
            if step.kind == StepKind::Call && tally.attempts > 1 {
                step.retries += tally.attempts - 1;
                step.requests_retried += 1;
            }
            if let (Some(b), true) = (budget, step.kind != StepKind::Ingress && tally.attempts > 0)
            {
                step.share_sum += tally.ms / b;
                step.share_n += 1;
            }
        }
    }

    /// Answers recorded.
    pub fn answers(&self) -> u64 {
        self.answers
    }

    /// The row of `name`, if it was seen.
    pub fn step(&self, name: &str) -> Option<StepSummary> {
        self.index.get(name).map(|&i| self.steps[i].summary())
    }

    /// Every row, in the order names were first seen.
    pub fn summaries(&self) -> Vec<StepSummary> {
        self.steps.iter().map(Step::summary).collect()
    }
}

/// Where a `desc`'s numbers stop saying what happened and start saying
/// how much: a skip reason (`skipped: 850ms < floor 1000ms`), Envoy's
/// upstream time after an attempt's status (`200 (upstream 35ms)`) and
/// the budget Envoy's route timeout cut to (`cut to 300ms by ...`).
const MEASURES: [&str; 3] = ["skipped", " (upstream ", "cut to "];

/// A `desc` as a note: its numbers blanked from the first of
/// [`MEASURES`] on, so that `skipped: 850ms < floor 1000ms` and
/// `skipped: 12ms < floor 1000ms` count together, and so do
/// `200 (upstream 35ms)` and `200 (upstream 41ms)` (a status before it
/// stays: `503` and `504` are different notes).
fn note(desc: &str) -> String {
    let Some(from) = MEASURES.iter().filter_map(|m| desc.find(m)).min() else {
        return desc.to_owned();
    };
    let mut out = String::with_capacity(desc.len());
    out.push_str(&desc[..from]);
    let mut in_digits = false;
    for c in desc[from..].chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// Renders `rows` as a markdown table.
pub fn markdown(rows: &[StepSummary]) -> String {
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    table.set_header(vec![
        "step",
        "answers",
        "calls",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "retries",
        "skips",
        "share of budget",
        "notes",
    ]);
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_default();
    for r in rows {
        let share = r
            .mean_share_of_budget
            .map(|s| format!("{:.1}%", s * 100.0))
            .unwrap_or_default();
        let mut notes: Vec<(&String, &u64)> = r.notes.iter().collect();
        notes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let mut notes: Vec<String> = notes
            .iter()
            .take(3)
            .map(|(d, n)| format!("{d} ×{n}"))
            .collect();
        if r.notes.len() > 3 {
            notes.push(format!("+{} more", r.notes.len() - 3));
        }
        if r.kind == StepKind::Ingress {
            notes.insert(0, "ingress budget".to_owned());
        }
        table.add_row(vec![
            r.name.clone(),
            r.requests.to_string(),
            if r.kind == StepKind::Ingress {
                String::new()
            } else {
                r.calls.to_string()
            },
            ms(r.p50_ms),
            ms(r.p90_ms),
            ms(r.p99_ms),
            if r.kind == StepKind::Call {
                r.retries.to_string()
            } else {
                String::new()
            },
            if r.kind == StepKind::Call {
                r.skips.to_string()
            } else {
                String::new()
            },
            share,
            notes.join("; ").replace('|', "\\|"),
        ]);
    }
    for col in 1..=8 {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}

/// How many of an answer's partner calls were answered by the client's
/// deadline, estimated from its ledger.
///
/// The ledger has durations, not times. Edge's `checkout` attempt ended
/// when the answer reached the client (edge's own work after it is well
/// under a millisecond), so it started at `answered_at - its duration`;
/// checkout's steps (`checkout.*`: permit waits, attempts, backoffs) ran
/// one after the other from there, so the k-th ended at that start plus
/// the durations up to and including it. A partner call counts when it
/// got an answer (no `desc`, or one that starts with a 3-digit status:
/// `503`, or `200 from 127.0.0.1:9001` for a dependency over several
/// endpoints; not `timeout`, not `connect-timeout`, not a skip) that ended
/// at or before `deadline`.
/// Times are in milliseconds from any common origin.
///
/// ```
/// use budget_core::ledger::parse_server_timing;
/// use load_tests::budget_table::partner_calls_answered_by;
///
/// let m = parse_server_timing("checkout;dur=900, checkout.inventory;dur=100, \
///     checkout.pricing;dur=300;desc=\"503\", checkout.pricing-wait;dur=50, checkout.pricing;dur=450");
/// // Answered at 1000 ms: checkout ran from 100 ms; inventory ended at 200,
/// // pricing at 500 and 1000.
/// assert_eq!(partner_calls_answered_by(&m, 1000.0, 1000.0), 3);
/// assert_eq!(partner_calls_answered_by(&m, 1000.0, 600.0), 2);
/// // A replica's answer names it after the status.
/// let m = parse_server_timing("checkout;dur=100, checkout.pricing;dur=50;desc=\"200 from 127.0.0.1:9001\"");
/// assert_eq!(partner_calls_answered_by(&m, 100.0, 100.0), 1);
/// ```
pub fn partner_calls_answered_by(metrics: &[Metric], answered_at: f64, deadline: f64) -> u64 {
    let Some(edge_attempt) = metrics
        .iter()
        .rev()
        .find(|m| m.name == CHECKOUT_HOP && m.dur.is_some())
        .and_then(|m| m.dur)
    else {
        return 0;
    };
    let prefix = format!("{CHECKOUT_HOP}.");
    let mut clock = answered_at - edge_attempt;
    let mut on_time = 0;
    for m in metrics.iter().filter(|m| m.name.starts_with(&prefix)) {
        let (Some(dur), kind) = (m.dur, StepKind::of(m)) else {
            continue;
        };
        if kind == StepKind::Ingress {
            continue;
        }
        clock += dur;
        let answered = match m.desc.as_deref() {
            None => true,
            Some(d) => {
                let status = d.split(' ').next().unwrap_or_default();
                status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit())
            }
        };
        if kind == StepKind::Call && answered && clock <= deadline {
            on_time += 1;
        }
    }
    on_time
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `v` within HdrHistogram's 3 significant digits of `want`.
    fn close(v: Option<f64>, want: f64) {
        let v = v.expect("a value");
        assert!((v - want).abs() <= want * 1e-3, "{v} vs {want}");
    }

    /// What edge answers in budget mode when pricing failed once, then
    /// answered, and recommendations was skipped.
    const RETRIED: &str = "budget;dur=2000;desc=\"ingress\", checkout;dur=700, \
        checkout.budget;dur=1989;desc=\"ingress\", checkout.inventory;dur=100, \
        checkout.pricing-queue;dur=40, checkout.pricing;dur=200;desc=\"503\", \
        checkout.pricing-wait;dur=60, checkout.pricing;dur=300, \
        checkout.recommendations;desc=\"skipped: 850ms < floor 1000ms\"";

    /// A fast answer with every dependency.
    const HEALTHY: &str = "budget;dur=1000;desc=\"ingress\", checkout;dur=100, \
        checkout.budget;dur=989;desc=\"ingress\", checkout.inventory;dur=20, \
        checkout.pricing;dur=50, checkout.recommendations;dur=30";

    /// Naive mode: no ingress anywhere, attempts still listed.
    const NAIVE: &str = "checkout;dur=2630.5, checkout.inventory;dur=42.7, \
        checkout.pricing;dur=2502.7, checkout.recommendations;dur=83";

    #[test]
    fn the_ledger_of_both_hops_becomes_one_row_per_metric_name_in_order() {
        let mut t = BudgetTable::new();
        t.record(RETRIED);
        let names: Vec<String> = t.summaries().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "budget",
                "checkout",
                "checkout.budget",
                "checkout.inventory",
                "checkout.pricing-queue",
                "checkout.pricing",
                "checkout.pricing-wait",
                "checkout.recommendations"
            ]
        );
        let kinds: Vec<StepKind> = t.summaries().into_iter().map(|s| s.kind).collect();
        use StepKind::*;
        assert_eq!(
            kinds,
            [Ingress, Call, Ingress, Call, Queue, Call, Wait, Call]
        );
    }

    #[test]
    fn attempts_retries_waits_and_skips_are_counted_per_answer() {
        let mut t = BudgetTable::new();
        t.record(RETRIED);
        t.record(HEALTHY);
        assert_eq!(t.answers(), 2);
        let pricing = t.step("checkout.pricing").unwrap();
        assert_eq!((pricing.requests, pricing.calls), (2, 3));
        assert_eq!((pricing.retries, pricing.requests_retried), (1, 1));
        assert_eq!(pricing.notes, BTreeMap::from([("503".to_owned(), 1)]));
        close(pricing.max_ms, 300.0);
        let recs = t.step("checkout.recommendations").unwrap();
        assert_eq!(
            (recs.requests, recs.calls, recs.skips, recs.retries),
            (2, 1, 1, 0)
        );
        assert_eq!(
            recs.notes,
            BTreeMap::from([("skipped: #ms < floor #ms".to_owned(), 1)])
        );
        let wait = t.step("checkout.pricing-wait").unwrap();
        assert_eq!(
            (wait.kind, wait.calls, wait.retries, wait.skips),
            (StepKind::Wait, 1, 0, 0)
        );
        close(t.step("checkout.pricing-queue").unwrap().p50_ms, 40.0);
    }

    #[test]
    fn envoys_upstream_time_and_cut_budget_count_as_one_note_each_status_apart() {
        assert_eq!(note("200 (upstream 35ms)"), note("200 (upstream 41ms)"));
        assert_eq!(note("200 (upstream 35ms)"), "200 (upstream #ms)");
        assert_ne!(note("503 (upstream 3ms)"), note("504 (upstream 3ms)"));
        assert_eq!(
            note("cut to 300ms by x-envoy-expected-rq-timeout-ms: request-budget-ms said 1983ms"),
            "cut to #ms by x-envoy-expected-rq-timeout-ms: request-budget-ms said #ms"
        );
        assert_eq!(
            note("envoy UT: upstream request timeout (504)"),
            "envoy UT: upstream request timeout (504)"
        );
    }

    #[test]
    fn percentiles_come_from_the_histogram_and_ingress_rows_hold_the_budget() {
        let mut t = BudgetTable::new();
        for i in 1..=100 {
            t.record(&format!(
                "budget;dur=2000;desc=\"ingress\", checkout.inventory;dur={i}"
            ));
        }
        let inv = t.step("checkout.inventory").unwrap();
        close(inv.p50_ms, 50.0);
        close(inv.p90_ms, 90.0);
        close(inv.p99_ms, 99.0);
        let budget = t.step("budget").unwrap();
        assert_eq!(budget.requests, 100);
        close(budget.p99_ms, 2000.0);
        assert_eq!(budget.mean_share_of_budget, None);
        // Mean of i / 2000 for i in 1..=100.
        let share = inv.mean_share_of_budget.unwrap();
        assert!((share - 0.02525).abs() < 1e-9, "{share}");
    }

    #[test]
    fn the_share_of_budget_sums_a_step_s_attempts_and_needs_an_ingress_budget() {
        let mut t = BudgetTable::new();
        t.record(RETRIED);
        // (200 + 300) / 2000 over one answer.
        assert_eq!(
            t.step("checkout.pricing").unwrap().mean_share_of_budget,
            Some(0.25)
        );
        assert_eq!(t.step("checkout").unwrap().mean_share_of_budget, Some(0.35));
        let mut naive = BudgetTable::new();
        naive.record(NAIVE);
        let pricing = naive.step("checkout.pricing").unwrap();
        assert_eq!(pricing.mean_share_of_budget, None);
        close(pricing.p50_ms, 2502.7);
    }

    #[test]
    fn junk_and_empty_values_add_an_answer_and_no_rows() {
        let mut t = BudgetTable::new();
        t.record("");
        t.record(",,;dur=1");
        assert_eq!(t.answers(), 2);
        assert!(t.summaries().is_empty());
    }

    #[test]
    fn the_markdown_table_has_a_row_per_step_and_escapes_pipes() {
        let mut t = BudgetTable::new();
        t.record(RETRIED);
        t.record("x;desc=\"a|b\"");
        let md = markdown(&t.summaries());
        assert!(md.starts_with("| step"), "{md}");
        assert_eq!(md.lines().count(), 2 + 9, "{md}");
        assert!(md.contains("503 ×1"), "{md}");
        assert!(md.contains("a\\|b ×1"), "{md}");
        assert!(md.contains("25.0%"), "{md}");
    }

    #[test]
    fn partner_calls_are_timed_back_from_the_answer_and_only_answers_count() {
        let m = parse_server_timing(RETRIED);
        // Answered at 1000: checkout started at 300; inventory ended at 400,
        // the queue at 440, pricing#1 (503) at 640, the wait at 700,
        // pricing#2 at 1000.
        assert_eq!(partner_calls_answered_by(&m, 1000.0, 2000.0), 3);
        assert_eq!(partner_calls_answered_by(&m, 1000.0, 999.0), 2);
        assert_eq!(partner_calls_answered_by(&m, 1000.0, 639.0), 1);
        let cut = parse_server_timing(
            "checkout;dur=990, checkout.inventory;dur=40, checkout.pricing;dur=945;desc=\"timeout\"",
        );
        assert_eq!(partner_calls_answered_by(&cut, 1000.0, 5000.0), 1);
        // Edge's own 504 has no checkout metrics; a ledger-less answer none.
        let edge_only = parse_server_timing("checkout;dur=30000;desc=\"timeout\"");
        assert_eq!(partner_calls_answered_by(&edge_only, 30000.0, 2000.0), 0);
        assert_eq!(partner_calls_answered_by(&[], 1.0, 2.0), 0);
    }
}
