//! Backoff: [`Backoff`] and its [`Jitter`] (docs/contract.md §2 rule 7).
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

/// How much randomness the backoff adds.
///
/// Serialises as `"full"` or `"none"`.
///
/// # Example
///
/// ```
/// use budget_core::retry::Jitter;
/// let j: Jitter = serde_json::from_str("\"none\"").unwrap();
/// assert_eq!(j, Jitter::None);
/// assert_eq!(Jitter::default(), Jitter::Full);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Jitter {
    /// Uniform in `[0, ceiling]` ("full jitter").
    #[default]
    Full,
    /// Exactly the ceiling: deterministic, for demos and tests.
    None,
    /// Test only, not configurable: "decorrelated jitter" (uniform in
    /// `[initial, min(max, 3 * previous wait)]`), the proof that a jitter
    /// reading the previous wait needs no change outside this file.
    #[cfg(test)]
    #[serde(skip)]
    Decorrelated,
}

/// A validated exponential backoff: how long to wait before the next
/// attempt when the server did not say (docs/contract.md §2 rule 7).
///
/// Exponential with "full jitter" (AWS Architecture Blog, "Exponential
/// Backoff and Jitter"): before retry `n` (1 for the first retry) the wait is
/// uniform in `[0, ceiling(n)]`, where
/// `ceiling(n) = min(max, initial * multiplier^(n-1))`. Full jitter spreads
/// the retries of many clients that failed together, so they do not return
/// together. [`Jitter::None`] gives exactly `ceiling(n)`, for demos and
/// tests that must be reproducible.
///
/// The arithmetic cannot overflow into a short wait: a product that does not
/// fit (a huge `n`, a huge multiplier) is the cap.
///
/// The random source is a parameter, so tests pass a seeded generator.
///
/// [`Backoff::wait`] is also told the previous wait (the one before the
/// attempt that just failed), so a jitter that grows from it, such as the
/// same article's "decorrelated jitter", fits here without the retry
/// decision or the client changing.
///
/// Build it with [`Backoff::new`], or from configuration through
/// [`BackoffConfig::build`](super::BackoffConfig::build) (the `backoff`
/// table of a [`RetryConfig`](super::RetryConfig)). It owns its
/// [`Jitter`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{Backoff, Jitter};
/// use rand::SeedableRng;
///
/// let b = Backoff::new(Duration::from_millis(100), Duration::from_secs(2), 2.0, Jitter::Full)
///     .unwrap();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(7);
/// let w = b.wait(3, None, &mut rng);
/// assert!(w <= b.ceiling(3));
/// assert_eq!(b.ceiling(3), Duration::from_millis(400));
/// ```
///
/// Without jitter the waits are the ceilings, and no retry number
/// overflows past the cap:
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::{Backoff, Jitter};
///
/// let b = Backoff::new(Duration::from_millis(50), Duration::from_secs(1), 2.0, Jitter::None)
///     .unwrap();
/// let mut rng = rand::rng();
/// let waits: Vec<u128> = (1..=6).map(|n| b.wait(n, None, &mut rng).as_millis()).collect();
/// assert_eq!(waits, [50, 100, 200, 400, 800, 1000]);
/// assert_eq!(b.wait(u32::MAX, None, &mut rng), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    multiplier: f64,
    jitter: Jitter,
}

