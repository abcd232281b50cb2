//! What a run measured: outcomes, goodput, latency, the partner's late
//! work, the budget table and a per-second timeline; as JSON
//! ([`RunReport`] is `Serialize`) and as markdown.
//!
//! # Definitions
//!
//! - **outcomes**: every scheduled request lands in exactly one of `ok`
//!   (a `2xx` with every dependency), `degraded` (a `2xx` that lacks an
//!   optional one), `429`, `503`, `504`, `other` (any other status, listed
//!   in `other_statuses`), `client_timeout`, `transport` (a connection
//!   error) and `not_sent` (the generator's in-flight cap); they add up to
//!   `scheduled`.
//! - **goodput**: `2xx` answers, degraded included, that arrived within the
//!   budget the client sent (latency counted from the intended send time),
//!   per second of the sending window. A degraded answer counts: serving it
//!   instead of failing is what an optional dependency is for.
//!   `full_goodput_per_s` counts only the non-degraded ones.
//! - **latency**: from the intended send time to the end of the answer's
//!   body (or the error), over every request sent, from an HdrHistogram
//!   (microseconds, 3 significant digits).
//! - **partner late work**: the slow partner's own `late` counter (`GET
//!   /stats`, reset before the run): calls whose work ended after the
//!   budget they arrived with. A call that arrives without a budget is
//!   never judged, so with budget mode off (nothing forwarded) it is 0 by
//!   construction. The comparable number for both modes is
//!   `partner_calls_not_answered_by_deadline`: the partner's requests minus
//!   those that, by the answers' ledgers, were answered by the client's
//!   deadline ([`partner_calls_answered_by`]); calls cut by a timeout, and
//!   calls of requests that came back without checkout's ledger, count as
//!   not answered in time.
//! - **answers after the request's own budget** (`late_answers`, client
//!   side): requests sent whose answer, of any status, arrived after the
//!   budget that request was given had run out (latency from the intended
//!   send time over its budget). Client timeouts and connection errors are
//!   not answers and are counted in their own outcomes. Unlike the
//!   partner's `late`, it needs no budget forwarded, so it compares every
//!   mode, and per request it uses that request's own budget (the
//!   `mixed-budgets` scenario gives each its own).
//! - **classes**: when the plan gives requests classes (`critical` and
//!   `rest` in the `criticality` scenario, `short-budget` and
//!   `long-budget` in `mixed-budgets`), per class: requests scheduled,
//!   `2xx` (any time), good (`2xx` within the request's budget), answers
//!   after the budget, and the shares of `2xx` and good among the class's
//!   requests (the **success rate**).
//! - **timeline**: per second of intended send time, the requests due in
//!   it, how many of them were good, and their p99 latency.
//! - **per hop** (the `deep` scenario: edge -> checkout -> middle ->
//!   partner), work finished after its caller's deadline: the client side
//!   for the whole chain (answers after the request's own budget); middle
//!   counts its own ([`MiddleStats`]: answers ready after the budget they
//!   arrived with, and work dropped at the deadline), and the partner its
//!   own (`late`); both only where a budget arrives, that is in budget
//!   mode. Not measured: edge and checkout keep no such counter, and in
//!   naive and peer mode nothing forwards a budget to middle or the
//!   partner, so there only the client side and "partner calls not
//!   answered by the client's deadline" (from checkout's ledger, whose
//!   calls in `deep` are calls to middle, one partner call each) compare.
//! - **outage** (the `outage` scenario): pricing attempts per client
//!   request during the outage and the time until goodput recovers, as
//!   [`crate::outage`] defines them.
//! - **ramp** (a run whose load has steps, the `ramp` scenario): per step
//!   (by intended send time) its rate, the requests due, goodput (good
//!   ones per second of the step) and p99, and, in budget mode,
//!   pricing's mean floor and adaptive limit over the step's seconds; and
//!   the per-second series (offered, goodput, p99, and the services' own
//!   state).
//! - **window** (the `burst-*` and `hang` scenarios): the requests due in
//!   one window of the run on their own: `2xx` within the budget,
//!   refusals by status, the failures' p50 and p99 latency, the slowest
//!   `2xx`, as [`crate::window`] defines them; per ramp step, the requests
//!   answered `5xx`.
//! - **connections dropped at a full accept queue**: the kernel's
//!   `ListenOverflows` during the run (Linux, the whole machine): a burst
//!   of connections larger than a listener's backlog (edge's and
//!   checkout's are tokio's default, 128) loses the `SYN`s beyond it, and
//!   their clients retry a second later, so those requests reach the
//!   chain a second late, in every mode.
//! - **hang** and **spike**: the calls held on a hung path and the
//!   recovery after it ([`crate::hang`]); the time until p99 is back to
//!   the calm level after a spike ([`crate::spike`]).
//! - **replicas**: per phase each replica's share of the partner calls,
//!   the seconds until a restarted replica takes its share again, and the
//!   scenario's goals against the measurements ([`crate::replicas`]).
//! - **services' own state** ([`ServiceSeries`], budget mode only): per
//!   second of the timeline, the floor in force and the adaptive
//!   concurrency limit per dependency, as checkout's `/metrics` gauges
//!   read at the end of that second ([`crate::gauges`]).

