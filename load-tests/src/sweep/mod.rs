//! `--scenario burst-sweep`: every burst shape, cold and warm, run, not
//! picked.
//!
//! The cells ([`Cell`]) are {cold, warm} x {100, 600, 2000 requests at
//! once} x {budgets 500 ms, 2 s, 10 s, mixed (half 400 ms, half 4 s)} x
//! {partner instant with no worker limit, 50 ms with no worker limit,
//! 50 ms with 8 workers per path}: 72 cells, each run in every mode asked
//! (`--modes`, default budget, naive and both peers) on a fresh chain and
//! partner, every request on a connection of its own, the client waiting
//! the longest budget plus 5 s at most. The filters (`--sweep-start`,
//! `--sweep-size`, `--sweep-budget`, `--sweep-partner`) keep a subset;
//! `--repeat N` runs it N times; `--noisy-neighbour` keeps one core busy
//! with another process for the sweep ([`NoisyNeighbour`]).
//!
//! Per cell and mode it keeps ([`ModeFigures`]): the requests answered in
//! budget (and of a mixed burst its short-budget ones), the refused, and
//! the refused requests' time in checkout's permit queues (p50, p99;
//! [`crate::window::checkout_queue_ms`]); per cell a [`verdict`]. The
//! markdown is one table ([`sweep_markdown`]); `--json` writes the same
//! numbers ([`SweepReport`]).
//!
//! ```no_run
//! use load_tests::chain::{ChainMode, ChainSettings};
//! use load_tests::client::Patience;
//! use load_tests::generator::LoadSpec;
//! use load_tests::run::LoadPlan;
//! use load_tests::sweep::{Filters, PartnerShape, SweepPlan, run_sweep, sweep_markdown};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let filters = Filters { sizes: vec![100], partners: vec![PartnerShape::Delay50Workers8],
//!     ..Filters::default() };
//! let plan = SweepPlan { cells: filters.cells(), modes: vec![ChainMode::Budget, ChainMode::Naive],
//!     repeat: 1, noisy_neighbour: false };
//! let base = LoadPlan::fixed(LoadSpec::new(1.0, std::time::Duration::from_secs(1))?,
//!     std::time::Duration::from_secs(2), Patience::Budget);
//! let (report, _runs) = run_sweep(&plan, &ChainSettings::default(), &base).await?;
//! print!("{}", sweep_markdown(&report));
//! # Ok(()) }
//! ```

mod args;
mod cell;
mod measure;
mod noisy;
mod plan;
mod table;

use std::time::Duration;

use serde::Serialize;

pub use args::{MAX_REPEAT, MAX_SWEEP, SweepArgs, parse_budget};
pub use cell::{
    Cell, MIXED_LONG, MIXED_SHORT, PartnerShape, SWEEP_NAME, SWEEP_WORKERS, Start, SweepBudget,
};
pub use measure::{ModeFigures, SweepRow, Verdict, tolerance, verdict};
pub use noisy::NoisyNeighbour;
pub use plan::{
    BUDGETS, Estimate, Filters, MACHINE_RATE, PARTNERS, RUN_OVERHEAD, SIZES, STARTS, SweepPlan,
};
pub use table::{mode_cell, sweep_markdown};

use crate::chain::{ChainSettings, Partners};
use crate::report::RunReport;
use crate::run::{LoadPlan, RunError, run_scenario};

/// What a sweep measured: a row per cell and run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SweepReport {
    /// Whether a noisy neighbour kept a core busy.
    pub noisy_neighbour: bool,
    /// The estimate printed before the sweep, seconds.
    pub estimated_s: f64,
    /// How long it took, seconds.
    pub elapsed_s: f64,
    /// The rows, in run order.
    pub rows: Vec<SweepRow>,
}

/// `1h 2m 3s`, to the second.
fn secs(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Runs `plan` (its cells `repeat` times, every mode of each on a chain
/// of its own, started under `settings`; `base`'s in-flight cap), printing
/// its estimate and progress on stderr. The report, and every run's own.
///
/// # Errors
///
/// When a chain or partner cannot start, a run fails, or the noisy
/// neighbour cannot start.
pub async fn run_sweep(
    plan: &SweepPlan,
    settings: &ChainSettings,
    base: &LoadPlan,
) -> Result<(SweepReport, Vec<RunReport>), RunError> {
    let estimate = plan.estimate();
    eprintln!(
        "load-tests: burst-sweep: {} cell(s) x {} mode(s) x {} = {} runs; about {}, at most {}",
        plan.cells.len(),
        plan.modes.len(),
        plan.repeat,
        estimate.runs,
        secs(estimate.typical),
        secs(estimate.at_most)
    );
    let noisy = if plan.noisy_neighbour {
        Some(NoisyNeighbour::start().map_err(RunError::Noisy)?)
    } else {
        None
    };
    // Run through the registry's runner: each cell starts its own partner
    // (`Topology::Fresh`); these shared ones are only its fallback.
    let partners = Partners::start(settings).await?;
    let start = tokio::time::Instant::now();
    let mut report = SweepReport {
        noisy_neighbour: noisy.is_some(),
        estimated_s: estimate.typical.as_secs_f64(),
        ..SweepReport::default()
    };
    let mut all = Vec::new();
    let outcome = run_cells(plan, settings, base, &partners, &mut report, &mut all).await;
    partners.shutdown().await;
    drop(noisy);
    outcome?;
    report.elapsed_s = start.elapsed().as_secs_f64();
    Ok((report, all))
}

/// Every run of the sweep, its rows into `report`, its runs into `all`.
async fn run_cells(
    plan: &SweepPlan,
    settings: &ChainSettings,
    base: &LoadPlan,
    partners: &Partners,
    report: &mut SweepReport,
    all: &mut Vec<RunReport>,
) -> Result<(), RunError> {
    let start = tokio::time::Instant::now();
    let total = plan.cells.len() * plan.repeat as usize;
    for run in 1..=plan.repeat {
        for (index, cell) in plan.cells.iter().enumerate() {
            let runs = run_scenario(cell, settings, base, &plan.modes, partners).await?;
            let modes: Vec<ModeFigures> = runs.iter().map(ModeFigures::of).collect();
            let row = SweepRow {
                index,
                cell: *cell,
                run,
                verdict: verdict(&modes),
                modes,
            };
            eprintln!(
                "load-tests: burst-sweep {}/{total} ({} in): {cell} run {run}: {}",
                report.rows.len() + 1,
                secs(start.elapsed()),
                row.modes
                    .iter()
                    .map(|m| format!("{} {}", m.mode, m.good))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            report.rows.push(row);
            all.extend(runs);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
