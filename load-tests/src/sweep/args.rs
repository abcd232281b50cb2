//! The sweep's flags (`--sweep-start`, `--sweep-size`, `--sweep-budget`,
//! `--sweep-partner`, `--repeat`, `--noisy-neighbour`), part of the load
//! tests' command line ([`crate::cli::Args`]), and their checks: a
//! refusal is a [`CliError`] naming the flag.

use std::time::Duration;

use crate::chain::ChainMode;
use crate::cli::{CliError, MAX_BUDGET};
use crate::generator::MAX_RATE;
use crate::sweep::cell::{PartnerShape, Start, SweepBudget};
use crate::sweep::plan::{Filters, SweepPlan};

/// The most repeats of a sweep.
pub const MAX_REPEAT: u32 = 20;

/// The longest a sweep may be bounded by ([`crate::sweep::Estimate::at_most`]).
pub const MAX_SWEEP: Duration = Duration::from_secs(8 * 3600);

/// The flags of `--scenario burst-sweep`.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct SweepArgs {
    /// burst-sweep: the starts to run, comma-separated: cold, warm (20
    /// req/s for 3 s first) [default: both].
    #[arg(long = "sweep-start", value_enum, value_delimiter = ',')]
    pub starts: Vec<Start>,
    /// burst-sweep: the burst sizes, comma-separated [default:
    /// 100,600,2000].
    #[arg(long = "sweep-size", value_delimiter = ',')]
    pub sizes: Vec<u64>,
    /// burst-sweep: the budgets, comma-separated: durations (500ms, 2s,
    /// 10s) or `mixed` (half 400 ms, half 4 s) [default: 500ms,2s,10s,mixed].
    #[arg(long = "sweep-budget", value_delimiter = ',')]
    pub budgets: Vec<String>,
    /// burst-sweep: the partner shapes, comma-separated: instant (no
    /// worker limit), 50ms (no worker limit), 50ms-8w (8 workers per path)
    /// [default: all three].
    #[arg(long = "sweep-partner", value_enum, value_delimiter = ',')]
    pub partners: Vec<PartnerShape>,
    /// burst-sweep: run the selected cells this many times, a row per run
    /// [default: 1].
    #[arg(long)]
    pub repeat: Option<u32>,
    /// burst-sweep: keep one core busy with another process for the
    /// sweep (`sh` spinning, killed at the end).
    #[arg(long)]
    pub noisy_neighbour: bool,
}

fn flag(flag: &'static str, problem: impl Into<String>) -> CliError {
    CliError::Flag {
        flag,
        problem: problem.into(),
    }
}

/// One `--sweep-budget` value: `mixed`, or a duration from 1 ms to 10 s.
///
/// # Errors
///
/// Anything else, as a [`CliError`] naming `--sweep-budget`.
///
/// ```
/// use std::time::Duration;
/// use load_tests::sweep::{SweepBudget, parse_budget};
///
/// assert_eq!(parse_budget("mixed").unwrap(), SweepBudget::Mixed);
/// assert_eq!(parse_budget("2s").unwrap(), SweepBudget::Fixed(Duration::from_secs(2)));
/// assert!(parse_budget("11s").unwrap_err().to_string().starts_with("--sweep-budget: "));
/// ```
pub fn parse_budget(value: &str) -> Result<SweepBudget, CliError> {
    if value.trim() == "mixed" {
        return Ok(SweepBudget::Mixed);
    }
    let d = budget_core::config::duration::parse(value.trim()).map_err(|e| {
        flag(
            "sweep-budget",
            format!("`{value}`: {e} (a duration, or `mixed`)"),
        )
    })?;
    if d.is_zero() || d > MAX_BUDGET {
        return Err(flag(
            "sweep-budget",
            format!("{value} is outside 1ms to 10s"),
        ));
    }
    Ok(SweepBudget::Fixed(d))
}

impl SweepArgs {
    /// The first sweep flag given, by name; `None` when none is.
    pub fn given(&self) -> Option<&'static str> {
        [
            (!self.starts.is_empty(), "sweep-start"),
            (!self.sizes.is_empty(), "sweep-size"),
            (!self.budgets.is_empty(), "sweep-budget"),
            (!self.partners.is_empty(), "sweep-partner"),
            (self.repeat.is_some(), "repeat"),
            (self.noisy_neighbour, "noisy-neighbour"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }

    /// The sweep they ask for, in `modes`.
    ///
    /// # Errors
    ///
    /// A size of 0 or over 5000, a budget [`parse_budget`] refuses, a
    /// repeat of 0 or over [`MAX_REPEAT`], or a sweep bounded by more than
    /// [`MAX_SWEEP`]; each naming its flag.
    pub fn plan(&self, modes: &[ChainMode]) -> Result<SweepPlan, CliError> {
        if let Some(&size) = self.sizes.iter().find(|&&n| n == 0 || n as f64 > MAX_RATE) {
            return Err(flag(
                "sweep-size",
                format!("{size} is outside 1 to {MAX_RATE}"),
            ));
        }
        let budgets = self
            .budgets
            .iter()
            .map(|b| parse_budget(b))
            .collect::<Result<Vec<_>, _>>()?;
        let repeat = self.repeat.unwrap_or(1);
        if !(1..=MAX_REPEAT).contains(&repeat) {
            return Err(flag(
                "repeat",
                format!("{repeat} is outside 1 to {MAX_REPEAT}"),
            ));
        }
        let filters = Filters {
            starts: self.starts.clone(),
            sizes: self.sizes.clone(),
            budgets,
            partners: self.partners.clone(),
        };
        let plan = SweepPlan {
            cells: filters.cells(),
            modes: modes.to_vec(),
            repeat,
            noisy_neighbour: self.noisy_neighbour,
        };
        if plan.estimate().at_most > MAX_SWEEP {
            return Err(flag(
                "repeat",
                format!(
                    "the sweep could take up to {}, over the cap of 8h",
                    humantime::format_duration(plan.estimate().at_most)
                ),
            ));
        }
        Ok(plan)
    }
}
