//! An adaptive concurrency limit: how many calls a partner should have in
//! flight at once, learnt from how long its answers take.
//!
//! # What and why
//!
//! A partner with `W` workers answers `W` calls in parallel; every call
//! beyond `W` waits in its queue, so its latency grows while its throughput
//! does not. The best limit is a little above `W`: enough that a worker is
//! never idle, not so much that calls pile up (and spend their budget) in
//! the partner's queue. [`AdaptiveLimit`] finds it from latency alone and
//! follows it when the partner changes.
//!
//! # The algorithm: a gradient controller with a measured min-RTT
//!
//! This is the gradient controller of Envoy's adaptive-concurrency filter,
//! with the decrease-on-drop and "app-limited" rules of Netflix's
//! concurrency-limits library:
//!
//! 1. **Min-RTT probe.** The no-queue latency (`min_rtt`) is *measured*: for
//!    a short while the limit is lowered to 3 (clamped into
//!    `[min, max]`), the calls already in flight drain, and the mean latency
//!    of `probe_samples` calls started during the probe, with at most that
//!    many in flight, becomes `min_rtt`. Before the first probe, `min_rtt`
//!    is the mean latency of the client's first three calls, sent at the
//!    probe's limit (as Envoy measures its first min-RTT at
//!    `min_concurrency`) until the first of them answers, or for 10 ms from
//!    the first call that found that limit full
//!    ([`AdaptiveLimit::on_full`]), whichever comes first: they met a
//!    partner this client had not queued, and the calls sent after them
//!    reach it behind them. At the probe's limit rather than at `initial`,
//!    since ten calls sent together reach a partner in an order of their
//!    own, and the first three sent may be the ones it queued (a `min_rtt`
//!    three times too long for a partner of four workers read a limit of
//!    13 as no queue); for 10 ms at most, not a round trip, because being
//!    ahead takes only the time to reach the partner, while a client
//!    starting under load at 3 in flight leaves most of a slow partner's
//!    workers idle for its whole first round trip (a second at 20 times
//!    the load tests' latency; held 50 ms, a burst on a cold chain left 5
//!    of a partner's 8 workers idle for 50 ms, about 5 answers fewer in a
//!    1 s budget than naive mode's, BENCHMARKS.md), and 10 ms is far
//!    shorter than a permit queue's CoDel interval, so the hold alone
//!    never makes a standing queue. Not the first answer alone: that is
//!    the fastest of a burst, below the partner's mean. Any first answer
//!    ends the probe's limit, a failed one too, so a partner failing every
//!    call is not held at 3; the first `min_rtt` then waits for calls that
//!    succeed with at most 3 in flight (or one such call among
//!    `probe_samples` answers).
//!    The first probe follows `probe_interval` later,
//!    another every `probe_interval` after it (plus up to `probe_jitter` of
//!    it, so that many clients do not probe together).
//!    During a probe the limit the calls were running at is kept and comes
//!    back when the probe ends.
//! 2. **Sample windows.** Outside a probe, the latencies of successful calls
//!    that *started* in the current window are averaged. A window closes once
//!    `window` has passed and it holds as many such calls as the limit (a
//!    whole round of calls, at most `window_samples`). Calls started before
//!    the window ran under an older limit and are left out: without this,
//!    the controller reacts to its own past and oscillates. A whole round is
//!    needed because calls sent together do not finish together: those that
//!    found a free worker answer first, and a window of only the first few
//!    answers would never see the queue behind them.
//! 3. **Gradient.** When a window closes,
//!    `gradient = min_rtt * (1 + buffer) / mean_rtt`, clamped into
//!    `[0.5, 2]`, and `limit = limit * gradient + headroom`. Where latency
//!    is at its no-queue level the gradient is `1 + buffer` and the limit
//!    grows. The mean is the statistic used (not a percentile) because it
//!    sees a queue in proportion to its length; the clamp at `0.5` bounds
//!    what one slow outlier can do to one window.
//! 4. **The knee.** A window whose mean is above `min_rtt * (1 + buffer)`
//!    saw a queue: its calls, with up to `peak` in flight when one of them
//!    started, took `mean_rtt` where one alone takes `min_rtt`, so the
//!    partner serves about `peak * min_rtt / mean_rtt` at once (Little's
//!    law). A moving average
//!    of that is the knee, `W`. After a queued window the limit is at most
//!    `(1 + buffer * a) * round(W) + headroom` (and at least half what it
//!    was), where `a` is the share of the headroom the callers can afford
//!    (item 5; 1 for callers with time): the knee counts whole calls, and
//!    its estimate carries the few percent of noise of `min_rtt`, so that
//!    unrounded, callers who can afford no queue would get 7 for a partner
//!    of 8 workers at 7.9, and a standing queue of one at 8.3; past
//!    that, a window without a queue adds one call, not a square root, and
//!    for callers who cannot afford the whole headroom (item 5) only when
//!    its mean is within their share of the buffer: a queue of one call at
//!    eight workers adds at most an eighth to the mean, near enough the
//!    buffer's tenth that a noisy window, or one whose limit was not full
//!    all along, reads it as no queue, and such callers cannot pay for it.
//! 5. **Headroom from the callers' budgets.** The headroom is a queue of
//!    `h` calls at the partner: each call then waits about
//!    `h / W * min_rtt`. It is a square root of the limit (Envoy's
//!    headroom, which keeps every worker busy) when the calls carry no
//!    budget ([`AdaptiveLimit::on_sample`]); when they do
//!    ([`AdaptiveLimit::on_sample_within`], what the client does in budget
//!    mode), it is at most what costs the callers 1/32 of their slack, their
//!    mean budget beyond one `min_rtt`. Callers with 38 no-queue latencies
//!    to spare (a 2 s budget, a 50 ms partner) keep the square root; callers
//!    with half of one to spare (a partner 20 times slower) get a limit at
//!    the knee, and the queue stands in the client, where the permit queue
//!    knows their deadlines. So the limit settles near
//!    `(1 + buffer) * W + sqrt(W)` for callers with time, near `W` for
//!    callers without.
//! 6. **App-limited rule.** A window may raise the limit only if one of the
//!    calls answered in it started with the whole limit in flight: a client
//!    that does not use its limit learns nothing about whether more would
//!    be better, and must not ratchet it up to `max` (Netflix's rule, with
//!    the whole limit rather than half: with budgets, a limit larger than
//!    the demand is a queue waiting to form at the next burst).
//! 7. **Drops.** A [`Sample::Dropped`] (overload answer, connection
//!    failure) or [`Sample::TimedOut`] multiplies the limit by
//!    `drop_factor`, at most once per round
//!    trip: a drop cuts the limit only if its call started after the
//!    previous cut, so a burst of timeouts from calls sent together is one
//!    cut, not a collapse to `min` (as TCP halves its window once per round
//!    trip); and at most once per `window`, so that a partner whose fast
//!    failures come back in a millisecond (half its answers `503`, say) is
//!    one signal per window, not a cut per answer that would leave the
//!    limit below the partner's capacity for the answers that succeed.
//!    A timed-out call's latency also counts in its window's mean: the
//!    answers that came in time are those that met no queue, and a mean of
//!    them alone would not see the queue the timeouts did. A call whose
//!    caller's budget ended it before `min_rtt` is neither: it was cut
//!    short, not queued, and its latency is only a bound below one answer's
//!    (counted, a few such calls make a window look faster than the
//!    partner, lower `min_rtt`, and every later window then reads as a
//!    queue and cuts the limit towards 1).
//! 8. **A slower partner.** If the partner becomes slower for good (say ten
//!    times), every window's gradient hits the `0.5` clamp; after 5 such
//!    windows in a row a probe re-measures `min_rtt` at once, and the limit
//!    grows back towards `W` from there instead of staying at its floor until
//!    the next periodic probe (the probe forgets the knee). A partner that
//!    becomes faster is seen at once: a window whose mean is more than the
//!    buffer below `min_rtt` lowers `min_rtt` to it. Only by more than the
//!    buffer: the lowest of many noisy window means is below the partner's
//!    no-queue latency, and a `min_rtt` biased low reads every window as a
//!    queue.
//!
//! 9. **Slow start.** Until a window first shows a queue or a call is
//!    dropped, the limit grows as TCP's window does in its slow start: a
//!    window closes after one `min_rtt` (not `window`) once a whole round
//!    of calls sent in it has answered, and a window at the no-queue
//!    latency that used the whole limit doubles it. A partner with room
//!    for many more calls than `initial` (no worker limit, or a large
//!    pool) is found in a few round trips (10, 20, 40, 80, 160, about one
//!    doubling every two `min_rtt`), not held at `initial` while a burst
//!    waits; the first call of a round slower than 1.5 `min_rtt` (it met
//!    a queue at the partner, HyStart's delay signal), or the first window
//!    with a queue, ends the slow start, and the knee (item 4) takes
//!    over. [`AdaptiveLimit::growth`] tells a permit queue how fast the
//!    limit is growing, so that its predicted waits count the doubling.
//!
//! ## Why not Gradient2?
//!
//! Netflix's Gradient2 compares the latency to a long-window *average* of
//! latency instead of a measured no-load latency. Under steady overload that
//! average drifts up to the overloaded latency, the gradient goes back to 1,
//! and the headroom term keeps raising the limit: against a closed loop of
//! callers (the case a budget client is in) nothing pulls it back to `W`.
//! Such a queue never drains by itself, so the no-queue latency can only be
//! learnt by making it drain, which is what the probe does, at the cost of
//! running at 3 in flight for about `probe_samples / 3` round trips (plus
//! the drain) every `probe_interval`.
//!
//! # Bounds
//!
//! The limit is always within `[min, max]` (so never 0), computed in `f64`
//! from finite inputs only; instants and durations use checked arithmetic.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
//! use tokio::time::Instant;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut config = AdaptiveLimitConfig::default();
//! config.probe_samples = 1;
//! config.window_samples = 1;
//! let limit = AdaptiveLimit::new(config).unwrap();
//! let rtt = Duration::from_millis(50);
//!
//! // The first answer starts the min-RTT probe; a call sent during it ends it.
//! let start = Instant::now();
//! limit.on_sample(start, rtt, 10, Sample::Success);
//! tokio::time::advance(rtt).await;
//! assert_eq!(limit.on_sample(Instant::now(), rtt, 1, Sample::Success), 10);
//! assert_eq!(limit.min_rtt(), Some(rtt));
//!
//! // A full window at the no-queue latency: the limit grows.
//! tokio::time::advance(Duration::from_millis(250)).await;
//! assert!(limit.on_sample(Instant::now(), rtt, 10, Sample::Success) > 10);
//! # }
//! ```

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::config::ConfigError;

