//! [`Evidence`]: what tells a breaker that its endpoint has stopped
//! answering, long before `failure_threshold` failures have piled up.
//!
//! The rule is the breaker's ("A dependency that stops answering" in the
//! [module docs](super#a-dependency-that-stops-answering)); this file keeps
//! its numbers: the typical latency of successful attempts, when the last
//! answer came, the silent attempts that ended in a row, and the attempts
//! outstanding, ordered by when they were sent, so that counting those
//! past the silence limit reads only the oldest few.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::time::Duration;

use tokio::time::Instant;

/// The silence limit is this many times an endpoint's typical latency.
pub(crate) const SILENCE_FACTOR: u32 = 4;

/// The shortest silence limit, whatever the typical latency: 250 ms.
///
/// A fast endpoint stalls now and then for longer than four of its usual
/// answers (a garbage-collection pause, a lost packet resent after Linux's
/// shortest retransmission timeout, 200 ms), and at a high rate three
/// calls are outstanding through any stall at once: a shorter limit would
/// turn such a pause into `open_for` of refused calls. Short enough that a
/// probe cycle (the limit plus `open_for`, 1 s in the example services)
/// stays under 2 s for any endpoint that answers within 250 ms.
pub(crate) const MIN_SILENCE: Duration = Duration::from_millis(250);

/// Every this many probes in a row that timed out, the next probe waits for
/// its call's whole time rather than the silence limit: 4, so that an
/// endpoint that came back slower than its silence limit is found within
/// four probes, and three of four probes of a silent endpoint end at the
/// silence limit.
pub(crate) const LONG_PROBE_EVERY: u32 = 4;

/// The weight of a new sample in the typical latency: 1/8 (the `alpha`
/// of RFC 6298).
const SMOOTHING: u32 = 8;

/// An attempt in flight: when it was sent, and a number that tells two
/// sent at the same instant apart.
pub(super) type Sent = (Instant, u64);

/// What a timed-out attempt says about the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TimedOut {
    /// Its caller's budget ended it before the typical latency: nothing.
    CutShort,
    /// An ordinary failure (before the silence limit, or at cold start).
    Failed,
    /// It went silent: evidence that the endpoint stopped answering.
    Silent,
}

/// Enough silent attempts to open the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hung {
    /// Silent attempts counted: ended in a row, and still outstanding.
    pub(super) attempts: u32,
}

/// A breaker's record of its endpoint's latency and silences.
#[derive(Debug, Default)]
pub(super) struct Evidence {
    /// The smoothed latency of successful attempts; `None` before the first.
    typical: Option<Duration>,
    /// When an attempt last got an answer (success or failure).
    last_answer: Option<Instant>,
    /// Attempts in a row that ended silent.
    silent: u32,
    /// Probes in a row that timed out.
    failed_probes: u32,
    /// The attempts of the current spell not yet settled, oldest first.
    outstanding: BTreeSet<Sent>,
    next: u64,
}

impl Evidence {
    /// The typical latency of a successful attempt.
    pub(super) fn typical(&self) -> Option<Duration> {
        self.typical
    }

    /// How long an attempt may go unanswered before it counts as silent.
    pub(super) fn silence(&self) -> Option<Duration> {
        self.typical
            .map(|typical| typical.saturating_mul(SILENCE_FACTOR).max(MIN_SILENCE))
    }

    /// How long the half-open probe may wait for its answer: the silence
    /// limit, but no limit for every `LONG_PROBE_EVERY`th probe in a row
    /// (after as many minus one timed out).
    pub(super) fn probe_limit(&self) -> Option<Duration> {
        let long = self.failed_probes % LONG_PROBE_EVERY == LONG_PROBE_EVERY - 1;
        self.silence().filter(|_| !long)
    }

    /// When the last answer came.
    pub(super) fn last_answer(&self) -> Option<Instant> {
        self.last_answer
    }

    /// Notes an attempt sent at `now`.
    pub(super) fn sent(&mut self, now: Instant) -> Sent {
        self.next = self.next.wrapping_add(1);
        let sent = (now, self.next);
        self.outstanding.insert(sent);
        sent
    }

    /// The attempt `sent` was really sent only now (it waited in a queue
    /// after its admission).
    pub(super) fn resent(&mut self, sent: &mut Sent, now: Instant) {
        if self.outstanding.remove(sent) {
            sent.0 = now;
            self.outstanding.insert(*sent);
        }
    }

