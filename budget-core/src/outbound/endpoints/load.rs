//! An endpoint's load estimate: its peak-sensitive moving average of
//! latency (peak-EWMA, as tower's `PeakEwma` and Linkerd's balancer keep)
//! times its outstanding calls, with failures as a penalty.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How fast a measured latency is forgotten: a sample `DECAY` old weighs
/// `1/e` of a new one, and an endpoint with no answers for `DECAY` is
/// estimated at `1/e` of its last latency. Three seconds: a steady stream
/// of answers (one every few milliseconds under load) averages many of
/// them, and a replica that was slow is trusted back over a few seconds,
/// not at its first fast answer: slowness comes back (a collection, a
/// noisy neighbour, a replica about to fail), and calls sent to a replica
/// that relapses wait for their hedge. (Linkerd's balancer forgets over
/// 10 s.) Calls still go back to such a replica as soon as the others
/// queue: the load is the estimate times the calls in flight.
pub(crate) const DECAY: Duration = Duration::from_secs(3);

/// How fast a failure's penalty is forgotten, in the sense of [`DECAY`]:
/// one second.
/// A failure's penalty is a guess, not a measurement (a replica that
/// refused or reset may be back a moment later), so a failed replica is
/// asked again within a few seconds, and its first answer replaces the
/// penalty: a restarted replica takes its share again at once. A replica
/// outrun by a hedge ([`PeakEwma::outrun`]) was slow, not gone: its
/// penalty is forgotten at the pace of a latency, [`DECAY`], and its
/// answers bring it down at that pace too, as a slow answer's.
pub(crate) const PENALTY_DECAY: Duration = Duration::from_secs(1);

/// The most a failure can raise the estimate to: failures double it (a
/// replica that refuses, resets or answers `5xx` at once must not look
/// fast), up to this.
pub(crate) const MAX_PENALTY: Duration = Duration::from_secs(30);

/// The estimate a failure raises an endpoint with no estimate yet to.
pub(crate) const FIRST_PENALTY: Duration = Duration::from_millis(100);

/// A peak-EWMA latency estimate.
#[derive(Debug)]
pub(crate) struct PeakEwma {
    state: Mutex<State>,
}

#[derive(Clone, Copy, Debug)]
struct State {
    /// The estimate in nanoseconds at `at`; `None` before the first sample
    /// (a cold endpoint, taken as the fastest of the others).
    nanos: Option<f64>,
    at: Instant,
    /// The estimate is a penalty, not a latency: which.
    penalty: Option<Penalty>,
}

/// Why an estimate is a penalty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Penalty {
    /// A failure: no connection, a reset, a `5xx`, a `429`.
    Failed,
    /// An attempt outrun by a hedge to another replica.
    Outrun,
}

