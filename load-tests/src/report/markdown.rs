//! The markdown of one scenario's runs: the side-by-side table (the rows
//! every run has, the watched window's, the scenario's own
//! ([`Scenario::rows`](crate::scenario::Scenario::rows)), the classes'), the per-step and per-second
//! tables of a load with steps, the scenario's own tables
//! ([`Scenario::after_table`](crate::scenario::Scenario::after_table)), and each run's budget table.

use std::fmt::Write as _;

use comfy_table::presets::ASCII_MARKDOWN;
use comfy_table::{CellAlignment, Table};

use super::{PerDependency, RampReport, RunReport, ServiceSeries};
use crate::budget_table::markdown;
use crate::client::Patience;
use crate::section::Section;
use crate::window::WindowReport;

/// A row of the side-by-side table: `name`, then `cell` of each run.
pub fn row(runs: &[RunReport], name: &str, cell: &dyn Fn(&RunReport) -> String) -> Vec<String> {
    let mut cells = vec![name.to_owned()];
    cells.extend(runs.iter().map(cell));
    cells
}

/// `n (x.y%)` of `of`; `0` when `of` is.
///
/// ```
/// assert_eq!(load_tests::report::pct(1, 8), "1 (12.5%)");
/// assert_eq!(load_tests::report::pct(0, 0), "0");
/// ```
pub fn pct(n: u64, of: u64) -> String {
    if of == 0 {
        "0".to_owned()
    } else {
        format!("{n} ({:.1}%)", n as f64 * 100.0 / of as f64)
    }
}

/// A cell from the run's section of type `T`, `-` when it has none.
pub fn section_cell<T: Section>(r: &RunReport, cell: impl Fn(&T) -> String) -> String {
    r.section::<T>().map_or("-".into(), cell)
}

