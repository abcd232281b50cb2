//! The wait before the next send of a batch that was not acknowledged.

use std::time::Duration;

use rand::Rng;

use crate::retry::Backoff;

/// A refusal by the open breaker is followed by at least this wait, so a
/// breaker answering "retry after 0" cannot spin the flush loop.
pub(crate) const MIN_WAIT: Duration = Duration::from_millis(1);

/// The wait after the `failures`-th failed send in a row of one batch:
/// the jittered backoff, at least the server's `Retry-After`, never over
/// the cap (`backoff.max`).
pub(crate) fn after_failure<R: Rng + ?Sized>(
    backoff: &Backoff,
    failures: u32,
    retry_after: Option<Duration>,
    rng: &mut R,
) -> Duration {
    let jittered = backoff.wait(failures, None, rng);
    retry_after
        .map_or(jittered, |asked| asked.max(jittered))
        .min(backoff.max())
}

/// The wait after the open breaker refused a send: until it admits its
/// probe, never over the cap. The refusal made no request, so this is no
/// failure of the batch.
pub(crate) fn after_open(backoff: &Backoff, retry_after: Duration) -> Duration {
    retry_after.clamp(MIN_WAIT, backoff.max().max(MIN_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Jitter;
    use rand::SeedableRng;

    fn backoff(jitter: Jitter) -> Backoff {
        Backoff::new(
            Duration::from_millis(500),
            Duration::from_secs(60),
            2.0,
            jitter,
        )
        .unwrap()
    }

    /// Full jitter: every wait within `[0, ceiling(n)]`, and the draws
    /// spread (not all the same).
    #[test]
    fn full_jitter_stays_within_the_ceiling_and_spreads() {
        let b = backoff(Jitter::Full);
        let mut rng = rand::rngs::StdRng::seed_from_u64(51);
        for n in 1..=10 {
            let waits: Vec<Duration> = (0..200)
                .map(|_| after_failure(&b, n, None, &mut rng))
                .collect();
            assert!(waits.iter().all(|w| *w <= b.ceiling(n)));
            let (lo, hi) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
            assert!(*hi - *lo > b.ceiling(n) / 2, "retry {n}: {lo:?}..{hi:?}");
        }
    }

    /// The cap holds for any retry number, and for a `Retry-After` above it.
    #[test]
    fn the_cap_bounds_backoff_and_retry_after() {
        let b = backoff(Jitter::None);
        let mut rng = rand::rng();
        let waits: Vec<u64> = (1..=9)
            .map(|n| after_failure(&b, n, None, &mut rng).as_secs())
            .collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(
            after_failure(&b, u32::MAX, None, &mut rng),
            Duration::from_secs(60)
        );
        let asked = Some(Duration::from_secs(3600));
        assert_eq!(
            after_failure(&b, 1, asked, &mut rng),
            Duration::from_secs(60)
        );
    }

    /// A `Retry-After` within the cap is honoured: never waited less.
    #[test]
    fn retry_after_within_the_cap_is_a_lower_bound() {
        let b = backoff(Jitter::Full);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let asked = Some(Duration::from_secs(5));
        for _ in 0..100 {
            let w = after_failure(&b, 1, asked, &mut rng);
            assert_eq!(
                w,
                Duration::from_secs(5),
                "the first ceiling (500ms) is below 5s"
            );
            let w = after_failure(&b, 6, asked, &mut rng);
            assert!(w >= Duration::from_secs(5) && w <= b.ceiling(6));
        }
    }

    /// An open breaker's `retry_after` is waited, at least `MIN_WAIT`, at
    /// most the cap.
    #[test]
    fn open_breaker_wait_is_its_retry_after() {
        let b = backoff(Jitter::Full);
        assert_eq!(
            after_open(&b, Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        assert_eq!(after_open(&b, Duration::ZERO), MIN_WAIT);
        assert_eq!(
            after_open(&b, Duration::from_secs(600)),
            Duration::from_secs(60)
        );
    }
}
