//! The budget table: a `Server-Timing` ledger rendered for people.

use budget_core::ledger::{INGRESS_DESC, INGRESS_METRIC, Metric, parse_server_timing};
use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Table};

/// Renders a `Server-Timing` value as a table: each step, its time, its
/// share of the ingress budget, and any note (status, skip reason).
///
/// ```
/// let t = budget_examples::table::budget_table(
///     "budget;dur=1000;desc=\"ingress\", inventory;dur=150, recs;desc=\"skipped: 10ms < floor 1000ms\"",
/// );
/// assert!(t.contains("inventory"));
/// assert!(t.contains("15.0%"));
/// ```
pub fn budget_table(server_timing: &str) -> String {
    let metrics = parse_server_timing(server_timing);
    let budget = metrics
        .iter()
        .find(|m| m.name == INGRESS_METRIC && m.desc.as_deref() == Some(INGRESS_DESC))
        .and_then(|m| m.dur);
    let mut table = Table::new();
    table.load_style(UTF8_FULL_CONDENSED);
    table.set_header(vec!["step", "ms", "of budget", "note"]);
    for m in &metrics {
        table.add_row(row(m, budget));
    }
    for col in [1, 2] {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}

fn row(m: &Metric, budget: Option<f64>) -> Vec<Cell> {
    let ms = m.dur.map(|d| format!("{d:.1}")).unwrap_or_default();
    let share = match (m.dur, budget) {
        // A hop's own ingress budget is not time spent.
        (Some(d), Some(b)) if b > 0.0 && m.desc.as_deref() != Some(INGRESS_DESC) => {
            format!("{:.1}%", d * 100.0 / b)
        }
        _ => String::new(),
    };
    vec![
        Cell::new(&m.name),
        Cell::new(ms),
        Cell::new(share),
        Cell::new(m.desc.as_deref().unwrap_or("")),
    ]
}