use std::collections::BTreeMap;
use std::time::Duration;

use budget_core::ledger::parse_server_timing;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use slow_partner::StatsSnapshot;

use crate::budget_table::{BudgetTable, StepSummary, micros_histogram, partner_calls_answered_by};
use crate::budgets::BudgetDistribution;
use crate::client::{Outcome, Patience, Sample};
use crate::gauges::Gauges;
use crate::generator::{Arrivals, LoadSpec, RateStep, RunTotals};
use crate::section::{Section, Sections};
use crate::window::{Watch, WindowCounts, WindowReport};

mod markdown;

pub use markdown::{pct, row, scenario_markdown, section_cell};

/// Counts per outcome; they add up to the requests scheduled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    /// `2xx` with every dependency.
    pub ok: u64,
    /// `2xx` lacking an optional dependency.
    pub degraded: u64,
    /// `429 Too Many Requests`.
    pub too_many_requests: u64,
    /// `503 Service Unavailable`.
    pub unavailable: u64,
    /// `504 Gateway Timeout`.
    pub gateway_timeout: u64,
    /// Any other status.
    pub other: u64,
    /// The other statuses, by code.
    pub other_statuses: BTreeMap<u16, u64>,
    /// No answer within the client's patience.
    pub client_timeout: u64,
    /// A connection error.
    pub transport: u64,
    /// Never sent (the generator's in-flight cap).
    pub not_sent: u64,
}

impl Outcomes {
    /// Counts one request.
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Ok => self.ok += 1,
            Outcome::Degraded => self.degraded += 1,
            Outcome::Status(429) => self.too_many_requests += 1,
            Outcome::Status(503) => self.unavailable += 1,
            Outcome::Status(504) => self.gateway_timeout += 1,
            Outcome::Status(code) => {
                self.other += 1;
                *self.other_statuses.entry(code).or_default() += 1;
            }
            Outcome::ClientTimeout => self.client_timeout += 1,
            Outcome::Transport => self.transport += 1,
            Outcome::NotSent => self.not_sent += 1,
        }
    }

    /// Every request counted.
    pub fn total(&self) -> u64 {
        self.ok
            + self.degraded
            + self.too_many_requests
            + self.unavailable
            + self.gateway_timeout
            + self.other
            + self.client_timeout
            + self.transport
            + self.not_sent
    }
}

/// Latency percentiles, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// The slow partner's side of a run (its `/stats`, reset before the run).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartnerReport {
    /// Calls it received.
    pub requests: u64,
    /// Calls answered, by status.
    pub answered: BTreeMap<u16, u64>,
    /// Calls that arrived with a budget.
    pub with_budget: u64,
    /// Calls whose work ended after the budget they arrived with.
    pub late: u64,
    /// `late / requests`.
    pub late_share: f64,
    /// Calls whose caller hung up before the work was done.
    pub abandoned: u64,
    /// `requests` minus the calls the ledgers show answered by the
    /// client's deadline (see the module docs).
    pub not_answered_by_deadline: u64,
    /// `not_answered_by_deadline / requests`.
    pub not_answered_by_deadline_share: f64,
}

impl PartnerReport {
    /// From the partner's counters and the ledgers' count of calls
    /// answered by the client's deadline.
    pub fn new(stats: &StatsSnapshot, answered_by_deadline: u64) -> Self {
        let share = |n: u64| {
            if stats.requests == 0 {
                0.0
            } else {
                n as f64 / stats.requests as f64
            }
        };
        let not_answered = stats.requests.saturating_sub(answered_by_deadline);
        Self {
            requests: stats.requests,
            answered: stats.answered.clone(),
            with_budget: stats.with_budget,
            late: stats.late,
            late_share: share(stats.late),
            abandoned: stats.abandoned,
            not_answered_by_deadline: not_answered,
            not_answered_by_deadline_share: share(not_answered),
        }
    }
}

