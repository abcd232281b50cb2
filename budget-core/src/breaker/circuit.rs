//! [`CircuitBreaker`], its [`BreakerPermit`] and its [`BreakerState`].

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::evidence::{Evidence, Sent, TimedOut};
use super::{BreakerPolicy, CircuitOpen, Verdict};
use crate::budget::Budget;

/// Where a breaker stands.
///
/// # Example
///
/// ```
/// use budget_core::breaker::{BreakerState, CircuitBreaker, BreakerPolicy};
///
/// let breaker = CircuitBreaker::new("http://a:80", BreakerPolicy::default());
/// assert_eq!(breaker.state(), BreakerState::Closed);
/// assert_eq!(BreakerState::HalfOpen.to_string(), "half-open");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go through; consecutive failures are counted.
    Closed,
    /// Calls are refused until `open_for` has passed.
    Open,
    /// One probe call is (or may be) out; everything else is refused.
    HalfOpen,
}

impl BreakerState {
    /// The state's name for logs and metric labels: `closed`, `open`,
    /// `half-open`.
    ///
    /// ```
    /// # use budget_core::breaker::BreakerState;
    /// assert_eq!(BreakerState::Open.as_str(), "open");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half-open",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One endpoint's circuit breaker.
///
/// Share it between the clients of one endpoint through an `Arc` or a
/// [`BreakerRegistry`](super::BreakerRegistry). Its state sits behind a
/// mutex held for a few instructions; no user code runs under it.
///
/// # Example
///
/// ```
/// use budget_core::breaker::{BreakerPolicy, CircuitBreaker, Verdict};
///
/// let breaker = CircuitBreaker::new("http://pricing:80", BreakerPolicy::default());
/// match breaker.try_acquire() {
///     Ok(permit) => {
///         // ... make the call, then:
///         permit.record(Verdict::Success);
///     }
///     Err(open) => println!("not calling: {open}"),
/// }
/// ```
pub struct CircuitBreaker {
    shared: Arc<Shared>,
}

/// What a breaker and its outstanding permits share.
struct Shared {
    key: String,
    policy: BreakerPolicy,
    inner: Mutex<Inner>,
}

struct Inner {
    phase: Phase,
    /// Consecutive failures in the current closed spell.
    failures: u32,
    /// Bumped on every state change; a permit's verdict counts only in the
    /// spell it was granted in.
    spell: u64,
    /// The endpoint's latency and silences.
    evidence: Evidence,
    /// Why the breaker last opened.
    cause: Cause,
}

/// Why a breaker opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cause {
    /// Failures, as counted by `failure_threshold` (or a failed probe).
    Failures,
    /// Attempts that went without an answer (or a probe that timed out).
    Silence,
}

impl Cause {
    fn as_str(self) -> &'static str {
        match self {
            Cause::Failures => "failures",
            Cause::Silence => "no answer",
        }
    }
}

#[derive(Clone, Copy)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen { probe_out: bool },
}