mod config;
mod gradient;
mod sample;
mod state;

pub use config::{AdaptiveLimitConfig, LimitConfig};
use state::{Hold, Mean, Phase, State};

/// The limit during a min-RTT probe, before clamping into `[min, max]`
/// (Envoy's default `min_concurrency`).
const PROBE_CONCURRENCY: usize = 3;
/// The longest the first calls are held at the probe's limit, from the
/// first call that found it full (item 1 of the module docs): time for the
/// first calls to reach the partner ahead of the rest, far shorter than a
/// permit queue's CoDel interval (100 ms) so that the hold alone never
/// makes a standing queue, and than a partner's answer, so that its
/// workers are not left idle for long (50 ms cost a burst about 5 answers
/// in a 1 s budget, BENCHMARKS.md).
pub(crate) const FIRST_HOLD: Duration = Duration::from_millis(10);
/// The gradient's clamp: one window at most halves the limit...
const MIN_GRADIENT: f64 = 0.5;
/// ...or doubles it.
const MAX_GRADIENT: f64 = 2.0;
/// Consecutive windows at [`MIN_GRADIENT`] that start a new probe.
const FLOOR_WINDOWS: u32 = 5;
/// The weight of a queued window in the moving average of the knee.
const KNEE_WEIGHT: f64 = 0.3;
/// In slow start, a call of the round slower than this many no-queue
/// latencies met a queue at the partner: the slow start ends (item 9).
const SLOW_START_EXIT: f64 = 1.5;
/// The share of the callers' slack a standing partner queue may cost
/// them. Small: a call does not know what the calls after it in its
/// request still need of the same budget.
const SLACK_SHARE: f64 = 1.0 / 32.0;

