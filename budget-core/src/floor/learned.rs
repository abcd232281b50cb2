//! A learned floor: the dependency's observed latency quantile times a
//! margin, clamped to configured bounds (docs/contract.md §2 rule 10).
//!
//! The estimate is a decaying window of the latencies of the dependency's
//! successful attempts, kept in two [`hdrhistogram`] histograms that take
//! turns (as tower's `hedge` keeps its latency percentiles): samples go
//! into the current one; every half `window` the older one is dropped and
//! the current one becomes the older one. The quantile is read over both,
//! so it always covers between half a window and a whole window of
//! samples, and a latency change is followed within one `window`.
//!
//! A window with few samples (a slow dependency's first seconds) is read
//! so that the floor rests on at least five of them (or as many as a
//! window of 100 samples puts at or above the quantile, if fewer: two for
//! a p99): the fifth-longest at most, and until `min_samples` exist the
//! fifth-longest itself).
//!
//! Reading the quantile walks the histogram, so the effective floor is
//! recomputed at most every 100 ms and cached: a call reads a cached
//! number under a short lock.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::floor::{LearnedFloor, LearnedFloorConfig};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut config = LearnedFloorConfig::default();
//! config.margin = 1.5;
//! let floor = LearnedFloor::new(config).unwrap();
//! // Cold start: too few samples, the configured minimum applies.
//! assert_eq!(floor.current().floor.get(), Duration::from_millis(5));
//! for _ in 0..100 {
//!     floor.observe(Duration::from_millis(400));
//! }
//! // The floor is recomputed at most every 100 ms.
//! tokio::time::advance(Duration::from_millis(100)).await;
//! let now = floor.current();
//! // p95 (the default quantile) of 400 ms, times the margin 1.5.
//! assert_eq!(now.floor.get().as_millis(), 600);
//! assert_eq!(now.basis.unwrap().to_string(), "p95 400ms x 1.5");
//! # }
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

use super::fixed::Floor;
use super::observer::{Observer, Reporter};
use crate::config::ConfigError;

mod config;

pub use config::LearnedFloorConfig;

/// How often at most the effective floor is recomputed from the window.
pub(crate) const REFRESH: Duration = Duration::from_millis(100);

/// The longest latency the histograms hold; longer samples count as this.
pub(crate) const MAX_SAMPLE: Duration = Duration::from_secs(60);

/// Where an effective floor came from, as the ledger's skip note says it
/// (`skipped: 420ms < floor 610ms (p99 407ms x 1.5)`).
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::{Clamp, FloorBasis};
///
/// let b = FloorBasis::Learned { quantile: 0.99, observed: Duration::from_millis(407), margin: 1.5, clamp: None };
/// assert_eq!(b.to_string(), "p99 407ms x 1.5");
/// let b = FloorBasis::Learned { quantile: 0.999, observed: Duration::from_millis(2), margin: 2.0, clamp: Some(Clamp::Min) };
/// assert_eq!(b.to_string(), "p99.9 2ms x 2, at min");
/// let cold = |samples, longest| FloorBasis::ColdStart { samples, needed: 20, longest };
/// assert_eq!(cold(7, 5).to_string(), "cold start: 5th longest of 7 samples, 20 needed");
/// assert_eq!(cold(3, 2).to_string(), "cold start: 2nd longest of 3 samples, 20 needed");
/// assert_eq!(cold(3, 1).to_string(), "cold start: longest of 3 samples, 20 needed");
/// assert_eq!(cold(3, 5).to_string(), "cold start: 3 samples, 20 needed");
/// assert_eq!(cold(0, 5).to_string(), "cold start: no sample yet");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum FloorBasis {
    /// The window's quantile times the margin.
    Learned {
        /// The quantile read (0.99 for p99).
        quantile: f64,
        /// The latency at that quantile.
        observed: Duration,
        /// The factor applied.
        margin: f64,
        /// Whether `min` or `max` bounded the product.
        clamp: Option<Clamp>,
    },
    /// Too few samples yet: the `longest`-th longest sample seen (1: the
    /// longest), at least the cold-start floor; with fewer than `longest`
    /// samples, the cold-start floor.
    ColdStart {
        /// Samples in the window.
        samples: u64,
        /// Samples needed.
        needed: u64,
        /// Which sample, counted from the longest, sets the floor.
        longest: u64,
    },
}