impl Phase {
    fn state(self) -> BreakerState {
        match self {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

/// A state change to report to the hook once the lock is released, and
/// what caused it.
type Change = Option<(BreakerState, BreakerState, Cause)>;

impl CircuitBreaker {
    /// A closed breaker for the endpoint `key` (see
    /// [`endpoint_key`](super::endpoint_key)).
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("http://a:80", BreakerPolicy::default());
    /// assert_eq!(breaker.key(), "http://a:80");
    /// ```
    pub fn new(key: impl Into<String>, policy: BreakerPolicy) -> Self {
        let key = key.into();
        policy.registered(&key);
        Self {
            shared: Arc::new(Shared {
                key,
                policy,
                inner: Mutex::new(Inner {
                    phase: Phase::Closed,
                    failures: 0,
                    spell: 0,
                    evidence: Evidence::default(),
                    cause: Cause::Failures,
                }),
            }),
        }
    }

    /// The endpoint key this breaker guards.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// assert_eq!(CircuitBreaker::new("k", BreakerPolicy::default()).key(), "k");
    /// ```
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The policy this breaker runs with.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// assert_eq!(breaker.policy().failure_threshold(), 5);
    /// ```
    pub fn policy(&self) -> &BreakerPolicy {
        &self.shared.policy
    }

    /// The current state.
    ///
    /// An open breaker whose `open_for` has passed still reads
    /// [`Open`](BreakerState::Open) until the next
    /// [`try_acquire`](Self::try_acquire) admits the probe and makes it
    /// half-open.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, BreakerState, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// assert_eq!(breaker.state(), BreakerState::Closed);
    /// ```
    pub fn state(&self) -> BreakerState {
        self.shared.lock().phase.state()
    }

    /// The endpoint's typical latency: the smoothed latency of its
    /// successful attempts (each new one weighs 1/8); `None` before the
    /// first success. See the [module docs](super#a-dependency-that-stops-answering).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker, Verdict};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// assert_eq!(breaker.typical_latency(), None);
    /// let permit = breaker.try_acquire().unwrap();
    /// tokio::time::advance(Duration::from_millis(200)).await;
    /// permit.record(Verdict::Success);
    /// assert_eq!(breaker.typical_latency(), Some(Duration::from_millis(200)));
    /// assert_eq!(breaker.silence_limit(), Some(Duration::from_millis(800)));
    /// # }
    /// ```
    pub fn typical_latency(&self) -> Option<Duration> {
        self.shared.lock().evidence.typical()
    }

    /// How long an attempt may go without an answer before it counts
    /// towards `timeout_threshold`: four typical latencies, at least
    /// 250 ms;
    /// `None` before the first success.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// assert_eq!(breaker.silence_limit(), None);
    /// ```
    pub fn silence_limit(&self) -> Option<Duration> {
        self.shared.lock().evidence.silence()
    }

    /// Asks to make a call: a [`BreakerPermit`] when the breaker is closed,
    /// or when it admits this call as the half-open probe; [`CircuitOpen`]
    /// otherwise.
    ///
    /// A closed breaker opens here, and refuses this call, when
    /// `timeout_threshold` attempts went without an answer, counting those
    /// still outstanding (see the
    /// [module docs](super#a-dependency-that-stops-answering)).
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// let permit = breaker.try_acquire().unwrap();
    /// assert!(!permit.is_probe());
    /// ```
    pub fn try_acquire(&self) -> Result<BreakerPermit, CircuitOpen> {
        let now = Instant::now();
        let shared = &self.shared;
        let mut inner = shared.lock();
        let mut change: Change = None;
        let probe = match inner.phase {
            Phase::Closed => {
                let threshold = shared.policy.timeout_threshold();
                if inner.evidence.hung(now, threshold).is_some() {
                    inner.open(&shared.policy, Cause::Silence);
                    let refused = shared.refusal(&inner, shared.policy.open_for(), now);
                    drop(inner);
                    shared.report(Some((
                        BreakerState::Closed,
                        BreakerState::Open,
                        Cause::Silence,
                    )));
                    return Err(refused);
                }
                false
            }
            Phase::Open { until } if now >= until => {
                inner.enter(Phase::HalfOpen { probe_out: true });
                change = Some((BreakerState::Open, BreakerState::HalfOpen, inner.cause));
                true
            }
            Phase::Open { until } => {
                return Err(shared.refusal(&inner, until.saturating_duration_since(now), now));
            }
            Phase::HalfOpen { probe_out: false } => {
                inner.phase = Phase::HalfOpen { probe_out: true };
                true
            }
            Phase::HalfOpen { probe_out: true } => {
                return Err(shared.refusal(&inner, shared.policy.open_for(), now));
            }
        };
        let spell = inner.spell;
        let sent = inner.evidence.sent(now);
        let attempt_limit = if probe {
            inner.evidence.probe_limit()
        } else {
            None
        };
        drop(inner);
        shared.report(change);
        Ok(BreakerPermit {
            shared: Arc::clone(shared),
            spell,
            probe,
            sent,
            attempt_limit,
            recorded: false,
        })
    }
}

impl fmt::Debug for CircuitBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("key", &self.shared.key)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No code that can panic runs under the lock; a poisoned lock still
        // holds a consistent state.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The refusal of a call now: retry after `retry_after`, and, for a
    /// breaker opened by silence, how long nothing has been answered.
    fn refusal(&self, inner: &Inner, retry_after: Duration, now: Instant) -> CircuitOpen {
        let refused = CircuitOpen::new(&self.key, retry_after);
        match (inner.cause, inner.evidence.last_answer()) {
            (Cause::Silence, Some(answer)) => {
                refused.with_no_answer_for(now.saturating_duration_since(answer))
            }
            _ => refused,
        }
    }

    fn report(&self, change: Change) {
        if let Some((from, to, cause)) = change {
            if to == BreakerState::Open && cause == Cause::Silence {
                tracing::info!(
                    endpoint = %self.key, %from, %to, cause = cause.as_str(),
                    "circuit breaker opened: the endpoint stopped answering"
                );
            } else {
                tracing::debug!(endpoint = %self.key, %from, %to, "circuit breaker state change");
            }
            self.policy.notify(&self.key, from, to);
        }
    }

    /// Applies a permit's verdict (`None`: dropped without one), if the
    /// permit's spell is still current.
    fn settle(&self, spell: u64, sent: Sent, probe: bool, verdict: Option<Verdict>) {
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.spell != spell {
            return; // granted in an earlier spell: stale news
        }
        inner.evidence.ended(sent);
        // What a timeout says depends on how long it went unanswered.
        // A call dropped unheard says as much as a timeout if it had gone
        // silent, and nothing otherwise.
        let (verdict, cause) = match verdict {
            Some(Verdict::TimedOut) => match inner.evidence.timed_out(sent.0, now) {
                TimedOut::CutShort => (Verdict::Neutral, Cause::Failures),
                TimedOut::Failed => (Verdict::Failure, Cause::Failures),
                TimedOut::Silent => (Verdict::Failure, Cause::Silence),
            },
            None => match inner.evidence.timed_out(sent.0, now) {
                TimedOut::Silent => (Verdict::Failure, Cause::Silence),
                TimedOut::CutShort | TimedOut::Failed => (Verdict::Neutral, Cause::Failures),
            },
            Some(verdict @ (Verdict::Success | Verdict::Failure)) => {
                inner
                    .evidence
                    .answered(sent.0, now, verdict == Verdict::Success);
                (verdict, Cause::Failures)
            }
            Some(Verdict::Neutral) => (Verdict::Neutral, Cause::Failures),
        };
        let change = match (inner.phase, verdict) {
            (Phase::Closed, Verdict::Success) => {
                inner.failures = 0;
                None
            }
            (Phase::Closed, Verdict::Failure) => {
                inner.failures = inner.failures.saturating_add(1);
                let threshold = self.policy.timeout_threshold();
                let cause = if inner.evidence.hung(now, threshold).is_some() {
                    Some(Cause::Silence)
                } else {
                    (inner.failures >= self.policy.failure_threshold()).then_some(Cause::Failures)
                };
                cause.map(|cause| {
                    inner.open(&self.policy, cause);
                    (BreakerState::Closed, BreakerState::Open, cause)
                })
            }
            (Phase::HalfOpen { .. }, Verdict::Success) => {
                inner.evidence.probe_answered();
                inner.enter(Phase::Closed);
                Some((BreakerState::HalfOpen, BreakerState::Closed, inner.cause))
            }
            (Phase::HalfOpen { .. }, Verdict::Failure) => {
                if probe && cause == Cause::Silence {
                    inner.evidence.probe_timed_out();
                }
                inner.open(&self.policy, cause);
                Some((BreakerState::HalfOpen, BreakerState::Open, cause))
            }
            (Phase::HalfOpen { .. }, _) => {
                // Neutral or abandoned: the probe slot is free again.
                inner.phase = Phase::HalfOpen { probe_out: false };
                None
            }
            // Closed + neutral; an open spell grants no permits.
            _ => None,
        };
        drop(inner);
        self.report(change);
    }
}

impl Inner {
    /// Moves to `phase` as a new spell.
    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.failures = 0;
        self.spell = self.spell.wrapping_add(1);
        self.evidence.new_spell();
    }

    /// Opens for `open_for`, because of `cause`.
    fn open(&mut self, policy: &BreakerPolicy, cause: Cause) {
        // An open spell is a budget of `open_for`: its deadline saturates
        // instead of overflowing the clock, however long `open_for` is.
        self.enter(Phase::Open {
            until: Budget::new(policy.open_for()).deadline(),
        });
        self.cause = cause;
    }
}

/// Leave to make one call through a breaker; report the call's
/// [`Verdict`] with [`record`](Self::record).
///
/// Dropped without a verdict (the call was cancelled), it counts as
/// [`Verdict::Neutral`]: a half-open breaker's probe slot is freed for the
/// next caller; but a call dropped after it had gone silent counts as a
/// silent [`Verdict::TimedOut`] (see the
/// [module docs](super#a-dependency-that-stops-answering)).
///
/// # Example
///
/// ```
/// use budget_core::breaker::{BreakerPolicy, CircuitBreaker, Verdict};
/// use http::StatusCode;
///
/// let breaker = CircuitBreaker::new("http://a:80", BreakerPolicy::default());
/// let permit = breaker.try_acquire().unwrap();
/// permit.record(Verdict::from_status(StatusCode::OK));
/// ```
#[must_use = "record the call's verdict; a dropped permit counts as neutral"]
pub struct BreakerPermit {
    shared: Arc<Shared>,
    spell: u64,
    probe: bool,
    /// When the attempt was sent, as the breaker's outstanding set knows it.
    sent: Sent,
    attempt_limit: Option<Duration>,
    recorded: bool,
}

impl BreakerPermit {
    /// Reports how the call went.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Verdict};
    /// let mut config = BreakerConfig::default();
    /// config.failure_threshold = 1;
    /// let policy = config.build().unwrap();
    /// let breaker = CircuitBreaker::new("http://a:80", policy);
    /// breaker.try_acquire().unwrap().record(Verdict::Failure);
    /// assert_eq!(breaker.state(), BreakerState::Open);
    /// ```
    pub fn record(mut self, verdict: Verdict) {
        self.recorded = true;
        self.shared
            .settle(self.spell, self.sent, self.probe, Some(verdict));
    }

