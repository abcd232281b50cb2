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
//!   deadline ([`partner_calls_answered_by`](crate::budget_table::partner_calls_answered_by)); calls cut by a timeout, and
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
//!   counts its own ([`MiddleStats`](crate::middle::MiddleStats): answers ready after the budget they
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

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use slow_partner::StatsSnapshot;

use crate::budget_table::StepSummary;
use crate::budgets::BudgetDistribution;
use crate::client::{Outcome, Patience};
use crate::gauges::Gauges;
use crate::generator::{Arrivals, LoadSpec};
use crate::section::{Section, Sections};
use crate::window::WindowReport;

mod markdown;
mod recorder;

pub use markdown::{pct, row, scenario_markdown, section_cell};
pub use recorder::Recorder;

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
pub(crate) mod tests;
