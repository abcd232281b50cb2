//! What an [`AdaptiveLimit`](super::AdaptiveLimit) knows between calls:
//! its estimate, where its controller is (first calls, probe or window),
//! and the running means its windows collect.

use std::time::Duration;

use tokio::time::Instant;

/// What the limit knows, behind the lock.
#[derive(Debug)]
pub(super) struct State {
    /// The limit outside a probe, in `[min, max]`.
    pub(super) estimate: f64,
    /// The no-queue latency, once a probe has measured it.
    pub(super) min_rtt: Option<Duration>,
    pub(super) phase: Phase,
    /// Consecutive windows whose gradient hit
    /// [`MIN_GRADIENT`](super::MIN_GRADIENT).
    pub(super) floor_windows: u32,
    /// When a drop last cut the limit.
    pub(super) last_cut: Option<Instant>,
    /// When the next periodic probe starts (`None`: never, or not yet set).
    pub(super) next_probe: Option<Instant>,
    /// The knee: how many calls the partner holds without a queue,
    /// estimated from the windows that showed one since the last probe
    /// (see [`AdaptiveLimit::close_window`](super::AdaptiveLimit::close_window)).
    pub(super) knee: Option<f64>,
    /// Slow start (item 9 of the module docs): no window has shown a
    /// queue and no call has been dropped yet.
    pub(super) slow_start: bool,
}

/// Where the controller is.
#[derive(Debug)]
pub(super) enum Phase {
    /// Before the first `min_rtt` (at the probe's limit until the first
    /// answer or the end of the hold): the latencies of the successful
    /// calls started with at most the probe's limit in flight (the
    /// client's first calls), every answer, failed or not, and the hold.
    Unstarted {
        first: Mean,
        answers: usize,
        hold: Hold,
    },
    /// Measuring `min_rtt` at the probe limit.
    Probing { since: Instant, mean: Mean },
    /// Collecting a sample window.
    Window(Window),
}

/// The first calls' hold at the probe's limit, before any answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hold {
    /// No call has found the limit full yet.
    Unarmed,
    /// A call found it full; the hold ends at this instant.
    Until(Instant),
    /// Over since this instant (its end or the first answer): the limit
    /// is `initial`.
    Over(Instant),
}

/// An empty window starting at `now`.
pub(super) fn new_window(now: Instant) -> Phase {
    Phase::Window(Window::new(now))
}

/// A sample window being collected (item 2 of the module docs).
#[derive(Debug)]
pub(super) struct Window {
    /// When it opened: only the calls started since count in `mean`.
    since: Instant,
    mean: Mean,
    /// The most calls in flight when any answer in it started.
    peak_in_flight: usize,
    /// The most calls in flight when one of the calls in `mean`
    /// started.
    peak_in_mean: usize,
    /// The budgets of the calls in `mean` that had one.
    budgets: Mean,
}

impl Window {
    fn new(now: Instant) -> Self {
        Self {
            since: now,
            mean: Mean::default(),
            peak_in_flight: 0,
            peak_in_mean: 0,
            budgets: Mean::default(),
        }
    }

    /// One answer; true when its call started in the window, and so
    /// counts in its mean.
    pub(super) fn add(
        &mut self,
        rtt: Duration,
        started: Option<Instant>,
        in_flight: usize,
        budget: Option<Duration>,
    ) -> bool {
        let counted = started.is_some_and(|s| s >= self.since);
        if counted {
            self.mean.add(rtt);
            self.peak_in_mean = self.peak_in_mean.max(in_flight);
            if let Some(budget) = budget {
                self.budgets.add(budget);
            }
        }
        // Any answer in the window shows how busy the client is, even
        // one sent before it: calls sent together finish together,
        // and the first to finish were sent with the fewest in flight.
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
        counted
    }

    /// What the window saw, once it has lasted `long_enough` and holds
    /// `needed` calls started in it; `None` before.
    pub(super) fn round(
        &self,
        now: Instant,
        long_enough: Duration,
        needed: usize,
    ) -> Option<Round> {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= long_enough && self.mean.count >= needed {
            let budget = (self.budgets.count > 0).then(|| self.budgets.value());
            Some(Round {
                mean: self.mean.value(),
                peak: self.peak_in_flight,
                peak_in_mean: self.peak_in_mean,
                budget,
            })
        } else {
            None
        }
    }
}

/// What a closed window saw.
pub(super) struct Round {
    /// The mean latency of the calls started in it.
    pub(super) mean: Duration,
    /// The most calls in flight when any answer in it started.
    pub(super) peak: usize,
    /// The most calls in flight when one of the calls in `mean` started.
    pub(super) peak_in_mean: usize,
    /// The mean budget of the calls in `mean` that had one.
    pub(super) budget: Option<Duration>,
}

/// A running mean of latencies, exact in nanoseconds.
#[derive(Debug, Default)]
pub(super) struct Mean {
    sum_nanos: u128,
    pub(super) count: usize,
}

impl Mean {
    pub(super) fn add(&mut self, rtt: Duration) {
        self.sum_nanos = self.sum_nanos.saturating_add(rtt.as_nanos());
        self.count = self.count.saturating_add(1);
    }

    pub(super) fn value(&self) -> Duration {
        let count = u128::try_from(self.count.max(1)).unwrap_or(u128::MAX);
        Duration::from_nanos(u64::try_from(self.sum_nanos / count).unwrap_or(u64::MAX))
    }
}
