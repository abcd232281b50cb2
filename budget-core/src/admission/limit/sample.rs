//! What one answer does to an [`AdaptiveLimit`]'s
//! state: the first calls' answers, drops, and the latencies its probes
//! and windows collect.

use std::time::Duration;

use tokio::time::Instant;

use super::state::{Hold, Mean, Phase, Round, State, new_window};
use super::{AdaptiveLimit, PROBE_CONCURRENCY, SLOW_START_EXIT, Sample};

/// What a successful sample ended.
enum Step {
    /// Nothing: the probe or window goes on.
    Continue,
    /// The probe, with this mean latency.
    ProbeDone(Duration),
    /// The window, with what it saw.
    WindowDone(Round),
}

impl AdaptiveLimit {
    /// An answer before the first `min_rtt` (item 1 of the module docs):
    /// it ends the first calls' hold, and the first calls' mean latency
    /// becomes the first `min_rtt` once enough of them have answered.
    pub(super) fn on_first_answer(
        &self,
        state: &mut State,
        now: Instant,
        rtt: Duration,
        in_flight: usize,
        outcome: Sample,
    ) {
        let Phase::Unstarted {
            first,
            answers,
            hold,
        } = &mut state.phase
        else {
            return;
        };
        *answers = answers.saturating_add(1);
        // The first answer ends the hold.
        if !matches!(hold, Hold::Over(_)) {
            *hold = Hold::Over(now);
        }
        if outcome != Sample::Success {
            // A drop cuts the limit already; it teaches no latency.
            let started = now.checked_sub(rtt);
            self.on_drop(state, now, started);
            return;
        }
        // The client's first calls run at the probe's limit until one
        // answers or the hold is over (item 1): they met a partner
        // this client had not queued, and later calls reached it
        // behind them, so the mean
        // of their latencies is the first no-queue latency (the first
        // answer alone is the fastest of a burst, below it). Probes
        // from `probe_interval` on measure it again.
        if in_flight <= self.probe_limit {
            first.add(rtt);
        }
        let done = first.count >= PROBE_CONCURRENCY.min(self.probe_limit)
            || (*answers >= self.config.probe_samples && first.count > 0);
        if done {
            // The first window holds the calls sent since the limit
            // became `initial`: they ran under it, and a partner they
            // queued is seen a round trip sooner than by calls sent
            // from now on.
            let since = match *hold {
                Hold::Over(since) => since,
                Hold::Unarmed | Hold::Until(_) => now,
            };
            state.min_rtt = Some(first.value());
            state.next_probe = self.next_probe_after(now);
            state.phase = new_window(since);
        }
    }

    /// A dropped call: cut the estimate, once per round trip and at most
    /// once per `window`.
    pub(super) fn on_drop(&self, state: &mut State, now: Instant, started: Option<Instant>) {
        let fresh = match (state.last_cut, started) {
            (None, _) => true,
            (Some(cut), Some(started)) => {
                started >= cut && now.saturating_duration_since(cut) >= self.config.window
            }
            (Some(_), None) => false,
        };
        if fresh {
            state.estimate = self.clamp(state.estimate * self.config.drop_factor);
            state.last_cut = Some(now);
        }
        state.slow_start = false;
    }

    /// A call's latency: a probe or window sample.
    pub(super) fn on_latency(
        &self,
        state: &mut State,
        now: Instant,
        rtt: Duration,
        started: Option<Instant>,
        in_flight: usize,
        budget: Option<Duration>,
    ) {
        let limit = self.limit_of(state);
        let step = match &mut state.phase {
            Phase::Unstarted { .. } => Step::Continue,
            Phase::Probing { since, mean } => {
                self.probe_sample(*since, mean, rtt, started, in_flight)
            }
            Phase::Window(window) => {
                let counted = window.add(rtt, started, in_flight, budget);
                // One call of the round queued at the partner ends the
                // slow start at once, as HyStart's delay increase ends
                // TCP's (item 9); the window closes as it would have.
                if counted
                    && state
                        .min_rtt
                        .is_some_and(|min| rtt.as_secs_f64() > min.as_secs_f64() * SLOW_START_EXIT)
                {
                    state.slow_start = false;
                }
                let long_enough = self.window_length(state.min_rtt, state.slow_start);
                let needed = self.config.window_samples.min(limit);
                match window.round(now, long_enough, needed) {
                    Some(round) => Step::WindowDone(round),
                    None => Step::Continue,
                }
            }
        };
        match step {
            Step::Continue => {}
            Step::ProbeDone(min_rtt) => self.end_probe(state, now, min_rtt),
            Step::WindowDone(round) => self.close_window(state, now, &round, limit),
        }
    }

    /// A latency during a probe started at `since`: it counts when its
    /// call started in the probe with at most the probe's limit in
    /// flight, and the probe is done once `probe_samples` have.
    fn probe_sample(
        &self,
        since: Instant,
        mean: &mut Mean,
        rtt: Duration,
        started: Option<Instant>,
        in_flight: usize,
    ) -> Step {
        if started.is_some_and(|s| s >= since) && in_flight <= self.probe_limit {
            mean.add(rtt);
        }
        if mean.count >= self.config.probe_samples {
            Step::ProbeDone(mean.value())
        } else {
            Step::Continue
        }
    }

    /// The shortest a window lasts. In slow start a window is a round
    /// trip, not `window` (item 9): the limit doubles once per round.
    fn window_length(&self, min_rtt: Option<Duration>, slow_start: bool) -> Duration {
        match min_rtt {
            Some(min_rtt) if slow_start => min_rtt.min(self.config.window),
            _ => self.config.window,
        }
    }

    /// A probe measured `min_rtt`: the next one is set, and a window opens.
    fn end_probe(&self, state: &mut State, now: Instant, min_rtt: Duration) {
        state.min_rtt = Some(min_rtt);
        state.floor_windows = 0;
        state.next_probe = self.next_probe_after(now);
        // A knee measured before belongs to the partner as it was.
        state.knee = None;
        state.phase = new_window(now);
    }
}
