//! The `hang` scenarios' measurements: a dependency that stops answering
//! for a while, and what the chain did meanwhile and after.
//!
//! The healthy chain runs at 20 requests/s (`hang`) or 2 (`hang-slow-rate`),
//! each request with its own budget drawn uniformly from 1.9 to 2.1 s by
//! its index ([`HANG_BUDGETS`]). A quarter into the run (5 s of the
//! default 20 s) the partner's [`HANG_PATH`] stops answering: every call
//! to it is held without an answer until its caller goes away
//! (`PartnerHandle::set_path_hang`), while pricing and recommendations
//! answer as usual. Half the run later (15 s) it answers again; calls held
//! by then stay held until their callers give up. Per mode
//! ([`HangReport`], and the run's [`WindowReport`]):
//!
//! - **failures while it hangs**: of the requests due (by intended send
//!   time) from [`HANG_SETTLE`] after the hang began until it ends, the
//!   failures' p50 and p99 latency (a failure: any answer but a `2xx`, a
//!   client timeout or a connection error). Two seconds in, a chain that
//!   has noticed the hang refuses at once; one that has not waits for its
//!   timeouts;
//! - **calls held at once** on the hung path: the partner's own high-water
//!   mark over the run (it includes the calls made before anything could
//!   notice, a budget's worth of arrivals), and the most held at once once
//!   those are gone: from [`HANG_SETTLE`] plus the largest budget after
//!   the hang began until it ends (every call made before the first
//!   failure came back has met its caller's deadline by then), read from
//!   the partner every [`HELD_SAMPLE_EVERY`]. A breaker that sends at most
//!   one probe at a time shows at most 1 there;
//! - **recovery**: seconds from the end of the hang to the first `2xx`
//!   answer of a request due at or after it (its intended send time plus
//!   its latency), and to the first whole second whose goodput is back to
//!   90 % of before, as the `outage` scenario's
//!   ([`crate::outage::recovery`]).
//!
//! ```
//! use std::time::Duration;
//! use load_tests::hang::watch;
//! use load_tests::outage::OutageWindow;
//!
//! let w = watch(OutageWindow::of_run(Duration::from_secs(20)));
//! assert_eq!((w.from, w.to, w.mark), (Duration::from_secs(7), Duration::from_secs(15), Some(Duration::from_secs(15))));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::outage::{OutageWindow, recovery};
use crate::report::SecondSummary;
use crate::window::{Watch, WindowReport};

/// The path that hangs.
pub const HANG_PATH: &str = "/inventory";

/// The budgets of the hang scenarios: from the first to the second,
/// uniform per request index.
pub const HANG_BUDGETS: (Duration, Duration) =
    (Duration::from_millis(1900), Duration::from_millis(2100));

/// How long after the hang began its failures start to count: time for a
/// chain to notice.
pub const HANG_SETTLE: Duration = Duration::from_secs(2);

/// How often the calls held on the hung path are read during the hang.
pub const HELD_SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// The window whose failures are reported: from [`HANG_SETTLE`] after the
/// hang began (or its end, if that is sooner) until its end; the mark,
/// for the first `2xx` after it, is the end.
pub fn watch(window: OutageWindow) -> Watch {
    Watch {
        what: format!("in the hang, from {} s in", HANG_SETTLE.as_secs()),
        from: window.from.saturating_add(HANG_SETTLE).min(window.to),
        to: window.to,
        mark: Some(window.to),
    }
}

/// From when the calls held at once are read as settled: [`HANG_SETTLE`]
/// plus the largest budget after the hang began.
pub fn settled_from(window: OutageWindow) -> Duration {
    window
        .from
        .saturating_add(HANG_SETTLE)
        .saturating_add(HANG_BUDGETS.1)
}

/// What the chain did while a dependency hung, and after.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HangReport {
    /// The path that hung.
    pub path: String,
    /// The hang began, seconds from the start of the run.
    pub from_s: f64,
    /// It ended.
    pub to_s: f64,
    /// The most calls held at once on the path over the run (the
    /// partner's high-water mark); `None`: the partner could not say.
    pub held_max: Option<u64>,
    /// From when [`settled_held_max`](Self::settled_held_max) is read.
    pub settled_from_s: f64,
    /// The most calls held at once from then until the hang's end
    /// (sampled); `None`: that part of the run is empty (a short run).
    pub settled_held_max: Option<u64>,
    /// Seconds from the hang's end to the first `2xx` of a request due
    /// after it; `None`: none within the run.
    pub first_success_after_s: Option<f64>,
    /// The mean goodput of the whole seconds before the hang.
    pub pre_hang_goodput_per_s: f64,
    /// Seconds from the hang's end to the first whole second with 90 % of
    /// that goodput; `None`: not within the run.
    pub recovered_after_s: Option<f64>,
}

/// The hang report of a run: `window` when the path hung, `held_max` and
/// `settled_held_max` as read from the partner, `watched` the run's
/// window report (for the first `2xx` after the end), `timeline` its
/// per-second summary.
pub fn hang_report(
    window: OutageWindow,
    held_max: Option<u64>,
    settled_held_max: Option<u64>,
    watched: Option<&WindowReport>,
    timeline: &[SecondSummary],
) -> HangReport {
    let (pre, recovered_after_s) = recovery(window, timeline);
    HangReport {
        path: HANG_PATH.to_owned(),
        from_s: window.from.as_secs_f64(),
        to_s: window.to.as_secs_f64(),
        held_max,
        settled_from_s: settled_from(window).as_secs_f64(),
        settled_held_max,
        first_success_after_s: watched.and_then(|w| w.first_success_after_mark_s),
        pre_hang_goodput_per_s: pre,
        recovered_after_s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_takes_recovery_from_the_timeline_and_the_first_2xx_from_the_window() {
        let window = OutageWindow::of_run(Duration::from_secs(8)); // 2 s to 6 s
        let timeline: Vec<SecondSummary> = [2, 2, 0, 0, 0, 0, 1, 2]
            .iter()
            .enumerate()
            .map(|(i, &good)| SecondSummary {
                second: i as u64,
                due: 2,
                good,
                p99_ms: None,
            })
            .collect();
        let watched = WindowReport {
            first_success_after_mark_s: Some(0.4),
            ..WindowReport::default()
        };
        let r = hang_report(window, Some(5), None, Some(&watched), &timeline);
        assert_eq!((r.from_s, r.to_s, r.settled_from_s), (2.0, 6.0, 6.1));
        assert_eq!((r.held_max, r.settled_held_max), (Some(5), None));
        assert_eq!(r.first_success_after_s, Some(0.4));
        assert_eq!(r.pre_hang_goodput_per_s, 2.0);
        // Second 6 has 1 (< 1.8), second 7 has 2.
        assert_eq!(r.recovered_after_s, Some(1.0));
        // The failures' window starts 2 s in; the mark is the end.
        let w = watch(window);
        assert_eq!(
            (w.from, w.to, w.mark),
            (
                Duration::from_secs(4),
                Duration::from_secs(6),
                Some(Duration::from_secs(6))
            )
        );
        // A hang shorter than the settling time: an empty window, not a
        // reversed one.
        let short = watch(OutageWindow {
            from: Duration::from_secs(1),
            to: Duration::from_millis(1500),
        });
        assert_eq!(short.from, short.to);
    }
}
