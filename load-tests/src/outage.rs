//! The `outage` scenario's measurements: a dependency path that answers
//! an error status for a while, and what the chain did meanwhile.
//!
//! The healthy chain runs at the default rate; a quarter into the run
//! (5 s of the default 20 s) the partner's `/pricing` starts answering
//! `503` to every call (`PartnerHandle::set_path_status`), for half the run
//! (10 s), then recovers. Two numbers per mode ([`OutageReport`]):
//!
//! - **pricing attempts per client request during the outage**: for the
//!   client requests due inside the window (by intended send time), the
//!   partner's `/pricing` calls that carried their `x-request-id` (its
//!   per-id stats, which list each call's path), divided by their number.
//!   A request due just before the window whose pricing call falls in it
//!   is not counted, one due just before its end is counted whole: the
//!   edges blur by one request's latency. The partner remembers its
//!   10 000 most recent ids, more than a 20 s run at the default rate
//!   sends;
//! - **recovery**: the seconds from the end of the outage to the first
//!   whole second (by intended send time) whose goodput is at least
//!   [`RECOVERED_SHARE`] of the mean goodput of the whole seconds before
//!   the outage; `None` when no second of the run gets there.
//!
//! ```
//! use std::time::Duration;
//! use load_tests::outage::OutageWindow;
//!
//! let w = OutageWindow::of_run(Duration::from_secs(20));
//! assert_eq!((w.from, w.to), (Duration::from_secs(5), Duration::from_secs(15)));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use slow_partner::StatsSnapshot;

use crate::report::SecondSummary;

/// The path that fails.
pub const OUTAGE_PATH: &str = "/pricing";

/// The status it answers while it fails.
pub const OUTAGE_STATUS: u16 = 503;

/// The share of its pre-outage goodput at which a second counts as
/// recovered.
pub const RECOVERED_SHARE: f64 = 0.9;

/// When the outage is, as offsets from the start of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutageWindow {
    /// It starts (ms in JSON).
    #[serde(with = "crate::report::millis")]
    pub from: Duration,
    /// It ends.
    #[serde(with = "crate::report::millis")]
    pub to: Duration,
}

impl OutageWindow {
    /// The window of a run sending for `duration`: from a quarter of it for
    /// half of it (5 s to 15 s of 20 s).
    pub fn of_run(duration: Duration) -> Self {
        Self {
            from: duration / 4,
            to: duration / 4 + duration / 2,
        }
    }
}

/// What the chain did during the outage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutageReport {
    /// The failing path.
    pub path: String,
    /// Its status meanwhile.
    pub status: u16,
    /// The window, seconds from the start of the run.
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// Client requests due inside it.
    pub requests: u64,
    /// Their calls to the failing path, by the partner's per-id stats.
    pub pricing_calls: u64,
    /// `pricing_calls / requests`.
    pub pricing_attempts_per_request: f64,
    /// The most calls one of them made.
    pub max_pricing_attempts: u64,
    /// The mean goodput of the whole seconds before the outage.
    pub pre_outage_goodput_per_s: f64,
    /// Seconds from the end of the outage to the first whole second with
    /// at least [`RECOVERED_SHARE`] of that goodput; `None`: not within
    /// the run.
    pub recovered_after_s: Option<f64>,
}

/// The outage report of a run: `offsets` are the run's intended send
/// times by request index, `id_prefix` its `x-request-id` prefix (ids are
/// `{id_prefix}-{index}`), `stats` the partner's after the run, `timeline`
/// the run's per-second summary.
pub fn outage_report(
    window: OutageWindow,
    offsets: &[Duration],
    id_prefix: &str,
    stats: &StatsSnapshot,
    timeline: &[SecondSummary],
) -> OutageReport {
    let inside = |i: usize| {
        offsets
            .get(i)
            .is_some_and(|o| *o >= window.from && *o < window.to)
    };
    let requests = (0..offsets.len()).filter(|&i| inside(i)).count() as u64;
    let mut calls = 0;
    let mut max = 0;
    for (id, s) in &stats.ids {
        let index = id
            .strip_prefix(id_prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<usize>().ok());
        if index.is_some_and(inside) {
            let n = s.calls.iter().filter(|c| c.path == OUTAGE_PATH).count() as u64;
            calls += n;
            max = max.max(n);
        }
    }
    let (pre_level, recovered_after_s) = recovery(window, timeline);
    let to_s = window.to.as_secs_f64();
    OutageReport {
        path: OUTAGE_PATH.to_owned(),
        status: OUTAGE_STATUS,
        from_s: window.from.as_secs_f64(),
        to_s,
        requests,
        pricing_calls: calls,
        pricing_attempts_per_request: if requests == 0 {
            0.0
        } else {
            calls as f64 / requests as f64
        },
        max_pricing_attempts: max,
        pre_outage_goodput_per_s: pre_level,
        recovered_after_s,
    }
}

