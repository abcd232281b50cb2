//! The `spike` scenario's measurement: how long after a spike of load the
//! chain's latency is back where it was.
//!
//! The healthy chain gets half its capacity for 4 s, three times it for
//! 2 s, then half again for 6 s ([`SPIKE_PHASES`](crate::scenarios::spike::SPIKE_PHASES);
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
//! **What had to be refused.** "Nothing refused that its budget covered"
//! needs a reference: the fewest refusals any scheduler could make, one
//! that knew the capacity. [`fewest_refusals`] works it out for the run's
//! steps on a model of the chain ([`BottleneckModel`]): the requests of
//! each step spread evenly over it, one queue in front of the bottleneck's
//! workers (pricing: 8 workers, 50 ms each), first come first served, a
//! request admitted when its wait there fits in what it may wait, refused
//! at once otherwise. With equal budgets first come first served is the
//! earliest deadline first, and admitting whoever still fits refuses the
//! fewest. The report gives two such schedules: each request waiting as
//! long as its whole budget allows (its budget less the chain's mean
//! latency), and waiting at most a standing queue's share of that
//! (`budget_core`'s `DEFAULT_STANDING_SHARE`, a quarter: the rest of the
//! budget stays for the calls after this one), each with the seconds from
//! the spike's end until its queue is empty again.
//!
//! ```
//! use load_tests::spike::back_threshold_ms;
//! assert_eq!(back_threshold_ms(60.0), 70.0);
//! assert_eq!(back_threshold_ms(300.0), 330.0);
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::report::{RampReport, RampStepReport};

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
    /// Requests answered `5xx` among those due from the spike's start to
    /// the end of the run.
    #[serde(default)]
    pub refused_from_spike: u64,
    /// The fewest refusals of a scheduler that knew the capacity, each
    /// request waiting as long as its whole budget allows (`None`: no
    /// model, e.g. budgets that differ).
    #[serde(default)]
    pub whole_budget: Option<Schedule>,
    /// The same, each request waiting at most a standing queue's share of
    /// that.
    #[serde(default)]
    pub standing_share: Option<Schedule>,
}

/// The chain as [`fewest_refusals`] sees it: one queue in front of the
/// bottleneck's workers.
///
/// ```
/// use std::time::Duration;
/// use load_tests::spike::BottleneckModel;
///
/// let m = BottleneckModel::new(8, Duration::from_millis(50), Duration::from_millis(1900));
/// assert_eq!(m.workers, 8);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BottleneckModel {
    /// Workers at the bottleneck.
    pub workers: usize,
    /// How long each call holds one.
    pub service: Duration,
    /// The longest a request may wait for one and still be answered in
    /// its budget.
    pub max_wait: Duration,
}

impl BottleneckModel {
    /// A model of `workers` workers of `service` each, waits of at most
    /// `max_wait`.
    pub fn new(workers: usize, service: Duration, max_wait: Duration) -> Self {
        Self {
            workers,
            service,
            max_wait,
        }
    }
}

/// What one ideal schedule of the run's steps refuses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// The longest a request waits in it, ms.
    pub max_wait_ms: f64,
    /// Requests it refuses, among those due from the spike's start on.
    pub refused: u64,
    /// Seconds from the spike's end until a request is again served
    /// without waiting (`None`: not within the run).
    pub drained_after_s: Option<f64>,
}

/// The fewest refusals of the run's steps on `model`, from the step
/// starting at `from_s` on, and when its queue is empty again after
/// `drained_from_s` (see the module's docs).
///
/// ```
/// use std::time::Duration;
/// use load_tests::report::RampStepReport;
/// use load_tests::spike::{BottleneckModel, fewest_refusals};
///
/// // 2 workers of 100 ms: 20 a second. 40 a second for 1 s, waits of at
/// // most 500 ms: 20 served in the second, 10 more in the 500 ms after.
/// let step = RampStepReport { rate_per_s: 40.0, from_s: 0.0, to_s: 1.0, due: 40, ..Default::default() };
/// let m = BottleneckModel::new(2, Duration::from_millis(100), Duration::from_millis(500));
/// let s = fewest_refusals(&[step], &m, 0.0, 1.0);
/// assert!((9..=11).contains(&s.refused), "{s:?}");
/// ```
pub fn fewest_refusals(
    steps: &[RampStepReport],
    model: &BottleneckModel,
    from_s: f64,
    drained_from_s: f64,
) -> Schedule {
    let service = model.service.as_secs_f64();
    let max_wait = model.max_wait.as_secs_f64();
    // When each worker is next free, seconds from the run's start.
    let mut free = vec![0.0_f64; model.workers.max(1)];
    let mut refused = 0;
    let mut drained_after_s = None;
    for step in steps {
        let span = step.to_s - step.from_s;
        for i in 0..step.due {
            let at = step.from_s + span * i as f64 / step.due as f64;
            // The worker free first (a handful of workers: a scan).
            let Some(earliest) = free.iter_mut().min_by(|a, b| a.total_cmp(b)) else {
                break;
            };
            let start = earliest.max(at);
            if start - at <= max_wait {
                *earliest = start + service;
            } else if at >= from_s {
                refused += 1;
            }
            if drained_after_s.is_none() && at >= drained_from_s && start <= at {
                drained_after_s = Some(at - drained_from_s);
            }
        }
    }
    Schedule {
        max_wait_ms: max_wait * 1000.0,
        refused,
        drained_after_s,
    }
}

