//! The `replicas` scenario: one dependency served by three replicas, one of
//! which gets slow, goes dark and restarts, and how evenly and how well the
//! chain spreads its calls meanwhile.
//!
//! Three slow partners ([`REPLICAS`]), each the chain's usual partner (8
//! workers per path, the healthy shapes), serve every dependency; checkout
//! gets all three as the `endpoints` of inventory, pricing and
//! recommendations (the peer checkouts get them as
//! [`PeerConfig::endpoints`](crate::peer::PeerConfig::endpoints)). The
//! offered load is [`REPLICA_LOAD`] (60 %) of the three replicas' combined
//! capacity: 3 x 160 = 480 req/s, so **288 req/s**. The run is six phases
//! ([`PHASES`]; a given `--duration` is split in the same proportions, a
//! given `--rate` stands for the combined capacity, as for `spike`), and
//! replica 2 ([`TROUBLED`]) is:
//!
//! | phase | from - to (s) | replica 2 |
//! | --- | --- | --- |
//! | `healthy` | 0 - 5 | as the others |
//! | `slow` | 5 - 10 | [`SLOWDOWN`] (10) times slower (`PartnerHandle::set_slowdown`) |
//! | `after-slow` | 10 - 12 | back to normal speed |
//! | `blackhole` | 12 - 17 | blackholed (`FaultMode::Blackhole`: connects time out) |
//! | `after-blackhole` | 17 - 19 | normal again |
//! | `restart` | 19 - 29 | refuses connections for 2 s ([`RESTART_DOWN`], `FaultMode::Refuse`), then normal: a restart |
//!
//! Per phase and mode the report has goodput, p99 latency and 5xx (by
//! intended send time, the ramp's per-step report), and **each replica's
//! share of the partner calls**: the calls each partner received during
//! the phase (its `requests` counter, read at every whole second and phase
//! boundary of the run) over the three's sum. For the restart, **back
//! after**: the seconds from replica 2 coming back to the first whole
//! second (at or after it, within the phase) in which its share of that
//! second's calls is within [`EVEN_TOLERANCE`] (20 %) of an even third
//! (26.7 % to 40 %); `None`, "not within the phase", when no second gets
//! there.
//!
//! The goals ([`GoalCheck`]), printed against the measurements:
//!
//! - all healthy: every replica's share within 20 % of a third;
//! - one slow replica: goodput at least [`GOODPUT_GOAL`] (95 %) of the
//!   offered load, and p99 at most [`P99_GOAL`] (2) times the all-healthy
//!   p99;
//! - one blackholed replica: goodput at least 95 % of the offered load;
//! - after the restart, the replica takes its share again within
//!   [`BACK_WITHIN`] (5 s).
//!
//! ```
//! use std::time::Duration;
//! use load_tests::replicas::{PHASES, Schedule};
//!
//! let s = Schedule::of_lengths(&PHASES.map(|(_, d)| d)).unwrap();
//! assert_eq!(s.back_at, Duration::from_secs(21));
//! assert_eq!(s.phases[3].from, Duration::from_secs(12));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use slow_partner::{FaultMode, PartnerHandle};
use tokio::time::Instant;

use crate::report::RampReport;

/// How many replicas serve every dependency.
pub const REPLICAS: usize = 3;

/// The offered load, as a share of the replicas' combined capacity.
pub const REPLICA_LOAD: f64 = 0.6;

/// The replica that gets slow, dark and restarted, from 0: replica 2.
pub const TROUBLED: usize = 1;

/// How much slower it gets in the `slow` phase.
pub const SLOWDOWN: u64 = 10;

/// How far a share may be from an even one and count as even, as a share
/// of the even one: 20 %.
pub const EVEN_TOLERANCE: f64 = 0.2;

/// The goal for goodput with one replica slow or dark, as a share of the
/// offered load.
pub const GOODPUT_GOAL: f64 = 0.95;

/// The goal for p99 with one replica slow, as a multiple of the all-healthy
/// p99.
pub const P99_GOAL: f64 = 2.0;

/// The goal for the time until a restarted replica takes its share again.
pub const BACK_WITHIN: Duration = Duration::from_secs(5);

