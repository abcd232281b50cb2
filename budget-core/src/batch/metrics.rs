//! The uploader's metric names and their recording, through the
//! `metrics` facade (feature `metrics`; without it the recording compiles
//! to nothing). Named in the style of
//! [`telemetry::semconv`](crate::telemetry::semconv), labelled by the
//! dependency's name ([`LABEL_DEPENDENCY`](crate::telemetry::semconv::LABEL_DEPENDENCY)).

/// Gauge: items held by an uploader (queued, being sent, set aside).
pub const METRIC_BATCH_QUEUED_ITEMS: &str = "budget_batch_queued_items";
/// Gauge: bytes held by an uploader.
pub const METRIC_BATCH_QUEUED_BYTES: &str = "budget_batch_queued_bytes";
/// Counter: batches acknowledged by the server.
pub const METRIC_BATCH_SENT_TOTAL: &str = "budget_batch_sent_total";
/// Counter: items in acknowledged batches.
pub const METRIC_BATCH_ITEMS_SENT_TOTAL: &str = "budget_batch_items_sent_total";
/// Counter: sends of a batch after its first.
pub const METRIC_BATCH_RETRIES_TOTAL: &str = "budget_batch_retries_total";
/// Counter: items dropped by the overflow policy; label
/// [`LABEL_POLICY`] (`drop_oldest`, `drop_newest`).
pub const METRIC_BATCH_DROPPED_ITEMS_TOTAL: &str = "budget_batch_dropped_items_total";
/// Counter: pushes refused; label [`LABEL_REASON`](crate::telemetry::semconv::LABEL_REASON)
/// (`full`, `too_large`).
pub const METRIC_BATCH_REJECTED_PUSHES_TOTAL: &str = "budget_batch_rejected_pushes_total";
/// Counter: batches set aside (the server refused them as bad).
pub const METRIC_BATCH_SET_ASIDE_TOTAL: &str = "budget_batch_set_aside_total";
/// Counter: sends made as the half-open breaker's probe.
pub const METRIC_BATCH_PROBES_TOTAL: &str = "budget_batch_probes_total";
/// Metric label: the overflow policy that dropped items.
pub const LABEL_POLICY: &str = "policy";

use std::sync::Arc;

use super::report::Stats;

/// Records the change between two snapshots of an uploader's stats.
#[cfg(feature = "metrics")]
pub(crate) fn record(dependency: &Arc<str>, policy: &'static str, before: &Stats, after: &Stats) {
    use crate::telemetry::semconv::LABEL_DEPENDENCY;
    let dep = || Arc::clone(dependency);
    let delta = |a: u64, b: u64| b.saturating_sub(a);
    metrics::gauge!(METRIC_BATCH_QUEUED_ITEMS, LABEL_DEPENDENCY => dep())
        .set(after.queued_items as f64);
    metrics::gauge!(METRIC_BATCH_QUEUED_BYTES, LABEL_DEPENDENCY => dep())
        .set(after.queued_bytes as f64);
    let counters = [
        (
            METRIC_BATCH_SENT_TOTAL,
            delta(before.batches_sent, after.batches_sent),
        ),
        (
            METRIC_BATCH_ITEMS_SENT_TOTAL,
            delta(before.items_sent, after.items_sent),
        ),
        (
            METRIC_BATCH_RETRIES_TOTAL,
            delta(before.retries, after.retries),
        ),
        (
            METRIC_BATCH_SET_ASIDE_TOTAL,
            delta(before.set_aside_batches, after.set_aside_batches),
        ),
        (
            METRIC_BATCH_PROBES_TOTAL,
            delta(before.probes, after.probes),
        ),
    ];
    for (name, n) in counters.into_iter().filter(|(_, n)| *n > 0) {
        metrics::counter!(name, LABEL_DEPENDENCY => dep()).increment(n);
    }
    let dropped = delta(before.dropped_items, after.dropped_items);
    if dropped > 0 {
        metrics::counter!(METRIC_BATCH_DROPPED_ITEMS_TOTAL, LABEL_DEPENDENCY => dep(), LABEL_POLICY => policy)
            .increment(dropped);
    }
}

/// Without the `metrics` feature: nothing.
#[cfg(not(feature = "metrics"))]
pub(crate) fn record(_: &Arc<str>, _: &'static str, _: &Stats, _: &Stats) {}

/// Records a refused push (`full` or `too_large`).
#[cfg(feature = "metrics")]
pub(crate) fn rejected(dependency: &Arc<str>, reason: &'static str) {
    use crate::telemetry::semconv::{LABEL_DEPENDENCY, LABEL_REASON};
    metrics::counter!(METRIC_BATCH_REJECTED_PUSHES_TOTAL, LABEL_DEPENDENCY => Arc::clone(dependency), LABEL_REASON => reason)
        .increment(1);
}

/// Without the `metrics` feature: nothing.
#[cfg(not(feature = "metrics"))]
pub(crate) fn rejected(_: &Arc<str>, _: &'static str) {}
