//! The `spike` scenario's measurement: how long after a spike of load the
//! chain's latency is back where it was.
//!
//! The healthy chain gets half its capacity for 4 s, three times it for
//! 2 s, then half again for 6 s ([`SPIKE_PHASES`](crate::scenario::SPIKE_PHASES);
//! a given `--duration` is split in the same proportions), every request
//! with the plan's budget (`--budget`, 2 s). Per phase the report has
//! goodput, p99 and the requests refused (`5xx`), per second goodput and
//! p99 (the `ramp` scenario's per-step and per-second report), and:
//!
//! - **the calm level**: the p99 latency of the requests due in the calm
//!   phase right before the spike (the phase before the one with the
//!   largest rate);
//! - **p99 back after**: the seconds from the spike's end to the start of
//!   the first whole second at or after it (by intended send time) whose
//!   p99 is within [`BACK_SHARE`] or [`BACK_MS`] of the calm level,
//!   whichever is larger: `p99 <= calm + max(0.1 * calm, 10 ms)`; `0` when
//!   the first second after the spike is already there, `None` when no
//!   second of the run gets there. A second in which nothing was sent has
//!   no p99 and does not count.
//!
//! p99 is over every request sent, failures included: a chain that
//! refuses fast keeps its p99 low and loses goodput, so read the two
//! together.
//!
//! ```
//! use load_tests::spike::back_threshold_ms;
//! assert_eq!(back_threshold_ms(60.0), 70.0);
//! assert_eq!(back_threshold_ms(300.0), 330.0);
//! ```

use serde::{Deserialize, Serialize};

use crate::report::RampReport;

/// The share of the calm p99 a second's p99 may exceed it by and count as
/// back.
pub const BACK_SHARE: f64 = 0.1;

/// The milliseconds a second's p99 may exceed the calm p99 by and count
/// as back, when that is more than [`BACK_SHARE`] of it.
pub const BACK_MS: f64 = 10.0;

/// The largest p99 that counts as back to a calm p99 of `calm_ms`.
pub fn back_threshold_ms(calm_ms: f64) -> f64 {
    calm_ms + (calm_ms * BACK_SHARE).max(BACK_MS)
}

/// How the chain came back after the spike.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpikeReport {
    /// The spike began, seconds from the start of the run.
    pub spike_from_s: f64,
    /// It ended.
    pub spike_to_s: f64,
    /// The p99 of the calm phase before it, ms (`None`: nothing sent).
    pub calm_p99_ms: Option<f64>,
    /// The largest per-second p99 that counts as back, ms.
    pub back_threshold_ms: Option<f64>,
    /// Seconds from the spike's end to the first whole second back; `None`:
    /// not within the run.
    pub p99_back_after_s: Option<f64>,
}

/// The spike report of a run with steps (`None` without a step before
/// the largest one).
pub fn spike_report(ramp: &RampReport) -> Option<SpikeReport> {
    let spike = ramp
        .steps
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.rate_per_s.total_cmp(&b.1.rate_per_s))
        .map(|(i, _)| i)?;
    let calm = ramp.steps.get(spike.checked_sub(1)?)?;
    let spike = &ramp.steps[spike];
    let threshold = calm.p99_ms.map(back_threshold_ms);
    let p99_back_after_s = threshold.and_then(|limit| {
        ramp.series
            .second
            .iter()
            .zip(&ramp.series.p99_ms)
            .find(|(second, p99)| **second as f64 >= spike.to_s && p99.is_some_and(|p| p <= limit))
            .map(|(second, _)| *second as f64 - spike.to_s)
    });
    Some(SpikeReport {
        spike_from_s: spike.from_s,
        spike_to_s: spike.to_s,
        calm_p99_ms: calm.p99_ms,
        back_threshold_ms: threshold,
        p99_back_after_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{RampSeries, RampStepReport};

    fn step(from_s: f64, to_s: f64, rate: f64, p99: f64) -> RampStepReport {
        RampStepReport {
            rate_per_s: rate,
            from_s,
            to_s,
            p99_ms: Some(p99),
            ..RampStepReport::default()
        }
    }

    #[test]
    fn p99_is_back_at_the_first_second_after_the_spike_within_the_tolerance() {
        let mut ramp = RampReport {
            steps: vec![
                step(0.0, 4.0, 80.0, 60.0),
                step(4.0, 6.0, 480.0, 900.0),
                step(6.0, 12.0, 80.0, 200.0),
            ],
            series: RampSeries {
                second: (0..12).collect(),
                // Calm 60 ms; the threshold is 70 ms (10 ms > 10 %).
                p99_ms: [
                    60., 61., 59., 60., 500., 900., 400., 120., NO_P99, 71., 69., 60.,
                ]
                .iter()
                .map(|&p| (p >= 0.0).then_some(p))
                .collect(),
                ..RampSeries::default()
            },
        };
        let r = spike_report(&ramp).unwrap();
        assert_eq!((r.spike_from_s, r.spike_to_s), (4.0, 6.0));
        assert_eq!(
            (r.calm_p99_ms, r.back_threshold_ms),
            (Some(60.0), Some(70.0))
        );
        // Second 8 sent nothing, 9 has 71 ms: second 10 is the first back.
        assert_eq!(r.p99_back_after_s, Some(4.0));
        ramp.series.p99_ms[10] = Some(75.0);
        ramp.series.p99_ms[11] = Some(80.0);
        assert_eq!(spike_report(&ramp).unwrap().p99_back_after_s, None);
        // No calm phase before the largest step: no spike report.
        ramp.steps.remove(0);
        assert!(spike_report(&ramp).is_none());
    }

    /// A second without a p99, in the table above.
    const NO_P99: f64 = -1.0;
}