/// How long the restarted replica refuses connections, when the restart
/// phase has its default length (a given `--duration` scales it).
pub const RESTART_DOWN: Duration = Duration::from_secs(2);

/// A phase of the `replicas` scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Every replica healthy.
    Healthy,
    /// Replica 2 ten times slower.
    Slow,
    /// Replica 2 back to normal speed.
    AfterSlow,
    /// Replica 2 blackholed.
    Blackhole,
    /// Replica 2 normal again.
    AfterBlackhole,
    /// Replica 2 refuses connections for a while, then serves again.
    Restart,
}

impl Phase {
    /// The name in reports: `healthy`, `slow`, `after-slow`, ...
    ///
    /// ```
    /// assert_eq!(load_tests::replicas::Phase::AfterBlackhole.as_str(), "after-blackhole");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Healthy => "healthy",
            Phase::Slow => "slow",
            Phase::AfterSlow => "after-slow",
            Phase::Blackhole => "blackhole",
            Phase::AfterBlackhole => "after-blackhole",
            Phase::Restart => "restart",
        }
    }

    /// What replica 2 does in it, in a few words.
    pub fn describe(self) -> String {
        match self {
            Phase::Healthy => "all healthy".into(),
            Phase::Slow => format!("replica 2 {SLOWDOWN}x slower"),
            Phase::AfterSlow => "replica 2 back to speed".into(),
            Phase::Blackhole => "replica 2 blackholed".into(),
            Phase::AfterBlackhole => "replica 2 normal again".into(),
            Phase::Restart => "replica 2 restarted (refuses, then serves)".into(),
        }
    }
}

/// The phases and their lengths when `--duration` is not given: 29 s.
pub const PHASES: [(Phase, Duration); 6] = [
    (Phase::Healthy, Duration::from_secs(5)),
    (Phase::Slow, Duration::from_secs(5)),
    (Phase::AfterSlow, Duration::from_secs(2)),
    (Phase::Blackhole, Duration::from_secs(5)),
    (Phase::AfterBlackhole, Duration::from_secs(2)),
    (Phase::Restart, Duration::from_secs(10)),
];

/// The load's shape: [`REPLICA_LOAD`] of the capacity in every phase, for
/// [`shaped_steps`](crate::scenario::shaped_steps).
pub fn load_shape() -> Vec<(f64, Duration)> {
    PHASES.iter().map(|&(_, d)| (REPLICA_LOAD, d)).collect()
}

/// What is done to the troubled replica at a moment of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaFault {
    /// `PartnerHandle::set_slowdown` to this factor.
    Slowdown(u64),
    /// `PartnerHandle::set_mode` to this mode.
    Mode(FaultMode),
}

/// One phase's window, as offsets from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseWindow {
    /// Which.
    pub phase: Phase,
    /// It starts.
    pub from: Duration,
    /// It ends.
    pub to: Duration,
}

/// When the phases are and what happens to replica 2 when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// The phases, in order.
    pub phases: Vec<PhaseWindow>,
    /// The faults, in time order.
    pub events: Vec<(Duration, ReplicaFault)>,
    /// The restarted replica serves again.
    pub back_at: Duration,
}

