//! `replicas`: three partners of their own per run
//! ([`Partners::start_replicas`](crate::chain::Partners::start_replicas)),
//! each the healthy partner with 8 workers per path, behind every
//! dependency (checkout's `endpoints`; the peers'
//! [`PeerConfig::endpoints`](crate::peer::PeerConfig::endpoints)); offered
//! 60 % of their combined capacity (3 x 160 x 0.6 = 288 req/s); replica 2
//! is 10x slower, blackholed, then restarted, in phases of 5, 5, 2, 5, 2
//! and 10 s; run in the `p2c` mode too. [`crate::replicas`] drives the
//! faults and defines the measurements.

use std::fmt::Write as _;
use std::time::Duration;

use comfy_table::presets::ASCII_MARKDOWN;
use comfy_table::{CellAlignment, Table};

use crate::chain::{ChainMode, ChainSettings};
use crate::replicas::{
    EVEN_TOLERANCE, PHASES, REPLICA_LOAD, REPLICAS, ReplicasReport, SLOWDOWN, Schedule, drive,
    load_shape, replicas_report,
};
use crate::report::{RunReport, row, section_cell};
use crate::run::ModeRun;
use crate::scenario::{RunFuture, Scenario, Setup, Topology};
use crate::section::{Section, SectionKind};

impl Section for ReplicasReport {
    const KEY: &'static str = "replicas";
}

/// The `replicas` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Replicas;

impl Scenario for Replicas {
    fn name(&self) -> &'static str {
        "replicas"
    }

    fn about(&self) -> &'static str {
        "Three replicas of the healthy partner behind every dependency, at 60 % of their \
         combined capacity; replica 2 gets 10x slower, then blackholed, then restarted"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let combined = REPLICAS as f64 * settings.capacity();
        let description = format!(
            "{REPLICAS} replicas of the healthy partner ({} workers per path each) behind \
             every dependency, at {:.0} % of their combined capacity ({:.0} req/s); replica \
             2 is {SLOWDOWN}x slower, then blackholed, then restarted (phases of {}; a \
             given --duration in the same proportions)",
            settings.partner_workers,
            REPLICA_LOAD * 100.0,
            REPLICA_LOAD * combined,
            PHASES
                .iter()
                .map(|(p, d)| format!("{} {} s", p.as_str(), d.as_secs()))
                .collect::<Vec<_>>()
                .join(", "),
        );
        Setup {
            capacity: combined,
            phases: Some(load_shape()),
            partners: Topology::Replicas(REPLICAS),
            ..Setup::new(self.name(), description, settings)
        }
    }

    /// `asked`, with [`ChainMode::Hedged`] right after
    /// [`ChainMode::Budget`] and [`ChainMode::P2c`] right after
    /// [`ChainMode::Peer`], so that balancing is compared with taking the
    /// replicas in turn.
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    /// use load_tests::scenario::Scenario as _;
    /// use load_tests::scenarios::replicas::Replicas;
    ///
    /// assert_eq!(Replicas.modes(&ChainMode::ALL), [ChainMode::Budget, ChainMode::Hedged,
    ///     ChainMode::Naive, ChainMode::Peer, ChainMode::P2c, ChainMode::Queue, ChainMode::Envoy]);
    /// assert_eq!(Replicas.modes(&[ChainMode::Peer, ChainMode::P2c]),
    ///     [ChainMode::Peer, ChainMode::P2c]);
    /// ```
    fn modes(&self, asked: &[ChainMode]) -> Vec<ChainMode> {
        let with_hedged = ChainMode::insert_after(asked, ChainMode::Budget, ChainMode::Hedged);
        ChainMode::insert_after(&with_hedged, ChainMode::Peer, ChainMode::P2c)
    }

    /// The load, with replica 2's faults beside it; then how the calls
    /// spread over the replicas per phase.
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let lengths: Vec<Duration> = run.plan.spec.steps().iter().map(|s| s.duration).collect();
            let Some(schedule) = Schedule::of_lengths(&lengths) else {
                return run.load().await;
            };
            let all = run.partners.all();
            let (report, (samples, fault_errors)) = run
                .load_beside(|start| drive(&all, &schedule, start))
                .await;
            let mut report = report?;
            if let Some(ramp) = &report.ramp {
                let mut measured = replicas_report(&schedule, &samples, ramp);
                measured.fault_errors = fault_errors;
                report.set_section(measured);
            }
            Ok(report)
        })
    }

    fn steps_title(&self) -> &'static str {
        "Per phase (healthy, slow, after-slow, blackhole, after-blackhole, restart)"
    }

    fn per_second(&self) -> bool {
        true
    }

    fn after_table(&self, runs: &[RunReport]) -> String {
        markdown(runs)
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<ReplicasReport>()];
        SECTIONS
    }
}

