//! What the sweep keeps of each run ([`ModeFigures`]) and each cell's
//! verdict ([`verdict`]): budget mode answers in budget at least the best
//! of the other modes, less max(3, 2 % of the burst); and where naive mode
//! answered the whole burst in budget, at least 99 % of it.

use serde::{Deserialize, Serialize};

use crate::budgets::BudgetClass;
use crate::chain::ChainMode;
use crate::report::RunReport;
use crate::sweep::cell::Cell;
use crate::warm::WarmUpReport;

/// One mode's figures of one burst (the warm-up apart).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModeFigures {
    /// The mode (`budget`, `naive`, `peer`, `queue`).
    pub mode: String,
    /// Requests in the burst.
    pub requests: u64,
    /// `2xx` within their budget.
    pub good: u64,
    /// Of a mixed burst: its short-budget requests, and those answered
    /// within their budget.
    pub short: Option<(u64, u64)>,
    /// Answered with an error status.
    pub refused: u64,
    /// No answer within the client's patience, a connection error, or not
    /// sent.
    pub other_failures: u64,
    /// The refused requests' time in checkout's permit queues, median, ms.
    pub refused_queue_p50_ms: Option<f64>,
    /// Its 99th percentile, ms.
    pub refused_queue_p99_ms: Option<f64>,
    /// The warm-up's figures, when the cell is warm (not counted above).
    pub warm_up: Option<WarmUpReport>,
}

impl ModeFigures {
    /// The figures of one run's report: its watched window (the burst),
    /// its short-budget class, its warm-up section.
    pub fn of(report: &RunReport) -> Self {
        let w = report.window.clone().unwrap_or_default();
        let short = report
            .classes
            .iter()
            .find(|c| c.class == BudgetClass::Short.as_str())
            .map(|c| (c.scheduled, c.good));
        Self {
            mode: report.mode.clone(),
            requests: w.requests,
            good: w.good,
            short,
            refused: w.refused.values().sum(),
            other_failures: w.client_timeouts + w.transport + w.not_sent,
            refused_queue_p50_ms: w.refused_queue_p50_ms,
            refused_queue_p99_ms: w.refused_queue_p99_ms,
            warm_up: report.section::<WarmUpReport>().cloned(),
        }
    }
}

/// A cell's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// `None`: not judged (budget mode, or every other mode, not run).
    pub pass: Option<bool>,
    /// Why, in a few words.
    pub why: String,
}

/// One run of one cell, every mode side by side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The cell's place in the sweep's plan.
    pub index: usize,
    /// The cell.
    pub cell: Cell,
    /// Which run of it (1 to `--repeat`).
    pub run: u32,
    /// Each mode's figures, in run order.
    pub modes: Vec<ModeFigures>,
    /// The verdict.
    pub verdict: Verdict,
}

/// How far below the best other mode budget mode may fall: max(3, 2 % of
/// the burst), rounded up.
///
/// ```
/// assert_eq!(load_tests::sweep::tolerance(100), 3);
/// assert_eq!(load_tests::sweep::tolerance(600), 12);
/// assert_eq!(load_tests::sweep::tolerance(2000), 40);
/// ```
pub fn tolerance(requests: u64) -> u64 {
    requests.saturating_mul(2).div_ceil(100).max(3)
}

/// The cell's verdict from its modes' figures: budget mode's count in
/// budget against the best of the others (naive, the peers, envoy; not
/// hedged, budget mode itself) less
/// [`tolerance`]; and, where naive answered every request in budget,
/// against 99 % of the burst (rounded up).
///
/// ```
/// use load_tests::sweep::{ModeFigures, verdict};
///
/// let f = |mode: &str, good| ModeFigures { mode: mode.into(), requests: 600, good,
///     ..ModeFigures::default() };
/// assert_eq!(verdict(&[f("budget", 264), f("naive", 274), f("peer", 100)]).pass, Some(true));
/// assert_eq!(verdict(&[f("budget", 264), f("naive", 200), f("envoy", 280)]).why, "below envoy (264 < 280 - 12)");
/// assert_eq!(verdict(&[f("budget", 208), f("naive", 276)]).pass, Some(false));
/// assert_eq!(verdict(&[f("budget", 590), f("naive", 600)]).pass, Some(false));
/// assert_eq!(verdict(&[f("budget", 594), f("naive", 600)]).pass, Some(true));
/// assert_eq!(verdict(&[f("naive", 600)]).pass, None);
/// ```
pub fn verdict(modes: &[ModeFigures]) -> Verdict {
    let budget_name = ChainMode::Budget.as_str();
    let Some(budget) = modes.iter().find(|m| m.mode == budget_name) else {
        return Verdict {
            pass: None,
            why: "budget mode not run".into(),
        };
    };
    let Some(best) = modes
        .iter()
        .filter(|m| m.mode != budget_name && m.mode != ChainMode::Hedged.as_str())
        .max_by_key(|m| m.good)
    else {
        return Verdict {
            pass: None,
            why: "no other mode run".into(),
        };
    };
    let tol = tolerance(budget.requests);
    if budget.good.saturating_add(tol) < best.good {
        return Verdict {
            pass: Some(false),
            why: format!(
                "below {} ({} < {} - {tol})",
                best.mode, budget.good, best.good
            ),
        };
    }
    let naive = modes.iter().find(|m| m.mode == ChainMode::Naive.as_str());
    if let Some(naive) = naive
        && naive.requests > 0
        && naive.good == naive.requests
    {
        let floor = budget.requests.saturating_mul(99).div_ceil(100);
        if budget.good < floor {
            return Verdict {
                pass: Some(false),
                why: format!("naive answered all; {} < 99 % ({floor})", budget.good),
            };
        }
    }
    Verdict {
        pass: Some(true),
        why: format!("ok (best other: {} {})", best.mode, best.good),
    }
}