impl Schedule {
    /// The schedule of phases of these lengths (the plan's steps, one per
    /// [`PHASES`] entry); the restart's down time is [`RESTART_DOWN`] scaled
    /// as its phase was. `None` unless there are six.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::replicas::{ReplicaFault, Schedule};
    /// use slow_partner::FaultMode;
    ///
    /// // --duration 2900ms: a tenth of every length.
    /// let tenths = [500, 500, 200, 500, 200, 1000].map(Duration::from_millis);
    /// let s = Schedule::of_lengths(&tenths).unwrap();
    /// assert_eq!(s.events[4], (Duration::from_millis(1900), ReplicaFault::Mode(FaultMode::Refuse)));
    /// assert_eq!(s.back_at, Duration::from_millis(2100));
    /// assert!(Schedule::of_lengths(&tenths[..5]).is_none());
    /// ```
    pub fn of_lengths(lengths: &[Duration]) -> Option<Self> {
        if lengths.len() != PHASES.len() {
            return None;
        }
        let mut from = Duration::ZERO;
        let phases: Vec<PhaseWindow> = PHASES
            .iter()
            .zip(lengths)
            .map(|(&(phase, _), &length)| {
                let w = PhaseWindow {
                    phase,
                    from,
                    to: from.saturating_add(length),
                };
                from = w.to;
                w
            })
            .collect();
        let at = |phase: Phase| phases.iter().find(|w| w.phase == phase).copied();
        let (slow, blackhole, restart) =
            (at(Phase::Slow)?, at(Phase::Blackhole)?, at(Phase::Restart)?);
        let default_restart = PHASES[PHASES.len() - 1].1;
        let down = Duration::from_secs_f64(
            RESTART_DOWN.as_secs_f64() * (restart.to - restart.from).as_secs_f64()
                / default_restart.as_secs_f64(),
        );
        let back_at = restart.from.saturating_add(down);
        let events = vec![
            (slow.from, ReplicaFault::Slowdown(SLOWDOWN)),
            (slow.to, ReplicaFault::Slowdown(1)),
            (blackhole.from, ReplicaFault::Mode(FaultMode::Blackhole)),
            (blackhole.to, ReplicaFault::Mode(FaultMode::Normal)),
            (restart.from, ReplicaFault::Mode(FaultMode::Refuse)),
            (back_at, ReplicaFault::Mode(FaultMode::Normal)),
        ];
        Some(Self {
            phases,
            events,
            back_at,
        })
    }

    /// When the replicas' counters are read: every whole second from the
    /// start to the end of the last phase, and every phase boundary and the
    /// restarted replica's return, in order, once each.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::replicas::Schedule;
    ///
    /// let lengths = [500, 500, 200, 500, 200, 1000].map(Duration::from_millis);
    /// let times = Schedule::of_lengths(&lengths).unwrap().sample_times();
    /// assert_eq!(times.first(), Some(&Duration::ZERO));
    /// assert_eq!(times.last(), Some(&Duration::from_millis(2900)));
    /// assert!(times.contains(&Duration::from_secs(2)) && times.contains(&Duration::from_millis(2100)));
    /// assert!(times.windows(2).all(|w| w[0] < w[1]));
    /// ```
    pub fn sample_times(&self) -> Vec<Duration> {
        let end = self.phases.last().map_or(Duration::ZERO, |w| w.to);
        let mut times: Vec<Duration> = (0..=end.as_secs()).map(Duration::from_secs).collect();
        times.extend(self.phases.iter().flat_map(|w| [w.from, w.to]));
        times.push(self.back_at);
        times.sort();
        times.dedup();
        times
    }
}

/// The replicas' `requests` counters, read at set times of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Samples {
    /// (offset from the start, each replica's count then), in time order.
    pub at: Vec<(Duration, Vec<u64>)>,
}

impl Samples {
    /// Each replica's calls between `from` and `to` (the samples at or
    /// last before each); `None` when either has no sample.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::replicas::Samples;
    ///
    /// let s = Samples { at: vec![
    ///     (Duration::ZERO, vec![0, 0]),
    ///     (Duration::from_secs(1), vec![5, 7]),
    ///     (Duration::from_secs(2), vec![9, 10]),
    /// ] };
    /// assert_eq!(s.calls_between(Duration::from_secs(1), Duration::from_secs(2)), Some(vec![4, 3]));
    /// assert_eq!(s.calls_between(Duration::ZERO, Duration::from_millis(2500)), Some(vec![9, 10]));
    /// ```
    pub fn calls_between(&self, from: Duration, to: Duration) -> Option<Vec<u64>> {
        let at = |t: Duration| {
            self.at
                .iter()
                .rev()
                .find(|(when, _)| *when <= t)
                .map(|(_, c)| c)
        };
        let (a, b) = (at(from)?, at(to)?);
        Some(b.iter().zip(a).map(|(b, a)| b.saturating_sub(*a)).collect())
    }
}