    /// The attempt `sent` is settled.
    pub(super) fn ended(&mut self, sent: Sent) {
        self.outstanding.remove(&sent);
    }

    /// A new spell: the attempts of the old one no longer count, nor do
    /// its silent ones.
    pub(super) fn new_spell(&mut self) {
        self.outstanding.clear();
        self.silent = 0;
    }

    /// The attempt sent at `sent` got an answer now; a success's latency
    /// is learned.
    pub(super) fn answered(&mut self, sent: Instant, now: Instant, success: bool) {
        self.last_answer = Some(now);
        self.silent = 0;
        if success {
            let latency = now.saturating_duration_since(sent);
            self.typical = Some(match self.typical {
                None => latency,
                Some(mean) if latency >= mean => mean.saturating_add((latency - mean) / SMOOTHING),
                Some(mean) => mean.saturating_sub((mean - latency) / SMOOTHING),
            });
        }
    }

    /// The attempt sent at `sent` timed out now: what it says.
    pub(super) fn timed_out(&mut self, sent: Instant, now: Instant) -> TimedOut {
        let (Some(typical), Some(silence)) = (self.typical, self.silence()) else {
            return TimedOut::Failed;
        };
        let waited = now.saturating_duration_since(sent);
        if waited < typical {
            TimedOut::CutShort
        } else if waited >= silence && self.unanswered_since(sent) {
            self.silent = self.silent.saturating_add(1);
            TimedOut::Silent
        } else {
            TimedOut::Failed
        }
    }

    /// The probe timed out: the next one gets twice as long.
    pub(super) fn probe_timed_out(&mut self) {
        self.failed_probes = self.failed_probes.saturating_add(1);
    }

    /// A probe succeeded: the next probe gets the silence limit again.
    pub(super) fn probe_answered(&mut self) {
        self.failed_probes = 0;
    }

    /// `threshold` attempts or more went silent by `now`: those that ended
    /// so, in a row, and those outstanding past the silence limit with no
    /// answer since they were sent.
    pub(super) fn hung(&self, now: Instant, threshold: u32) -> Option<Hung> {
        let silence = self.silence()?;
        let mut attempts = self.silent;
        if attempts < threshold
            && let Some(cutoff) = now.checked_sub(silence)
        {
            let from = match self.last_answer {
                Some(answer) => Bound::Included((answer, 0)),
                None => Bound::Unbounded,
            };
            if from_before(from, cutoff) {
                let needed = (threshold - attempts) as usize;
                let outstanding = self
                    .outstanding
                    .range((from, Bound::Included((cutoff, u64::MAX))))
                    .take(needed)
                    .count();
                // At most `needed`, itself a u32.
                attempts += outstanding as u32;
            }
        }
        (attempts >= threshold).then_some(Hung { attempts })
    }

    fn unanswered_since(&self, sent: Instant) -> bool {
        self.last_answer.is_none_or(|answer| sent >= answer)
    }
}

