//! `GET /metrics`: the partner's own counts in the Prometheus text format,
//! read from the same figures as `GET /stats` (so `POST /stats/reset` resets
//! them too; Prometheus' `rate()` reads a reset as a counter restart).
//!
//! | series | type | what |
//! | --- | --- | --- |
//! | `partner_requests_total` | counter | work requests received (reserved paths not counted) |
//! | `partner_answers_total{status}` | counter | answers by status |
//! | `partner_with_budget_total` | counter | requests that arrived with a valid budget header |
//! | `partner_late_total` | counter | work that finished after its caller's budget ran out |
//! | `partner_abandoned_total` | counter | requests whose caller went away before the work was done |
//! | `partner_path_workers{path}` | gauge | a limited path's workers |
//! | `partner_path_in_work{path}`, `partner_path_queued{path}` | gauge | its calls at work and waiting now |
//! | `partner_path_queue_wait_seconds_sum{path}`, `_count` | counter | the answered calls' queue waits |
//!
//! Label values are bounded: statuses are `200..=599`, paths those with a
//! worker pool (at most [`MAX_WORKER_POOLS`](crate::MAX_WORKER_POOLS)).

use std::fmt::Write as _;

use crate::{PathWorkers, StatsSnapshot};

/// The text-format content type.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `stats` as Prometheus text.
pub(crate) fn render(stats: &StatsSnapshot) -> String {
    let mut text = String::with_capacity(2048);
    write_family(
        &mut text,
        "partner_requests_total",
        "counter",
        "Work requests the partner received (reserved paths not counted).",
    );
    let _ = writeln!(text, "partner_requests_total {}", stats.requests);
    write_family(
        &mut text,
        "partner_answers_total",
        "counter",
        "Answers by status.",
    );
    for (status, count) in &stats.answered {
        let _ = writeln!(text, "partner_answers_total{{status=\"{status}\"}} {count}");
    }
    for (name, help, value) in [
        (
            "partner_with_budget_total",
            "Requests that arrived with a valid budget header.",
            stats.with_budget,
        ),
        (
            "partner_late_total",
            "Work that finished after its caller's budget ran out.",
            stats.late,
        ),
        (
            "partner_abandoned_total",
            "Requests whose caller went away before the work was done.",
            stats.abandoned,
        ),
    ] {
        write_family(&mut text, name, "counter", help);
        let _ = writeln!(text, "{name} {value}");
    }
    if !stats.paths.is_empty() {
        let gauges: [Gauge; 3] = [
            ("partner_path_workers", "A limited path's workers.", |p| {
                p.workers as u64
            }),
            (
                "partner_path_in_work",
                "A limited path's calls at work now.",
                |p| p.in_work,
            ),
            (
                "partner_path_queued",
                "A limited path's calls waiting for a worker now.",
                |p| p.queued,
            ),
        ];
        for (name, help, value) in gauges {
            write_family(&mut text, name, "gauge", help);
            for (path, p) in &stats.paths {
                let _ = writeln!(text, "{name}{{path=\"{}\"}} {}", escape(path), value(p));
            }
        }
        write_family(
            &mut text,
            "partner_path_queue_wait_seconds",
            "summary",
            "The queue waits of a limited path's answered calls.",
        );
        for (path, p) in &stats.paths {
            let path = escape(path);
            let sum = p.queue_wait_ms.sum as f64 / 1000.0;
            let _ = writeln!(
                text,
                "partner_path_queue_wait_seconds_sum{{path=\"{path}\"}} {sum}"
            );
            let _ = writeln!(
                text,
                "partner_path_queue_wait_seconds_count{{path=\"{path}\"}} {}",
                p.queue_wait_ms.count
            );
        }
    }
    text
}

/// A per-path gauge: its name, help text and value.
type Gauge = (&'static str, &'static str, fn(&PathWorkers) -> u64);

fn write_family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
