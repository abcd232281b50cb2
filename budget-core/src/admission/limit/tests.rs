//! Unit tests of each rule of the adaptive limit, and of its config.

use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::*;

const RTT: Duration = Duration::from_millis(50);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The defaults, without jitter and with short probes and windows.
fn config() -> AdaptiveLimitConfig {
    AdaptiveLimitConfig {
        probe_jitter: 0.0,
        probe_samples: 3,
        window_samples: 5,
        ..Default::default()
    }
}

/// A limit past the answers of its first three calls (`min_rtt` =
/// [`RTT`]), and when they came.
fn measured(config: AdaptiveLimitConfig) -> (AdaptiveLimit, Instant) {
    let limit = AdaptiveLimit::new(config).unwrap();
    let t = Instant::now();
    let first = limit.current();
    assert_eq!(
        first, limit.probe_limit,
        "the first calls at the probe's limit"
    );
    for in_flight in 1..=3 {
        let now = limit.on_sample(t, RTT, in_flight, Sample::Success);
        assert_eq!(
            now,
            config.initial_limit(),
            "`initial` from the first answer"
        );
    }
    assert_eq!(limit.min_rtt(), Some(RTT));
    (limit, t)
}

/// One full window from `t`: `window_samples` calls started at or after
/// `t`, each `rtt` long with `in_flight` in flight. Returns when it ended
/// and the limit then.
fn window(limit: &AdaptiveLimit, t: Instant, rtt: Duration, in_flight: usize) -> (Instant, usize) {
    window_within(limit, t, rtt, in_flight, None)
}

/// [`window`] with each call having had `budget` to answer in.
fn window_within(
    limit: &AdaptiveLimit,
    t: Instant,
    rtt: Duration,
    in_flight: usize,
    budget: Option<Duration>,
) -> (Instant, usize) {
    let end = t + limit.config.window.max(rtt);
    let mut now = limit.current();
    for _ in 0..limit.config.window_samples {
        now = limit.on_sample_within(end, rtt, in_flight, Sample::Success, budget);
    }
    (end, now)
}

/// What one window does to the estimate `l` when the latency is `rtt`.
fn step(l: f64, rtt: Duration, buffer: f64) -> f64 {
    let g = (RTT.as_secs_f64() * (1.0 + buffer) / rtt.as_secs_f64()).clamp(0.5, 2.0);
    l * g + (l * g).sqrt()
}