/// Each count's share of their sum (all zero when the sum is).
///
/// ```
/// assert_eq!(load_tests::replicas::shares(&[1, 1, 2]), [0.25, 0.25, 0.5]);
/// assert_eq!(load_tests::replicas::shares(&[0, 0]), [0.0, 0.0]);
/// ```
pub fn shares(counts: &[u64]) -> Vec<f64> {
    let sum: u64 = counts.iter().sum();
    counts
        .iter()
        .map(|&c| if sum == 0 { 0.0 } else { c as f64 / sum as f64 })
        .collect()
}

/// Whether `share` is within [`EVEN_TOLERANCE`] of an even share of `n`.
///
/// ```
/// use load_tests::replicas::is_even;
/// assert!(is_even(0.27, 3) && is_even(0.40, 3));
/// assert!(!is_even(0.26, 3) && !is_even(0.41, 3));
/// ```
pub fn is_even(share: f64, n: usize) -> bool {
    let even = 1.0 / n.max(1) as f64;
    (share - even).abs() <= EVEN_TOLERANCE * even + 1e-9
}

/// The seconds from `back_at` to the first whole second starting at or
/// after it and ending by `until` in which `replica`'s share of the calls
/// is even ([`is_even`]); `None` when none is.
///
/// ```
/// use std::time::Duration;
/// use load_tests::replicas::{Samples, back_after};
///
/// // Seconds 0..4: replica 1 gets none, then 10 %, then a third.
/// let counts = [[0, 0, 0], [10, 0, 10], [19, 2, 19], [29, 12, 29], [39, 22, 39]];
/// let s = Samples { at: counts.iter().enumerate()
///     .map(|(i, c)| (Duration::from_secs(i as u64), c.to_vec())).collect() };
/// assert_eq!(back_after(&s, 1, Duration::from_millis(500), Duration::from_secs(4)), Some(1.5));
/// assert_eq!(back_after(&s, 1, Duration::from_millis(500), Duration::from_secs(2)), None);
/// ```
pub fn back_after(
    samples: &Samples,
    replica: usize,
    back_at: Duration,
    until: Duration,
) -> Option<f64> {
    let first = back_at.as_secs() + u64::from(back_at.subsec_nanos() > 0);
    (first..until.as_secs())
        .find(|&second| {
            let from = Duration::from_secs(second);
            samples
                .calls_between(from, from + Duration::from_secs(1))
                .is_some_and(|calls| {
                    let n = calls.len();
                    calls.iter().sum::<u64>() > 0
                        && shares(&calls).get(replica).is_some_and(|&s| is_even(s, n))
                })
        })
        .map(|second| second as f64 - back_at.as_secs_f64())
}

/// One phase of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseReport {
    /// Which (`healthy`, `slow`, ...).
    pub phase: String,
    /// It starts, seconds from the start of the run.
    pub from_s: f64,
    /// It ends.
    pub to_s: f64,
    /// The offered load, requests per second.
    pub offered_per_s: f64,
    /// Goodput of the requests due in it, per second of it.
    pub goodput_per_s: f64,
    /// Their p99 latency, ms.
    pub p99_ms: Option<f64>,
    /// The calls each replica received during it.
    pub calls: Vec<u64>,
    /// Each replica's share of them.
    pub shares: Vec<f64>,
}

/// One goal of the scenario, against what a run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GoalCheck {
    /// The goal.
    pub goal: String,
    /// What was measured.
    pub measured: String,
    /// Whether it was met (`None`: nothing to judge).
    pub met: Option<bool>,
}

/// What the `replicas` scenario measured in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicasReport {
    /// How many replicas.
    pub replicas: usize,
    /// The troubled one, from 1 (replica 2).
    pub troubled: usize,
    /// Per phase.
    pub phases: Vec<PhaseReport>,
    /// Per whole second of the run, the calls each replica received.
    pub calls_per_second: Vec<Vec<u64>>,
    /// The restarted replica served again, seconds from the start.
    pub back_at_s: f64,
    /// Seconds from then until its share of a second's calls was even
    /// again; `None`: not within the phase.
    pub back_after_s: Option<f64>,
    /// The goals against the measurements.
    pub goals: Vec<GoalCheck>,
    /// The faults that could not be done to the troubled replica (a mode
    /// switch that failed), with why: its phase then did not happen as
    /// planned. Empty when all were done.
    #[serde(default)]
    pub fault_errors: Vec<String>,
}