/// The spike report of a run with steps (`None` without a step before
/// the largest one), with the two ideal schedules when `model` (the
/// longest wait the whole budget allows) is given.
pub fn spike_report(ramp: &RampReport, model: Option<&BottleneckModel>) -> Option<SpikeReport> {
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
    let refused_from_spike = ramp
        .steps
        .iter()
        .filter(|s| s.from_s >= spike.from_s)
        .map(|s| s.refused)
        .sum();
    let schedule = |m: &BottleneckModel| fewest_refusals(&ramp.steps, m, spike.from_s, spike.to_s);
    let share = |m: &BottleneckModel| BottleneckModel {
        max_wait: m
            .max_wait
            .mul_f64(budget_core::admission::queue::DEFAULT_STANDING_SHARE),
        ..*m
    };
    Some(SpikeReport {
        spike_from_s: spike.from_s,
        spike_to_s: spike.to_s,
        calm_p99_ms: calm.p99_ms,
        back_threshold_ms: threshold,
        p99_back_after_s,
        refused_from_spike,
        whole_budget: model.map(schedule),
        standing_share: model.map(|m| schedule(&share(m))),
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
        let r = spike_report(&ramp, None).unwrap();
        assert_eq!((r.spike_from_s, r.spike_to_s), (4.0, 6.0));
        assert_eq!(
            (r.calm_p99_ms, r.back_threshold_ms),
            (Some(60.0), Some(70.0))
        );
        // Second 8 sent nothing, 9 has 71 ms: second 10 is the first back.
        assert_eq!(r.p99_back_after_s, Some(4.0));
        ramp.series.p99_ms[10] = Some(75.0);
        ramp.series.p99_ms[11] = Some(80.0);
        assert_eq!(spike_report(&ramp, None).unwrap().p99_back_after_s, None);
        // No calm phase before the largest step: no spike report.
        ramp.steps.remove(0);
        assert!(spike_report(&ramp, None).is_none());
    }

    fn due(from_s: f64, to_s: f64, rate: f64) -> RampStepReport {
        RampStepReport {
            rate_per_s: rate,
            from_s,
            to_s,
            due: ((to_s - from_s) * rate).round() as u64,
            ..RampStepReport::default()
        }
    }

    #[test]
    fn the_fewest_refusals_of_the_default_spike_wait_the_whole_budget_or_a_quarter() {
        // 160 a second (8 workers of 50 ms); 80, 480 for 2 s, 80; 2 s
        // budgets less the chain's 100 ms.
        let steps = [
            due(0.0, 4.0, 80.0),
            due(4.0, 6.0, 480.0),
            due(6.0, 12.0, 80.0),
        ];
        let whole = BottleneckModel::new(8, Duration::from_millis(50), Duration::from_millis(1900));
        let w = fewest_refusals(&steps, &whole, 4.0, 6.0);
        // 960 in the spike; 2 s of it and 1.9 s of queue served, the rest
        // refused: 960 - 320 - 304 = 336.
        assert!((330..=340).contains(&w.refused), "{w:?}");
        // 304 queued at the spike's end drain at 160 - 80 a second.
        let drained = w.drained_after_s.unwrap();
        assert!((3.6..=4.0).contains(&drained), "{w:?}");
        let quarter =
            BottleneckModel::new(8, Duration::from_millis(50), Duration::from_millis(475));
        let q = fewest_refusals(&steps, &quarter, 4.0, 6.0);
        assert!((555..=570).contains(&q.refused), "{q:?}");
        assert!(q.drained_after_s.unwrap() < 1.0, "{q:?}");
        // Below the capacity, nothing is refused and nothing waits.
        let calm = fewest_refusals(&[due(0.0, 10.0, 150.0)], &quarter, 0.0, 0.0);
        assert_eq!((calm.refused, calm.drained_after_s), (0, Some(0.0)));
    }

    #[test]
    fn the_spike_report_counts_refusals_from_the_spike_on_and_gives_both_schedules() {
        let mut steps = vec![
            due(0.0, 4.0, 80.0),
            due(4.0, 6.0, 480.0),
            due(6.0, 12.0, 80.0),
        ];
        steps[0].refused = 7;
        steps[1].refused = 500;
        steps[2].refused = 3;
        steps[0].p99_ms = Some(100.0);
        let ramp = RampReport {
            steps,
            ..RampReport::default()
        };
        let whole = BottleneckModel::new(8, Duration::from_millis(50), Duration::from_millis(1900));
        let r = spike_report(&ramp, Some(&whole)).unwrap();
        assert_eq!(r.refused_from_spike, 503);
        let (w, s) = (r.whole_budget.unwrap(), r.standing_share.unwrap());
        assert_eq!(s.max_wait_ms, 475.0);
        assert!(w.refused < s.refused, "{w:?} {s:?}");
        assert!(spike_report(&ramp, None).unwrap().whole_budget.is_none());
    }

    /// A second without a p99, in the table above.
    const NO_P99: f64 = -1.0;
}