/// How a finished call went, as far as the limit is concerned.
///
/// ```
/// use budget_core::admission::limit::Sample;
/// let outcome = |status: u16| match status {
///     429 | 503 => Sample::Dropped,
///     400..=499 => Sample::Ignore,
///     _ => Sample::Success,
/// };
/// assert_eq!(outcome(503), Sample::Dropped);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sample {
    /// An answer: its latency is a measurement of the partner.
    Success,
    /// A sign of overload: an overload answer (`503`, `429`), a
    /// connection failure. Cuts the limit by `drop_factor`, at most once per
    /// round trip; its latency is not used.
    Dropped,
    /// A call that ran out of time before its answer: a drop, and its
    /// latency (the answer would have taken at least this) counts in the
    /// window's mean, so that a queue the successful answers do not show
    /// (only the calls that met none answered in time) is seen. One that
    /// ran out before `min_rtt` was cut short by its caller's budget, not
    /// slowed by the partner: it changes nothing.
    TimedOut,
    /// Says nothing about load (say a `404`): changes nothing.
    Ignore,
}

/// A concurrency limit that follows the partner's latency (see the
/// [module docs](self) for the algorithm).
///
/// Shared by the callers of one partner, behind an `Arc`; every method
/// takes `&self` (a short `Mutex` inside).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut config = AdaptiveLimitConfig::default();
/// config.probe_samples = 1;
/// let limit = Arc::new(AdaptiveLimit::new(config).unwrap());
/// let rtt = Duration::from_millis(20);
/// // The first min-RTT probe: one call at low concurrency.
/// limit.on_sample(tokio::time::Instant::now(), rtt, 1, Sample::Success);
/// tokio::time::advance(rtt).await;
/// assert_eq!(limit.on_sample(tokio::time::Instant::now(), rtt, 1, Sample::Success), 10);
///
/// // A burst of timeouts from calls sent together: one cut of 10 %, not fifty.
/// let sent = tokio::time::Instant::now();
/// tokio::time::advance(Duration::from_secs(1)).await;
/// let shared = Arc::clone(&limit);
/// for _ in 0..50 {
///     shared.on_sample(sent + Duration::from_secs(1), Duration::from_secs(1), 10, Sample::Dropped);
/// }
/// assert_eq!(limit.current(), 9);
/// # }
/// ```
#[derive(Debug)]
pub struct AdaptiveLimit {
    config: AdaptiveLimitConfig,
    probe_limit: usize,
    /// Whether the first calls may still be held (no answer yet, the hold
    /// not over): lets [`AdaptiveLimit::on_full`] skip the lock after.
    holding: AtomicBool,
    state: Mutex<State>,
}