/// Which bound of a learned floor applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clamp {
    /// The product was below `min`.
    Min,
    /// The product was above `max`.
    Max,
}

impl fmt::Display for FloorBasis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FloorBasis::Learned {
                quantile,
                observed,
                margin,
                clamp,
            } => {
                let percent = (quantile * 1000.0).round() / 10.0;
                write!(f, "p{percent} {}ms x {margin}", observed.as_millis())?;
                match clamp {
                    Some(Clamp::Min) => f.write_str(", at min"),
                    Some(Clamp::Max) => f.write_str(", at max"),
                    None => Ok(()),
                }
            }
            FloorBasis::ColdStart { samples: 0, .. } => f.write_str("cold start: no sample yet"),
            FloorBasis::ColdStart {
                samples,
                needed,
                longest,
            } => {
                f.write_str("cold start: ")?;
                match longest {
                    _ if samples < longest => {}
                    1 => f.write_str("longest of ")?,
                    2 => f.write_str("2nd longest of ")?,
                    3 => f.write_str("3rd longest of ")?,
                    n => write!(f, "{n}th longest of ")?,
                }
                write!(f, "{samples} samples, {needed} needed")
            }
        }
    }
}

/// A floor in force now, and where it came from (`None`: a fixed floor).
///
/// ```
/// use std::time::Duration;
/// use budget_core::floor::{Effective, Floor};
///
/// let e = Effective::fixed(Floor::new(Duration::from_millis(10)));
/// assert!(e.basis.is_none());
/// assert_eq!(e.check(Duration::from_millis(3)).unwrap_err().to_string(), "3ms < floor 10ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Effective {
    /// The floor.
    pub floor: Floor,
    /// Where it came from.
    pub basis: Option<FloorBasis>,
}

impl Effective {
    /// A fixed floor, with no basis to report.
    ///
    /// ```
    /// # use budget_core::floor::{Effective, Floor};
    /// assert_eq!(Effective::fixed(Floor::default()).floor, Floor::default());
    /// ```
    pub const fn fixed(floor: Floor) -> Self {
        Self { floor, basis: None }
    }

    /// [`Floor::check`], the refusal saying where the floor came from.
    ///
    /// # Errors
    ///
    /// [`BelowFloor`](super::BelowFloor) when `remaining` does not reach it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::{Effective, Floor};
    /// assert!(Effective::fixed(Floor::default()).check(Duration::from_millis(1)).is_ok());
    /// ```
    pub fn check(&self, remaining: Duration) -> Result<(), super::BelowFloor> {
        self.floor
            .check(remaining)
            .map_err(|e| e.with_basis(self.basis))
    }
}

/// A floor learned from a dependency's latency; shared by every call to
/// it: the quantile of a decaying window of its successful attempts'
/// latencies, times a margin, within configured bounds
/// ([`LearnedFloorConfig`]).
#[derive(Debug)]
pub struct LearnedFloor {
    config: LearnedFloorConfig,
    cold: Effective,
    state: Mutex<Window>,
    /// Who hears of each recomputation, once reporting started.
    reporter: OnceLock<Reporter>,
}

#[derive(Debug)]
struct Window {
    current: Histogram<u32>,
    older: Histogram<u32>,
    scratch: Histogram<u32>,
    rotated_at: Instant,
    computed_at: Option<Instant>,
    dirty: bool,
    effective: Effective,
}

/// How far a learned latency distribution reaches past its middle: its
/// median and its p99 ([`LearnedFloor::spread`]).
#[cfg(any(outbound, test))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spread {
    /// The median.
    pub(crate) p50: Duration,
    /// The 99th percentile.
    pub(crate) p99: Duration,
}

fn histogram() -> Histogram<u32> {
    // 1 us to a minute, 3 significant digits (0.1 % resolution): about
    // 70 KiB of counts each.
    Histogram::new_with_bounds(1, MAX_SAMPLE.as_micros() as u64, 3)
        .expect("static histogram bounds are valid")
}

