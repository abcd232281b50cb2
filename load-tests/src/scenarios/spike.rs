//! `spike`: healthy; 0.5x of the capacity for 4 s, 3x for 2 s, 0.5x for
//! 6 s ([`SPIKE_PHASES`]; a given `--duration` in the same proportions,
//! [`shaped_steps`](crate::scenario::shaped_steps)); reported per phase and
//! per second, with the time until p99 is back ([`crate::spike`] defines
//! the measurements).

use std::time::Duration;

use crate::budgets::BudgetDistribution;
use crate::chain::ChainSettings;
use crate::report::{RunReport, row, section_cell};
use crate::run::ModeRun;
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};
use crate::spike::{SpikeReport, spike_report};

impl Section for SpikeReport {
    const KEY: &'static str = "spike";
}

/// The `spike` scenario's phases: (multiple of the capacity, length when
/// `--duration` is not given): 4 s calm at half the capacity, 2 s at three
/// times it, 6 s calm again. A given `--duration` is split in the same
/// proportions (a third, a sixth, a half).
pub const SPIKE_PHASES: [(f64, Duration); 3] = [
    (0.5, Duration::from_secs(4)),
    (3.0, Duration::from_secs(2)),
    (0.5, Duration::from_secs(6)),
];

/// The `spike` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Spike;

impl Scenario for Spike {
    fn name(&self) -> &'static str {
        "spike"
    }

    fn about(&self) -> &'static str {
        "The healthy partner at half the capacity, three times it for a while, then half again; \
         reported per phase and per second"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let description = format!(
            "healthy partner; offered load {}x of capacity ({:.0} req/s) for 4 s, {}x for \
             2 s, {}x for 6 s (a given --duration in the same proportions)",
            SPIKE_PHASES[0].0,
            settings.capacity(),
            SPIKE_PHASES[1].0,
            SPIKE_PHASES[2].0,
        );
        Setup {
            phases: Some(SPIKE_PHASES.to_vec()),
            ..Setup::new(self.name(), description, settings)
        }
    }

    /// The load, then how the chain came back after the spike.
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            // The ideal schedules need one budget for every request.
            let model = match run.plan.budgets {
                BudgetDistribution::Fixed(budget) => Some(run.settings.bottleneck_model(budget)),
                _ => None,
            };
            let mut report = run.load().await?;
            if let Some(spike) = report
                .ramp
                .as_ref()
                .and_then(|ramp| spike_report(ramp, model.as_ref()))
            {
                report.set_section(spike);
            }
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        if let Some(sp) = runs.iter().find_map(|r| r.section::<SpikeReport>()) {
            rows.push(row(
                runs,
                &format!(
                    "spike ({} to {} s): calm p99 before it, ms / seconds after it until a \
                     second's p99 is back within 10 % or 10 ms of it",
                    sp.spike_from_s, sp.spike_to_s
                ),
                &|r| {
                    section_cell(r, |sp: &SpikeReport| {
                        format!(
                            "{} / {}",
                            sp.calm_p99_ms.map_or("-".into(), |p| format!("{p:.0}")),
                            sp.p99_back_after_s
                                .map_or("not within the run".into(), |s| format!("{s:.0}"))
                        )
                    })
                },
            ));
        }
        rows.extend(ideal_row(runs));
        rows
    }

    fn steps_title(&self) -> &'static str {
        "Per phase of the spike"
    }

    fn per_second(&self) -> bool {
        true
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<SpikeReport>()];
        SECTIONS
    }
}

/// The row of the refusals from the spike's start, against the fewest a
/// scheduler knowing the capacity refuses (when a run has them).
fn ideal_row(runs: &[RunReport]) -> Option<Vec<String>> {
    let (w, q) = runs.iter().find_map(|r| {
        r.section::<SpikeReport>()
            .and_then(|sp| sp.whole_budget.zip(sp.standing_share))
    })?;
    let drained = |d: Option<f64>| d.map_or("not within the run".into(), |s| format!("{s:.1} s"));
    Some(row(
        runs,
        &format!(
            "spike: refused (5xx) from its start; the fewest a scheduler knowing the capacity \
             refuses: {} waiting up to {:.0} ms (queue empty {} after the spike), {} waiting \
             up to {:.0} ms ({} after)",
            w.refused,
            w.max_wait_ms,
            drained(w.drained_after_s),
            q.refused,
            q.max_wait_ms,
            drained(q.drained_after_s),
        ),
        &|r| section_cell(r, |sp: &SpikeReport| sp.refused_from_spike.to_string()),
    ))
}