    /// Says that the call is being sent now, when that is later than the
    /// permit was granted (it waited for a concurrency permit, say): its
    /// latency, and how long it has gone without an answer, count from
    /// now.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker, Verdict};
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// let mut permit = breaker.try_acquire().unwrap();
    /// tokio::time::advance(Duration::from_millis(500)).await; // queued
    /// permit.mark_sent();
    /// tokio::time::advance(Duration::from_millis(100)).await;
    /// permit.record(Verdict::Success);
    /// assert_eq!(breaker.typical_latency(), Some(Duration::from_millis(100)));
    /// # }
    /// ```
    pub fn mark_sent(&mut self) {
        let mut inner = self.shared.lock();
        if inner.spell == self.spell {
            inner.evidence.resent(&mut self.sent, Instant::now());
        }
    }

    /// The longest this call should wait for its answer, as far as the
    /// breaker is concerned: for the half-open probe, the silence limit,
    /// so that a probe sent to an endpoint that still does not answer ends
    /// soon and the next probe follows `open_for` later; `None` for other
    /// calls, before the first success, and for every fourth probe in a
    /// row that timed out (see the [module docs](super#a-dependency-that-stops-answering)).
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("k", BreakerPolicy::default());
    /// assert_eq!(breaker.try_acquire().unwrap().attempt_limit(), None);
    /// ```
    pub fn attempt_limit(&self) -> Option<Duration> {
        self.attempt_limit
    }