impl LearnedFloor {
    /// A learned floor with `config`, cold until samples come.
    ///
    /// # Errors
    ///
    /// [`LearnedFloorConfig::validate`]'s.
    ///
    /// ```
    /// use budget_core::floor::{LearnedFloor, LearnedFloorConfig};
    /// let mut bad = LearnedFloorConfig::default();
    /// bad.quantile = 1.0;
    /// assert_eq!(LearnedFloor::new(bad).unwrap_err().field(), "quantile");
    /// ```
    pub fn new(config: LearnedFloorConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let cold = Effective {
            floor: Floor::new(config.cold_start.unwrap_or(config.min)),
            basis: Some(FloorBasis::ColdStart {
                samples: 0,
                needed: config.min_samples,
                longest: tail(config.quantile),
            }),
        };
        Ok(Self {
            config,
            cold,
            state: Mutex::new(Window {
                current: histogram(),
                older: histogram(),
                scratch: histogram(),
                rotated_at: Instant::now(),
                computed_at: None,
                dirty: false,
                effective: cold,
            }),
            reporter: OnceLock::new(),
        })
    }

    /// Reports the floor of `dependency` to `observer` from now on: now,
    /// and each time it is recomputed (not on every call that reads it).
    /// Only the first call counts: a floor reports to one observer.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// use budget_core::floor::{LearnedFloor, LearnedFloorConfig, Observer};
    ///
    /// struct Print;
    /// impl Observer for Print {
    ///     fn floor_changed(&self, dependency: &Arc<str>, floor: Duration) {
    ///         println!("{dependency}: {floor:?}");
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let floor = LearnedFloor::new(LearnedFloorConfig::default()).unwrap();
    /// floor.report_to(Arc::from("pricing"), Arc::new(Print)); // prints the cold start's 5ms
    /// # }
    /// ```
    pub fn report_to(&self, dependency: Arc<str>, observer: Arc<dyn Observer>) {
        let reporter = Reporter {
            dependency,
            observer,
        };
        reporter.report(self.current().floor.get());
        let _ = self.reporter.set(reporter);
    }

    /// Its settings.
    ///
    /// ```
    /// # use budget_core::floor::{LearnedFloor, LearnedFloorConfig};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let f = LearnedFloor::new(LearnedFloorConfig::default()).unwrap();
    /// assert_eq!(f.config().quantile, 0.95);
    /// # }
    /// ```
    pub fn config(&self) -> &LearnedFloorConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        // A panic while holding the lock leaves plain numbers behind.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the latency of one attempt: a successful one, or one that
    /// timed out (its latency is at least that long).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::{LearnedFloor, LearnedFloorConfig};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let f = LearnedFloor::new(LearnedFloorConfig::default()).unwrap();
    /// f.observe(Duration::from_millis(12));
    /// # }
    /// ```
    pub fn observe(&self, latency: Duration) {
        let micros = latency.as_micros().clamp(1, MAX_SAMPLE.as_micros()) as u64;
        let mut w = self.lock();
        self.rotate(&mut w, Instant::now());
        w.current.saturating_record(micros);
        w.dirty = true;
    }

    /// The floor in force now and its basis; recomputed from the window
    /// at most every `REFRESH`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::floor::{FloorBasis, LearnedFloor, LearnedFloorConfig};
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let f = LearnedFloor::new(LearnedFloorConfig::default()).unwrap();
    /// assert!(matches!(f.current().basis, Some(FloorBasis::ColdStart { samples: 0, .. })));
    /// # }
    /// ```
    pub fn current(&self) -> Effective {
        let now = Instant::now();
        let mut w = self.lock();
        let due = w
            .computed_at
            .is_none_or(|at| now.saturating_duration_since(at) >= REFRESH);
        if due {
            let rotated = self.rotate(&mut w, now);
            if w.dirty || rotated || w.computed_at.is_none() {
                w.effective = self.compute(&mut w);
                w.dirty = false;
                if let Some(reporter) = self.reporter.get() {
                    reporter.report(w.effective.floor.get());
                }
            }
            w.computed_at = Some(now);
        }
        w.effective
    }

    /// The window's median and p99 as of the last [`current`](Self::current)
    /// (read from the window the floor was computed from, at most
    /// `REFRESH` old); `None` while it had fewer than `min_samples`
    /// samples.
    #[cfg(any(outbound, test))]
    pub(crate) fn spread(&self) -> Option<Spread> {
        let w = self.lock();
        (w.scratch.len() >= self.config.min_samples).then(|| Spread {
            p50: Duration::from_micros(w.scratch.value_at_quantile(0.5)),
            p99: Duration::from_micros(w.scratch.value_at_quantile(0.99)),
        })
    }