impl PeakEwma {
    /// A cold estimate.
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                nanos: None,
                at: Instant::now(),
                penalty: None,
            }),
        }
    }

    /// The estimate now (decayed toward zero since the last sample);
    /// `None` while cold.
    pub(crate) fn estimate(&self, now: Instant) -> Option<Duration> {
        let state = *self.lock();
        state
            .nanos
            .map(|nanos| nanos_to_duration(nanos * state.decay(now)))
    }

    /// An answer that took `rtt`: above the estimate it becomes the
    /// estimate at once (the peak), below it is averaged in by how long
    /// since the last sample. After failures it is the estimate: the
    /// penalty kept a failing replica from looking fast, and an answer
    /// shows what it costs now (a restarted replica takes its share again
    /// at its first answers, not once the penalty has decayed). After an
    /// attempt outrun by a hedge it is averaged in, as after a slow
    /// answer: the replica was slow, and one fast answer says it may be
    /// fast again, not that it is (slowness comes back; a replica given
    /// its share again at its first fast answer after a slow spell takes
    /// that share of the calls into its next fault: `BENCHMARKS.md`,
    /// "Replicas").
    pub(crate) fn observe(&self, rtt: Duration, now: Instant) {
        let mut state = self.lock();
        let rtt = rtt.as_nanos() as f64;
        let next = match state.nanos {
            Some(_) if state.penalty == Some(Penalty::Failed) => rtt,
            // A latency, or a replica outrun by hedges: averaged in.
            Some(old) => {
                // The old estimate as it stands now, already weighed by
                // its age: the new sample gets the weight the age took.
                let decay = state.decay(now);
                let old = old * decay;
                if rtt > old {
                    rtt
                } else {
                    old + rtt * (1.0 - decay)
                }
            }
            None => rtt,
        };
        *state = State {
            nanos: Some(next),
            at: now,
            penalty: None,
        };
    }

    /// An attempt that timed out after `rtt`: the latency was at least
    /// that, so the estimate rises to it, and is not lowered.
    pub(crate) fn at_least(&self, rtt: Duration, now: Instant) {
        let mut state = self.lock();
        let old = state.nanos.map_or(0.0, |old| old * state.decay(now));
        *state = State {
            nanos: Some(old.max(rtt.as_nanos() as f64)),
            at: now,
            penalty: state.penalty,
        };
    }

    /// A failure that took `rtt`: the estimate doubles (at least to
    /// `rtt` and [`FIRST_PENALTY`], at most [`MAX_PENALTY`]), and is
    /// forgotten at [`PENALTY_DECAY`].
    pub(crate) fn penalize(&self, rtt: Duration, now: Instant) {
        self.double(rtt, now, Penalty::Failed);
    }

    /// An attempt that ran `rtt` and was outrun by a hedge to another
    /// replica: the estimate doubles as for a failure (or a replica whose
    /// slow calls are all cut short by hedges would look as fast as the
    /// hedge delay), and is forgotten at [`DECAY`], as the slow latency it
    /// stands for.
    pub(crate) fn outrun(&self, rtt: Duration, now: Instant) {
        self.double(rtt, now, Penalty::Outrun);
    }

    fn double(&self, rtt: Duration, now: Instant, why: Penalty) {
        let mut state = self.lock();
        let old = state.nanos.map_or(0.0, |old| old * state.decay(now));
        let next = (old * 2.0)
            .max(rtt.as_nanos() as f64)
            .max(FIRST_PENALTY.as_nanos() as f64)
            .min(MAX_PENALTY.as_nanos() as f64);
        *state = State {
            nanos: Some(next),
            at: now,
            penalty: Some(why),
        };
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock holds a plain number: still good.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    /// The weight left to the estimate now: [`PENALTY_DECAY`] for a
    /// failure's penalty, [`DECAY`] for a latency or a replica outrun.
    fn decay(&self, now: Instant) -> f64 {
        let period = match self.penalty {
            Some(Penalty::Failed) => PENALTY_DECAY,
            Some(Penalty::Outrun) | None => DECAY,
        };
        let age = now.saturating_duration_since(self.at);
        (-(age.as_secs_f64() / period.as_secs_f64())).exp()
    }
}