    /// True when this call is the half-open breaker's one probe.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerPolicy, CircuitBreaker};
    /// let breaker = CircuitBreaker::new("http://a:80", BreakerPolicy::default());
    /// assert!(!breaker.try_acquire().unwrap().is_probe());
    /// ```
    pub fn is_probe(&self) -> bool {
        self.probe
    }
}

impl Drop for BreakerPermit {
    fn drop(&mut self) {
        if !self.recorded {
            self.shared.settle(self.spell, self.sent, self.probe, None);
        }
    }
}

impl fmt::Debug for BreakerPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerPermit")
            .field("key", &self.shared.key)
            .field("probe", &self.probe)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::breaker::BreakerConfig;

    const OPEN_FOR: Duration = Duration::from_secs(10);

    fn breaker(threshold: u32) -> CircuitBreaker {
        let policy = BreakerConfig {
            failure_threshold: threshold,
            open_for: OPEN_FOR,
            ..Default::default()
        }
        .build()
        .unwrap();
        CircuitBreaker::new("http://dep:80", policy)
    }

    fn call(b: &CircuitBreaker, verdict: Verdict) {
        b.try_acquire().expect("admitted").record(verdict);
    }

    fn open(b: &CircuitBreaker) {
        while b.state() == BreakerState::Closed {
            call(b, Verdict::Failure);
        }
    }