/// Side-by-side summary of the runs of one scenario (a column per run),
/// then each run's budget table. The scenario's own parts come from the
/// registry ([`crate::scenarios::find`] by the runs' scenario name); a run
/// of none (`target`) has only the common ones.
pub fn scenario_markdown(runs: &[RunReport]) -> String {
    let Some(first) = runs.first() else {
        return String::new();
    };
    let scenario = crate::scenarios::find(&first.scenario).map(|s| s.get());
    let request_load = scenario.is_none_or(|s| s.request_load());
    let mut out = if request_load {
        heading(first)
    } else {
        format!("### {}: {}\n\n", first.scenario, first.description)
    };
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    let mut header = vec!["".to_owned()];
    header.extend(runs.iter().map(|r| format!("{} mode", r.mode)));
    table.set_header(header);
    let common = if request_load {
        common_rows(runs)
    } else {
        Vec::new()
    };
    let rows = common
        .into_iter()
        .chain(window_rows(runs))
        .chain(scenario.map(|s| s.rows(runs)).unwrap_or_default())
        .chain(class_rows(runs));
    for r in rows {
        table.add_row(r);
    }
    for col in 1..=runs.len() {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let _ = writeln!(out, "{table}\n");
    if let Some(ramp) = &first.ramp {
        let title = scenario.map_or("Per step of the ramp", |s| s.steps_title());
        out.push_str(&ramp_markdown(runs, ramp, title));
        if scenario.is_some_and(|s| s.per_second()) {
            out.push_str(&per_second_markdown(runs));
        }
    }
    if let Some(s) = scenario {
        out.push_str(&s.after_table(runs));
    }
    if !request_load {
        return out;
    }
    for r in runs {
        let _ = writeln!(
            out,
            "Budget table, {} mode ({} answers with a ledger):\n",
            r.mode,
            r.steps.first().map_or(0, |s| s.requests)
        );
        if r.steps.is_empty() {
            let _ = writeln!(out, "(no answer carried a Server-Timing ledger)\n");
        } else {
            let _ = writeln!(out, "{}\n", markdown(&r.steps));
        }
    }
    out
}

/// The scenario's heading and its load, from its first run.
fn heading(first: &RunReport) -> String {
    format!(
        "### {}: {}\n\n{} req/s ({:?} arrivals) for {} s, client budget {}, client patience {}.\n\n",
        first.scenario,
        first.description,
        // A ramp's mean rate to a tenth (146.7, not 146.66666666666666).
        (first.rate_per_s * 10.0).round() / 10.0,
        first.arrivals,
        first.duration_s,
        first.budgets.describe(),
        match first.patience {
            Patience::Fixed(d) => humantime::format_duration(d).to_string(),
            Patience::Budget => "the budget".to_owned(),
        }
    )
}

/// The rows every run has: outcomes, goodput, latency.
fn common_rows(runs: &[RunReport]) -> Vec<Vec<String>> {
    let mut rows = vec![
        row(runs, "requests scheduled / sent", &|r| {
            format!("{} / {}", r.scheduled, r.sent)
        }),
        row(runs, "200 (full)", &|r| r.outcomes.ok.to_string()),
        row(runs, "200 degraded", &|r| r.outcomes.degraded.to_string()),
        row(runs, "429", &|r| r.outcomes.too_many_requests.to_string()),
        row(runs, "503", &|r| r.outcomes.unavailable.to_string()),
        row(runs, "504", &|r| r.outcomes.gateway_timeout.to_string()),
        row(runs, "other status", &|r| {
            let detail: Vec<String> = r
                .outcomes
                .other_statuses
                .iter()
                .map(|(c, n)| format!("{c}: {n}"))
                .collect();
            if detail.is_empty() {
                "0".to_owned()
            } else {
                format!("{} ({})", r.outcomes.other, detail.join(", "))
            }
        }),
        row(runs, "transport errors / client timeouts", &|r| {
            format!("{} / {}", r.outcomes.transport, r.outcomes.client_timeout)
        }),
        row(runs, "not sent (in-flight cap)", &|r| {
            r.outcomes.not_sent.to_string()
        }),
        row(runs, "**goodput** (2xx within budget), req/s", &|r| {
            format!("**{:.1}**", r.goodput_per_s)
        }),
        row(runs, "of which not degraded, req/s", &|r| {
            format!("{:.1}", r.full_goodput_per_s)
        }),
        row(runs, "2xx after the budget", &|r| {
            r.success_after_budget.to_string()
        }),
        row(
            runs,
            "answers after the request's own budget (client side)",
            &|r| pct(r.late_answers, r.sent),
        ),
        row(runs, "latency p50 / p90 / p99 / max, ms", &|r| {
            let l = r.latency_ms;
            format!("{:.0} / {:.0} / {:.0} / {:.0}", l.p50, l.p90, l.p99, l.max)
        }),
    ];
    rows.extend(partner_rows(runs));
    rows
}

/// The rows every run has: the partner's side and the run's own.
fn partner_rows(runs: &[RunReport]) -> Vec<Vec<String>> {
    vec![
        row(runs, "partner calls", &|r| {
            r.partner
                .as_ref()
                .map_or("-".into(), |p| p.requests.to_string())
        }),
        row(runs, "partner calls per request sent", &|r| {
            r.partner.as_ref().map_or("-".into(), |p| {
                if r.sent == 0 {
                    "-".to_owned()
                } else {
                    format!("{:.3}", p.requests as f64 / r.sent as f64)
                }
            })
        }),
        row(runs, "partner late (its /stats)", &|r| {
            r.partner
                .as_ref()
                .map_or("-".into(), |p| pct(p.late, p.requests))
        }),
        row(
            runs,
            "partner calls not answered by the client's deadline",
            &|r| {
                r.partner
                    .as_ref()
                    .map_or("-".into(), |p| pct(p.not_answered_by_deadline, p.requests))
            },
        ),
        row(
            runs,
            "connections dropped at a full accept queue (kernel, whole machine)",
            &|r| r.listen_overflows.map_or("-".into(), |n| n.to_string()),
        ),
        row(runs, "generator max lag, ms", &|r| {
            format!("{:.1}", r.generator_max_lag_ms)
        }),
        row(runs, "run wall time, s", &|r| format!("{:.1}", r.wall_s)),
        row(runs, "load average before (1 / 5 / 15 min)", &|r| {
            r.load_average
                .map_or("-".into(), |[a, b, c]| format!("{a:.2} / {b:.2} / {c:.2}"))
        }),
    ]
}

/// The rows of the watched window ([`crate::window`]), when a run has
/// one.
fn window_rows(runs: &[RunReport]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    if let Some(w) = runs.iter().find_map(|r| r.window.as_ref()) {
        let win = |r: &RunReport, f: &dyn Fn(&WindowReport) -> String| {
            r.window.as_ref().map_or("-".into(), f)
        };
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        let what = &w.what;
        rows.push(row(
            runs,
            &format!("{what}: 2xx within budget / 2xx, of requests"),
            &|r| {
                win(r, &|w| {
                    format!("{} / {} of {}", w.good, w.success, w.requests)
                })
            },
        ));
        rows.push(row(runs, &format!("{what}: refused (by status)"), &|r| {
            win(r, &|w| {
                let mut parts: Vec<String> = w
                    .refused
                    .iter()
                    .map(|(code, n)| format!("{code}: {n}"))
                    .collect();
                for (name, n) in [
                    ("client timeout", w.client_timeouts),
                    ("transport", w.transport),
                    ("not sent", w.not_sent),
                ] {
                    if n > 0 {
                        parts.push(format!("{name}: {n}"));
                    }
                }
                let refused: u64 = w.refused.values().sum();
                if parts.is_empty() {
                    "0".to_owned()
                } else {
                    format!("{refused} ({})", parts.join(", "))
                }
            })
        }));
        rows.push(row(
            runs,
            &format!("{what}: failures' latency p50 / p99, ms"),
            &|r| {
                win(r, &|w| {
                    format!("{} / {}", ms(w.failure_p50_ms), ms(w.failure_p99_ms))
                })
            },
        ));
        rows.push(row(
            runs,
            &format!("{what}: refused, time in checkout's permit queue p50 / p99, ms"),
            &|r| {
                win(r, &|w| {
                    format!(
                        "{} / {}",
                        ms(w.refused_queue_p50_ms),
                        ms(w.refused_queue_p99_ms)
                    )
                })
            },
        ));
        rows.push(row(runs, &format!("{what}: slowest 2xx, ms"), &|r| {
            win(r, &|w| ms(w.slowest_success_ms))
        }));
    }
    rows
}

/// Two rows per class of request, when the runs have classes.
fn class_rows(runs: &[RunReport]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut classes: Vec<&str> = Vec::new();
    for r in runs {
        for c in &r.classes {
            if !classes.contains(&c.class.as_str()) {
                classes.push(&c.class);
            }
        }
    }
    for class in classes {
        let of = |r: &RunReport| r.classes.iter().find(|c| c.class == class).cloned();
        rows.push(row(
            runs,
            &format!("{class}: 2xx (success rate) / good, of requests"),
            &|r| {
                of(r).map_or("-".into(), |c| {
                    format!(
                        "{} ({:.1}%) / {} ({:.1}%) of {}",
                        c.success,
                        c.success_share * 100.0,
                        c.good,
                        c.good_share * 100.0,
                        c.scheduled
                    )
                })
            },
        ));
        rows.push(row(
            runs,
            &format!("{class}: answers after the request's own budget"),
            &|r| of(r).map_or("-".into(), |c| c.late_answers.to_string()),
        ));
    }
    rows
}

/// The per-step table of a ramp: a row per step, a column per run
/// (goodput and p99), and, for the runs that read them, pricing's mean
/// floor and adaptive limit over the step's seconds.
fn ramp_markdown(runs: &[RunReport], first: &RampReport, what: &str) -> String {
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    let mut header = vec!["step (offered load)".to_owned()];
    header.extend(
        runs.iter()
            .map(|r| format!("{} mode: goodput req/s / p99 ms / 5xx", r.mode)),
    );
    type Pick = fn(&ServiceSeries) -> Option<&PerDependency>;
    let floor: Pick = |s| s.learned_floor_ms.as_ref();
    let limit: Pick = |s| s.adaptive_limit.as_ref();
    // (run, what, how it is written) for each column of the services.
    let mut extra: Vec<(&RunReport, Pick, usize)> = Vec::new();
    for r in runs {
        for (pick, what, digits) in [
            (floor, "pricing floor ms (mean)", 0),
            (limit, "pricing adaptive limit (mean)", 1),
        ] {
            if pick(&r.services).is_some_and(|m| m.contains_key(PRICING)) {
                header.push(format!("{} mode: {what}", r.mode));
                extra.push((r, pick, digits));
            }
        }
    }
    table.set_header(header);
    for (i, step) in first.steps.iter().enumerate() {
        let mut cells = vec![format!(
            "{}: {}-{} s, {}{:.0} req/s",
            i + 1,
            step.from_s,
            step.to_s,
            step.factor.map_or(String::new(), |f| format!("{f}x, ")),
            step.rate_per_s
        )];
        cells.extend(runs.iter().map(|r| {
            r.ramp
                .as_ref()
                .and_then(|ramp| ramp.steps.get(i))
                .map_or("-".into(), |s| {
                    format!(
                        "{:.1} / {} / {}",
                        s.goodput_per_s,
                        s.p99_ms.map_or("-".into(), |p| format!("{p:.0}")),
                        s.refused
                    )
                })
        }));
        cells.extend(extra.iter().map(|(r, pick, digits)| {
            ServiceSeries::mean_over(pick(&r.services), PRICING, step.from_s, step.to_s)
                .map_or("-".into(), |v| format!("{v:.digits$}"))
        }));
        table.add_row(cells);
    }
    format!("{what} (by intended send time; 5xx: requests answered 5xx):\n\n{table}\n\n")
}

/// A row per second of the run (by intended send time), a column per run:
/// goodput and p99 latency of the requests due in that second.
fn per_second_markdown(runs: &[RunReport]) -> String {
    let mut table = Table::new();
    table.load_style(ASCII_MARKDOWN);
    let mut header = vec!["second".to_owned()];
    header.extend(
        runs.iter()
            .map(|r| format!("{} mode: goodput / p99 ms", r.mode)),
    );
    table.set_header(header);
    let seconds = runs.iter().map(|r| r.timeline.len()).max().unwrap_or(0);
    for i in 0..seconds {
        let mut cells = vec![i.to_string()];
        cells.extend(runs.iter().map(|r| {
            r.timeline.get(i).map_or("-".into(), |s| {
                format!(
                    "{} / {}",
                    s.good,
                    s.p99_ms.map_or("-".into(), |p| format!("{p:.0}"))
                )
            })
        }));
        table.add_row(cells);
    }
    format!("Per second (by intended send time):\n\n{table}\n\n")
}

/// The dependency whose floor and limit the ramp's table shows.
const PRICING: &str = "pricing";
