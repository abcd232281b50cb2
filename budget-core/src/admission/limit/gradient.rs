//! The gradient step at the end of a sample window (items 3 to 6, 8 and 9
//! of the module docs), one controller rule to a function.

use std::time::Duration;

use tokio::time::Instant;

use super::state::{Mean, Phase, Round, State, new_window};
use super::{AdaptiveLimit, FLOOR_WINDOWS, KNEE_WEIGHT, MAX_GRADIENT, MIN_GRADIENT, SLACK_SHARE};

/// A closed window read against `min_rtt`, in seconds.
#[derive(Clone, Copy)]
struct Reading {
    /// The no-queue latency.
    min_rtt: f64,
    /// The window's mean latency.
    mean: f64,
    /// `min_rtt * (1 + buffer) / mean`, before its clamp.
    raw: f64,
    /// The mean was above `min_rtt * (1 + buffer)`: the window saw a queue.
    queued: bool,
    /// One of its answers started with the whole limit in flight.
    used_limit: bool,
}

impl Reading {
    /// The gradient, clamped into `[MIN_GRADIENT, MAX_GRADIENT]`; 1 when
    /// it is not a number.
    fn gradient(self) -> f64 {
        if self.raw.is_finite() {
            self.raw.clamp(MIN_GRADIENT, MAX_GRADIENT)
        } else {
            1.0
        }
    }
}

/// The queue at the partner the callers' budgets pay for past the knee
/// (item 5 of the module docs).
#[derive(Clone, Copy)]
struct Headroom {
    /// The callers' mean budget, when their calls carried one.
    budget: Option<Duration>,
    /// The no-queue latency, in seconds.
    min_rtt: f64,
}

impl Headroom {
    /// The share of Envoy's headroom (a square root of the knee) the
    /// callers can afford: `h` calls more than `knee` workers hold wait
    /// about `h / knee * min_rtt`, and that may take [`SLACK_SHARE`] of
    /// the callers' slack (their budget beyond one no-queue latency).
    /// The whole of it without a budget.
    fn share(self, knee: f64) -> f64 {
        match self.budget {
            Some(budget) if self.min_rtt > 0.0 => {
                let slack = (budget.as_secs_f64() / self.min_rtt - 1.0).max(0.0);
                (knee.sqrt() * slack * SLACK_SHARE).min(1.0)
            }
            _ => 1.0,
        }
    }

    /// The queue the callers can afford past `knee`, in calls.
    fn calls(self, knee: f64) -> f64 {
        knee.sqrt() * self.share(knee)
    }
}

impl AdaptiveLimit {
    /// The gradient step at the end of a window.
    pub(super) fn close_window(
        &self,
        state: &mut State,
        now: Instant,
        round: &Round,
        limit: usize,
    ) {
        let min_rtt = self.follow_faster_partner(state, round.mean);
        let reading = self.read(min_rtt, round, limit);
        if state.slow_start && !reading.queued {
            self.slow_start_step(state, now, reading.used_limit);
            return;
        }
        state.slow_start = false;
        if reading.queued {
            learn_knee(state, round.peak_in_mean, reading);
        }
        let headroom = Headroom {
            budget: round.budget,
            min_rtt: reading.min_rtt,
        };
        let mut next = self.proposed(state, reading, headroom);
        if let Some(knee) = state.knee.filter(|_| reading.queued) {
            next = self.cap_at_knee(state.estimate, knee, next, headroom);
        }
        if !reading.used_limit {
            // App-limited: this window says nothing about more.
            next = next.min(state.estimate);
        }
        state.estimate = self.clamp(next);
        self.open_next(state, now, reading.raw);
    }

    /// The `min_rtt` a window of mean latency `mean` is read against: the
    /// one known, or `mean` itself (kept) when the window was faster.
    fn follow_faster_partner(&self, state: &mut State, mean: Duration) -> Duration {
        // A window lowers `min_rtt` only when it is faster by more than the
        // buffer: the lowest of many noisy window means is below the
        // partner's no-queue latency, and a `min_rtt` biased low reads
        // every window as a queue.
        match state.min_rtt {
            Some(min_rtt)
                if mean.as_secs_f64() >= min_rtt.as_secs_f64() * (1.0 - self.config.buffer) =>
            {
                min_rtt
            }
            _ => {
                state.min_rtt = Some(mean);
                mean
            }
        }
    }