    /// Drops the older histogram when half a window has passed; true when
    /// it did.
    fn rotate(&self, w: &mut Window, now: Instant) -> bool {
        let half = self.config.window / 2;
        let since = now.saturating_duration_since(w.rotated_at);
        if since < half {
            return false;
        }
        if since >= self.config.window {
            // Nothing recent enough in either half.
            w.older.reset();
            w.current.reset();
        } else {
            std::mem::swap(&mut w.older, &mut w.current);
            w.current.reset();
        }
        w.rotated_at = now;
        true
    }

    /// The highest rank (1: the shortest) of `samples` samples that has
    /// [`tail`] samples at or above it; `None` with fewer samples.
    fn top_rank(&self, samples: u64) -> Option<u64> {
        samples
            .checked_sub(tail(self.config.quantile) - 1)
            .filter(|&rank| rank >= 1)
    }

    /// The quantile to read from `samples` samples: the configured one,
    /// but with at least [`tail`] samples at or above it.
    fn quantile_of(&self, samples: u64) -> f64 {
        let q = self.config.quantile;
        let rank = (q * samples as f64).ceil() as u64;
        match self.top_rank(samples) {
            Some(most) if rank > most => rank_quantile(most, samples),
            _ => q,
        }
    }

    fn compute(&self, w: &mut Window) -> Effective {
        let Window {
            current,
            older,
            scratch,
            ..
        } = w;
        scratch.reset();
        // Same bounds: adding cannot fail.
        let _ = scratch.add(&*older);
        let _ = scratch.add(&*current);
        let samples = scratch.len();
        if samples < self.config.min_samples {
            // Too few recent samples for a quantile: the [`tail`]-th
            // longest seen (a partner's latency is known to reach that),
            // at least the cold-start floor; with fewer samples, the
            // cold-start floor. Not the longest: one call of the first
            // burst that timed out in a queue at the partner would refuse
            // every call with less time left, and a floor that refuses
            // every call learns nothing new, so it would stand until the
            // window forgot it. With none in the window, the cold-start
            // floor itself, for the same reason.
            let longest = self.top_rank(samples).map_or(Duration::ZERO, |rank| {
                whole_millis(scratch.value_at_quantile(rank_quantile(rank, samples)))
            });
            return Effective {
                floor: Floor::new(longest.clamp(self.cold.floor.get(), self.config.max)),
                basis: Some(FloorBasis::ColdStart {
                    samples,
                    needed: self.config.min_samples,
                    longest: tail(self.config.quantile),
                }),
            };
        }
        let observed = whole_millis(scratch.value_at_quantile(self.quantile_of(samples)));
        let product = observed.mul_f64(self.config.margin);
        let (floor, clamp) = if product < self.config.min {
            (self.config.min, Some(Clamp::Min))
        } else if product > self.config.max {
            (self.config.max, Some(Clamp::Max))
        } else {
            (product, None)
        };
        Effective {
            floor: Floor::new(floor),
            basis: Some(FloorBasis::Learned {
                quantile: self.config.quantile,
                observed,
                margin: self.config.margin,
                clamp,
            }),
        }
    }
}

/// How many samples, at least, a learned floor rests on: with few
/// samples in the window the floor is never above the fifth-longest, nor,
/// until `min_samples` exist, below it. For a quantile above the p95, as
/// many as a window of 100 samples puts at or above it, if fewer (two for
/// the p99).
///
/// A slow dependency's window holds few samples (a partner answering 8
/// calls a second leaves 20 to 40 in the first seconds), and its p95 is
/// then one of its two longest: two or three calls of one burst that met
/// a passing queue at the partner, or timed out in it, would set the
/// floor for the whole window and refuse the calls that fit; and a floor
/// that refuses every call learns nothing new, so it stands until the
/// window forgets. From 80 samples on for the p95 (100 for the p99) the
/// floor is the quantile itself.
pub(crate) const TAIL_SAMPLES: u64 = 5;

/// How many samples, at least, are at or above a learned floor's quantile
/// `q` in its window: as many as a window of 100 samples puts there (6 for
/// the p95, 2 for the p99), but at most `TAIL_SAMPLES`.
fn tail(q: f64) -> u64 {
    // Less a hair, so that 0.95 (95.000...01 in binary) is 95.
    let in_100 = 101u64
        .saturating_sub((q * 100.0 - 1e-9).ceil() as u64)
        .max(1);
    in_100.min(TAIL_SAMPLES)
}

