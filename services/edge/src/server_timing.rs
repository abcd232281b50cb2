//! One `Server-Timing` header across hops: a downstream hop's metrics, with
//! their names prefixed by the hop, become entries of this hop's ledger.
//!
//! Edge's ledger then reads, in one header, where every millisecond went:
//!
//! ```text
//! budget;dur=2000;desc="ingress", checkout;dur=1210,
//!   checkout.budget;dur=1985;desc="ingress", checkout.inventory;dur=300,
//!   checkout.pricing;dur=250;desc="503", checkout.pricing-wait;dur=200, checkout.pricing;dur=400,
//!   checkout.recommendations;desc="skipped: 820ms < floor 1000ms"
//! ```

use std::time::Duration;

use budget_core::ledger::{
    Entry, Ledger, Metric, parse_server_timing, parse_server_timing_limited,
};

/// The metrics of `server_timing` (a downstream hop's `Server-Timing`
/// value; several header fields joined by `, `) as ledger entries named
/// `{hop}.{name}`, in order. A metric with a duration is kept as a local
/// step (duration and description as they were); one without (a skipped
/// call) as a skip with its description. Rendered back, each metric reads
/// as it came, prefixed. Lenient like the parser: junk is dropped, never
/// an error.
///
/// ```
/// use budget_core::ledger::Ledger;
///
/// let ledger = Ledger::new();
/// for entry in edge::prefixed_metrics("inventory;dur=300, pricing;dur=250;desc=\"503\"", "checkout") {
///     ledger.record(entry);
/// }
/// assert_eq!(
///     ledger.server_timing(),
///     "checkout.inventory;dur=300, checkout.pricing;dur=250;desc=\"503\""
/// );
/// ```
pub fn prefixed_metrics(server_timing: &str, hop: &str) -> Vec<Entry> {
    prefixed(parse_server_timing(server_timing), hop)
}

/// Records a downstream hop's `Server-Timing` in `ledger` as
/// [`prefixed_metrics`] does, bounded: at most the ledger's
/// `max_entries` metrics are read into entries, the rest only counted
/// (into the ledger's `+N more`), so a downstream answering thousands of
/// metrics costs its bytes to scan and no more; the ledger's own bounds
/// then apply to what it renders.
///
/// ```
/// use budget_core::ledger::Ledger;
///
/// let ledger = Ledger::new();
/// let downstream = vec!["x;dur=1"; 10_000].join(", ");
/// edge::record_downstream(&ledger, &downstream, "checkout");
/// let header = ledger.server_timing();
/// assert!(header.len() <= 4096, "{}", header.len());
/// assert!(header.contains("ledger;desc=\"+9936 more\""), "{header}");
/// ```
pub fn record_downstream(ledger: &Ledger, server_timing: &str, hop: &str) {
    let (metrics, more) = parse_server_timing_limited(server_timing, ledger.limits().max_entries);
    for entry in prefixed(metrics, hop) {
        ledger.record(entry);
    }
    if more > 0 {
        ledger.record_dropped(more);
    }
}

/// `metrics` as entries named `{hop}.{name}`.
fn prefixed(metrics: Vec<Metric>, hop: &str) -> Vec<Entry> {
    metrics
        .into_iter()
        .map(|m| {
            let name = format!("{hop}.{}", m.name);
            match m.dur {
                Some(ms) => Entry::local(name, millis(ms), m.desc),
                None => Entry::skip(name, m.desc.unwrap_or_default()),
            }
        })
        .collect()
}

/// A `dur` (milliseconds, finite as parsed) as a duration, to the
/// microsecond; negative is zero, huge saturates.
fn millis(ms: f64) -> Duration {
    // `as` saturates: NaN and negatives give 0, huge values u64::MAX.
    Duration::from_micros((ms * 1000.0).round() as u64)
}

#[cfg(test)]
mod tests {
    use budget_core::ledger::Ledger;

    use super::*;

    fn render(entries: Vec<Entry>) -> String {
        let ledger = Ledger::new();
        for e in entries {
            ledger.record(e);
        }
        ledger.server_timing()
    }

    #[test]
    fn the_contract_example_reads_the_same_with_the_hop_prefixed() {
        let checkout = "budget;dur=2000;desc=\"ingress\", inventory;dur=300, \
             pricing;dur=250;desc=\"503\", pricing-wait;dur=200, pricing;dur=400, \
             recommendations;desc=\"skipped: 850ms < floor 1000ms\"";
        assert_eq!(
            render(prefixed_metrics(checkout, "checkout")),
            "checkout.budget;dur=2000;desc=\"ingress\", checkout.inventory;dur=300, \
             checkout.pricing;dur=250;desc=\"503\", checkout.pricing-wait;dur=200, \
             checkout.pricing;dur=400, \
             checkout.recommendations;desc=\"skipped: 850ms < floor 1000ms\""
        );
    }

    #[test]
    fn fractions_quotes_and_separators_in_descriptions_survive() {
        let value = "db;dur=1.5;desc=\"a, b; \\\"c\\\"\", x;dur=0.1";
        assert_eq!(
            render(prefixed_metrics(value, "checkout")),
            "checkout.db;dur=1.5;desc=\"a, b; \\\"c\\\"\", checkout.x;dur=0.1"
        );
    }

    #[test]
    fn nothing_in_gives_nothing_out_and_junk_is_dropped() {
        assert!(prefixed_metrics("", "checkout").is_empty());
        assert_eq!(
            render(prefixed_metrics(",,;dur=3, a;dur=x", "checkout")),
            "checkout.a;desc=\"\""
        );
        assert_eq!(millis(-1.0), Duration::ZERO);
        assert_eq!(millis(f64::MAX), Duration::from_micros(u64::MAX));
    }
}