    /// `round` read against `min_rtt` and the limit it ran under.
    fn read(&self, min_rtt: Duration, round: &Round, limit: usize) -> Reading {
        let (min_rtt, mean) = (min_rtt.as_secs_f64(), round.mean.as_secs_f64());
        let tolerated = min_rtt * (1.0 + self.config.buffer);
        Reading {
            min_rtt,
            mean,
            raw: if mean > 0.0 {
                tolerated / mean
            } else {
                MAX_GRADIENT
            },
            queued: mean > tolerated,
            used_limit: round.peak >= limit,
        }
    }

    /// Slow start (item 9): a whole round at the no-queue latency doubles
    /// the limit; a window that did not use it says nothing.
    fn slow_start_step(&self, state: &mut State, now: Instant, used_limit: bool) {
        if used_limit {
            state.estimate = self.clamp(state.estimate * MAX_GRADIENT);
        }
        state.floor_windows = 0;
        state.phase = new_window(now);
    }

    /// The limit the gradient proposes after a window (items 3 and 4),
    /// with the headroom the callers can afford, before the knee's cap and
    /// the app-limited rule.
    fn proposed(&self, state: &State, reading: Reading, headroom: Headroom) -> f64 {
        let scaled = state.estimate * reading.gradient();
        match state.knee {
            // At the knee with no queue: one call more, once a window has
            // used the whole limit (the calls waiting in the client are
            // the ones that know their deadlines).
            //
            // And, for callers who cannot afford the whole headroom, a mean
            // within the share of the buffer they can: a queue of one call
            // at eight workers adds at most an eighth to the mean, which a
            // noisy window reads as within the buffer's tenth, and such a
            // queue costs a caller with half a no-queue latency to spare a
            // quarter of its slack.
            Some(knee) if !reading.queued && scaled >= knee + headroom.calls(knee) => {
                let within = reading.min_rtt * (1.0 + self.config.buffer * headroom.share(knee));
                if reading.used_limit && reading.mean <= within {
                    state.estimate + 1.0
                } else {
                    state.estimate
                }
            }
            // Below it, or not known yet: room to grow, as far as the
            // callers' budgets allow a queue.
            _ => scaled + headroom.calls(scaled),
        }
    }

    /// `next` after a queued window: no more than the knee, plus the share
    /// of the buffer and the headroom the callers can afford (both whole
    /// for callers with time); but one window at most halves `estimate`,
    /// as the gradient does.
    fn cap_at_knee(&self, estimate: f64, knee: f64, next: f64, headroom: Headroom) -> f64 {
        // The knee counts whole calls (workers, threads, connections): its
        // estimate carries the few percent of noise of `min_rtt`, and
        // rounding it keeps a partner of eight workers at eight for callers
        // who can afford no queue, where 7.9 would cost it a worker and 8.3
        // times the buffer a standing queue.
        let whole = knee.round().max(1.0);
        let cap = whole * (1.0 + self.config.buffer * headroom.share(knee)) + headroom.calls(knee);
        next.min(cap.max(estimate * MIN_GRADIENT))
    }

    /// Opens the next window, or a probe after [`FLOOR_WINDOWS`] windows in
    /// a row whose raw gradient was at the clamp's floor (item 8: the
    /// partner became slower for good).
    fn open_next(&self, state: &mut State, now: Instant, raw: f64) {
        if raw <= MIN_GRADIENT {
            state.floor_windows = state.floor_windows.saturating_add(1);
        } else {
            state.floor_windows = 0;
        }
        state.phase = if state.floor_windows >= FLOOR_WINDOWS {
            state.floor_windows = 0;
            Phase::Probing {
                since: now,
                mean: Mean::default(),
            }
        } else {
            new_window(now)
        };
    }
}

/// A queued window: up to `peak_in_mean` calls in flight took `mean` where
/// one alone takes `min_rtt`, so the partner serves about
/// `peak_in_mean * min_rtt / mean` at once (Little's law). The knee is a
/// moving average of that.
fn learn_knee(state: &mut State, peak_in_mean: usize, reading: Reading) {
    let sample = peak_in_mean as f64 * reading.min_rtt / reading.mean;
    if sample.is_finite() {
        state.knee = Some(match state.knee {
            Some(knee) => knee + KNEE_WEIGHT * (sample - knee),
            None => sample,
        });
    }
}