/// The report of a run: its `schedule`, the counters read during it, and
/// its per-step (per-phase) report.
pub fn replicas_report(
    schedule: &Schedule,
    samples: &Samples,
    ramp: &RampReport,
) -> ReplicasReport {
    let phases: Vec<PhaseReport> = schedule
        .phases
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let step = ramp.steps.get(i);
            let calls = samples
                .calls_between(w.from, w.to)
                .unwrap_or_else(|| vec![0; REPLICAS]);
            PhaseReport {
                phase: w.phase.as_str().to_owned(),
                from_s: w.from.as_secs_f64(),
                to_s: w.to.as_secs_f64(),
                offered_per_s: step.map_or(0.0, |s| s.rate_per_s),
                goodput_per_s: step.map_or(0.0, |s| s.goodput_per_s),
                p99_ms: step.and_then(|s| s.p99_ms),
                shares: shares(&calls),
                calls,
            }
        })
        .collect();
    let end = schedule.phases.last().map_or(Duration::ZERO, |w| w.to);
    let calls_per_second = (0..end.as_secs())
        .filter_map(|s| samples.calls_between(Duration::from_secs(s), Duration::from_secs(s + 1)))
        .collect();
    let back_after_s = back_after(samples, TROUBLED, schedule.back_at, end);
    let goals = goals(&phases, back_after_s);
    ReplicasReport {
        replicas: REPLICAS,
        troubled: TROUBLED + 1,
        phases,
        calls_per_second,
        back_at_s: schedule.back_at.as_secs_f64(),
        back_after_s,
        goals,
        fault_errors: Vec::new(),
    }
}

/// The scenario's goals against `phases` and the restart's `back_after_s`.
fn goals(phases: &[PhaseReport], back_after_s: Option<f64>) -> Vec<GoalCheck> {
    let phase = |name: Phase| phases.iter().find(|p| p.phase == name.as_str());
    let pct = |v: f64| format!("{:.1} %", v * 100.0);
    let mut goals = Vec::new();
    if let Some(h) = phase(Phase::Healthy) {
        let even = h.shares.iter().all(|&s| is_even(s, h.shares.len()));
        let total: u64 = h.calls.iter().sum();
        goals.push(GoalCheck {
            goal: format!(
                "all healthy: every replica's share within {:.0} % of an even third",
                EVEN_TOLERANCE * 100.0
            ),
            measured: h
                .shares
                .iter()
                .map(|&s| pct(s))
                .collect::<Vec<_>>()
                .join(" / "),
            met: (total > 0).then_some(even),
        });
    }
    let goodput_goal = |p: &PhaseReport, what: &str| {
        let share = (p.offered_per_s > 0.0).then(|| p.goodput_per_s / p.offered_per_s);
        GoalCheck {
            goal: format!(
                "{what}: goodput >= {:.0} % of offered",
                GOODPUT_GOAL * 100.0
            ),
            measured: share.map_or("-".into(), |s| {
                format!(
                    "{} ({:.1} of {:.1} req/s)",
                    pct(s),
                    p.goodput_per_s,
                    p.offered_per_s
                )
            }),
            met: share.map(|s| s >= GOODPUT_GOAL),
        }
    };
    if let Some(slow) = phase(Phase::Slow) {
        goals.push(goodput_goal(slow, "one slow replica"));
        let healthy = phase(Phase::Healthy).and_then(|h| h.p99_ms);
        goals.push(GoalCheck {
            goal: format!("one slow replica: p99 <= {P99_GOAL}x the all-healthy p99"),
            measured: match (slow.p99_ms, healthy) {
                (Some(s), Some(h)) => format!("{s:.0} ms vs {P99_GOAL} x {h:.0} ms"),
                _ => "-".into(),
            },
            met: slow.p99_ms.zip(healthy).map(|(s, h)| s <= P99_GOAL * h),
        });
    }
    if let Some(bh) = phase(Phase::Blackhole) {
        goals.push(goodput_goal(bh, "one blackholed replica"));
    }
    goals.push(GoalCheck {
        goal: format!(
            "after the restart: its share back within {:.0} % of a third within {} s",
            EVEN_TOLERANCE * 100.0,
            BACK_WITHIN.as_secs()
        ),
        measured: back_after_s.map_or("not within the phase".into(), |s| format!("{s:.1} s")),
        met: Some(back_after_s.is_some_and(|s| s <= BACK_WITHIN.as_secs_f64())),
    });
    goals
}

