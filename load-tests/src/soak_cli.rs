//! The `soak` command line: flags, their checks, the markdown it prints.
//!
//! ```text
//! cargo run --release -p load-tests --bin soak                     # ten 1-minute phases
//! cargo run --release -p load-tests --bin soak -- --phase 5s --faults normal,hang
//! ```
//!
//! Exit code 0 when every phase returned to the baseline, 1 when one did
//! not (or the soak could not run), 2 for a refused command line.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use service_kit::BudgetMode;
use slow_partner::FaultMode;

use crate::cli::{MAX_BUDGET, start_runtime};
use crate::generator::{LoadSpec, SpecError};
use crate::output::{machine, write_json_file};
use crate::soak::{DEFAULT_FAULTS, SoakPlan, SoakReport, run_soak};

/// The most phases a soak runs.
pub const MAX_PHASES: usize = 60;

/// The longest a soak sends, over all its phases: one hour.
pub const MAX_SOAK: Duration = Duration::from_secs(3600);

/// A bounded soak of the budget chain (edge -> checkout -> slow partner,
/// started in this process on 127.0.0.1): steady load while the partner's
/// fault switches every phase; after each phase, checks that the partner
/// has no call in flight, no TCP connection is left open and no more tokio
/// tasks are alive than at the baseline, and reports resident memory.
#[derive(Debug, Parser)]
#[command(name = "soak", version)]
pub struct SoakArgs {
    /// The partner's mode in each phase, comma-separated (normal, hang,
    /// reset, blackhole, refuse) [default: normal,hang,reset,blackhole,refuse, twice].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub faults: Vec<FaultMode>,
    /// How long each phase sends (humantime: 1m, 5s).
    #[arg(long, default_value = "1m", value_parser = budget_core::config::duration::parse)]
    pub phase: Duration,
    /// Requests per second, in every phase.
    #[arg(long, default_value_t = 50.0)]
    pub rate: f64,
    /// The budget each request is given.
    #[arg(long, default_value = "2s", value_parser = budget_core::config::duration::parse)]
    pub budget: Duration,
    /// Healthy load before the baseline is read.
    #[arg(long, default_value = "5s", value_parser = budget_core::config::duration::parse)]
    pub warmup: Duration,
    /// Checkout's and edge's pool idle timeout (an idle connection closes
    /// after it).
    #[arg(long, default_value = "2s", value_parser = budget_core::config::duration::parse)]
    pub pool_idle_timeout: Duration,
    /// The longest the drain after a phase waits for the baseline.
    #[arg(long, default_value = "30s", value_parser = budget_core::config::duration::parse)]
    pub drain_deadline: Duration,
    /// Budget mode of checkout and edge.
    #[arg(long, value_enum, default_value_t = BudgetMode::On)]
    pub budget_mode: BudgetMode,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar (it is hidden anyway when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

/// A refused soak command line: the flag and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--{flag}: {problem}")]
pub struct SoakArgsError {
    /// The flag.
    pub flag: &'static str,
    /// What is wrong.
    pub problem: String,
}

fn refuse(flag: &'static str, problem: impl Into<String>) -> SoakArgsError {
    SoakArgsError {
        flag,
        problem: problem.into(),
    }
}

fn within(
    flag: &'static str,
    d: Duration,
    min: Duration,
    max: Duration,
) -> Result<(), SoakArgsError> {
    if d < min || d > max {
        return Err(refuse(
            flag,
            format!(
                "{} is outside {} to {}",
                humantime::format_duration(d),
                humantime::format_duration(min),
                humantime::format_duration(max)
            ),
        ));
    }
    Ok(())
}

impl SoakArgs {
    /// Checks every flag and makes the plan.
    ///
    /// # Errors
    ///
    /// The first refused flag, named.
    ///
    /// ```
    /// use clap::Parser;
    /// use load_tests::soak_cli::SoakArgs;
    ///
    /// let err = SoakArgs::try_parse_from(["soak", "--phase", "0s"]).unwrap().plan().unwrap_err();
    /// assert_eq!(err.to_string(), "--phase: duration must be more than zero");
    /// let plan = SoakArgs::try_parse_from(["soak"]).unwrap().plan().unwrap();
    /// assert_eq!(plan.faults.len(), 10);
    /// ```
    pub fn plan(&self) -> Result<SoakPlan, SoakArgsError> {
        let faults = if self.faults.is_empty() {
            DEFAULT_FAULTS.to_vec()
        } else {
            self.faults.clone()
        };
        if faults.len() > MAX_PHASES {
            return Err(refuse(
                "faults",
                format!("{} phases is over the cap of {MAX_PHASES}", faults.len()),
            ));
        }
        LoadSpec::new(self.rate, self.phase).map_err(|e| match e {
            SpecError::ZeroDuration | SpecError::DurationOverCap { .. } => {
                refuse("phase", e.to_string())
            }
            e => refuse("rate", e.to_string()),
        })?;
        let total = self.phase.saturating_mul(faults.len() as u32);
        if total > MAX_SOAK {
            return Err(refuse(
                "phase",
                format!(
                    "{} phases of {} send for {}, over the cap of {}",
                    faults.len(),
                    humantime::format_duration(self.phase),
                    humantime::format_duration(total),
                    humantime::format_duration(MAX_SOAK)
                ),
            ));
        }
        let ms = Duration::from_millis;
        within("budget", self.budget, ms(1), MAX_BUDGET)?;
        within("warmup", self.warmup, ms(100), Duration::from_secs(600))?;
        within(
            "pool-idle-timeout",
            self.pool_idle_timeout,
            ms(10),
            Duration::from_secs(600),
        )?;
        within(
            "drain-deadline",
            self.drain_deadline,
            ms(100),
            Duration::from_secs(600),
        )?;
        Ok(SoakPlan {
            faults,
            phase: self.phase,
            rate: self.rate,
            budget: self.budget,
            warmup: self.warmup,
            pool_idle_timeout: self.pool_idle_timeout,
            drain_deadline: self.drain_deadline,
            budget_mode: self.budget_mode,
            progress: !self.no_progress,
        })
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The markdown on stdout: the setup, one row per phase, memory and the
/// verdict.
pub fn soak_markdown(report: &SoakReport, command: &str) -> String {
    let plan = &report.plan;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Soak: {} phases of {} at {} req/s\n",
        plan.faults.len(),
        humantime::format_duration(plan.phase),
        plan.rate
    );
    let _ = writeln!(out, "Command: `{command}`\n");
    let _ = writeln!(out, "Machine: {}\n", machine().describe());
    let _ = writeln!(
        out,
        "Chain: edge -> checkout -> slow partner (healthy shapes), budget mode {}, {} budget, \
         pool idle timeout {}. Baseline after {} of warm-up: {} tasks, {} connections, {} MiB resident{}.\n",
        if plan.budget_mode.is_on() {
            "on"
        } else {
            "off"
        },
        humantime::format_duration(plan.budget),
        humantime::format_duration(plan.pool_idle_timeout),
        humantime::format_duration(plan.warmup),
        report.baseline.after.tasks,
        report.baseline.after.connections,
        mib(report.baseline.after.rss_kib),
        if report.baseline.returned_in_ms.is_some() {
            ""
        } else {
            " (NOT settled within the drain deadline)"
        }
    );
    out.push_str(
        "| phase | partner | sent | 2xx | 504 | 503 | other | p99 ms | partner calls \
         | peak tasks | peak conns | back in | tasks after | conns after | partner in flight | RSS MiB |\n",
    );
    out.push_str(
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in &report.phases {
        let o = &p.run.outcomes;
        let other = o.total() - o.ok - o.degraded - o.gateway_timeout - o.unavailable;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.index,
            p.fault,
            p.run.sent,
            o.ok + o.degraded,
            o.gateway_timeout,
            o.unavailable,
            other,
            p.run.latency_ms.p99,
            p.run.partner.as_ref().map_or(0, |s| s.requests),
            p.peak.tasks,
            p.peak.connections,
            p.drain
                .returned_in_ms
                .map_or_else(|| "NOT".to_owned(), |ms| format!("{ms} ms")),
            p.drain.after.tasks,
            p.drain.after.connections,
            p.drain.partner_in_flight,
            mib(p.drain.after.rss_kib),
        );
    }
    let change = |from: u64| (report.rss_end_kib as f64 - from as f64) / 1024.0;
    let half = report.phases.len() / 2;
    let _ = writeln!(
        out,
        "\nResident memory: {} MiB at the baseline, {} MiB after phase {half}, {} MiB after the last phase \
         ({:+.1} MiB since the baseline, {:+.1} MiB over the second half), at most {} MiB. Wall time {:.0} s.\n",
        mib(report.rss_start_kib),
        mib(report.rss_mid_kib),
        mib(report.rss_end_kib),
        change(report.rss_start_kib),
        change(report.rss_mid_kib),
        mib(report.rss_max_kib),
        report.wall_s
    );
    if report.all_returned {
        out.push_str(
            "Every phase returned to the baseline: no partner call in flight, no connection open, \
             no task over the baseline.\n",
        );
    } else {
        for p in report.phases.iter().filter(|p| !p.returned()) {
            let _ = writeln!(
                out,
                "Phase {} ({}) did NOT return within {}: {} tasks (baseline {}), connections {:?}, {} partner calls in flight.",
                p.index,
                p.fault,
                humantime::format_duration(plan.drain_deadline),
                p.drain.after.tasks,
                report.baseline.after.tasks,
                p.drain.after.by_state,
                p.drain.partner_in_flight
            );
        }
    }
    out
}

/// The whole program: check `args`, soak, print, write.
pub fn main_with(args: SoakArgs, command: &str) -> ExitCode {
    let plan = match args.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match start_runtime("soak") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    eprintln!(
        "soak: {} phases of {} at {} req/s ({})",
        plan.faults.len(),
        humantime::format_duration(plan.phase),
        plan.rate,
        plan.faults
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let report = match runtime.block_on(run_soak(&plan)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("soak: {}", service_kit::error_chain(&e));
            return ExitCode::FAILURE;
        }
    };
    print!("{}", soak_markdown(&report, command));
    if let Some(path) = &args.json
        && let Err(e) = write_json_file(path, &report)
    {
        eprintln!("soak: --json {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    if report.all_returned {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(args: &[&str]) -> String {
        let mut full = vec!["soak"];
        full.extend_from_slice(args);
        SoakArgs::try_parse_from(full)
            .expect("parses")
            .plan()
            .expect_err("refused")
            .to_string()
    }

    #[test]
    fn every_flag_out_of_range_is_refused_by_name() {
        assert_eq!(
            refusal(&["--rate", "0"]),
            "--rate: rate 0/s is not a positive number"
        );
        assert_eq!(
            refusal(&["--phase", "11m"]),
            "--phase: duration 11m is over the cap of 10m"
        );
        assert_eq!(
            refusal(&[
                "--phase",
                "10m",
                "--faults",
                "normal,hang,reset,refuse,blackhole,normal,hang"
            ]),
            "--phase: 7 phases of 10m send for 1h 10m, over the cap of 1h"
        );
        let many = vec!["normal"; 61].join(",");
        assert_eq!(
            refusal(&["--faults", &many]),
            "--faults: 61 phases is over the cap of 60"
        );
        assert!(refusal(&["--budget", "11s"]).starts_with("--budget: 11s is outside"));
        assert!(refusal(&["--pool-idle-timeout", "1ms"]).starts_with("--pool-idle-timeout: "));
        assert!(refusal(&["--drain-deadline", "11m"]).starts_with("--drain-deadline: "));
        assert!(refusal(&["--warmup", "0s"]).starts_with("--warmup: "));
        assert!(SoakArgs::try_parse_from(["soak", "--faults", "sleep"]).is_err());
    }

    #[test]
    fn the_defaults_are_ten_one_minute_phases_over_every_mode() {
        let plan = SoakArgs::try_parse_from(["soak"]).unwrap().plan().unwrap();
        assert_eq!(
            SoakPlan {
                progress: false,
                ..plan.clone()
            },
            SoakPlan::default()
        );
        for mode in FaultMode::ALL {
            assert_eq!(
                plan.faults.iter().filter(|&&m| m == mode).count(),
                2,
                "{mode}"
            );
        }
        let plan = SoakArgs::try_parse_from(["soak", "--faults", "hang,normal", "--phase", "3s"])
            .unwrap()
            .plan()
            .unwrap();
        assert_eq!(plan.faults, [FaultMode::Hang, FaultMode::Normal]);
        assert_eq!(plan.phase, Duration::from_secs(3));
    }
}