/// One class of requests of a run (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    /// `critical`, `rest`, `short-budget`, `long-budget`.
    pub class: String,
    /// Its requests in the schedule.
    pub scheduled: u64,
    /// `2xx` answers, degraded included, whenever they came.
    pub success: u64,
    /// `2xx` within the request's own budget.
    pub good: u64,
    /// Answers of any status after the request's own budget.
    pub late_answers: u64,
    /// `success / scheduled`: the success rate.
    pub success_share: f64,
    /// `good / scheduled`.
    pub good_share: f64,
}

/// A class's live counters.
#[derive(Debug, Default)]
struct ClassCounts {
    scheduled: u64,
    success: u64,
    good: u64,
    late_answers: u64,
}

/// One step of a ramp, by intended send time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RampStepReport {
    /// 0 for the first step.
    pub step: usize,
    /// Its rate as a multiple of the capacity.
    pub factor: Option<f64>,
    /// Its rate, requests per second.
    pub rate_per_s: f64,
    /// Its start, seconds from the start of the run.
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// Requests due in it.
    pub due: u64,
    /// Of those, the good ones.
    pub good: u64,
    /// Of those, the ones answered with a `5xx` (refused or failed by the
    /// chain).
    #[serde(default)]
    pub refused: u64,
    /// `good` per second of the step.
    pub goodput_per_s: f64,
    /// p99 latency of those sent, ms (none sent: none).
    pub p99_ms: Option<f64>,
}

/// One value per second, by dependency name (`None`: none that second).
pub type PerDependency = BTreeMap<String, Vec<Option<f64>>>;

/// The services' own per-second state during a run, one value per second
/// of the timeline ([`RunReport::timeline`], [`RampSeries::second`]), by
/// dependency name: checkout's (and edge's, `checkout`) gauges read from
/// `/metrics` at the end of each second ([`crate::gauges`]).
///
/// `None`: not sampled (naive and peer mode, or a run against
/// `--target`). A dependency whose gauge was never read in the run is not
/// in the map; a second without it (a failed scrape, or before the gauge
/// was first set) is `None` in its series.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceSeries {
    /// The floor in force per dependency, ms: learned from the
    /// dependency's latency (checkout's default for inventory and
    /// pricing), or fixed (recommendations' 1 s, a `--pricing-floor`).
    pub learned_floor_ms: Option<PerDependency>,
    /// The adaptive concurrency limit per dependency (checkout's default
    /// `concurrency = "auto"`); a fixed limit has none.
    pub adaptive_limit: Option<PerDependency>,
}

impl ServiceSeries {
    /// The series of `seconds` seconds from one sample per second (entry
    /// `i` for second `i`; later samples are dropped, missing ones are
    /// `None`).
    ///
    /// ```
    /// use load_tests::gauges::Gauges;
    /// use load_tests::report::ServiceSeries;
    ///
    /// let g = Gauges { floor_seconds: [("pricing".to_owned(), 0.25)].into(), ..Gauges::default() };
    /// let s = ServiceSeries::from_samples(&[None, Some(g)], 3);
    /// assert_eq!(s.learned_floor_ms.unwrap()["pricing"], [None, Some(250.0), None]);
    /// assert!(s.adaptive_limit.unwrap().is_empty());
    /// ```
    pub fn from_samples(samples: &[Option<Gauges>], seconds: usize) -> Self {
        let mut floors: PerDependency = BTreeMap::new();
        let mut limits: PerDependency = BTreeMap::new();
        for (i, sample) in samples.iter().take(seconds).enumerate() {
            let Some(g) = sample else { continue };
            for (into, values, scale) in [
                (&mut floors, &g.floor_seconds, 1000.0),
                (&mut limits, &g.concurrency_limit, 1.0),
            ] {
                for (dependency, v) in values {
                    into.entry(dependency.clone())
                        .or_insert_with(|| vec![None; seconds])[i] = Some(v * scale);
                }
            }
        }
        Self {
            learned_floor_ms: Some(floors),
            adaptive_limit: Some(limits),
        }
    }