impl AdaptiveLimit {
    /// A limit that runs its first calls at the probe's limit (3, clamped
    /// into `[min, max]`) and is at `config`'s initial value once one of
    /// them has answered or their hold is over (item 1 of the
    /// [module docs](self)); or the
    /// [`ConfigError`] of [`AdaptiveLimitConfig::validate`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut config = AdaptiveLimitConfig::default();
    /// config.initial = Some(16);
    /// let limit = AdaptiveLimit::new(config).unwrap();
    /// assert_eq!(limit.current(), 3);
    /// let now = tokio::time::Instant::now();
    /// for in_flight in 1..=3 {
    ///     limit.on_sample(now, Duration::from_millis(50), in_flight, Sample::Success);
    /// }
    /// assert_eq!(limit.current(), 16);
    /// let mut config = AdaptiveLimitConfig::default();
    /// config.min = 0;
    /// let err = AdaptiveLimit::new(config).unwrap_err();
    /// assert_eq!(err.field(), "min");
    /// # }
    /// ```
    pub fn new(config: AdaptiveLimitConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            probe_limit: PROBE_CONCURRENCY.clamp(config.min, config.max),
            holding: AtomicBool::new(true),
            state: Mutex::new(State {
                estimate: config.initial_limit() as f64,
                min_rtt: None,
                phase: Phase::Unstarted {
                    first: Mean::default(),
                    answers: 0,
                    hold: Hold::Unarmed,
                },
                floor_windows: 0,
                last_cut: None,
                next_probe: None,
                knee: None,
                slow_start: true,
            }),
            config,
        })
    }

    /// The limit now: within `[min, max]`, never 0. During a min-RTT probe,
    /// and for the first calls, the probe's limit (3, clamped into
    /// `[min, max]`).
    ///
    /// ```
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig};
    /// let mut config = AdaptiveLimitConfig::default();
    /// config.max = 2;
    /// let limit = AdaptiveLimit::new(config).unwrap();
    /// assert_eq!(limit.current(), 2);
    /// ```
    pub fn current(&self) -> usize {
        let state = self.lock();
        self.limit_of(&state)
    }

    /// The no-queue latency the last min-RTT probe measured (or a faster
    /// window found since); `None` before the first probe has ended.
    ///
    /// ```
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig};
    /// let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
    /// assert_eq!(limit.min_rtt(), None);
    /// ```
    pub fn min_rtt(&self) -> Option<Duration> {
        self.lock().min_rtt
    }

    /// While the limit is in its slow start (item 9 of the module docs)
    /// and outside a probe, about how often it doubles: two no-queue
    /// latencies, the time for a whole round of calls sent in a window to
    /// answer (from the first successful answer on, before the first
    /// min-RTT is complete). `None` otherwise. A
    /// [`PermitQueue`](super::queue::PermitQueue) predicts its waits with it
    /// ([`set_growth`](super::queue::PermitQueue::set_growth)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
    /// assert_eq!(limit.growth(), None); // no min-RTT yet
    /// for in_flight in 1..=3 {
    ///     limit.on_sample(Instant::now(), Duration::from_millis(50), in_flight, Sample::Success);
    /// }
    /// assert_eq!(limit.growth(), Some(Duration::from_millis(100)));
    /// // A dropped call ends the slow start.
    /// limit.on_sample(Instant::now(), Duration::from_millis(50), 4, Sample::Dropped);
    /// assert_eq!(limit.growth(), None);
    /// # }
    /// ```
    pub fn growth(&self) -> Option<Duration> {
        let state = self.lock();
        if !state.slow_start {
            return None;
        }
        match (&state.phase, state.min_rtt) {
            (Phase::Window(_), Some(min_rtt)) => Some(min_rtt.saturating_mul(2)),
            // Past the first calls' limit, before the first min-RTT: the
            // slow start is about to begin, at the latency of the first
            // answers.
            (
                Phase::Unstarted {
                    first,
                    hold: Hold::Over(_),
                    ..
                },
                _,
            ) if first.count > 0 => Some(first.value().saturating_mul(2)),
            _ => None,
        }
    }

    /// A call found every call the limit allows in flight at `now`.
    ///
    /// Before the first answer the first calls run at the probe's limit
    /// (item 1 of the [module docs](self)), but not for longer than 10 ms
    /// from the first call that found it full: long enough for the first
    /// calls to reach the partner ahead of the others, and short enough
    /// not to leave most of a slow partner's workers idle for a whole
    /// round trip. Returns when that hold ends to the call that starts it
    /// (for a timer to call this again then), `None` to any other; a call
    /// at or after the end ends it, and the limit is `initial` from then
    /// on (read it with [`current`](Self::current)). Lock-free once the
    /// first answer has come or the hold is over.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
    /// let now = tokio::time::Instant::now();
    /// let ends = limit.on_full(now).unwrap();
    /// assert_eq!(ends - now, Duration::from_millis(10));
    /// assert_eq!((limit.on_full(now), limit.current()), (None, 3));
    /// assert_eq!((limit.on_full(ends), limit.current()), (None, 10));
    /// # }
    /// ```
    pub fn on_full(&self, now: Instant) -> Option<Instant> {
        if !self.holding.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.lock();
        let Phase::Unstarted {
            answers: 0, hold, ..
        } = &mut state.phase
        else {
            self.holding.store(false, Ordering::Release);
            return None;
        };
        match *hold {
            Hold::Unarmed => match now.checked_add(FIRST_HOLD) {
                Some(ends) => {
                    *hold = Hold::Until(ends);
                    Some(ends)
                }
                None => {
                    *hold = Hold::Over(now);
                    self.holding.store(false, Ordering::Release);
                    None
                }
            },
            Hold::Until(ends) if now >= ends => {
                *hold = Hold::Over(ends);
                self.holding.store(false, Ordering::Release);
                None
            }
            Hold::Until(_) | Hold::Over(_) => None,
        }
    }

    /// Runs `then` on tokio's timer at `end`, the end of the hold that
    /// [`on_full`](Self::on_full) returned: there the owner of the limit
    /// ends the hold (`on_full(end)`) and takes the new limit, so that the
    /// calls waiting get it even if no other call comes. Outside a tokio
    /// runtime nothing is timed, and the first answer ends the hold.
    #[cfg(any(outbound, feature = "server"))]
    pub(crate) fn at_hold_end(end: Instant, then: impl FnOnce() + Send + 'static) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                tokio::time::sleep_until(end).await;
                then();
            });
        }
    }

    /// One finished call: how long it took (from the moment it got its
    /// permit to its answer), how many calls were in flight when it started
    /// (itself included), and how it went. Returns the limit now (as
    /// [`current`](Self::current) would).
    ///
    /// `now` is when the answer came; the call started at `now - rtt`. Only
    /// calls started after the last change of the limit count towards the
    /// next change.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
    /// let now = tokio::time::Instant::now();
    /// assert_eq!(limit.on_sample(now, Duration::from_millis(5), 1, Sample::Ignore), 3);
    /// # }
    /// ```
    pub fn on_sample(
        &self,
        now: Instant,
        rtt: Duration,
        in_flight: usize,
        outcome: Sample,
    ) -> usize {
        self.on_sample_within(now, rtt, in_flight, outcome, None)
    }

    /// [`on_sample`](Self::on_sample) for a call that had `budget` to
    /// answer in (`None`: no deadline known). The callers' budgets bound
    /// the queue the limit lets stand at the partner: past the knee, the
    /// headroom is what a small share of their slack pays for (item 5 of
    /// the [module docs](self)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig, Sample};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let limit = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
    /// let now = tokio::time::Instant::now();
    /// let budget = Some(Duration::from_millis(1500));
    /// assert_eq!(limit.on_sample_within(now, Duration::from_millis(5), 1, Sample::Success, budget), 10);
    /// # }
    /// ```
    pub fn on_sample_within(
        &self,
        now: Instant,
        rtt: Duration,
        in_flight: usize,
        outcome: Sample,
        budget: Option<Duration>,
    ) -> usize {
        let mut state = self.lock();
        if outcome == Sample::Ignore {
            return self.limit_of(&state);
        }
        if matches!(state.phase, Phase::Unstarted { .. }) {
            self.on_first_answer(&mut state, now, rtt, in_flight, outcome);
            return self.limit_of(&state);
        }
        let due = match state.phase {
            Phase::Unstarted { .. } | Phase::Probing { .. } => false,
            Phase::Window { .. } => state.next_probe.is_some_and(|at| now >= at),
        };
        if due {
            state.phase = Phase::Probing {
                since: now,
                mean: Mean::default(),
            };
        }
        let started = now.checked_sub(rtt);
        match outcome {
            Sample::Dropped => self.on_drop(&mut state, now, started),
            // Cut short by its caller's budget (item 7): says nothing.
            Sample::TimedOut if state.min_rtt.is_some_and(|min_rtt| rtt < min_rtt) => {}
            Sample::TimedOut => {
                self.on_drop(&mut state, now, started);
                self.on_latency(&mut state, now, rtt, started, in_flight, budget);
            }
            Sample::Success => self.on_latency(&mut state, now, rtt, started, in_flight, budget),
            Sample::Ignore => {}
        }
        self.limit_of(&state)
    }

    /// When the probe after one ending at `now` starts.
    fn next_probe_after(&self, now: Instant) -> Option<Instant> {
        let interval = self.config.probe_interval;
        let jitter = if self.config.probe_jitter > 0.0 {
            interval.mul_f64(self.config.probe_jitter * rand::random::<f64>())
        } else {
            Duration::ZERO
        };
        now.checked_add(interval.saturating_add(jitter))
    }

    /// `x` clamped into `[min, max]`; a non-finite `x` is `min`.
    fn clamp(&self, x: f64) -> f64 {
        let (min, max) = (self.config.min as f64, self.config.max as f64);
        if x.is_finite() {
            x.clamp(min, max)
        } else {
            min
        }
    }

    /// The limit `state` gives.
    fn limit_of(&self, state: &State) -> usize {
        match state.phase {
            Phase::Probing { .. } => self.probe_limit,
            // The first calls, at the probe's limit until one answers or
            // the hold is over.
            Phase::Unstarted {
                hold: Hold::Unarmed | Hold::Until(_),
                ..
            } => self.probe_limit,
            _ => (state.estimate.floor() as usize).clamp(self.config.min, self.config.max),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod convergence;