/// The mean goodput of the whole seconds of `timeline` before `window`,
/// and the seconds from `window`'s end to the first whole second at or
/// after it with at least [`RECOVERED_SHARE`] of that (`None`: no such
/// second, or no goodput before).
///
/// ```
/// use std::time::Duration;
/// use load_tests::outage::{OutageWindow, recovery};
/// use load_tests::report::SecondSummary;
///
/// let timeline: Vec<SecondSummary> = [10, 10, 0, 5, 9].iter().enumerate()
///     .map(|(i, &good)| SecondSummary { second: i as u64, due: 10, good, p99_ms: None })
///     .collect();
/// let w = OutageWindow { from: Duration::from_secs(2), to: Duration::from_secs(3) };
/// assert_eq!(recovery(w, &timeline), (10.0, Some(1.0)));
/// ```
pub fn recovery(window: OutageWindow, timeline: &[SecondSummary]) -> (f64, Option<f64>) {
    let before = window.from.as_secs() as usize;
    let pre: Vec<u64> = timeline.iter().take(before).map(|s| s.good).collect();
    let pre_level = if pre.is_empty() {
        0.0
    } else {
        pre.iter().sum::<u64>() as f64 / pre.len() as f64
    };
    let to_s = window.to.as_secs_f64();
    let recovered_after_s = (pre_level > 0.0)
        .then(|| {
            timeline
                .iter()
                .find(|s| s.second as f64 >= to_s && s.good as f64 >= RECOVERED_SHARE * pre_level)
                .map(|s| s.second as f64 - to_s)
        })
        .flatten();
    (pre_level, recovered_after_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn second(second: u64, good: u64) -> SecondSummary {
        SecondSummary {
            second,
            due: 10,
            good,
            p99_ms: None,
        }
    }

    #[test]
    fn attempts_come_from_the_ids_due_in_the_window_and_recovery_from_the_timeline() {
        let window = OutageWindow::of_run(Duration::from_secs(8)); // 2 s to 6 s
        // One request per second: 0..8.
        let offsets: Vec<Duration> = (0..8).map(Duration::from_secs).collect();
        let call = |path: &str| format!(r#"{{"path":"{path}","attempt":1,"budget_ms":null}}"#);
        let id = |pricing: usize| {
            let mut calls = vec![call("/inventory")];
            calls.extend((0..pricing).map(|_| call("/pricing")));
            format!(
                r#"{{"attempts":{},"calls":[{}]}}"#,
                calls.len(),
                calls.join(",")
            )
        };
        // Requests 2..5 are due in the window: 3, 3, 2 and 1 pricing calls;
        // request 1 (before) made 3, request 7 (after) 1, and an id of
        // another run 3.
        let ids = [
            ("lt-outage-budget-1", id(3)),
            ("lt-outage-budget-2", id(3)),
            ("lt-outage-budget-3", id(3)),
            ("lt-outage-budget-4", id(2)),
            ("lt-outage-budget-5", id(1)),
            ("lt-outage-budget-7", id(1)),
            ("lt-outage-naive-3", id(3)),
        ];
        let ids: Vec<String> = ids.iter().map(|(k, v)| format!(r#""{k}":{v}"#)).collect();
        let stats: StatsSnapshot = serde_json::from_str(&format!(
            r#"{{"requests":0,"answered":{{}},"with_budget":0,"late":0,"abandoned":0,"evicted_ids":0,"ids":{{{}}}}}"#,
            ids.join(",")
        ))
        .unwrap();
        // Goodput 10/s before, 0 during, then 5 and 9 after.
        let timeline: Vec<SecondSummary> = [10, 10, 0, 0, 0, 0, 5, 9]
            .iter()
            .enumerate()
            .map(|(i, &g)| second(i as u64, g))
            .collect();
        let r = outage_report(window, &offsets, "lt-outage-budget", &stats, &timeline);
        assert_eq!(
            (r.requests, r.pricing_calls, r.max_pricing_attempts),
            (4, 9, 3)
        );
        assert_eq!(r.pricing_attempts_per_request, 2.25);
        assert_eq!(r.pre_outage_goodput_per_s, 10.0);
        // Second 6 has 5 (< 9), second 7 has 9 (>= 90 % of 10).
        assert_eq!(r.recovered_after_s, Some(1.0));
        let never: Vec<SecondSummary> = timeline[..7].to_vec();
        let r = outage_report(window, &offsets, "lt-outage-budget", &stats, &never);
        assert_eq!(r.recovered_after_s, None);
    }
}