    /// The mean of `series[dependency]` over the seconds that overlap
    /// `from_s..to_s` (second `i` covers `i..i + 1`), over the seconds
    /// that have a value; `None` without one.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use load_tests::report::ServiceSeries;
    ///
    /// let s = BTreeMap::from([("pricing".to_owned(), vec![Some(1.0), None, Some(3.0), Some(9.0)])]);
    /// assert_eq!(ServiceSeries::mean_over(Some(&s), "pricing", 0.0, 3.0), Some(2.0));
    /// assert_eq!(ServiceSeries::mean_over(Some(&s), "pricing", 1.0, 2.0), None);
    /// assert_eq!(ServiceSeries::mean_over(Some(&s), "pricing", 3.5, 4.0), Some(9.0));
    /// assert_eq!(ServiceSeries::mean_over(None, "pricing", 0.0, 4.0), None);
    /// ```
    pub fn mean_over(
        series: Option<&PerDependency>,
        dependency: &str,
        from_s: f64,
        to_s: f64,
    ) -> Option<f64> {
        let values: Vec<f64> = series?
            .get(dependency)?
            .iter()
            .enumerate()
            .filter(|(i, _)| (*i as f64) < to_s && (*i as f64 + 1.0) > from_s)
            .filter_map(|(_, v)| *v)
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    }

    /// Whether anything was read: a dependency in either map.
    ///
    /// ```
    /// use load_tests::report::ServiceSeries;
    ///
    /// assert!(!ServiceSeries::default().has_values());
    /// assert!(!ServiceSeries::from_samples(&[None], 1).has_values());
    /// ```
    pub fn has_values(&self) -> bool {
        [&self.learned_floor_ms, &self.adaptive_limit]
            .iter()
            .any(|m| m.as_ref().is_some_and(|m| !m.is_empty()))
    }
}

/// A ramp's per-second series, by intended send time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RampSeries {
    /// Seconds from the start of the run.
    pub second: Vec<u64>,
    /// Requests due in each second (the offered load).
    pub offered_per_s: Vec<u64>,
    /// Good ones among them (goodput, per second).
    pub goodput_per_s: Vec<u64>,
    /// Their p99 latency, ms.
    pub p99_ms: Vec<Option<f64>>,
    /// The services' own series (see [`ServiceSeries`]).
    pub services: ServiceSeries,
}

/// What a ramp measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RampReport {
    /// Per step.
    pub steps: Vec<RampStepReport>,
    /// Per second.
    pub series: RampSeries,
}

/// One second of the run, by intended send time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SecondSummary {
    /// Seconds from the start of the run.
    pub second: u64,
    /// Requests due in it.
    pub due: u64,
    /// Of those, the good ones (goodput).
    pub good: u64,
    /// Their p99 latency, ms (none sent: none).
    pub p99_ms: Option<f64>,
}

/// Everything one run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// The scenario's name (`slow`), or `target`.
    pub scenario: String,
    /// `budget`, `naive` or `target`.
    pub mode: String,
    /// What the scenario does.
    pub description: String,
    /// Requests per second.
    pub rate_per_s: f64,
    /// The sending window, seconds.
    pub duration_s: f64,
    /// How send times were spread.
    pub arrivals: Arrivals,
    /// The budget each request was given, ms (with mixed budgets, the
    /// largest one).
    pub budget_ms: u64,
    /// The budgets, as the plan gave them.
    pub budgets: BudgetDistribution,
    /// How long the client waited for an answer.
    pub patience: Patience,
    /// Requests in the schedule.
    pub scheduled: u64,
    /// Requests sent.
    pub sent: u64,
    /// What came of them.
    pub outcomes: Outcomes,
    /// `2xx` within the budget.
    pub good: u64,
    /// `good` per second of the sending window.
    pub goodput_per_s: f64,
    /// Non-degraded `2xx` within the budget, per second.
    pub full_goodput_per_s: f64,
    /// `2xx` that came after the budget (nobody was waiting any more).
    pub success_after_budget: u64,
    /// Answers of any status after the request's own budget (client side).
    pub late_answers: u64,
    /// Per class of request, when the plan has classes (in name order).
    pub classes: Vec<ClassReport>,
    /// Latency of every request sent.
    pub latency_ms: Latency,
    /// How far behind schedule the generator sent, at worst, ms.
    pub generator_max_lag_ms: f64,
    /// Connections the kernel dropped during the run because a listening
    /// socket's accept queue was full (its `ListenOverflows`, for the whole
    /// machine; [`crate::resources::listen_overflows`]): each one's client
    /// retried a second later. `None` without `/proc/net/netstat`.
    #[serde(default)]
    pub listen_overflows: Option<u64>,
    /// From the first send to the last answer, seconds.
    pub wall_s: f64,
    /// The 1, 5 and 15 minute load averages before the run.
    pub load_average: Option<[f64; 3]>,
    /// The partner's counters, when it could be read.
    pub partner: Option<PartnerReport>,
    /// The budget table.
    pub steps: Vec<StepSummary>,
    /// Per second of the run.
    pub timeline: Vec<SecondSummary>,
    /// The services' own state per second of the timeline (budget mode;
    /// see [`ServiceSeries`]).
    #[serde(default)]
    pub services: ServiceSeries,
    /// Per step and second of a ramp; `None` for a constant rate.
    pub ramp: Option<RampReport>,
    /// The requests of one window of the run on their own (the `burst`
    /// scenarios: every request; `hang`: those due while the hang held);
    /// `None` when the plan watches none.
    #[serde(default)]
    pub window: Option<WindowReport>,
    /// The scenario's own measurements ([`crate::section`]): in the JSON,
    /// a key each (`middle`, `outage`, `hang`, `spike`, `replicas`).
    #[serde(flatten)]
    pub sections: Sections,
}