impl Backoff {
    /// A backoff starting at `initial`, multiplied by `multiplier` for each
    /// further retry, capped at `max`.
    ///
    /// Errors name the field as a [`RetryConfig`](super::RetryConfig) spells
    /// it: `initial` zero (`backoff.initial`), `max` below `initial`
    /// (`backoff.max`), `multiplier` below 1 or not finite
    /// (`backoff.multiplier`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::retry::{Backoff, Jitter};
    ///
    /// let err = Backoff::new(Duration::ZERO, Duration::from_secs(1), 2.0, Jitter::Full).unwrap_err();
    /// assert_eq!(err.field(), "backoff.initial");
    /// let err = Backoff::new(Duration::from_secs(1), Duration::from_secs(1), f64::NAN, Jitter::Full)
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "backoff.multiplier");
    /// ```
    pub fn new(
        initial: Duration,
        max: Duration,
        multiplier: f64,
        jitter: Jitter,
    ) -> Result<Self, ConfigError> {
        if initial.is_zero() {
            return Err(ConfigError::new("backoff.initial", "must not be zero"));
        }
        if max < initial {
            return Err(ConfigError::new(
                "backoff.max",
                "must not be below backoff.initial",
            ));
        }
        if !multiplier.is_finite() {
            return Err(ConfigError::new("backoff.multiplier", "must be finite"));
        }
        if multiplier < 1.0 {
            return Err(ConfigError::new("backoff.multiplier", "must be at least 1"));
        }
        Ok(Self {
            initial,
            max,
            multiplier,
            jitter,
        })
    }

    /// The wait before retry `retry` (1 for the first retry), without
    /// jitter: `min(max, initial * multiplier^(retry-1))`. `retry` 0 counts
    /// as 1.
    ///
    /// Computed on nanoseconds in `f64`, exact for whole multipliers while
    /// the product stays below 2^53 ns (about 104 days, far above any cap).
    /// A product that is not finite or exceeds the cap is the cap.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::retry::{Backoff, Jitter};
    /// let b = Backoff::new(Duration::from_millis(10), Duration::from_millis(25), 1.5, Jitter::Full)
    ///     .unwrap();
    /// assert_eq!(b.ceiling(2), Duration::from_millis(15));
    /// assert_eq!(b.ceiling(4), Duration::from_millis(25));
    /// ```
    pub fn ceiling(&self, retry: u32) -> Duration {
        let exponent = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let nanos = self.initial.as_nanos() as f64 * self.multiplier.powi(exponent);
        if !nanos.is_finite() || nanos >= self.max.as_nanos() as f64 {
            return self.max;
        }
        // Below the cap, hence below `Duration::MAX`; `as` saturates anyway.
        let nanos = nanos.round() as u128;
        let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
        // The remainder is below 10^9, so it fits a u32.
        let sub = (nanos % 1_000_000_000) as u32;
        Duration::new(secs, sub).min(self.max)
    }

    /// The wait before retry `retry` (1 for the first retry): the
    /// [`ceiling`](Self::ceiling) with the configured jitter, drawing from
    /// `rng`.
    ///
    /// `previous` is how long the call waited before the attempt that just
    /// failed (`None` before the first retry). Neither [`Jitter::Full`] nor
    /// [`Jitter::None`] uses it; it is there for a jitter that grows from
    /// the previous wait, so adding one changes only this type.
    ///
    /// With [`Jitter::Full`] the wait is uniform in `[0, ceiling]` (a ceiling
    /// above `u64::MAX` ns, some 584 years, draws from `[0, u64::MAX ns]`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::retry::{Backoff, Jitter};
    /// use rand::SeedableRng;
    ///
    /// let b = Backoff::new(Duration::from_millis(50), Duration::from_secs(1), 2.0, Jitter::Full)
    ///     .unwrap();
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    /// assert!((0..100).all(|_| b.wait(10, None, &mut rng) <= Duration::from_secs(1)));
    /// let previous = Some(Duration::from_millis(30));
    /// assert!(b.wait(2, previous, &mut rng) <= Duration::from_millis(100));
    /// ```
    pub fn wait<R: Rng + ?Sized>(
        &self,
        retry: u32,
        previous: Option<Duration>,
        rng: &mut R,
    ) -> Duration {
        // Full and none jitter draw from the ceiling alone; so far only the
        // test-only decorrelated jitter reads `previous`.
        #[cfg(not(test))]
        let _ = previous;
        let ceiling = self.ceiling(retry);
        match self.jitter {
            Jitter::None => ceiling,
            Jitter::Full => uniform(Duration::ZERO, ceiling, rng),
            #[cfg(test)]
            Jitter::Decorrelated => {
                let top = previous
                    .unwrap_or(self.initial)
                    .saturating_mul(3)
                    .clamp(self.initial, self.max);
                uniform(self.initial, top, rng)
            }
        }
    }

    /// The first retry's ceiling.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::{Backoff, Jitter};
    /// let b = Backoff::new(Duration::from_millis(5), Duration::from_secs(1), 2.0, Jitter::Full).unwrap();
    /// assert_eq!(b.initial(), Duration::from_millis(5));
    /// ```
    pub fn initial(&self) -> Duration {
        self.initial
    }

    /// The cap.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::{Backoff, Jitter};
    /// let b = Backoff::new(Duration::from_millis(5), Duration::from_secs(1), 2.0, Jitter::Full).unwrap();
    /// assert_eq!(b.max(), Duration::from_secs(1));
    /// ```
    pub fn max(&self) -> Duration {
        self.max
    }

    /// The growth factor per retry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::{Backoff, Jitter};
    /// let b = Backoff::new(Duration::from_millis(5), Duration::from_secs(1), 3.0, Jitter::Full).unwrap();
    /// assert_eq!(b.multiplier(), 3.0);
    /// ```
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The jitter mode.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::{Backoff, Jitter};
    /// let b = Backoff::new(Duration::from_millis(5), Duration::from_secs(1), 2.0, Jitter::None).unwrap();
    /// assert_eq!(b.jitter(), Jitter::None);
    /// ```
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }
}

