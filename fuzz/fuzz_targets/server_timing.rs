//! `Server-Timing`: `budget_core::ledger::parse_server_timing` (and its
//! bounded form `parse_server_timing_limited`), edge's
//! `edge::prefixed_metrics`, which turns a downstream hop's metrics into
//! entries of this hop's ledger, and `edge::record_downstream`, which does so
//! within the ledger's bounds.
//!
//! Input: the whole input, when UTF-8, is the header value.
//!
//! What must hold for any input:
//! - no panic;
//! - every parsed metric has a name: not empty, trimmed, without `,` or `;`;
//!   a `dur` is finite;
//! - the bounded parser keeps the first `limit` metrics of the unbounded one
//!   and counts the rest;
//! - `prefixed_metrics` keeps every metric, in order, named `checkout.NAME`;
//! - an unbounded ledger of them renders a valid header value, which parses
//!   back to as many metrics, each still prefixed;
//! - one more hop reads the same: the rendered value, prefixed again,
//!   renders the same metrics (each name with one more `checkout.`, the same
//!   description, the same duration for any duration below 10^9 ms);
//! - a default (bounded) ledger filled by `record_downstream` renders a
//!   valid header value of at most `DEFAULT_MAX_BYTES`, the same as the
//!   unbounded one when that fits, else with a `ledger;desc="+N more"`.

#![no_main]

use budget_core::ledger::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_ENTRIES, DROPPED_METRIC, Ledger, LedgerLimits, Metric,
    parse_server_timing, parse_server_timing_limited,
};
use libfuzzer_sys::fuzz_target;

const HOP: &str = "checkout";

/// Below this many milliseconds a duration survives rendering (tenths of a
/// millisecond) and parsing (an `f64`) exactly.
const EXACT_MS: f64 = 1e9;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    let metrics = parse_server_timing(value);
    for m in &metrics {
        assert!(!m.name.is_empty(), "{value:?}");
        assert_eq!(m.name, m.name.trim(), "{value:?}");
        assert!(!m.name.contains([',', ';']), "{value:?}: {m:?}");
        assert!(m.dur.is_none_or(f64::is_finite), "{value:?}: {m:?}");
    }

    for limit in [0, 1, 3, DEFAULT_MAX_ENTRIES] {
        let (kept, more) = parse_server_timing_limited(value, limit);
        assert_eq!(kept, metrics[..limit.min(metrics.len())], "{value:?}");
        assert_eq!(kept.len() + more, metrics.len(), "{value:?}");
    }

    let entries = edge::prefixed_metrics(value, HOP);
    assert_eq!(entries.len(), metrics.len(), "{value:?}");
    let once = render(entries);
    assert!(
        http::HeaderValue::from_str(&once).is_ok(),
        "{value:?} rendered as {once:?}"
    );
    let reread = parse_server_timing(&once);
    assert_eq!(
        reread.len(),
        metrics.len(),
        "{value:?} rendered as {once:?}"
    );
    for m in &reread {
        assert!(m.name.starts_with("checkout."), "{once:?}: {m:?}");
    }

    let twice = parse_server_timing(&render(edge::prefixed_metrics(&once, HOP)));
    assert_eq!(twice.len(), reread.len());
    for (first, second) in reread.iter().zip(&twice) {
        assert_same_metric(first, second, &once);
    }

    let bounded = Ledger::new();
    edge::record_downstream(&bounded, value, HOP);
    let header = bounded.server_timing();
    assert!(
        header.len() <= DEFAULT_MAX_BYTES,
        "{value:?}: {}",
        header.len()
    );
    assert!(http::HeaderValue::from_str(&header).is_ok(), "{header:?}");
    if metrics.len() <= DEFAULT_MAX_ENTRIES && once.len() <= DEFAULT_MAX_BYTES {
        assert_eq!(header, once, "{value:?}");
    } else {
        let dropped = format!("{DROPPED_METRIC};desc=\"+");
        assert!(header.contains(&dropped), "{value:?}: {header:?}");
    }
});

/// An unbounded ledger of `entries`, as its `Server-Timing` value.
fn render(entries: Vec<budget_core::ledger::Entry>) -> String {
    let ledger = Ledger::with_limits(LedgerLimits {
        max_entries: usize::MAX,
        max_bytes: usize::MAX,
    });
    for entry in entries {
        ledger.record(entry);
    }
    ledger.server_timing()
}

/// `second` is `first` read through one more hop.
fn assert_same_metric(first: &Metric, second: &Metric, once: &str) {
    assert_eq!(second.name, format!("{HOP}.{}", first.name), "{once:?}");
    assert_eq!(second.desc, first.desc, "{once:?}");
    match (first.dur, second.dur) {
        (Some(a), Some(b)) if a < EXACT_MS => assert_eq!(a, b, "{once:?}"),
        (Some(_), Some(_)) => {}
        (a, b) => assert_eq!(a, b, "{once:?}"),
    }
}