fn nanos_to_duration(nanos: f64) -> Duration {
    // Finite and non-negative by construction; saturates past u64 nanos.
    Duration::from_nanos(nanos.clamp(0.0, u64::MAX as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[tokio::test(start_paused = true)]
    async fn a_cold_estimate_is_none_and_the_first_answer_is_the_estimate() {
        let load = PeakEwma::new();
        assert_eq!(load.estimate(Instant::now()), None);
        load.observe(ms(40), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(40)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_answer_is_taken_at_once_and_fast_ones_bring_it_down_slowly() {
        let load = PeakEwma::new();
        load.observe(ms(50), Instant::now());
        load.observe(ms(500), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(500)));
        for _ in 0..10 {
            tokio::time::advance(ms(10)).await;
            load.observe(ms(50), Instant::now());
        }
        let now = load.estimate(Instant::now()).unwrap();
        assert!(now > ms(100) && now < ms(500), "{now:?}");
    }

    /// Answers of one latency, one every few milliseconds (a loaded
    /// replica), keep the estimate at that latency.
    #[tokio::test(start_paused = true)]
    async fn a_steady_latency_is_its_own_estimate() {
        let load = PeakEwma::new();
        load.observe(ms(50), Instant::now());
        for _ in 0..1000 {
            tokio::time::advance(ms(3)).await;
            load.observe(ms(50), Instant::now());
        }
        let now = load.estimate(Instant::now()).unwrap();
        assert!(now > ms(49) && now <= ms(50), "{now:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_estimate_decays_by_e_per_decay_period() {
        let load = PeakEwma::new();
        load.observe(ms(1000), Instant::now());
        tokio::time::advance(DECAY).await;
        let after = load.estimate(Instant::now()).unwrap();
        assert!(after > ms(367) && after < ms(369), "{after:?}");
    }

    /// A failure's penalty is a guess and is forgotten three times as
    /// fast as a measured latency or a replica outrun by a hedge: after one
    /// [`PENALTY_DECAY`] the failure's is at `1/e`, the others of the same
    /// size still well above it.
    #[tokio::test(start_paused = true)]
    async fn a_failure_is_forgotten_faster_than_a_slow_latency_or_an_outrun_attempt() {
        let (failed, slow, outrun) = (PeakEwma::new(), PeakEwma::new(), PeakEwma::new());
        failed.penalize(ms(1000), Instant::now());
        slow.observe(ms(1000), Instant::now());
        outrun.outrun(ms(1000), Instant::now());
        tokio::time::advance(PENALTY_DECAY).await;
        let now = Instant::now();
        let failed = failed.estimate(now).unwrap();
        assert!(failed > ms(367) && failed < ms(369), "{failed:?}");
        for kept in [slow.estimate(now).unwrap(), outrun.estimate(now).unwrap()] {
            assert!(kept > ms(716) && kept < ms(717), "{kept:?}");
        }
    }

    /// An outrun replica's penalty doubles as a failed one's.
    #[tokio::test(start_paused = true)]
    async fn an_outrun_replica_doubles() {
        let load = PeakEwma::new();
        load.observe(ms(50), Instant::now());
        load.outrun(ms(60), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(100)));
        load.outrun(ms(60), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(200)));
    }

    /// A replica outrun by hedges and then answering fast is trusted back
    /// over [`DECAY`], as a slow one: its first fast answer does not make
    /// it look fast, and a steady stream of them brings the estimate down
    /// by `e` per period. A failed replica's first answer is its estimate.
    #[tokio::test(start_paused = true)]
    async fn after_an_outrun_fast_answers_are_averaged_in_and_after_a_failure_replace_it() {
        let (outrun, failed) = (PeakEwma::new(), PeakEwma::new());
        for load in [&outrun, &failed] {
            load.observe(ms(50), Instant::now());
        }
        for _ in 0..3 {
            outrun.outrun(ms(60), Instant::now());
            failed.penalize(ms(60), Instant::now());
        }
        tokio::time::advance(ms(10)).await;
        outrun.observe(ms(40), Instant::now());
        failed.observe(ms(40), Instant::now());
        assert_eq!(failed.estimate(Instant::now()), Some(ms(40)));
        let first = outrun.estimate(Instant::now()).unwrap();
        assert!(first > ms(390) && first < ms(400), "{first:?}");
        // Answers of 40 ms every 10 ms for one DECAY: 40 + 360/e.
        for _ in 0..DECAY.as_millis() / 10 {
            tokio::time::advance(ms(10)).await;
            outrun.observe(ms(40), Instant::now());
        }
        let later = outrun.estimate(Instant::now()).unwrap();
        assert!(later > ms(170) && later < ms(175), "{later:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_raises_the_estimate_to_its_length_and_never_lowers_it() {
        let load = PeakEwma::new();
        load.observe(ms(100), Instant::now());
        load.at_least(ms(30), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(100)));
        load.at_least(ms(800), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(800)));
    }

    #[tokio::test(start_paused = true)]
    async fn failures_double_the_estimate_up_to_the_cap() {
        let load = PeakEwma::new();
        load.penalize(Duration::ZERO, Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(FIRST_PENALTY));
        load.penalize(Duration::ZERO, Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(200)));
        for _ in 0..20 {
            load.penalize(Duration::ZERO, Instant::now());
        }
        assert_eq!(load.estimate(Instant::now()), Some(MAX_PENALTY));
    }

    /// A replica back from failures is what its first answer says, and
    /// averages as before from then on.
    #[tokio::test(start_paused = true)]
    async fn an_answer_after_failures_replaces_the_penalty() {
        let load = PeakEwma::new();
        load.observe(ms(50), Instant::now());
        for _ in 0..6 {
            load.penalize(ms(1), Instant::now());
        }
        assert_eq!(load.estimate(Instant::now()), Some(ms(3200)));
        // A timeout keeps it a penalty.
        load.at_least(ms(250), Instant::now());
        load.observe(ms(60), Instant::now());
        assert_eq!(load.estimate(Instant::now()), Some(ms(60)));
        tokio::time::advance(ms(10)).await;
        load.observe(ms(40), Instant::now());
        let now = load.estimate(Instant::now()).unwrap();
        assert!(now > ms(55) && now < ms(60), "{now:?}");
    }
}