/// Drives the troubled replica through `schedule` and reads every
/// replica's counter at [`Schedule::sample_times`], from the run's start
/// (sent on `start`) until its end; then leaves the troubled replica
/// healthy. Returns the samples and the faults that failed (see
/// [`ReplicasReport::fault_errors`]); empty samples when the run never
/// started.
pub(crate) async fn drive(
    replicas: &[&PartnerHandle],
    schedule: &Schedule,
    start: tokio::sync::oneshot::Receiver<Instant>,
) -> (Samples, Vec<String>) {
    let Ok(start) = start.await else {
        return (Samples::default(), Vec::new());
    };
    let Some(troubled) = replicas.get(TROUBLED) else {
        return (Samples::default(), Vec::new());
    };
    let faults = async {
        let mut errors = Vec::new();
        for &(at, fault) in &schedule.events {
            tokio::time::sleep_until(start + at).await;
            if let Err(e) = apply(troubled, fault).await {
                errors.push(format!("at {:.1} s, {fault:?}: {e}", at.as_secs_f64()));
            }
        }
        errors
    };
    let sampler = async {
        let mut samples = Samples::default();
        for at in schedule.sample_times() {
            tokio::time::sleep_until(start + at).await;
            samples
                .at
                .push((at, replicas.iter().map(|r| r.requests()).collect()));
        }
        samples
    };
    let (errors, samples) = tokio::join!(faults, sampler);
    for fault in [
        ReplicaFault::Slowdown(1),
        ReplicaFault::Mode(FaultMode::Normal),
    ] {
        // Said on stderr by `apply`; the replicas stop after the run.
        let _ = apply(troubled, fault).await;
    }
    (samples, errors)
}