/// The quantile to read from a histogram of `samples` samples so that it
/// returns the sample of rank `rank` (1: the shortest): the middle of its
/// share, so that the histogram's `ceil` lands on it.
fn rank_quantile(rank: u64, samples: u64) -> f64 {
    (rank as f64 - 0.5) / samples as f64
}

/// A quantile read from the histogram (whose buckets end a little above
/// the recorded values) to the nearest millisecond, as floors and budget
/// headers speak; below a millisecond, in microseconds.
fn whole_millis(micros: u64) -> Duration {
    if micros < 1000 {
        Duration::from_micros(micros)
    } else {
        Duration::from_millis(micros.saturating_add(500) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn learned(config: LearnedFloorConfig) -> LearnedFloor {
        LearnedFloor::new(config).unwrap()
    }

    /// The defaults with the margin of the contract's example, 1.5.
    /// The p99 times 1.5: the mechanism's tests read a quantile other
    /// than the default one.
    fn x15() -> LearnedFloorConfig {
        LearnedFloorConfig {
            quantile: 0.99,
            margin: 1.5,
            ..Default::default()
        }
    }

    async fn settle() {
        tokio::time::advance(REFRESH).await;
    }

    /// The floor now and the skip note's words for where it came from.
    async fn reads(f: &LearnedFloor) -> (Duration, String) {
        settle().await;
        let e = f.current();
        (e.floor.get(), e.basis.unwrap().to_string())
    }

    #[tokio::test(start_paused = true)]
    async fn the_spread_is_the_windows_median_and_p99_once_it_has_enough_samples() {
        let f = learned(LearnedFloorConfig::default());
        (1..=19).for_each(|v| f.observe(ms(v)));
        settle().await;
        f.current();
        assert_eq!(f.spread(), None, "19 samples, 20 needed");
        (20..=100).for_each(|v| f.observe(ms(v)));
        settle().await;
        f.current();
        let spread = f.spread().unwrap();
        // Read from the histogram's buckets: within a tenth of a percent.
        let near = |got: Duration, want: u64| got >= ms(want) && got <= ms(want) + ms(want) / 500;
        assert!(near(spread.p50, 50), "{spread:?}");
        assert!(near(spread.p99, 99), "{spread:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_until_enough_samples_the_floor_is_the_fifth_longest_seen() {
        let f = learned(LearnedFloorConfig::default());
        assert_eq!(f.current().floor.get(), ms(5), "no sample: the minimum");
        let observe = |latency: u64, times: usize| (0..times).for_each(|_| f.observe(ms(latency)));
        observe(300, 4);
        let four = (ms(5), "cold start: 4 samples, 20 needed".to_string());
        assert_eq!(reads(&f).await, four, "four samples: still the minimum");
        observe(100, 14);
        assert_eq!(
            reads(&f).await.0,
            ms(100),
            "four long samples of eighteen (one burst that met a queue) do not set it"
        );
        observe(300, 1);
        let five = (
            ms(300),
            "cold start: 5th longest of 19 samples, 20 needed".to_string(),
        );
        assert_eq!(reads(&f).await, five, "five do");
        observe(100, 1);
        let p95 = (ms(300), "p95 300ms x 1".to_string());
        assert_eq!(reads(&f).await, p95, "the p95 from 20 on, on five samples");
        // A p99 rests on two: the second-longest before 20 samples.
        let p99 = learned(x15());
        for latency in [100, 100, 100, 300] {
            p99.observe(ms(latency));
        }
        let second = (
            ms(100),
            "cold start: 2nd longest of 4 samples, 20 needed".to_string(),
        );
        assert_eq!(reads(&p99).await, second);
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_a_floor_that_refused_every_call_is_not_set_by_one_burst() {
        // `slow` at 20x: pricing's first 25 answers, 20 in its body
        // (900-1 100 ms) and the calls of the first burst that queued at
        // the partner (1 300-1 600 ms, three of them timed out). Callers
        // reach pricing with about 1 450 ms left: a floor above that
        // refuses every call, learns nothing more, and stands for the
        // window.
        let f = learned(LearnedFloorConfig::default());
        for i in 0..20u64 {
            f.observe(ms(900 + i * 10));
        }
        for latency in [1314, 1390, 1486, 1513] {
            f.observe(ms(latency));
        }
        settle().await;
        let floor = f.current().floor.get();
        assert!(floor <= ms(1450), "{floor:?}: the body's, not the burst's");
        f.observe(ms(1600));
        settle().await;
        let floor = f.current().floor.get();
        assert!(
            (ms(1310)..=ms(1320)).contains(&floor),
            "{floor:?}: five long samples do set it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_by_default_one_outlier_in_a_sparse_window_does_not_set_the_floor() {
        // A 1 s dependency with 8 workers: 80 samples in the window, one
        // of them an attempt that timed out at its 1.5 s budget.
        let sparse = |config: LearnedFloorConfig| async move {
            let f = learned(config);
            for i in 0..79u64 {
                f.observe(ms(900 + (i * 200) / 78));
            }
            f.observe(ms(1500));
            settle().await;
            f.current()
        };
        let default = sparse(LearnedFloorConfig::default()).await;
        let floor = default.floor.get();
        assert!(
            (ms(1080)..=ms(1100)).contains(&floor),
            "the p95 is in the steady body (900-1100 ms), not the outlier: {floor:?}"
        );
        assert_eq!(
            default.basis.unwrap().to_string(),
            format!("p95 {}ms x 1", floor.as_millis()),
            "the skip note names the default quantile"
        );
        let p99 = sparse(LearnedFloorConfig {
            quantile: 0.99,
            ..Default::default()
        })
        .await;
        assert!(
            p99.floor.get() < ms(1110),
            "a p99 rests on two samples: not the one outlier"
        );
        // Two outliers in 80 samples are the p99, not the p95.
        let f = learned(LearnedFloorConfig {
            quantile: 0.99,
            ..Default::default()
        });
        let g = learned(LearnedFloorConfig::default());
        for i in 0..78u64 {
            f.observe(ms(900 + (i * 200) / 77));
            g.observe(ms(900 + (i * 200) / 77));
        }
        for _ in 0..2 {
            f.observe(ms(1500));
            g.observe(ms(1500));
        }
        settle().await;
        assert_eq!(f.current().floor.get(), ms(1500), "two outliers: the p99");
        assert!(g.current().floor.get() <= ms(1100), "but not the p95");
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_a_configured_cold_start_applies_before_samples() {
        let f = learned(LearnedFloorConfig {
            cold_start: Some(ms(250)),
            ..Default::default()
        });
        assert_eq!(f.current().floor.get(), ms(250));
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_the_floor_is_the_quantile_times_the_margin() {
        let f = learned(x15());
        // 98 fast samples and 2 slow ones: p99 is the slow tail.
        for _ in 0..98 {
            f.observe(ms(100));
        }
        f.observe(ms(400));
        f.observe(ms(400));
        settle().await;
        let e = f.current();
        let floor = e.floor.get().as_millis();
        assert!((596..=604).contains(&floor), "{floor}");
        let basis = e.basis.unwrap().to_string();
        assert!(
            basis.starts_with("p99 ") && basis.ends_with("ms x 1.5"),
            "{basis}"
        );
        // p50 of the same window is the fast body.
        let f50 = learned(LearnedFloorConfig {
            quantile: 0.5,
            margin: 1.0,
            ..Default::default()
        });
        for _ in 0..98 {
            f50.observe(ms(100));
        }
        settle().await;
        assert_eq!(f50.current().floor.get().as_millis(), 100);
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_the_bounds_clamp_and_say_so() {
        let f = learned(LearnedFloorConfig {
            max: ms(500),
            ..Default::default()
        });
        for _ in 0..50 {
            f.observe(ms(1000));
        }
        settle().await;
        let e = f.current();
        assert_eq!(e.floor.get(), ms(500));
        assert!(e.basis.unwrap().to_string().ends_with(", at max"));
        let g = learned(x15());
        for _ in 0..50 {
            g.observe(Duration::from_micros(500));
        }
        settle().await;
        assert_eq!(g.current().floor.get(), ms(5));
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_the_floor_follows_a_slower_partner_within_one_window() {
        let f = learned(x15());
        for _ in 0..100 {
            f.observe(ms(50));
        }
        settle().await;
        assert_eq!(f.current().floor.get(), ms(75));
        // The partner turns 10x slower; 100 samples a second for 10 s.
        for _ in 0..100 {
            tokio::time::advance(ms(100)).await;
            for _ in 0..10 {
                f.observe(ms(500));
            }
        }
        settle().await;
        assert_eq!(f.current().floor.get().as_millis(), 750);
    }

    #[tokio::test(start_paused = true)]
    async fn rule10_a_floor_that_refuses_everything_falls_back_to_cold_start() {
        let f = learned(x15());
        for _ in 0..100 {
            f.observe(ms(200));
        }
        settle().await;
        assert_eq!(f.current().floor.get(), ms(300));
        // No call made (and so no sample) for a window: not metastable.
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(f.current().floor.get(), ms(300), "within the window");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(f.current().floor.get(), ms(300), "in the older half");
        tokio::time::advance(Duration::from_secs(5)).await;
        let e = f.current();
        assert_eq!(e.floor.get(), ms(5));
        assert_eq!(e.basis.unwrap().to_string(), "cold start: no sample yet");
    }

    #[tokio::test(start_paused = true)]
    async fn the_floor_is_cached_between_refreshes() {
        let f = learned(x15());
        for _ in 0..100 {
            f.observe(ms(200));
        }
        settle().await;
        assert_eq!(f.current().floor.get(), ms(300));
        for _ in 0..1000 {
            f.observe(ms(2000));
        }
        assert_eq!(f.current().floor.get(), ms(300), "not yet recomputed");
        settle().await;
        assert_eq!(f.current().floor.get(), ms(2000));
    }

    #[tokio::test(start_paused = true)]
    async fn extreme_samples_saturate_instead_of_panicking() {
        let f = learned(LearnedFloorConfig::default());
        for _ in 0..30 {
            f.observe(Duration::MAX);
            f.observe(Duration::ZERO);
        }
        settle().await;
        assert_eq!(f.current().floor.get(), ms(2000));
    }

    /// Remembers every floor it was told of.
    #[derive(Default)]
    struct Told(Mutex<Vec<(String, Duration)>>);

    impl Observer for Told {
        fn floor_changed(&self, dependency: &Arc<str>, floor: Duration) {
            self.0.lock().unwrap().push((dependency.to_string(), floor));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_observer_hears_each_recomputation_not_each_read() {
        let told = Arc::new(Told::default());
        let last = || told.0.lock().unwrap().last().cloned();
        let count = || told.0.lock().unwrap().len();
        let f = learned(x15());
        f.report_to(Arc::from("pricing"), told.clone());
        assert_eq!(
            last(),
            Some(("pricing".into(), ms(5))),
            "cold start at once"
        );
        for _ in 0..20 {
            f.observe(ms(200));
        }
        f.current();
        assert_eq!(
            count(),
            1,
            "observing and reading within 100 ms recompute nothing"
        );
        settle().await;
        f.current();
        assert_eq!(
            last(),
            Some(("pricing".into(), ms(300))),
            "p99 200 ms x 1.5"
        );
        settle().await;
        f.current();
        assert_eq!(count(), 2, "no new sample, no recomputation");
    }

    #[test]
    fn validation_names_each_field() {
        let with = |f: &dyn Fn(&mut LearnedFloorConfig)| {
            let mut c = LearnedFloorConfig::default();
            f(&mut c);
            c.validate().unwrap_err().field().to_owned()
        };
        assert!(LearnedFloorConfig::default().validate().is_ok());
        assert_eq!(with(&|c| c.quantile = 0.0), "quantile");
        assert_eq!(with(&|c| c.quantile = 1.0), "quantile");
        assert_eq!(with(&|c| c.quantile = f64::NAN), "quantile");
        assert_eq!(with(&|c| c.margin = 0.99), "margin");
        assert_eq!(with(&|c| c.margin = f64::INFINITY), "margin");
        assert_eq!(with(&|c| c.min = ms(3000)), "min");
        assert_eq!(with(&|c| c.max = Duration::ZERO), "max");
        assert_eq!(with(&|c| c.cold_start = Some(ms(1))), "cold_start");
        assert_eq!(with(&|c| c.min_samples = 0), "min_samples");
        assert_eq!(with(&|c| c.window = Duration::ZERO), "window");
    }
}