impl RunReport {
    /// Puts `series` in the report: per second of the run, and in the
    /// ramp's series when there is one.
    ///
    /// ```no_run
    /// # fn demo(mut report: load_tests::report::RunReport, series: load_tests::report::ServiceSeries) {
    /// report.set_services(series.clone());
    /// assert_eq!(report.services, series);
    /// # }
    /// ```
    pub fn set_services(&mut self, series: ServiceSeries) {
        if let Some(ramp) = &mut self.ramp {
            ramp.series.services = series.clone();
        }
        self.services = series;
    }

    /// The scenario's measurement of type `T`, if the run has one.
    pub fn section<T: Section>(&self) -> Option<&T> {
        self.sections.get()
    }

    /// Puts the scenario's measurement `section` in the report (replacing
    /// one of its type).
    pub fn set_section<T: Section>(&mut self, section: T) {
        self.sections.set(section);
    }
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

/// What a report says about the run besides its measurements.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// The scenario's name.
    pub scenario: String,
    /// `budget`, `naive` or `target`.
    pub mode: String,
    /// What the scenario does.
    pub description: String,
    /// The load.
    pub spec: LoadSpec,
    /// The client's budgets.
    pub budgets: BudgetDistribution,
    /// The client's patience.
    pub patience: Patience,
    /// The load averages before the run.
    pub load_average: Option<[f64; 3]>,
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), where there is
/// one.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().ok());
    Some([parts.next()??, parts.next()??, parts.next()??])
}