/// A wait drawn uniformly from `[low, high]` (`low <= high`), in
/// nanoseconds; a bound above `u64::MAX` ns is `u64::MAX` ns.
fn uniform<R: Rng + ?Sized>(low: Duration, high: Duration, rng: &mut R) -> Duration {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.random_range(ns(low)..=ns(high)))
}

impl Default for Backoff {
    /// The contract defaults: 50 ms, doubling, capped at 1 s, full jitter
    /// ([`Jitter::default`]). [`BackoffConfig::default`](super::BackoffConfig)
    /// reads them from here.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(50),
            max: Duration::from_secs(1),
            multiplier: 2.0,
            jitter: Jitter::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn exact(initial_ms: u64, max_ms: u64, multiplier: f64) -> Backoff {
        Backoff::new(
            Duration::from_millis(initial_ms),
            Duration::from_millis(max_ms),
            multiplier,
            Jitter::None,
        )
        .unwrap()
    }

    #[test]
    fn rule7_jitter_free_backoff_grows_exponentially_then_is_capped() {
        let b = exact(50, 1000, 2.0);
        let mut rng = StdRng::seed_from_u64(0);
        let waits: Vec<Duration> = (1..=7).map(|n| b.wait(n, None, &mut rng)).collect();
        let ms = |v: u64| Duration::from_millis(v);
        assert_eq!(
            waits,
            [
                ms(50),
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1000),
                ms(1000)
            ]
        );
        assert_eq!(b.ceiling(0), ms(50), "retry 0 counts as the first");
    }

    #[test]
    fn rule7_fractional_and_unit_multipliers() {
        let b = exact(100, 10_000, 1.5);
        assert_eq!(b.ceiling(3), Duration::from_millis(225));
        let flat = exact(100, 10_000, 1.0);
        assert_eq!(flat.ceiling(u32::MAX), Duration::from_millis(100));
    }

    #[test]
    fn rule7_overflow_at_huge_attempt_numbers_picks_the_cap() {
        let b = exact(50, 1000, 2.0);
        for n in [64, 65, 1_000, 1_000_000, u32::MAX - 1, u32::MAX] {
            assert_eq!(b.ceiling(n), Duration::from_secs(1), "{n}");
        }
        let huge = Backoff::new(Duration::MAX, Duration::MAX, 1e300, Jitter::None).unwrap();
        assert_eq!(huge.ceiling(u32::MAX), Duration::MAX);
        assert_eq!(huge.ceiling(1), Duration::MAX);
        let mut rng = StdRng::seed_from_u64(0);
        let full = Backoff {
            jitter: Jitter::Full,
            ..huge
        };
        let _ = full.wait(u32::MAX, Some(Duration::MAX), &mut rng); // no panic
    }

    #[test]
    fn rule7_validation_names_the_field() {
        let s = Duration::from_secs(1);
        let field = |r: Result<Backoff, ConfigError>| r.unwrap_err().field().to_owned();
        assert_eq!(
            field(Backoff::new(Duration::ZERO, s, 2.0, Jitter::Full)),
            "backoff.initial"
        );
        assert_eq!(
            field(Backoff::new(s, s / 2, 2.0, Jitter::Full)),
            "backoff.max"
        );
        for m in [0.5, 0.0, -2.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                field(Backoff::new(s, s, m, Jitter::Full)),
                "backoff.multiplier"
            );
        }
        assert!(Backoff::new(s, s, 1.0, Jitter::Full).is_ok());
    }

    #[test]
    fn rule7_full_jitter_is_seeded_and_spreads() {
        let b = Backoff::default();
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..20)
                .map(|_| b.wait(4, None, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3), "the same seed gives the same waits");
        let waits = draw(3);
        assert!(waits.iter().all(|w| *w <= Duration::from_millis(400)));
        assert!(
            waits.iter().any(|w| *w < Duration::from_millis(200)),
            "spread"
        );
    }

    #[test]
    fn rule7_a_jitter_can_grow_from_the_previous_wait() {
        // Decorrelated jitter, test only: each wait is drawn up to three
        // times the previous one, from `initial`, capped at `max`.
        let b = Backoff {
            jitter: Jitter::Decorrelated,
            ..exact(50, 1000, 2.0)
        };
        let mut rng = StdRng::seed_from_u64(5);
        for _ in 0..200 {
            let first = b.wait(1, None, &mut rng);
            assert!((ms(50)..=ms(150)).contains(&first), "{first:?}");
            let next = b.wait(2, Some(ms(100)), &mut rng);
            assert!((ms(50)..=ms(300)).contains(&next), "{next:?}");
            let capped = b.wait(9, Some(ms(900)), &mut rng);
            assert!((ms(50)..=ms(1000)).contains(&capped), "{capped:?}");
        }
        let spread = (0..50).map(|_| b.wait(2, Some(ms(900)), &mut rng));
        assert!(
            spread.max().unwrap() > ms(300),
            "it reads the previous wait"
        );
    }

    proptest! {
        #[test]
        fn rule7_full_jitter_stays_within_zero_and_the_ceiling(
            seed in any::<u64>(),
            initial_ms in 1u64..10_000,
            extra_ms in 0u64..100_000,
            multiplier in 1.0f64..100.0,
            retry in any::<u32>(),
        ) {
            let b = Backoff::new(
                Duration::from_millis(initial_ms),
                Duration::from_millis(initial_ms + extra_ms),
                multiplier,
                Jitter::Full,
            ).unwrap();
            let mut rng = StdRng::seed_from_u64(seed);
            let ceiling = b.ceiling(retry);
            prop_assert!(ceiling <= b.max());
            prop_assert!(b.wait(retry, None, &mut rng) <= ceiling);
        }

        #[test]
        fn rule7_the_ceiling_never_shrinks_as_retries_grow(
            initial_ms in 1u64..10_000,
            extra_ms in 0u64..100_000,
            multiplier in 1.0f64..100.0,
            retry in 1u32..u32::MAX,
        ) {
            let b = Backoff::new(
                Duration::from_millis(initial_ms),
                Duration::from_millis(initial_ms + extra_ms),
                multiplier,
                Jitter::None,
            ).unwrap();
            prop_assert!(b.ceiling(retry) <= b.ceiling(retry + 1));
            prop_assert!(b.ceiling(retry) >= b.initial());
        }
    }
}
