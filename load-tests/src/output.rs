//! What a run prints and writes, apart from the command line that asks
//! for it: the markdown on stdout ([`markdown`], with its [`chain_line`]),
//! the JSON file ([`write_json`]; the soak's JSON goes through the same
//! writer) and the [`Machine`]
//! a run was measured on. The SVG and HTML writers are [`crate::plot`]'s
//! and [`crate::html`]'s; [`crate::cli`] and [`crate::soak_cli`] call
//! these.
//!
//! ```
//! use load_tests::output::machine;
//! assert!(machine().describe().contains("logical CPUs"));
//! ```

use std::io::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::chain::ChainSettings;
use crate::cli::Invocation;
use crate::report::{RunReport, scenario_markdown};

/// The markdown on stdout: the setup, then per scenario the side-by-side
/// summary and the budget tables.
///
/// ```
/// use clap::Parser;
/// use load_tests::cli::Args;
/// use load_tests::output::markdown;
///
/// let invocation = Args::try_parse_from(["load-tests"]).unwrap().invocation().unwrap();
/// let md = markdown(&invocation, "load-tests", &[]);
/// assert!(md.starts_with("## Load tests"), "{md}");
/// assert!(md.contains("Command: `load-tests`"), "{md}");
/// ```
pub fn markdown(invocation: &Invocation, command: &str, reports: &[RunReport]) -> String {
    let mut out = String::new();
    out.push_str("## Load tests: budget mode vs generous timeouts vs plain tower\n\n");
    out.push_str(&format!("Command: `{command}`\n\n"));
    out.push_str(&format!("Machine: {}\n\n", machine().describe()));
    if let Invocation::Scenarios { settings, .. } = invocation {
        out.push_str(&chain_line(settings));
    }
    let mut groups: Vec<Vec<RunReport>> = Vec::new();
    for r in reports {
        match groups.iter_mut().find(|g| g[0].scenario == r.scenario) {
            Some(g) => g.push(r.clone()),
            None => groups.push(vec![r.clone()]),
        }
    }
    for g in &groups {
        out.push_str(&scenario_markdown(g));
    }
    out
}

/// The markdown's "Chain:" line: the partner's workers per path,
/// checkout's client limit, the capacity, the floors, the slowdown.
///
/// ```
/// use load_tests::output::chain_line;
/// use load_tests::chain::ChainSettings;
///
/// let line = chain_line(&ChainSettings::default());
/// assert!(line.contains("at most 8 calls at once per path"), "{line}");
/// assert!(line.contains("checkout's default (adaptive)"), "{line}");
/// assert!(!line.contains("Envoy"), "{line}");
/// ```
pub fn chain_line(settings: &ChainSettings) -> String {
    format!(
        "Chain: the slow partner works on at most {} calls at once per path (FIFO queue beyond); \
         checkout's client limit per dependency: {}; healthy capacity {:.0} req/s \
         (pricing, 50 ms mean); budget-mode floors: inventory {}, pricing {}, recommendations 1s, \
         edge's of checkout {}; slowdown {}x.{}\n\n",
        settings.partner_workers,
        settings.concurrency.map_or_else(
            || "checkout's default (adaptive)".to_owned(),
            |n| format!("{n} (fixed, a comparison row)")
        ),
        settings.capacity(),
        floor_text(settings.inventory_floor),
        floor_text(settings.pricing_floor),
        settings
            .checkout_floor
            .map_or_else(|| "edge's default".to_owned(), |f| floor_text(Some(f))),
        settings.slowdown,
        if settings.via_envoy {
            format!(" Topology: {}.", crate::envoy::VIA_ENVOY)
        } else {
            String::new()
        },
    )
}

/// A floor as the markdown says it: the duration, or that checkout's
/// default applies.
fn floor_text(floor: Option<Duration>) -> String {
    floor.map_or_else(
        || "checkout's default".to_owned(),
        |f| humantime::format_duration(f).to_string(),
    )
}

/// What the JSON file holds.
#[derive(Debug, Serialize)]
struct JsonOut<'a> {
    command: &'a str,
    machine: Machine,
    settings: Option<&'a ChainSettings>,
    runs: &'a [RunReport],
}

/// The machine a run was measured on.
///
/// ```
/// use load_tests::output::Machine;
/// let m = Machine { cpus: 2, cpu_model: None };
/// assert_eq!(m.describe(), "2 logical CPUs, unknown CPU");
/// ```
#[derive(Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: Option<String>,
}

impl Machine {
    /// `2 logical CPUs, <model>`.
    ///
    /// ```
    /// let m = load_tests::output::Machine { cpus: 4, cpu_model: Some("Demo CPU".into()) };
    /// assert_eq!(m.describe(), "4 logical CPUs, Demo CPU");
    /// ```
    pub fn describe(&self) -> String {
        format!(
            "{} logical CPUs, {}",
            self.cpus,
            self.cpu_model.as_deref().unwrap_or("unknown CPU")
        )
    }
}

/// This machine.
///
/// ```
/// assert!(load_tests::output::machine().cpus >= 1);
/// ```
pub fn machine() -> Machine {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|m| m.trim().to_owned())
    });
    Machine {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
    }
}

/// Writes the JSON file.
///
/// # Errors
///
/// When the file cannot be written.
///
/// ```no_run
/// use clap::Parser;
/// use load_tests::cli::Args;
///
/// let invocation = Args::try_parse_from(["load-tests"]).unwrap().invocation().unwrap();
/// load_tests::output::write_json("run.json".as_ref(), &invocation, "load-tests", &[]).unwrap();
/// ```
pub fn write_json(
    path: &std::path::Path,
    invocation: &Invocation,
    command: &str,
    reports: &[RunReport],
) -> std::io::Result<()> {
    let settings = match invocation {
        Invocation::Scenarios { settings, .. } | Invocation::Sweep { settings, .. } => {
            Some(settings)
        }
        Invocation::Target { .. } => None,
    };
    let out = JsonOut {
        command,
        machine: machine(),
        settings,
        runs: reports,
    };
    write_json_file(path, &out)
}

/// Writes `value` as pretty JSON and a newline to `path`.
/// Writes a sweep's report as JSON to `path`: the command, the machine,
/// the chain's settings and the sweep's rows ([`crate::sweep::SweepReport`]).
///
/// # Errors
///
/// When the file cannot be written.
pub fn write_sweep_json(
    path: &std::path::Path,
    command: &str,
    settings: &ChainSettings,
    sweep: &crate::sweep::SweepReport,
) -> std::io::Result<()> {
    #[derive(Serialize)]
    struct SweepOut<'a> {
        command: &'a str,
        machine: Machine,
        settings: &'a ChainSettings,
        sweep: &'a crate::sweep::SweepReport,
    }
    let out = SweepOut {
        command,
        machine: machine(),
        settings,
        sweep,
    };
    write_json_file(path, &out)
}

pub(crate) fn write_json_file(
    path: &std::path::Path,
    value: &impl Serialize,
) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    serde_json::to_writer_pretty(&mut file, value)?;
    file.write_all(b"\n")?;
    file.flush()
}