/// Its tables: per phase each replica's share of the calls, the
/// restart's time back, and the goals, a column per run.
fn markdown(runs: &[RunReport]) -> String {
    let Some(first) = runs.iter().find_map(|r| r.section::<ReplicasReport>()) else {
        return String::new();
    };
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    let mut header = vec!["phase: share of the partner calls per replica".to_owned()];
    header.extend(
        runs.iter()
            .map(|r| format!("{} mode: r1 / r2 / r3 %", r.mode)),
    );
    table.set_header(header);
    let rows = phase_rows(runs, first)
        .into_iter()
        .chain(restart_rows(runs, first))
        .chain(goal_rows(runs, first));
    for r in rows {
        table.add_row(r);
    }
    for col in 1..=runs.len() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Replicas (each partner's own count of the calls it received, per phase):\n\n{table}\n"
    );
    out
}

/// A row per phase: each replica's share of the calls, a column per run.
fn phase_rows(runs: &[RunReport], first: &ReplicasReport) -> Vec<Vec<String>> {
    first
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let name = format!(
                "{}: {}-{} s, {}",
                p.phase,
                p.from_s,
                p.to_s,
                PHASES.get(i).map_or(String::new(), |(ph, _)| ph.describe())
            );
            row(runs, &name, &|r| {
                r.section::<ReplicasReport>()
                    .and_then(|rep| rep.phases.get(i))
                    .map_or("-".into(), |p| {
                        let shares: Vec<String> = p
                            .shares
                            .iter()
                            .map(|s| format!("{:.1}", s * 100.0))
                            .collect();
                        format!(
                            "{} ({} calls)",
                            shares.join(" / "),
                            p.calls.iter().sum::<u64>()
                        )
                    })
            })
        })
        .collect()
}

/// The restart's time back, and the faults that did not take effect
/// (when a run has one).
fn restart_rows(runs: &[RunReport], first: &ReplicasReport) -> Vec<Vec<String>> {
    let name = format!(
        "restart: seconds from replica {} serving again ({} s) until its share of a second's \
         calls is within {:.0} % of a third",
        first.troubled,
        first.back_at_s,
        EVEN_TOLERANCE * 100.0
    );
    let mut rows = vec![row(runs, &name, &|r| {
        section_cell(r, |rep: &ReplicasReport| {
            rep.back_after_s
                .map_or("not within the phase".into(), |s| format!("{s:.1}"))
        })
    })];
    if runs.iter().any(|r| {
        r.section::<ReplicasReport>()
            .is_some_and(|rep| !rep.fault_errors.is_empty())
    }) {
        rows.push(row(
            runs,
            "faults that did not take effect (the phase differs)",
            &|r| {
                section_cell(r, |rep: &ReplicasReport| {
                    if rep.fault_errors.is_empty() {
                        "none".to_owned()
                    } else {
                        rep.fault_errors.join("; ")
                    }
                })
            },
        ));
    }
    rows
}

/// A row per goal of the scenario: met or not, and the measurement.
fn goal_rows(runs: &[RunReport], first: &ReplicasReport) -> Vec<Vec<String>> {
    first
        .goals
        .iter()
        .enumerate()
        .map(|(i, g)| {
            row(runs, &format!("goal: {}", g.goal), &|r| {
                r.section::<ReplicasReport>()
                    .and_then(|rep| rep.goals.get(i))
                    .map_or("-".into(), |g| {
                        let verdict = match g.met {
                            Some(true) => "met",
                            Some(false) => "NOT met",
                            None => "-",
                        };
                        format!("{verdict}: {}", g.measured)
                    })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Patience;
    use crate::generator::LoadSpec;
    use crate::run::LoadPlan;

    #[test]
    fn sixty_percent_of_three_replicas_in_six_phases() {
        let settings = ChainSettings::default();
        let setup = Replicas.setup(&settings);
        assert!(setup.partners.is_replicas() && setup.capacity == 480.0);
        let base = LoadPlan::fixed(
            LoadSpec::new(128.0, Duration::from_secs(20)).unwrap(),
            Duration::from_secs(2),
            Patience::Budget,
        );
        let own = Replicas.plan(&setup, &base).unwrap();
        assert!(own.spec.steps().iter().all(|s| s.rate == 288.0));
        assert_eq!(own.spec.duration(), Duration::from_secs(29));
    }
}