    #[test]
    fn opens_after_exactly_threshold_consecutive_failures() {
        let b = breaker(3);
        call(&b, Verdict::Failure);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Closed);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.try_acquire().is_err());
    }

    #[test]
    fn neutral_neither_counts_nor_resets_the_failures() {
        let b = breaker(3);
        call(&b, Verdict::Failure);
        call(&b, Verdict::Failure);
        for _ in 0..10 {
            call(&b, Verdict::Neutral);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn success_resets_the_consecutive_failure_count() {
        let b = breaker(3);
        call(&b, Verdict::Failure);
        call(&b, Verdict::Failure);
        call(&b, Verdict::Success);
        call(&b, Verdict::Failure);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Closed);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn open_rejects_with_retry_after_shrinking_as_time_passes() {
        let b = breaker(1);
        open(&b);
        let first = b.try_acquire().unwrap_err();
        assert_eq!(first.retry_after(), OPEN_FOR);
        assert_eq!(first.key(), "http://dep:80");
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(
            b.try_acquire().unwrap_err().retry_after(),
            Duration::from_secs(6)
        );
        tokio::time::advance(Duration::from_millis(5_999)).await;
        assert_eq!(
            b.try_acquire().unwrap_err().retry_after(),
            Duration::from_millis(1)
        );
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn after_open_for_exactly_one_probe_is_admitted() {
        let b = breaker(1);
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        let probe = b.try_acquire().expect("the probe");
        assert!(probe.is_probe());
        assert_eq!(b.state(), BreakerState::HalfOpen);
        let second = b.try_acquire().expect_err("one probe at a time");
        assert_eq!(second.retry_after(), OPEN_FOR);
        tokio::time::advance(OPEN_FOR * 3).await;
        assert!(
            b.try_acquire().is_err(),
            "still one probe, however long it takes"
        );
        drop(probe);
    }

    #[test]
    fn concurrent_callers_after_open_for_get_exactly_one_probe() {
        let policy = BreakerConfig {
            failure_threshold: 1,
            open_for: Duration::from_nanos(1),
            ..Default::default()
        }
        .build()
        .unwrap();
        let b = Arc::new(CircuitBreaker::new("http://dep:80", policy));
        call(&b, Verdict::Failure);
        // Past open_for by the time the threads start.
        let start = Instant::now();
        while Instant::now() == start {
            std::hint::spin_loop();
        }
        let admitted = Mutex::new(Vec::new());
        let barrier = std::sync::Barrier::new(16);
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    barrier.wait();
                    if let Ok(permit) = b.try_acquire() {
                        // Kept, not dropped: the slot stays taken.
                        admitted.lock().unwrap().push(permit);
                    }
                });
            }
        });
        assert_eq!(admitted.lock().unwrap().len(), 1);
    }

    #[test]
    fn an_enormous_open_for_saturates_instead_of_panicking() {
        let policy = BreakerConfig {
            failure_threshold: 1,
            open_for: Duration::MAX,
            ..Default::default()
        }
        .build()
        .unwrap();
        let b = CircuitBreaker::new("http://dep:80", policy);
        call(&b, Verdict::Failure);
        let refused = b.try_acquire().unwrap_err();
        assert!(refused.retry_after() > Duration::from_secs(365 * 24 * 3600));
    }

    #[tokio::test(start_paused = true)]
    async fn probe_success_closes_the_breaker() {
        let b = breaker(2);
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        b.try_acquire().unwrap().record(Verdict::Success);
        assert_eq!(b.state(), BreakerState::Closed);
        // A fresh closed spell: the count starts again from zero.
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Closed);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn probe_failure_reopens_for_another_open_for() {
        let b = breaker(1);
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        tokio::time::advance(Duration::from_secs(1)).await; // the probe takes 1 s
        let probe = b.try_acquire().unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        probe.record(Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.try_acquire().unwrap_err().retry_after(), OPEN_FOR);
        tokio::time::advance(OPEN_FOR - Duration::from_millis(1)).await;
        assert!(b.try_acquire().is_err());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(b.try_acquire().unwrap().is_probe());
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_probe_permit_frees_the_probe_slot() {
        let b = breaker(1);
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        let probe = b.try_acquire().unwrap();
        assert!(b.try_acquire().is_err());
        drop(probe); // the caller's future was cancelled
        assert_eq!(b.state(), BreakerState::HalfOpen);
        let next = b.try_acquire().expect("the slot is free again");
        assert!(next.is_probe());
        next.record(Verdict::Success);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_probe_future_frees_the_probe_slot() {
        let b = Arc::new(breaker(1));
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        let task_breaker = Arc::clone(&b);
        let call = tokio::spawn(async move {
            let permit = task_breaker.try_acquire().unwrap();
            tokio::time::sleep(Duration::from_secs(3600)).await;
            permit.record(Verdict::Success);
        });
        tokio::task::yield_now().await;
        assert!(b.try_acquire().is_err(), "the spawned call holds the probe");
        call.abort();
        assert!(call.await.unwrap_err().is_cancelled());
        assert!(b.try_acquire().unwrap().is_probe());
    }

    #[tokio::test(start_paused = true)]
    async fn neutral_probe_verdict_frees_the_slot_without_deciding() {
        let b = breaker(1);
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        b.try_acquire().unwrap().record(Verdict::Neutral);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert!(b.try_acquire().unwrap().is_probe());
    }

    #[tokio::test(start_paused = true)]
    async fn verdicts_from_an_earlier_spell_are_ignored() {
        let b = breaker(2);
        let late_success = b.try_acquire().unwrap();
        let late_failure = b.try_acquire().unwrap();
        open(&b);
        tokio::time::advance(OPEN_FOR).await;
        let probe = b.try_acquire().unwrap();
        // Only the probe decides a half-open breaker.
        late_success.record(Verdict::Success);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        probe.record(Verdict::Success);
        // ... and an old failure does not count in the new closed spell.
        late_failure.record(Verdict::Failure);
        call(&b, Verdict::Failure);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn state_change_hook_sees_every_transition_once() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let policy = BreakerConfig {
            failure_threshold: 1,
            open_for: OPEN_FOR,
            ..Default::default()
        }
        .build()
        .unwrap()
        .with_on_state_change(move |key, from, to| {
            log.lock().unwrap().push((key.to_owned(), from, to));
        });
        let b = CircuitBreaker::new("http://dep:80", policy);
        call(&b, Verdict::Failure);
        tokio::time::advance(OPEN_FOR).await;
        call(&b, Verdict::Failure);
        tokio::time::advance(OPEN_FOR).await;
        call(&b, Verdict::Success);
        use BreakerState::*;
        let key = "http://dep:80".to_owned();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (key.clone(), Closed, Open),
                (key.clone(), Open, HalfOpen),
                (key.clone(), HalfOpen, Open),
                (key.clone(), Open, HalfOpen),
                (key, HalfOpen, Closed),
            ]
        );
    }

    /// Remembers what it was told, in order.
    #[derive(Default)]
    struct Told(Mutex<Vec<String>>);

    impl crate::breaker::Observer for Told {
        fn registered(&self, key: &str) {
            self.0.lock().unwrap().push(format!("registered {key}"));
        }

        fn transition(&self, key: &str, from: BreakerState, to: BreakerState) {
            self.0.lock().unwrap().push(format!("{key} {from} -> {to}"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_observer_hears_the_making_and_each_transition_not_each_call() {
        let told = Arc::new(Told::default());
        let policy = BreakerConfig {
            failure_threshold: 2,
            open_for: OPEN_FOR,
            ..Default::default()
        }
        .build()
        .unwrap()
        .with_observer(told.clone());
        let b = CircuitBreaker::new("http://dep:80", policy);
        call(&b, Verdict::Success);
        call(&b, Verdict::Failure);
        call(&b, Verdict::Failure);
        assert!(b.try_acquire().is_err());
        tokio::time::advance(OPEN_FOR).await;
        call(&b, Verdict::Success);
        call(&b, Verdict::Success);
        assert_eq!(
            *told.0.lock().unwrap(),
            [
                "registered http://dep:80",
                "http://dep:80 closed -> open",
                "http://dep:80 open -> half-open",
                "http://dep:80 half-open -> closed",
            ]
        );
    }

    #[test]
    fn a_registry_without_an_observer_takes_the_fallback_for_the_breakers_it_makes() {
        let told = Arc::new(Told::default());
        let fallback: crate::breaker::SharedObserver = told.clone();
        let registry = crate::breaker::BreakerRegistry::default();
        registry.get_observed("http://a:80", Some(&fallback));
        registry.get_observed("http://a:80", Some(&fallback)); // made once
        registry.get("http://b:80"); // none given
        let own = Arc::new(Told::default());
        let observed = crate::breaker::BreakerRegistry::new(
            BreakerPolicy::default().with_observer(own.clone()),
        );
        observed.get_observed("http://c:80", Some(&fallback));
        assert_eq!(*told.0.lock().unwrap(), ["registered http://a:80"]);
        assert_eq!(*own.0.lock().unwrap(), ["registered http://c:80"]);
    }
}