#[tokio::test(start_paused = true)]
async fn the_first_three_calls_give_the_first_min_rtt_and_the_first_probe_comes_an_interval_later()
{
    let limit = AdaptiveLimit::new(AdaptiveLimitConfig {
        probe_samples: 20,
        ..config()
    })
    .unwrap();
    assert_eq!(limit.current(), 3, "the first calls at the probe's limit");
    assert_eq!(limit.min_rtt(), None);
    let t0 = Instant::now();
    // A drop or a timeout teaches no latency; the first cuts the estimate
    // (10 -> 9), the second started before that cut. Any answer ends the
    // first calls' limit: the calls sent from then on reach the partner
    // behind them.
    assert_eq!(limit.on_sample(t0, RTT * 3, 3, Sample::Dropped), 9);
    limit.on_sample(t0, RTT * 3, 1, Sample::TimedOut);
    assert_eq!(limit.min_rtt(), None);
    let initial = limit.current();
    assert_eq!(initial, 9);
    // An answer of a call sent with more than the probe's 3 in flight met
    // a queue, maybe: not counted.
    assert_eq!(limit.on_sample(t0, RTT * 5, 10, Sample::Success), initial);
    // The first three calls (1, 2 and 3 in flight): their mean, not the
    // fastest of them.
    for (in_flight, ms) in [(1, 40), (2, 50), (3, 60)] {
        assert_eq!(limit.min_rtt(), None, "not before the third");
        let rtt = Duration::from_millis(ms);
        assert_eq!(
            limit.on_sample(t0, rtt, in_flight, Sample::Success),
            initial
        );
    }
    assert_eq!(limit.min_rtt(), Some(RTT), "the mean of the first three");
    // No probe until probe_interval has passed.
    let later = t0 + limit.config.probe_interval - Duration::from_millis(1);
    assert_eq!(limit.on_sample(later, RTT, 1, Sample::Success), initial);
    let due = t0 + limit.config.probe_interval;
    assert_eq!(
        limit.on_sample(due, RTT, 1, Sample::Success),
        3,
        "the first probe"
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_calls_run_at_the_probe_s_limit_until_one_answers() {
    let limit = AdaptiveLimit::new(config()).unwrap();
    let t0 = Instant::now();
    assert_eq!(limit.current(), 3, "the first calls at the probe's limit");
    assert_eq!(
        limit.on_sample(t0 + RTT, RTT, 1, Sample::Success),
        10,
        "the first answer: `initial`"
    );
    assert_eq!(limit.min_rtt(), None, "one answer is not yet a min-RTT");
    // A partner failing every first call does not hold the limit at 3:
    // its first answer, a drop, ends the first calls' limit as well.
    let failing = AdaptiveLimit::new(config()).unwrap();
    assert_eq!(failing.on_sample(t0 + RTT, RTT, 1, Sample::Dropped), 9);
    assert_eq!(failing.min_rtt(), None);
}

#[tokio::test(start_paused = true)]
async fn the_first_calls_hold_at_the_probe_s_limit_for_10ms_at_most() {
    let limit = AdaptiveLimit::new(config()).unwrap();
    let t0 = Instant::now();
    assert_eq!(
        limit.on_full(t0),
        Some(t0 + FIRST_HOLD),
        "the first full: the hold's clock starts"
    );
    assert_eq!(
        limit.on_full(t0 + ms(5)),
        None,
        "only the first arms a timer"
    );
    assert_eq!(limit.current(), 3, "held within the 10 ms");
    assert_eq!(limit.on_full(t0 + FIRST_HOLD - ms(1)), None);
    assert_eq!(limit.current(), 3, "still held 1 ms before the end");
    assert_eq!(limit.on_full(t0 + FIRST_HOLD), None);
    assert_eq!(
        limit.current(),
        10,
        "`initial` once the hold is over, no answer yet"
    );
    assert_eq!(limit.min_rtt(), None, "nothing learnt from the clock");
    // The first three calls (sent at 3 in flight) still make the first
    // min-RTT; a later call sent at 10 in flight does not count in it.
    limit.on_sample(t0 + RTT, RTT, 1, Sample::Success);
    limit.on_sample(t0 + RTT * 2, RTT * 2, 10, Sample::Success);
    assert_eq!(
        limit.min_rtt(),
        None,
        "the call at 10 in flight is not a first call"
    );
    limit.on_sample(t0 + RTT, RTT, 2, Sample::Success);
    limit.on_sample(t0 + RTT, RTT, 3, Sample::Success);
    assert_eq!(limit.min_rtt(), Some(RTT));
    assert_eq!(limit.current(), 10);
    assert_eq!(
        limit.on_full(t0 + RTT * 3),
        None,
        "after the hold: nothing to arm"
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_before_the_hold_ends_it_and_a_later_full_arms_nothing() {
    let limit = AdaptiveLimit::new(config()).unwrap();
    let t0 = Instant::now();
    assert!(limit.on_full(t0).is_some());
    assert_eq!(limit.on_sample(t0 + ms(20), ms(20), 1, Sample::Success), 10);
    assert_eq!(limit.on_full(t0 + ms(30)), None);
    assert_eq!(limit.current(), 10);
    // A probe later is not a hold: `on_full` does not end it.
    let (limit, t) = measured(AdaptiveLimitConfig {
        probe_interval: Duration::from_secs(1),
        ..config()
    });
    limit.on_sample(t + Duration::from_secs(2), RTT, 5, Sample::Success);
    assert_eq!(limit.current(), 3, "probing");
    assert_eq!(limit.on_full(t + Duration::from_secs(3)), None);
    assert_eq!(limit.current(), 3, "still probing");
}

#[tokio::test(start_paused = true)]
async fn the_first_window_holds_the_calls_sent_since_the_limit_became_initial() {
    let limit = AdaptiveLimit::new(config()).unwrap();
    let t0 = Instant::now();
    limit.on_full(t0);
    limit.on_full(t0 + FIRST_HOLD);
    assert_eq!(limit.current(), 10, "the hold is over at 10 ms");
    // The first three calls answer at 100 ms: the first min-RTT.
    for in_flight in 1..=3 {
        limit.on_sample(t0 + ms(100), ms(100), in_flight, Sample::Success);
    }
    assert_eq!(limit.min_rtt(), Some(ms(100)));
    // Calls sent at 60 ms, with 10 in flight, queued at the partner: they
    // ran under `initial`, so they are the first window (a window begun
    // at the min-RTT, 100 ms, would leave them out and see no queue).
    let mut now = 10;
    for _ in 0..5 {
        now = limit.on_sample(t0 + ms(400), ms(340), 10, Sample::Success);
    }
    assert!(now < 10, "the first window saw the queue: {now}");
}

#[tokio::test(start_paused = true)]
async fn after_a_queue_tight_callers_are_capped_at_the_rounded_knee() {
    // A window at 10 in flight 1.2 times slower than `min_rtt`: a knee
    // of 8.3 calls (Little's law), a partner of 8 workers read with a few
    // percent of noise.
    let queued = RTT.mul_f64(10.0 / 8.3);
    // Callers with half a no-queue latency to spare afford almost no
    // queue: the cap is the knee rounded, 8 (8.3 x 1.1 would keep 9).
    let (limit, t) = measured(config());
    let (_, tight) = window_within(&limit, t, queued, 10, Some(RTT * 3 / 2));
    assert_eq!(tight, 8);
    // Callers with time keep the buffer and the square root.
    let (limit, t) = measured(config());
    let (_, roomy) = window_within(&limit, t, queued, 10, None);
    assert!(roomy >= 10, "{roomy}");
}

#[tokio::test(start_paused = true)]
async fn an_ignored_sample_changes_nothing() {
    let limit = AdaptiveLimit::new(config()).unwrap();
    let t0 = Instant::now();
    assert_eq!(limit.on_sample(t0, RTT, 3, Sample::Ignore), 3);
    assert_eq!(limit.current(), 3, "still the first calls' limit");
    assert_eq!(limit.min_rtt(), None, "nothing learnt");
    let (limit, t) = measured(config());
    let before = limit.current();
    for _ in 0..100 {
        limit.on_sample(t + Duration::from_secs(1), RTT * 10, before, Sample::Ignore);
    }
    assert_eq!(limit.current(), before);
}

#[tokio::test(start_paused = true)]
async fn no_queue_latency_grows_the_limit_up_to_max() {
    let (limit, mut t) = measured(AdaptiveLimitConfig {
        max: 100,
        ..config()
    });
    // Slow start (item 9): doubled by each whole window at the no-queue
    // latency, 10, 20, 40, 80.
    let mut previous = limit.current();
    for expected in [20, 40, 80] {
        let (end, now) = window(&limit, t, RTT, previous);
        assert_eq!(now, expected);
        (t, previous) = (end, now);
    }
    // A window with a queue ends the slow start; the gradient and the knee
    // take over, and windows without a queue grow the limit again, by the
    // gradient and the headroom.
    let (end, now) = window(&limit, t, RTT * 2, previous);
    assert!(now < previous, "{now} after a queued window at {previous}");
    assert_eq!(limit.growth(), None);
    t = end;
    let mut expected = now as f64;
    previous = now;
    for _ in 0..3 {
        let (end, now) = window(&limit, t, RTT, previous);
        expected = step(expected, RTT, 0.1);
        assert!(now > previous, "{now} after {previous}");
        assert!(now as f64 <= expected.floor(), "{now} above {expected}");
        (t, previous) = (end, now);
    }
    let limit = measured(AdaptiveLimitConfig {
        max: 40,
        ..config()
    });
    let (limit, mut t) = limit;
    let mut previous = limit.current();
    while previous < 40 {
        let (end, now) = window(&limit, t, RTT, previous);
        assert!(now > previous, "{now} after {previous}");
        (t, previous) = (end, now);
    }
    for _ in 0..10 {
        (t, previous) = window(&limit, t, RTT, previous);
        assert_eq!(previous, 40, "max holds");
    }
}

#[tokio::test(start_paused = true)]
async fn latency_above_the_buffer_shrinks_the_limit_by_the_gradient() {
    let (limit, t) = measured(config());
    let (_, now) = window(&limit, t, RTT * 2, 10);
    // gradient 55 / 100: 10 * 0.55 + sqrt(5.5) = 7.85
    assert_eq!(now, step(10.0, RTT * 2, 0.1).floor() as usize);
    assert_eq!(now, 7);
    // One window at most halves the limit, however slow.
    let (limit, t) = measured(AdaptiveLimitConfig {
        initial: Some(100),
        ..config()
    });
    let (_, now) = window(&limit, t, RTT * 100, 100);
    // The knee the window reads (100 calls at 100 times the no-queue
    // latency: 1) would cut to 2; the cut stops at half.
    assert_eq!(now, 50, "the knee's cap at most halves too");
}

#[tokio::test(start_paused = true)]
async fn against_a_modelled_queue_the_limit_settles_at_w_plus_a_square_root() {
    for workers in [4_usize, 8, 32, 100] {
        let (limit, mut t) = measured(config());
        let mut now = limit.current();
        for _ in 0..40 {
            // Little's law: `now` in flight at `workers` in parallel.
            let queued = RTT.mul_f64((now as f64 / workers as f64).max(1.0));
            (t, now) = window(&limit, t, queued, now);
        }
        // Past the knee (W) by the buffer and a square root of it: `1.1 W
        // + sqrt(W)`, give or take the rounding down of the limit the
        // queue is modelled from.
        let w = workers as f64;
        let settled = (1.1 * w + w.sqrt()).floor() as usize;
        assert!(
            (settled - 1..=settled + 1).contains(&now),
            "W = {workers}: {now}"
        );
        assert!((workers..=2 * workers).contains(&now));
    }
}

#[tokio::test(start_paused = true)]
async fn with_budgets_that_leave_little_slack_the_limit_settles_at_the_knee() {
    for workers in [4_usize, 8, 32, 100] {
        let (limit, mut t) = measured(config());
        let mut now = limit.current();
        let mut seen = Vec::new();
        for i in 0..60 {
            let queued = RTT.mul_f64((now as f64 / workers as f64).max(1.0));
            // Every call had 1.5 no-queue latencies to answer in: a queue
            // of a square root's size would cost a caller most of that.
            (t, now) = window_within(&limit, t, queued, now, Some(RTT * 3 / 2));
            if i >= 40 {
                seen.push(now);
            }
        }
        let (low, high) = (*seen.iter().min().unwrap(), *seen.iter().max().unwrap());
        // At the workers, or one call past them while it probes for more.
        assert!(
            low >= workers && high <= workers + 1 + workers / 10,
            "W = {workers}: {seen:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn past_the_knee_a_queue_inside_the_buffer_grows_the_limit_only_for_callers_with_time() {
    let workers = 8_usize;
    for (budget, grows) in [(Some(RTT * 3 / 2), false), (None, true)] {
        let (limit, mut t) = measured(config());
        let mut now = limit.current();
        // The knee, from a queue of the modelled size (Little's law).
        for _ in 0..30 {
            let queued = RTT.mul_f64((now as f64 / workers as f64).max(1.0));
            (t, now) = window_within(&limit, t, queued, now, budget);
        }
        let settled = now;
        // Then latencies 5 % above the no-queue one: inside the buffer's
        // 10 %, so no window reads as queued.
        for _ in 0..5 {
            (t, now) = window_within(&limit, t, RTT.mul_f64(1.05), now, budget);
        }
        if grows {
            assert!(now > settled, "no budget: {settled} -> {now}");
        } else {
            assert!(now <= settled, "tight budgets: {settled} -> {now}");
            assert!(now >= workers, "{now}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_window_waits_for_a_round_of_answers_as_many_as_the_limit() {
    let (limit, t) = measured(AdaptiveLimitConfig {
        window_samples: 1000,
        ..config()
    });
    let end = t + Duration::from_secs(1);
    for _ in 0..9 {
        assert_eq!(limit.on_sample(end, RTT, 10, Sample::Success), 10);
    }
    assert!(
        limit.on_sample(end, RTT, 10, Sample::Success) > 10,
        "the tenth closes it"
    );
    // `window_samples` caps the round.
    let (limit, t) = measured(AdaptiveLimitConfig {
        window_samples: 2,
        ..config()
    });
    let end = t + Duration::from_secs(1);
    assert_eq!(limit.on_sample(end, RTT, 10, Sample::Success), 10);
    assert!(
        limit.on_sample(end, RTT, 10, Sample::Success) > 10,
        "the second closes it"
    );
}

#[tokio::test(start_paused = true)]
async fn calls_started_before_the_window_are_left_out() {
    let (limit, t) = measured(config());
    let end = t + Duration::from_secs(5);
    // Slow calls from before the window began: no decision from them.
    for _ in 0..100 {
        limit.on_sample(end, Duration::from_secs(6), 10, Sample::Success);
        limit.on_sample(end, Duration::MAX, 10, Sample::Success);
    }
    assert_eq!(limit.current(), 10);
    let (_, now) = window(&limit, end, RTT, 10);
    assert!(now > 10, "a fresh window still decides: {now}");
}

#[tokio::test(start_paused = true)]
async fn the_limit_stays_within_min_and_max_whatever_the_samples() {
    let config = AdaptiveLimitConfig {
        min: 2,
        max: 5,
        window_samples: 1,
        ..config()
    };
    let (limit, mut t) = measured(config);
    let rtts = [
        Duration::ZERO,
        Duration::from_nanos(1),
        RTT,
        Duration::from_secs(3600),
        Duration::MAX,
    ];
    let in_flights = [0, 1, 5, usize::MAX];
    for round in 0..200_u32 {
        t += Duration::from_millis(300);
        let rtt = rtts[round as usize % rtts.len()];
        let in_flight = in_flights[round as usize % in_flights.len()];
        let outcome = if round % 7 == 0 {
            Sample::Dropped
        } else {
            Sample::Success
        };
        let now = limit.on_sample(t, rtt, in_flight, outcome);
        assert!((2..=5).contains(&now), "round {round}: {now}");
        assert_eq!(now, limit.current());
    }
    // The largest max grows without overflow and stops there.
    let huge = AdaptiveLimitConfig {
        max: Semaphore::MAX_PERMITS,
        window_samples: 1,
        probe_interval: Duration::from_secs(3600),
        ..self::config()
    };
    let (limit, mut t) = measured(huge);
    for _ in 0..200 {
        t += Duration::from_millis(300);
        let now = limit.current();
        let after = limit.on_sample(t, Duration::ZERO, now, Sample::Success);
        assert!(after >= now && after <= Semaphore::MAX_PERMITS);
    }
    assert_eq!(limit.current(), Semaphore::MAX_PERMITS);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_drops_cuts_once_per_round_trip_down_to_min() {
    let (limit, t) = measured(AdaptiveLimitConfig { min: 2, ..config() });
    let second = Duration::from_secs(1);
    let cut = t + second;
    // A hundred timeouts of calls sent together: one cut.
    for _ in 0..100 {
        limit.on_sample(cut, second, 10, Sample::Dropped);
    }
    assert_eq!(limit.current(), 9);
    // A call sent before that cut: no second cut.
    limit.on_sample(cut + RTT, second, 10, Sample::Dropped);
    assert_eq!(limit.current(), 9);
    // A call sent after it: another 10 % (9 * 0.9 = 8.1).
    limit.on_sample(cut + second, second, 9, Sample::Dropped);
    assert_eq!(limit.current(), 8);
    // Round trip after round trip of drops: down to min, never below.
    let mut now = cut + second;
    let mut cuts = 2;
    while limit.current() > 2 {
        now += second;
        limit.on_sample(now, second, 1, Sample::Dropped);
        cuts += 1;
        assert!(cuts < 100);
    }
    // 10 * 0.9^n < 3 needs n = 12.
    assert_eq!(cuts, 12);
    now += second;
    assert_eq!(limit.on_sample(now, second, 1, Sample::Dropped), 2);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_cut_short_by_its_caller_s_budget_neither_cuts_nor_lowers_min_rtt() {
    let (limit, t) = measured(config());
    let initial = limit.current();
    // Callers with less than one no-queue latency left: their calls time
    // out before the partner could have answered any of them.
    let mut now = t;
    for _ in 0..50 {
        now += limit.config.window;
        limit.on_sample(now, RTT / 2, initial, Sample::TimedOut);
    }
    assert_eq!(limit.current(), initial, "no cut");
    assert_eq!(limit.min_rtt(), Some(RTT), "min_rtt not lowered");
    // Windows at the partner's no-queue latency then read as no queue:
    // the limit grows, not shrinks.
    let (_, after) = window(&limit, now, RTT, initial);
    assert!(after > initial, "{after} > {initial}");
    // A timeout past min_rtt is still a drop.
    now += limit.config.window * 2;
    let grown = limit.current();
    limit.on_sample(now, RTT * 2, grown, Sample::TimedOut);
    assert!(limit.current() < grown, "{} < {grown}", limit.current());
}

#[tokio::test(start_paused = true)]
async fn fast_failures_cut_at_most_once_per_window() {
    let (limit, t) = measured(config());
    let fast = Duration::from_millis(1);
    // A thousand 503s a millisecond apart, each sent after the last cut:
    // one cut per 250 ms window, four in the second.
    let mut now = t;
    for _ in 0..1000 {
        now += fast;
        limit.on_sample(now, fast, 10, Sample::Dropped);
    }
    // 10 x 0.9^4 = 6.6 (the first cut at t + 1 ms, then every 250 ms).
    assert_eq!(limit.current(), 6);
}

#[tokio::test(start_paused = true)]
async fn an_idle_client_does_not_ratchet_the_limit_up() {
    let (limit, mut t) = measured(config());
    for _ in 0..100 {
        // Four in flight of ten: less than the limit, latency at its best.
        let now;
        (t, now) = window(&limit, t, RTT, 4);
        assert_eq!(now, 10);
    }
    // It may still come down when latency says so.
    let (t, now) = window(&limit, t, RTT * 3, 4);
    assert!(now < 10, "{now}");
    // Half the limit in flight is not busy enough to grow, the whole
    // limit is.
    let before = now;
    let (t, now) = window(&limit, t, RTT, before.div_ceil(2));
    assert_eq!(now, before);
    let (_, now) = window(&limit, t, RTT, before);
    assert!(now > before, "{now} after {before}");
}

#[tokio::test(start_paused = true)]
async fn a_partner_ten_times_slower_for_good_is_re_measured_and_the_limit_regrows() {
    let (limit, mut t) = measured(config());
    let slow = RTT * 10;
    let mut now = limit.current();
    for i in 1..=FLOOR_WINDOWS {
        let before = now;
        (t, now) = window(&limit, t, slow, now);
        assert!(
            now < before || now == limit.config.min || now == limit.probe_limit,
            "window {i}: {now} after {before}"
        );
        let probing = matches!(limit.lock().phase, Phase::Probing { .. });
        assert_eq!(
            probing,
            i == FLOOR_WINDOWS,
            "a probe after the fifth window at the clamp"
        );
    }
    let kept = limit.lock().estimate;
    // The probe measures the slower partner.
    for _ in 0..3 {
        t += slow;
        now = limit.on_sample(t, slow, 1, Sample::Success);
    }
    assert_eq!(limit.min_rtt(), Some(slow));
    assert_eq!(
        now,
        kept.floor() as usize,
        "the limit from before the probe"
    );
    // The latency is the partner's no-queue latency again: it grows.
    let before = now;
    for _ in 0..5 {
        (t, now) = window(&limit, t, slow, now);
    }
    assert!(now > 2 * before, "{now} after {before}");
}

#[tokio::test(start_paused = true)]
async fn the_periodic_probe_starts_after_probe_interval() {
    let interval = Duration::from_secs(10);
    let (limit, probe_end) = measured(AdaptiveLimitConfig {
        probe_interval: interval,
        ..config()
    });
    let mut t = probe_end;
    let mut now = limit.current();
    while t + limit.config.window < probe_end + interval {
        (t, now) = window(&limit, t, RTT, now);
        assert_ne!(now, 3, "no probe before the interval");
    }
    let due = probe_end + interval;
    assert_eq!(limit.on_sample(due, RTT, now, Sample::Success), 3);
    // A partner that is now slower is what the probe measures.
    for _ in 0..3 {
        limit.on_sample(due + RTT * 4, RTT * 4, 2, Sample::Success);
    }
    assert_eq!(limit.min_rtt(), Some(RTT * 4));
    assert_eq!(limit.current(), now);
}

#[tokio::test(start_paused = true)]
async fn jitter_delays_the_next_probe_by_at_most_its_fraction() {
    let interval = Duration::from_secs(10);
    for _ in 0..20 {
        let config = AdaptiveLimitConfig {
            probe_interval: interval,
            probe_jitter: 0.5,
            ..config()
        };
        let (limit, end) = measured(config);
        let next = limit.lock().next_probe.unwrap();
        assert!(next >= end + interval && next <= end + interval.mul_f64(1.5));
    }
}

#[tokio::test(start_paused = true)]
async fn a_faster_partner_lowers_min_rtt_at_once() {
    let (limit, t) = measured(config());
    let (_, now) = window(&limit, t, RTT / 2, 10);
    assert_eq!(limit.min_rtt(), Some(RTT / 2));
    assert_eq!(now, 20, "no queue at the new min: doubled, in slow start");
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Dependency {
    concurrency: LimitConfig,
}

fn parse(toml: &str) -> Result<LimitConfig, String> {
    toml::from_str::<Dependency>(toml)
        .map(|d| d.concurrency)
        .map_err(|e| e.to_string())
}

#[test]
fn toml_reads_a_number_auto_or_a_table() {
    assert_eq!(parse("concurrency = 8"), Ok(LimitConfig::Fixed(8)));
    assert_eq!(
        parse(r#"concurrency = "auto""#),
        Ok(LimitConfig::Adaptive(AdaptiveLimitConfig::default()))
    );
    let table = parse("concurrency = { min = 1, max = 200, initial = 16 }").unwrap();
    assert_eq!(
        table,
        LimitConfig::Adaptive(AdaptiveLimitConfig {
            min: 1,
            max: 200,
            initial: Some(16),
            ..Default::default()
        })
    );
    let section = parse(
        "[concurrency]\nwindow = \"1s 500ms\"\nprobe_interval = \"2m\"\nbuffer = 0.25\ndrop_factor = 0.5",
    )
    .unwrap();
    let LimitConfig::Adaptive(section) = section else {
        panic!("{section:?}")
    };
    assert_eq!(section.window, Duration::from_millis(1500));
    assert_eq!(section.probe_interval, Duration::from_secs(120));
    assert_eq!((section.buffer, section.drop_factor), (0.25, 0.5));
    assert_eq!(section.max, 256, "missing fields default");
}

#[test]
fn toml_refuses_other_values_with_a_clear_message() {
    for bad in [r#""fast""#, "-3", "true", "1.5"] {
        let err = parse(&format!("concurrency = {bad}")).unwrap_err();
        assert!(
            err.contains(r#"expected a number, "auto" or a table"#),
            "{bad}: {err}"
        );
    }
    let err = parse("concurrency = { maximum = 3 }").unwrap_err();
    assert!(err.contains("unknown field `maximum`"), "{err}");
}

#[test]
fn toml_writes_what_it_reads() {
    let fixed = Dependency {
        concurrency: LimitConfig::Fixed(8),
    };
    assert_eq!(toml::to_string(&fixed).unwrap().trim(), "concurrency = 8");
    for concurrency in [
        LimitConfig::Fixed(8),
        LimitConfig::Adaptive(AdaptiveLimitConfig::default()),
        LimitConfig::Adaptive(AdaptiveLimitConfig {
            initial: Some(16),
            window: Duration::from_millis(750),
            ..Default::default()
        }),
    ] {
        let text = toml::to_string(&Dependency { concurrency }).unwrap();
        assert_eq!(parse(&text), Ok(concurrency), "{text}");
    }
}

#[test]
fn validation_names_the_bad_field() {
    let d = AdaptiveLimitConfig::default;
    let cases = [
        (AdaptiveLimitConfig { min: 0, ..d() }, "min"),
        (
            AdaptiveLimitConfig {
                min: 10,
                max: 9,
                ..d()
            },
            "max",
        ),
        (
            AdaptiveLimitConfig {
                max: Semaphore::MAX_PERMITS + 1,
                ..d()
            },
            "max",
        ),
        (
            AdaptiveLimitConfig {
                initial: Some(0),
                ..d()
            },
            "initial",
        ),
        (
            AdaptiveLimitConfig {
                initial: Some(257),
                ..d()
            },
            "initial",
        ),
        (
            AdaptiveLimitConfig {
                window: Duration::ZERO,
                ..d()
            },
            "window",
        ),
        (
            AdaptiveLimitConfig {
                window_samples: 0,
                ..d()
            },
            "window_samples",
        ),
        (
            AdaptiveLimitConfig {
                buffer: -0.1,
                ..d()
            },
            "buffer",
        ),
        (
            AdaptiveLimitConfig {
                buffer: f64::NAN,
                ..d()
            },
            "buffer",
        ),
        (
            AdaptiveLimitConfig {
                buffer: f64::INFINITY,
                ..d()
            },
            "buffer",
        ),
        (
            AdaptiveLimitConfig {
                drop_factor: 0.0,
                ..d()
            },
            "drop_factor",
        ),
        (
            AdaptiveLimitConfig {
                drop_factor: 1.0,
                ..d()
            },
            "drop_factor",
        ),
        (
            AdaptiveLimitConfig {
                drop_factor: f64::NAN,
                ..d()
            },
            "drop_factor",
        ),
        (
            AdaptiveLimitConfig {
                probe_interval: Duration::ZERO,
                ..d()
            },
            "probe_interval",
        ),
        (
            AdaptiveLimitConfig {
                probe_jitter: -0.5,
                ..d()
            },
            "probe_jitter",
        ),
        (
            AdaptiveLimitConfig {
                probe_jitter: f64::NAN,
                ..d()
            },
            "probe_jitter",
        ),
        (
            AdaptiveLimitConfig {
                probe_samples: 0,
                ..d()
            },
            "probe_samples",
        ),
    ];
    for (config, field) in cases {
        let err = LimitConfig::Adaptive(config).validate().unwrap_err();
        assert_eq!(err.field(), field, "{config:?}");
        assert_eq!(AdaptiveLimit::new(config).unwrap_err(), err);
        assert!(err.problem().chars().next().unwrap().is_lowercase());
    }
    assert_eq!(
        LimitConfig::Fixed(0).validate().unwrap_err().to_string(),
        "invalid config: `concurrency` must be at least 1"
    );
    assert_eq!(
        LimitConfig::Fixed(Semaphore::MAX_PERMITS + 1)
            .validate()
            .unwrap_err()
            .field(),
        "concurrency"
    );
    assert!(LimitConfig::Fixed(1).validate().is_ok());
    assert!(
        LimitConfig::Adaptive(AdaptiveLimitConfig {
            min: 5,
            max: 5,
            ..d()
        })
        .validate()
        .is_ok()
    );
}

#[test]
fn an_absent_initial_is_ten_clamped_a_given_one_is_kept() {
    let d = AdaptiveLimitConfig::default;
    assert_eq!(d().initial_limit(), 10);
    assert_eq!(AdaptiveLimitConfig { max: 4, ..d() }.initial_limit(), 4);
    assert_eq!(AdaptiveLimitConfig { min: 20, ..d() }.initial_limit(), 20);
    assert_eq!(
        AdaptiveLimitConfig {
            initial: Some(1),
            ..d()
        }
        .initial_limit(),
        1
    );
    let limit = AdaptiveLimit::new(AdaptiveLimitConfig { min: 20, ..d() }).unwrap();
    assert_eq!(limit.current(), 20);
    // A probe at a min above 3 runs at min.
    let t0 = Instant::now();
    for in_flight in 1..=3 {
        assert_eq!(limit.on_sample(t0, RTT, in_flight, Sample::Success), 20);
    }
    let due = t0 + limit.config.probe_interval * 2;
    assert_eq!(limit.on_sample(due, RTT, 1, Sample::Success), 20);
    assert!(matches!(limit.lock().phase, Phase::Probing { .. }));
}

#[tokio::test(start_paused = true)]
async fn slow_start_windows_last_one_min_rtt_and_end_at_a_queue_or_a_drop() {
    let (limit, t) = measured(AdaptiveLimitConfig {
        window_samples: 1000,
        ..config()
    });
    assert_eq!(limit.growth(), Some(RTT * 2));
    // A whole round (10 calls, the limit) sent in the window, answered one
    // min-RTT after it opened: the window closes then, not after `window`.
    let mut now = 0;
    for _ in 0..10 {
        now = limit.on_sample(t + RTT * 2, RTT, 10, Sample::Success);
    }
    assert_eq!(now, 20);
    // A drop ends the slow start for good.
    limit.on_sample(t + RTT * 3, RTT, 20, Sample::Dropped);
    assert_eq!(limit.growth(), None);
    let cut = limit.current();
    for _ in 0..cut {
        now = limit.on_sample(t + RTT * 5, RTT, cut, Sample::Success);
    }
    assert_eq!(now, cut, "a window shorter than `window` closes no more");
}

#[tokio::test(start_paused = true)]
async fn slow_start_does_not_double_a_limit_the_calls_did_not_use() {
    let (limit, t) = measured(config());
    // Five answers at the no-queue latency with 4 of 10 in flight: the
    // window closes, app-limited, and the limit stays.
    let (_, now) = window(&limit, t, RTT, 4);
    assert_eq!(now, 10);
    assert_eq!(limit.growth(), Some(RTT * 2), "still in slow start");
}

#[tokio::test(start_paused = true)]
async fn one_call_of_the_round_that_met_a_queue_ends_the_slow_start() {
    let (limit, t) = measured(config());
    assert!(limit.growth().is_some());
    // 1.4 no-queue latencies: noise, still slow start.
    limit.on_sample(t + RTT * 2, RTT.mul_f64(1.4), 10, Sample::Success);
    assert!(limit.growth().is_some());
    // Twice the no-queue latency, sent in the window: a queue at the
    // partner, the slow start is over before the window closes.
    limit.on_sample(t + RTT * 3, RTT * 2, 10, Sample::Success);
    assert_eq!(limit.growth(), None);
    assert_eq!(limit.current(), 10, "the limit itself is untouched");
}