/// Does `fault` to `replica`; a failure is said on stderr and returned
/// (for the report), and the run goes on.
async fn apply(replica: &PartnerHandle, fault: ReplicaFault) -> Result<(), String> {
    let result = match fault {
        ReplicaFault::Slowdown(f) => replica
            .set_slowdown(f)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        ReplicaFault::Mode(m) => replica
            .set_mode(m)
            .await
            .map(|_| ())
            .map_err(|e| slow_partner::error_chain(&e)),
    };
    if let Err(e) = &result {
        eprintln!("load-tests: replica 2: {fault:?} failed: {e}");
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RampStepReport;

    fn step(rate: f64, goodput: f64, p99: f64) -> RampStepReport {
        RampStepReport {
            rate_per_s: rate,
            goodput_per_s: goodput,
            p99_ms: Some(p99),
            ..RampStepReport::default()
        }
    }

    #[test]
    fn the_schedule_is_the_documented_one() {
        let s = Schedule::of_lengths(&PHASES.map(|(_, d)| d)).unwrap();
        let windows: Vec<(&str, u64, u64)> = s
            .phases
            .iter()
            .map(|w| (w.phase.as_str(), w.from.as_secs(), w.to.as_secs()))
            .collect();
        assert_eq!(
            windows,
            [
                ("healthy", 0, 5),
                ("slow", 5, 10),
                ("after-slow", 10, 12),
                ("blackhole", 12, 17),
                ("after-blackhole", 17, 19),
                ("restart", 19, 29),
            ]
        );
        let secs = |n| Duration::from_secs(n);
        assert_eq!(
            s.events,
            [
                (secs(5), ReplicaFault::Slowdown(10)),
                (secs(10), ReplicaFault::Slowdown(1)),
                (secs(12), ReplicaFault::Mode(FaultMode::Blackhole)),
                (secs(17), ReplicaFault::Mode(FaultMode::Normal)),
                (secs(19), ReplicaFault::Mode(FaultMode::Refuse)),
                (secs(21), ReplicaFault::Mode(FaultMode::Normal)),
            ]
        );
        assert_eq!(s.back_at, secs(21));
        // Read every second 0..=29, nothing else (the boundaries are whole).
        assert_eq!(s.sample_times(), (0..=29).map(secs).collect::<Vec<_>>());
        assert_eq!(PHASES.iter().map(|(_, d)| d.as_secs()).sum::<u64>(), 29);
        assert!(load_shape().iter().all(|&(f, _)| f == REPLICA_LOAD));
    }

    #[test]
    fn shares_per_phase_and_the_restart_come_from_the_counters_and_goals_from_them() {
        let s = Schedule::of_lengths(&PHASES.map(|(_, d)| d)).unwrap();
        // 30 calls a second. Replica 2 gets a third until 5 s, 2 of 30
        // while slow (5..10), a third again until 12 s, none while dark
        // and refusing (12..21 except 17..19, a third), 1 of 30 at 21 s,
        // 6 at 22 s, 10 from 23 s.
        let r2 = |second: u64| match second {
            5..10 => 2,
            12..17 | 19..21 => 0,
            21 => 1,
            22 => 6,
            _ => 10,
        };
        let mut counts = vec![0u64; 3];
        let mut at = vec![(Duration::ZERO, counts.clone())];
        for second in 0..29 {
            let b = r2(second);
            counts[1] += b;
            counts[0] += (30 - b) / 2;
            counts[2] += 30 - b - (30 - b) / 2;
            at.push((Duration::from_secs(second + 1), counts.clone()));
        }
        let samples = Samples { at };
        let ramp = RampReport {
            steps: vec![
                step(288.0, 288.0, 40.0),
                step(288.0, 280.0, 90.0),
                step(288.0, 288.0, 40.0),
                step(288.0, 250.0, 2000.0),
                step(288.0, 288.0, 40.0),
                step(288.0, 288.0, 40.0),
            ],
            ..RampReport::default()
        };
        let r = replicas_report(&s, &samples, &ramp);
        assert_eq!(r.phases.len(), 6);
        assert_eq!(r.phases[0].calls, [50, 50, 50]);
        assert_eq!(r.phases[1].calls, [70, 10, 70]);
        assert_eq!(r.phases[3].calls[1], 0);
        assert_eq!(r.calls_per_second.len(), 29);
        assert_eq!(r.calls_per_second[22], [12, 6, 12]);
        // Back at 21 s; 21 and 22 are below 26.7 %, 23 is a third: 2 s.
        assert_eq!(r.back_after_s, Some(2.0));
        let met: Vec<Option<bool>> = r.goals.iter().map(|g| g.met).collect();
        // Healthy even; slow goodput 97.2 % met, p99 90 <= 2 x 40 not;
        // blackhole goodput 86.8 % not; back in 2 s met.
        assert_eq!(
            met,
            [Some(true), Some(true), Some(false), Some(false), Some(true)]
        );
        assert!(
            r.goals[1].measured.starts_with("97.2 %"),
            "{:?}",
            r.goals[1]
        );
        // Never back within the phase.
        let never = Samples {
            at: samples
                .at
                .iter()
                .map(|(t, c)| {
                    let mut c = c.clone();
                    if *t > Duration::from_secs(21) {
                        c[1] = samples.at[21].1[1];
                    }
                    (*t, c)
                })
                .collect(),
        };
        let r = replicas_report(&s, &never, &ramp);
        assert_eq!(r.back_after_s, None);
        assert_eq!(r.goals[4].measured, "not within the phase");
        assert_eq!(r.goals[4].met, Some(false));
    }

    #[test]
    fn an_even_share_is_within_20_percent_of_a_third() {
        assert!(is_even(1.0 / 3.0, 3));
        assert!(is_even(0.5, 2) && !is_even(0.61, 2));
        assert_eq!(shares(&[]), Vec::<f64>::new());
        // No counter at all: no calls, nothing even.
        let s = Samples::default();
        assert_eq!(
            s.calls_between(Duration::ZERO, Duration::from_secs(1)),
            None
        );
        assert_eq!(
            back_after(&s, 1, Duration::ZERO, Duration::from_secs(5)),
            None
        );
    }
}