/// Serialises a duration as whole milliseconds.
pub(crate) mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// Serialises an optional duration as whole milliseconds, or `null`.
pub(crate) mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(d).map(|ms| ms.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;
    use crate::generator::Scheduled;
    use crate::outage::OutageReport;

    /// A budget-mode run of `scenario` at 10 req/s for 1 s, 1 s budgets.
    fn one_second_run(scenario: &str) -> RunInfo {
        RunInfo {
            scenario: scenario.into(),
            mode: "budget".into(),
            description: "test".into(),
            spec: LoadSpec::new(10.0, Duration::from_secs(1)).unwrap(),
            budgets: BudgetDistribution::Fixed(Duration::from_secs(1)),
            patience: Patience::Budget,
            load_average: None,
        }
    }

    fn sample(index: u64, outcome: Outcome, latency_ms: u64, timing: Option<&str>) -> Sample {
        let start = Instant::now();
        Sample {
            scheduled: Scheduled {
                index,
                intended: start + Duration::from_millis(index * 100),
                run_start: start,
            },
            outcome,
            latency: Duration::from_millis(latency_ms),
            budget: Duration::from_millis(1000),
            class: None,
            server_timing: timing.map(str::to_owned),
        }
    }

    #[test]
    fn outcomes_add_up_and_goodput_counts_2xx_within_the_budget() {
        let mut rec = Recorder::new();
        let samples = [
            sample(0, Outcome::Ok, 100, None),
            sample(1, Outcome::Degraded, 900, None),
            sample(2, Outcome::Ok, 1500, None), // late: not good
            sample(3, Outcome::Status(504), 990, None),
            sample(4, Outcome::Status(429), 5, None),
            sample(5, Outcome::Status(502), 50, None),
            sample(6, Outcome::ClientTimeout, 35_000, None),
            sample(7, Outcome::Transport, 1, None),
            sample(8, Outcome::NotSent, 0, None),
            sample(12, Outcome::Status(503), 3, None),
        ];
        for s in &samples {
            rec.record(s);
        }
        let spec = LoadSpec::new(10.0, Duration::from_secs(2)).unwrap();
        let info = RunInfo {
            scenario: "t".into(),
            mode: "budget".into(),
            description: "test".into(),
            spec,
            budgets: BudgetDistribution::Fixed(Duration::from_secs(1)),
            patience: Patience::Budget,
            load_average: None,
        };
        let totals = RunTotals {
            scheduled: 10,
            sent: 9,
            not_sent: 1,
            ..RunTotals::default()
        };
        let report = rec.finish(info, totals, Some(&StatsSnapshot::default()));
        assert_eq!(report.outcomes.total(), 10);
        assert_eq!(report.outcomes.other_statuses, BTreeMap::from([(502, 1)]));
        assert_eq!((report.good, report.success_after_budget), (2, 1));
        // Request 2's 200 at 1500 ms of its 1000 ms; the client timeout
        // and the connection error are not answers.
        assert_eq!(report.late_answers, 1);
        assert!(report.classes.is_empty());
        assert_eq!(report.goodput_per_s, 1.0);
        assert_eq!(report.full_goodput_per_s, 0.5);
        // Seconds 0 (requests 0-9 minus the unsent one) and 1 (request 12).
        assert_eq!(report.timeline.len(), 2);
        assert_eq!((report.timeline[0].due, report.timeline[0].good), (9, 2));
        assert_eq!(report.timeline[1].due, 1);
        assert!((report.latency_ms.max - 35_000.0).abs() < 35.0);
        let json = serde_json::to_string(&report).unwrap();
        let back: RunReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.outcomes, report.outcomes);
        let md = scenario_markdown(&[report]);
        assert!(md.contains("| 504"), "{md}");
        assert!(md.contains("502: 1"), "{md}");
    }

    #[test]
    fn classes_count_success_good_and_late_answers_by_each_request_s_own_budget() {
        let mut rec = Recorder::new();
        let with = |index, outcome, latency_ms, budget_ms, class| Sample {
            budget: Duration::from_millis(budget_ms),
            class: Some(class),
            ..sample(index, outcome, latency_ms, None)
        };
        for s in [
            with(0, Outcome::Ok, 300, 400, "short-budget"), // good
            with(1, Outcome::Ok, 500, 400, "short-budget"), // 2xx, late
            with(2, Outcome::Status(504), 450, 400, "short-budget"), // late
            with(3, Outcome::Ok, 500, 1500, "long-budget"), // good
            with(4, Outcome::NotSent, 0, 1500, "long-budget"),
        ] {
            rec.record(&s);
        }
        let info = RunInfo {
            scenario: "mixed-budgets".into(),
            mode: "naive".into(),
            description: "test".into(),
            spec: LoadSpec::new(10.0, Duration::from_secs(1)).unwrap(),
            budgets: BudgetDistribution::mixed_default(),
            patience: Patience::Budget,
            load_average: None,
        };
        let report = rec.finish(info, RunTotals::default(), None);
        assert_eq!(report.late_answers, 2);
        assert_eq!(report.budget_ms, 2000);
        let long = &report.classes[0];
        assert_eq!(long.class, "long-budget");
        assert_eq!((long.scheduled, long.success, long.good), (2, 1, 1));
        assert_eq!(long.success_share, 0.5);
        let short = &report.classes[1];
        assert_eq!(
            (
                short.scheduled,
                short.success,
                short.good,
                short.late_answers
            ),
            (3, 2, 1, 2)
        );
        let md = scenario_markdown(&[report]);
        assert!(
            md.contains("| short-budget: 2xx (success rate) / good, of requests"),
            "{md}"
        );
        assert!(md.contains("2 (66.7%) / 1 (33.3%) of 3"), "{md}");
        assert!(md.contains("half the callers 200-600 ms"), "{md}");
    }

    #[test]
    fn a_ramp_is_reported_per_step_and_per_second_with_the_services_series() {
        let step = |rate, factor| RateStep {
            rate,
            duration: Duration::from_secs(1),
            factor: Some(factor),
        };
        let spec = LoadSpec::ramp(vec![step(5.0, 0.5), step(10.0, 1.0)]).unwrap();
        let mut rec = Recorder::for_spec(&spec);
        // `sample(i, ..)` is due at i * 100 ms: 0-9 in step 1, 10-14 in 2.
        for i in 0..15 {
            let latency = if i < 10 { 50 } else { 1500 }; // step 2: late
            rec.record(&sample(i, Outcome::Ok, latency, None));
        }
        let info = RunInfo {
            scenario: "ramp".into(),
            mode: "budget".into(),
            description: "test".into(),
            spec,
            budgets: BudgetDistribution::Fixed(Duration::from_secs(1)),
            patience: Patience::Budget,
            load_average: None,
        };
        let mut report = rec.finish(info, RunTotals::default(), None);
        assert_eq!(report.services, ServiceSeries::default());
        let naive = report.clone();
        let gauges = |floor_s: f64, limit: Option<f64>| Gauges {
            floor_seconds: [
                ("pricing".to_owned(), floor_s),
                ("checkout".to_owned(), 1.9),
            ]
            .into(),
            concurrency_limit: limit
                .map(|l| ("pricing".to_owned(), l))
                .into_iter()
                .collect(),
        };
        // Second 0's scrape failed; the run's end gave a third sample,
        // beyond its two seconds.
        let samples = [None, Some(gauges(0.3, Some(12.0))), Some(gauges(0.9, None))];
        report.set_services(ServiceSeries::from_samples(&samples, report.timeline.len()));
        let ramp = report.ramp.as_ref().expect("a ramp report");
        assert_eq!(ramp.series.services, report.services);
        let floors = report.services.learned_floor_ms.as_ref().unwrap();
        assert_eq!(floors["pricing"], [None, Some(300.0)]);
        assert_eq!(floors["checkout"], [None, Some(1900.0)]);
        let limits = report.services.adaptive_limit.as_ref().unwrap();
        assert_eq!(limits["pricing"], [None, Some(12.0)]);
        assert!(report.services.has_values() && !naive.services.has_values());
        assert_eq!(ramp.steps.len(), 2);
        assert_eq!((ramp.steps[0].due, ramp.steps[0].good), (10, 10));
        assert_eq!((ramp.steps[1].due, ramp.steps[1].good), (5, 0));
        assert_eq!(ramp.steps[0].goodput_per_s, 10.0);
        assert_eq!((ramp.steps[1].from_s, ramp.steps[1].to_s), (1.0, 2.0));
        assert!((ramp.steps[1].p99_ms.unwrap() - 1500.0).abs() < 20.0);
        assert_eq!(ramp.series.second, [0, 1]);
        assert_eq!(ramp.series.offered_per_s, [10, 5]);
        assert_eq!(ramp.series.goodput_per_s, [10, 0]);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(
            json["ramp"]["series"]["services"]["learned_floor_ms"]["pricing"],
            serde_json::json!([null, 300.0])
        );
        assert_eq!(json["services"]["adaptive_limit"]["pricing"][1], 12.0);
        let back: RunReport = serde_json::from_value(json).unwrap();
        assert_eq!(back.services, report.services);
        let json = serde_json::to_value(&naive).unwrap();
        assert!(json["ramp"]["series"]["services"]["learned_floor_ms"].is_null());
        let md = scenario_markdown(&[report, naive]);
        assert!(md.contains("Per step of the ramp"), "{md}");
        assert!(
            md.contains("budget mode: pricing floor ms (mean)")
                && md.contains("budget mode: pricing adaptive limit (mean)"),
            "{md}"
        );
        assert!(!md.contains("naive mode: pricing floor"), "{md}");
        // Step 1 (0-1 s) has no sample, step 2 (1-2 s) second 1's.
        assert!(md.contains("| 1: 0-1 s, 0.5x, 5 req/s"), "{md}");
        assert!(md.contains("| 2: 1-2 s, 1x, 10 req/s"), "{md}");
        assert!(md.contains("10.0 / 50"), "{md}");
        let step2 = md.lines().find(|l| l.starts_with("| 2: 1-2 s")).unwrap();
        assert!(
            step2.contains("| 300 ") && step2.contains("| 12.0 "),
            "{step2}"
        );
        let step1 = md.lines().find(|l| l.starts_with("| 1: 0-1 s")).unwrap();
        assert_eq!(step1.matches("| - ").count(), 2, "{step1}");
    }

    #[test]
    fn a_watched_window_reports_its_failures_slowest_2xx_and_the_first_2xx_after_its_mark() {
        // `sample(i, ..)` is due at i * 100 ms; the window is 200-600 ms,
        // the mark 500 ms.
        let watch = Watch {
            what: "w".into(),
            from: Duration::from_millis(200),
            to: Duration::from_millis(600),
            mark: Some(Duration::from_millis(500)),
        };
        let mut rec = Recorder::new().watching(Some(watch));
        for s in [
            sample(1, Outcome::Status(504), 5, None), // before the window
            sample(2, Outcome::Status(503), 10, None),
            sample(3, Outcome::Status(504), 30, None),
            sample(4, Outcome::Ok, 1200, None), // 2xx after its budget
            sample(5, Outcome::ClientTimeout, 900, None),
            sample(6, Outcome::Ok, 40, None), // after the window and the mark
            sample(7, Outcome::Ok, 20, None),
        ] {
            rec.record(&s);
        }
        let report = rec.finish(one_second_run("hang"), RunTotals::default(), None);
        let w = report.window.as_ref().expect("a window report");
        assert_eq!((w.requests, w.success, w.good, w.failures), (4, 1, 0, 3));
        assert_eq!(w.refused, BTreeMap::from([(503, 1), (504, 1)]));
        assert_eq!(w.client_timeouts, 1);
        assert!((w.failure_p50_ms.unwrap() - 30.0).abs() < 1.0, "{w:?}");
        assert!((w.failure_p99_ms.unwrap() - 900.0).abs() < 1.0, "{w:?}");
        assert!(
            (w.slowest_success_ms.unwrap() - 1200.0).abs() < 1.0,
            "{w:?}"
        );
        // Request 5 (due at the mark) failed; request 6 is due 100 ms after
        // it and answered 40 ms later; request 7 answered 320 ms after it.
        let first = w.first_success_after_mark_s.unwrap();
        assert!((first - 0.14).abs() < 1e-9, "{first}");
        let md = scenario_markdown(std::slice::from_ref(&report));
        assert!(md.contains("| w: refused (by status)"), "{md}");
        assert!(md.contains("2 (503: 1, 504: 1, client timeout: 1)"), "{md}");
        assert!(md.contains("0 / 1 of 4"), "{md}");
        // Without a watch, no window.
        let plain = Recorder::new().finish(one_second_run("t"), RunTotals::default(), None);
        assert!(plain.window.is_none());
    }

    #[test]
    fn a_scenario_s_section_is_a_top_level_json_key_and_reads_back() {
        let mut report =
            Recorder::new().finish(one_second_run("outage"), RunTotals::default(), None);
        assert!(report.section::<OutageReport>().is_none());
        let outage = OutageReport {
            path: "/pricing".into(),
            requests: 3,
            ..OutageReport::default()
        };
        report.set_section(outage.clone());
        assert_eq!(report.section::<OutageReport>(), Some(&outage));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["outage"]["requests"], 3);
        // Every registered section has its key, null where the run has none.
        for key in ["middle", "hang", "spike", "replicas"] {
            assert!(json.get(key).is_some_and(|v| v.is_null()), "{key}");
        }
        let back: RunReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
        assert!(back.section::<crate::hang::HangReport>().is_none());
    }

    #[test]
    fn the_partner_report_compares_its_calls_with_the_ledgers() {
        let mut rec = Recorder::new();
        // Answered at 900 ms of a 1000 ms budget: both calls in time.
        rec.record(&sample(
            0,
            Outcome::Ok,
            900,
            Some("checkout;dur=800, checkout.inventory;dur=100, checkout.pricing;dur=600"),
        ));
        // Answered at 3000 ms: checkout started at 200; inventory ended at
        // 300 (in time), pricing at 2900 (not).
        rec.record(&sample(
            1,
            Outcome::Ok,
            3000,
            Some("checkout;dur=2800, checkout.inventory;dur=100, checkout.pricing;dur=2600"),
        ));
        assert_eq!(rec.partner_calls_answered_by_deadline(), 3);
        let stats: StatsSnapshot = serde_json::from_str(
            r#"{"requests":5,"answered":{"200":5},"with_budget":0,"late":0,"abandoned":0,"evicted_ids":0,"ids":{}}"#,
        )
        .unwrap();
        let p = PartnerReport::new(&stats, rec.partner_calls_answered_by_deadline());
        assert_eq!((p.requests, p.late, p.not_answered_by_deadline), (5, 0, 2));
        assert_eq!(p.not_answered_by_deadline_share, 0.4);
    }
}
