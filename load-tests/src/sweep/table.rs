//! The sweep's markdown: one table, a row per cell and run, the modes
//! side by side, and the verdict.

use crate::sweep::SweepReport;
use crate::sweep::measure::{ModeFigures, SweepRow};

/// `12` or `-`.
fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

/// One mode's cell: `good[ (short s/of)] / refused / queue p50-p99`.
///
/// ```
/// use load_tests::sweep::{ModeFigures, mode_cell};
///
/// let f = ModeFigures { mode: "budget".into(), requests: 600, good: 290, refused: 310,
///     short: Some((300, 120)), refused_queue_p50_ms: Some(0.0), refused_queue_p99_ms: Some(4.0),
///     ..ModeFigures::default() };
/// assert_eq!(mode_cell(Some(&f)), "290 (short 120/300) · 310 ref · q 0/4");
/// assert_eq!(mode_cell(None), "-");
/// ```
pub fn mode_cell(f: Option<&ModeFigures>) -> String {
    let Some(f) = f else {
        return "-".into();
    };
    let short = f
        .short
        .map_or(String::new(), |(of, good)| format!(" (short {good}/{of})"));
    let other = if f.other_failures > 0 {
        format!(" · {} other", f.other_failures)
    } else {
        String::new()
    };
    format!(
        "{}{short} · {} ref{other} · q {}/{}",
        f.good,
        f.refused,
        ms(f.refused_queue_p50_ms),
        ms(f.refused_queue_p99_ms)
    )
}

fn row_line(row: &SweepRow, modes: &[String]) -> String {
    let c = &row.cell;
    let mut cells = vec![
        format!("{:?}", c.start).to_lowercase(),
        c.size.to_string(),
        c.budget.to_string(),
        c.partner.as_str().to_owned(),
        row.run.to_string(),
    ];
    cells.extend(
        modes
            .iter()
            .map(|m| mode_cell(row.modes.iter().find(|f| &f.mode == m))),
    );
    let mark = match row.verdict.pass {
        Some(true) => "pass",
        Some(false) => "**FAIL**",
        None => "-",
    };
    cells.push(format!("{mark}: {}", row.verdict.why));
    format!("| {} |\n", cells.join(" | "))
}

/// The sweep's markdown: what it ran, the table, how many cells passed.
pub fn sweep_markdown(report: &SweepReport) -> String {
    let mut modes: Vec<String> = Vec::new();
    for f in report.rows.iter().flat_map(|r| &r.modes) {
        if !modes.contains(&f.mode) {
            modes.push(f.mode.clone());
        }
    }
    let mut out = String::from("### burst-sweep\n\n");
    out.push_str(&format!(
        "{} cell run(s), {} mode(s) each, {} s (estimated {} s){}. Per mode: answered in budget (of a mixed \
         burst also its short-budget requests: in budget/sent) · refused (an error status) · \
         the refused requests' time in checkout's permit queue, p50/p99 ms (0 when none \
         waited; `-`: none refused). Warm cells were warmed first (20 req/s for 3 s), and \
         only the burst is counted. Verdict: budget >= the best other mode - max(3, 2 %), \
         and >= 99 % where naive answered the whole burst in budget.\n\n",
        report.rows.len(),
        modes.len(),
        report.elapsed_s.round(),
        report.estimated_s.round(),
        if report.noisy_neighbour {
            ", one core kept busy by a noisy neighbour"
        } else {
            ""
        }
    ));
    let mut header = vec!["start", "size", "budgets", "partner", "run"];
    header.extend(modes.iter().map(String::as_str));
    header.push("verdict");
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
    let mut rows: Vec<&SweepRow> = report.rows.iter().collect();
    rows.sort_by_key(|r| (r.index, r.run));
    for row in rows {
        out.push_str(&row_line(row, &modes));
    }
    let judged = report
        .rows
        .iter()
        .filter(|r| r.verdict.pass.is_some())
        .count();
    let passed = report
        .rows
        .iter()
        .filter(|r| r.verdict.pass == Some(true))
        .count();
    out.push_str(&format!("\n{passed} of {judged} judged rows pass.\n\n"));
    out
}