/// Whether the range from `from` to `cutoff` is not empty (`BTreeSet::range`
/// panics on a reversed range).
fn from_before(from: Bound<Sent>, cutoff: Instant) -> bool {
    match from {
        Bound::Included((answer, _)) => answer <= cutoff,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Evidence that has learned `latency` from `n` successes.
    fn learned(latency: Duration, n: usize) -> (Evidence, Instant) {
        let mut e = Evidence::default();
        let mut now = Instant::now();
        for _ in 0..n {
            let sent = e.sent(now);
            now += latency;
            e.ended(sent);
            e.answered(sent.0, now, true);
        }
        (e, now)
    }

    #[test]
    fn the_typical_latency_is_a_mean_that_moves_by_an_eighth_of_each_success() {
        let (mut e, now) = learned(ms(200), 1);
        assert_eq!(e.typical(), Some(ms(200)));
        e.answered(now - ms(1000), now, true);
        assert_eq!(e.typical(), Some(ms(300)), "200 + (1000 - 200) / 8");
        e.answered(now - ms(100), now, true);
        assert_eq!(e.typical(), Some(ms(275)), "300 - (300 - 100) / 8");
        e.answered(now - ms(5000), now, false);
        assert_eq!(
            e.typical(),
            Some(ms(275)),
            "a failure's latency is not learned"
        );
    }

    #[test]
    fn the_silence_limit_is_four_typical_latencies_at_least_250ms() {
        assert_eq!(Evidence::default().silence(), None, "cold start");
        assert_eq!(learned(ms(200), 1).0.silence(), Some(ms(800)));
        assert_eq!(learned(ms(5), 1).0.silence(), Some(MIN_SILENCE));
    }

    #[test]
    fn a_timeout_is_cut_short_failed_or_silent_by_how_long_it_waited() {
        let (mut e, now) = learned(ms(200), 1);
        assert_eq!(e.timed_out(now, now + ms(150)), TimedOut::CutShort);
        assert_eq!(e.timed_out(now, now + ms(500)), TimedOut::Failed);
        assert_eq!(e.timed_out(now, now + ms(800)), TimedOut::Silent);
        // Sent before the last answer: something answered since.
        assert_eq!(e.timed_out(now - ms(2000), now), TimedOut::Failed);
        let mut cold = Evidence::default();
        assert_eq!(cold.timed_out(now, now + ms(2000)), TimedOut::Failed);
    }

    #[test]
    fn every_fourth_probe_in_a_row_has_no_limit_the_others_the_silence_limit() {
        let (mut e, _) = learned(ms(200), 1);
        let mut limits = Vec::new();
        for _ in 0..9 {
            limits.push(e.probe_limit());
            e.probe_timed_out();
        }
        let short = Some(ms(800));
        assert_eq!(
            limits,
            [short, short, short, None, short, short, short, None, short]
        );
        e.probe_answered();
        assert_eq!(e.probe_limit(), short);
        e.failed_probes = u32::MAX;
        e.probe_timed_out();
        let _ = e.probe_limit(); // no overflow, however many
    }

    /// The breaker's side of the rule, through its public face, on a
    /// paused clock: a 200 ms endpoint, `open_for = 1s`, 5 failures or 3
    /// silent attempts.
    mod breaker {
        use super::ms;
        use crate::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Verdict};
        use std::time::Duration;
        use tokio::time::advance;

        const OPEN_FOR: Duration = Duration::from_secs(1);

        fn breaker() -> CircuitBreaker {
            let policy = BreakerConfig {
                failure_threshold: 5,
                open_for: OPEN_FOR,
                timeout_threshold: 3,
            }
            .build()
            .unwrap();
            CircuitBreaker::new("http://dep:80", policy)
        }

        /// A call that takes `took` and ends with `verdict`.
        async fn call(b: &CircuitBreaker, took: Duration, verdict: Verdict) {
            let permit = b.try_acquire().expect("admitted");
            advance(took).await;
            permit.record(verdict);
        }

        /// A breaker that has learned the endpoint answers in 200 ms.
        async fn learned() -> CircuitBreaker {
            let b = breaker();
            for _ in 0..5 {
                call(&b, ms(200), Verdict::Success).await;
            }
            assert_eq!(b.typical_latency(), Some(ms(200)));
            assert_eq!(b.silence_limit(), Some(ms(800)));
            b
        }

        #[tokio::test(start_paused = true)]
        async fn three_timeouts_in_a_row_with_time_to_spare_open_it_and_refuse_at_once() {
            let b = learned().await;
            // One call at a time, each with a 2 s budget, none answered.
            call(&b, ms(2000), Verdict::TimedOut).await;
            call(&b, ms(2000), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Closed);
            call(&b, ms(2000), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Open, "3 < failure_threshold 5");
            let refused = b.try_acquire().unwrap_err();
            assert_eq!(refused.retry_after(), OPEN_FOR);
            assert_eq!(refused.no_answer_for(), Some(ms(6000)));
        }

        #[tokio::test(start_paused = true)]
        async fn an_answer_between_timeouts_starts_the_count_again() {
            let b = learned().await;
            for _ in 0..10 {
                call(&b, ms(2000), Verdict::TimedOut).await;
                call(&b, ms(2000), Verdict::TimedOut).await;
                call(&b, ms(300), Verdict::Success).await;
            }
            assert_eq!(b.state(), BreakerState::Closed);
            // A failure is an answer too (a fast 503 is not a hang); the
            // consecutive-failure count is its own rule.
            call(&b, ms(2000), Verdict::TimedOut).await;
            call(&b, ms(2000), Verdict::TimedOut).await;
            call(&b, ms(10), Verdict::Failure).await;
            call(&b, ms(2000), Verdict::TimedOut).await;
            call(&b, ms(2000), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Open, "five failures in a row");
            assert_eq!(b.try_acquire().unwrap_err().no_answer_for(), None);
        }

        #[tokio::test(start_paused = true)]
        async fn timeouts_cut_short_by_a_budget_below_the_typical_latency_do_not_count() {
            let b = learned().await;
            for _ in 0..50 {
                call(&b, ms(150), Verdict::TimedOut).await;
            }
            assert_eq!(
                b.state(),
                BreakerState::Closed,
                "neither silent nor failures"
            );
        }

        #[tokio::test(start_paused = true)]
        async fn timeouts_short_of_the_silence_limit_are_ordinary_failures() {
            let b = learned().await;
            for _ in 0..4 {
                call(&b, ms(500), Verdict::TimedOut).await;
            }
            assert_eq!(
                b.state(),
                BreakerState::Closed,
                "not silent: 500 ms < 800 ms"
            );
            call(&b, ms(500), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Open, "the fifth failure");
            assert_eq!(b.try_acquire().unwrap_err().no_answer_for(), None);
        }

        #[tokio::test(start_paused = true)]
        async fn at_cold_start_timeouts_count_only_as_failures() {
            let b = breaker();
            for _ in 0..4 {
                call(&b, ms(2000), Verdict::TimedOut).await;
            }
            assert_eq!(b.state(), BreakerState::Closed, "no latency known yet");
            call(&b, ms(2000), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Open);
        }

        #[tokio::test(start_paused = true)]
        async fn calls_outstanding_past_the_silence_limit_open_it_before_they_end() {
            let b = learned().await;
            // Two calls a second, none answered, none ended yet.
            let mut held = Vec::new();
            for _ in 0..4 {
                held.push(b.try_acquire().expect("admitted"));
                advance(ms(500)).await;
            }
            // t = 2 s: sent at 0, 0.5, 1.0 s are past 800 ms.
            let refused = b
                .try_acquire()
                .expect_err("three outstanding past the limit");
            assert_eq!(b.state(), BreakerState::Open);
            assert_eq!(refused.retry_after(), OPEN_FOR);
            assert_eq!(refused.no_answer_for(), Some(ms(2000)));
            // Their late verdicts belong to the old spell.
            for permit in held {
                permit.record(Verdict::TimedOut);
            }
            assert_eq!(b.state(), BreakerState::Open);
        }

        #[tokio::test(start_paused = true)]
        async fn outstanding_calls_do_not_count_while_others_are_answered() {
            let b = learned().await;
            let mut held = Vec::new();
            for _ in 0..6 {
                // A stuck call, and one answered 200 ms later.
                held.push(b.try_acquire().expect("admitted"));
                call(&b, ms(200), Verdict::Success).await;
                advance(ms(300)).await;
            }
            assert!(b.try_acquire().is_ok(), "the endpoint answers");
            assert_eq!(b.state(), BreakerState::Closed);
            drop(held);
        }

        #[tokio::test(start_paused = true)]
        async fn a_call_dropped_after_it_went_silent_counts_as_a_silent_timeout() {
            let b = learned().await;
            // Each caller's own deadline comes first: the call is dropped
            // unheard, after 2 s without an answer.
            for _ in 0..2 {
                let permit = b.try_acquire().expect("admitted");
                advance(ms(2000)).await;
                drop(permit);
            }
            // Dropped early (a hedge that lost, a caller that gave up),
            // a call says nothing, and does not break the run.
            for _ in 0..5 {
                let permit = b.try_acquire().expect("admitted");
                advance(ms(500)).await;
                drop(permit);
            }
            assert_eq!(b.state(), BreakerState::Closed);
            let permit = b.try_acquire().expect("admitted");
            advance(ms(2000)).await;
            drop(permit);
            assert_eq!(b.state(), BreakerState::Open, "three silent in a row");
        }

        #[tokio::test(start_paused = true)]
        async fn a_fast_endpoint_s_200ms_stall_at_a_high_rate_does_not_open_it() {
            let b = breaker();
            for _ in 0..20 {
                call(&b, ms(5), Verdict::Success).await;
            }
            assert_eq!(
                b.silence_limit(),
                Some(crate::breaker::evidence::MIN_SILENCE)
            );
            // A call every millisecond, none answered for 200 ms.
            let mut held = Vec::new();
            for _ in 0..200 {
                held.push(b.try_acquire().expect("admitted through the stall"));
                advance(ms(1)).await;
            }
            for permit in held {
                permit.record(Verdict::Success);
            }
            assert_eq!(b.state(), BreakerState::Closed);
        }

        #[tokio::test(start_paused = true)]
        async fn the_wait_before_the_call_is_sent_is_not_silence() {
            let b = learned().await;
            let mut held = Vec::new();
            for _ in 0..3 {
                held.push(b.try_acquire().expect("admitted"));
            }
            advance(ms(900)).await; // queued for a concurrency permit
            for permit in &mut held {
                permit.mark_sent();
            }
            advance(ms(700)).await;
            assert!(b.try_acquire().is_ok(), "sent 700 ms ago: not yet silent");
            advance(ms(100)).await;
            assert!(b.try_acquire().is_err(), "now 800 ms");
        }

        #[tokio::test(start_paused = true)]
        async fn one_probe_at_a_time_after_open_for_with_the_silence_limit_to_answer() {
            let b = learned().await;
            for _ in 0..3 {
                call(&b, ms(2000), Verdict::TimedOut).await;
            }
            advance(OPEN_FOR - ms(1)).await;
            assert!(b.try_acquire().is_err(), "not before open_for");
            advance(ms(1)).await;
            let probe = b.try_acquire().expect("the probe");
            assert!(probe.is_probe());
            assert_eq!(probe.attempt_limit(), Some(ms(800)));
            assert!(b.try_acquire().is_err(), "at most one probe");
            // Still silent: the probe times out at its limit; open again.
            advance(ms(800)).await;
            probe.record(Verdict::TimedOut);
            assert_eq!(b.state(), BreakerState::Open);
            let refused = b.try_acquire().unwrap_err();
            assert_eq!(refused.retry_after(), OPEN_FOR);
            assert_eq!(refused.no_answer_for(), Some(ms(7800)));
            // Two more short probes, then one that waits its call's time.
            for _ in 0..2 {
                advance(OPEN_FOR).await;
                let probe = b.try_acquire().expect("the next probe");
                assert_eq!(probe.attempt_limit(), Some(ms(800)));
                advance(ms(800)).await;
                probe.record(Verdict::TimedOut);
            }
            advance(OPEN_FOR).await;
            let probe = b.try_acquire().expect("the fourth probe");
            assert_eq!(probe.attempt_limit(), None);
            advance(ms(1500)).await; // the endpoint came back slower
            probe.record(Verdict::Success);
            assert_eq!(b.state(), BreakerState::Closed);
            assert_eq!(b.typical_latency(), Some(ms(200) + ms(1300) / 8));
            for _ in 0..3 {
                call(&b, ms(3000), Verdict::TimedOut).await;
            }
            advance(OPEN_FOR).await;
            let probe = b.try_acquire().expect("a probe");
            assert_eq!(probe.attempt_limit(), Some(ms(1450)), "4 x 362.5 ms");
            advance(ms(200)).await;
            probe.record(Verdict::Success);
            assert_eq!(b.state(), BreakerState::Closed);
            // Recovered: calls have no breaker limit; the count starts again.
            assert_eq!(b.try_acquire().unwrap().attempt_limit(), None);
            call(&b, ms(2000), Verdict::TimedOut).await;
            call(&b, ms(2000), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Closed);
            call(&b, ms(2000), Verdict::TimedOut).await;
            assert_eq!(b.state(), BreakerState::Open);
            advance(OPEN_FOR).await;
            let probe = b.try_acquire().expect("a probe");
            assert_eq!(
                probe.attempt_limit(),
                b.silence_limit(),
                "a success starts the probes' count again"
            );
        }

        #[tokio::test(start_paused = true)]
        async fn a_probe_that_answers_within_two_seconds_of_recovery_closes_it() {
            // Silent from t = 0: the breaker opens on the third timeout
            // (t = 6 s); the endpoint comes back at a moment no later
            // than any probe's start; the next probe is admitted at most
            // open_for + the probe limit after it.
            let b = learned().await;
            for _ in 0..3 {
                call(&b, ms(2000), Verdict::TimedOut).await;
            }
            let mut waited = Duration::ZERO;
            loop {
                match b.try_acquire() {
                    Err(refused) => {
                        assert!(refused.retry_after() <= OPEN_FOR);
                        advance(ms(500)).await;
                        waited += ms(500);
                    }
                    Ok(probe) => {
                        // The endpoint answers from now on.
                        advance(ms(200)).await;
                        probe.record(Verdict::Success);
                        break;
                    }
                }
            }
            assert!(waited <= OPEN_FOR + ms(800), "{waited:?}");
            assert_eq!(b.state(), BreakerState::Closed);
        }
    }
}
