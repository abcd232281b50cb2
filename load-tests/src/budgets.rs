//! The budget each request of a run is given: one fixed budget, or a mix
//! of callers with short and long budgets (the `mixed-budgets` scenario).
//!
//! A real service's callers do not all wait the same: a page render gives
//! a few hundred milliseconds, a batch job seconds. A fixed timeout fits
//! one of them at best; a forwarded budget fits each. The mix is
//! deterministic per request index (a seeded hash of the index, so a
//! request's budget does not depend on the order tasks run in, and two
//! runs of the same plan give every request the same budget).
//!
//! ```
//! use std::time::Duration;
//! use load_tests::budgets::BudgetDistribution;
//!
//! let mixed = BudgetDistribution::mixed_default();
//! let b = mixed.budget(17);
//! assert_eq!(b, mixed.budget(17), "the same index, the same budget");
//! assert!(b >= Duration::from_millis(200) && b <= Duration::from_secs(2));
//! assert_eq!(BudgetDistribution::Fixed(Duration::from_secs(2)).budget(17), Duration::from_secs(2));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A range budgets are drawn from, uniformly: `[min, max)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRange {
    /// The least budget, ms in JSON.
    #[serde(with = "crate::report::millis")]
    pub min: Duration,
    /// The budgets are below this, ms in JSON.
    #[serde(with = "crate::report::millis")]
    pub max: Duration,
}

impl BudgetRange {
    /// The value at `fraction` (in `[0, 1)`) of the range.
    fn at(self, unit: u64) -> Duration {
        let span = self.max.saturating_sub(self.min).as_nanos();
        // `unit` is uniform over u64: `span * unit / 2^64` is uniform in
        // [0, span).
        let offset = (span * u128::from(unit)) >> 64;
        self.min.saturating_add(Duration::from_nanos(
            u64::try_from(offset).unwrap_or(u64::MAX),
        ))
    }
}

/// Which of the two caller groups of a [`BudgetDistribution::Mixed`] a
/// request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetClass {
    /// The callers with a short budget.
    Short,
    /// The callers with a long budget.
    Long,
}

impl BudgetClass {
    /// `short-budget` or `long-budget`: the class of the report.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetClass::Short => "short-budget",
            BudgetClass::Long => "long-budget",
        }
    }
}

/// The budgets of a run's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetDistribution {
    /// Every request gets this budget (ms in JSON).
    Fixed(#[serde(with = "crate::report::millis")] Duration),
    /// Half the callers (by a seeded hash of the request index) draw from
    /// `short`, the others from `long`.
    Mixed {
        /// The short callers' range.
        short: BudgetRange,
        /// The long callers' range.
        long: BudgetRange,
        /// The hash's seed.
        seed: u64,
    },
    /// Every request draws from one range (by a seeded hash of its index):
    /// the `hang` scenarios' 1.9 to 2.1 s.
    Uniform {
        /// The range.
        range: BudgetRange,
        /// The hash's seed.
        seed: u64,
    },
}

impl BudgetDistribution {
    /// The `mixed-budgets` scenario's: 200 to 600 ms for half the callers,
    /// 1 to 2 s for the other half, seed 1.
    pub fn mixed_default() -> Self {
        BudgetDistribution::Mixed {
            short: BudgetRange {
                min: Duration::from_millis(200),
                max: Duration::from_millis(600),
            },
            long: BudgetRange {
                min: Duration::from_secs(1),
                max: Duration::from_secs(2),
            },
            seed: 1,
        }
    }

    /// Every request's budget drawn uniformly from `min..max` by its
    /// index, seed 1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::budgets::BudgetDistribution;
    ///
    /// let d = BudgetDistribution::uniform(Duration::from_millis(1900), Duration::from_millis(2100));
    /// assert!((0..1000).all(|i| (1900..2100).contains(&d.budget(i).as_millis())));
    /// assert_eq!(d.budget(7), d.budget(7));
    /// assert_eq!((d.max(), d.class(7)), (Duration::from_millis(2100), None));
    /// assert_eq!(d.describe(), "1900-2100 ms, uniform per request");
    /// ```
    pub fn uniform(min: Duration, max: Duration) -> Self {
        BudgetDistribution::Uniform {
            range: BudgetRange { min, max },
            seed: 1,
        }
    }

    /// The budget of request `index`.
    pub fn budget(&self, index: u64) -> Duration {
        match *self {
            BudgetDistribution::Fixed(d) => d,
            BudgetDistribution::Uniform { range, seed } => {
                range.at(splitmix64(seed ^ splitmix64(index)))
            }
            BudgetDistribution::Mixed { short, long, seed } => {
                let h = splitmix64(seed ^ splitmix64(index));
                let range = if h >> 63 == 0 { short } else { long };
                range.at(splitmix64(h))
            }
        }
    }

    /// The caller group of request `index`; `None` for a fixed or uniform
    /// budget (one group of callers).
    pub fn class(&self, index: u64) -> Option<BudgetClass> {
        match *self {
            BudgetDistribution::Fixed(_) | BudgetDistribution::Uniform { .. } => None,
            BudgetDistribution::Mixed { seed, .. } => {
                Some(if splitmix64(seed ^ splitmix64(index)) >> 63 == 0 {
                    BudgetClass::Short
                } else {
                    BudgetClass::Long
                })
            }
        }
    }

    /// The largest budget any request may get (the fixed one, or the
    /// upper end of the long or the uniform range).
    pub fn max(&self) -> Duration {
        match *self {
            BudgetDistribution::Fixed(d) => d,
            BudgetDistribution::Uniform { range, .. } => range.max,
            BudgetDistribution::Mixed { short, long, .. } => short.max.max(long.max),
        }
    }

    /// One line for the report: `2000 ms`, or the ranges.
    ///
    /// ```
    /// use load_tests::budgets::BudgetDistribution;
    /// assert_eq!(
    ///     BudgetDistribution::mixed_default().describe(),
    ///     "half the callers 200-600 ms, half 1000-2000 ms"
    /// );
    /// ```
    pub fn describe(&self) -> String {
        match *self {
            BudgetDistribution::Fixed(d) => format!("{} ms", d.as_millis()),
            BudgetDistribution::Uniform { range, .. } => format!(
                "{}-{} ms, uniform per request",
                range.min.as_millis(),
                range.max.as_millis()
            ),
            BudgetDistribution::Mixed { short, long, .. } => format!(
                "half the callers {}-{} ms, half {}-{} ms",
                short.min.as_millis(),
                short.max.as_millis(),
                long.min.as_millis(),
                long.max.as_millis()
            ),
        }
    }
}

/// SplitMix64's output function: a well-mixed 64-bit hash of `x`.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_budgets_split_in_half_and_stay_in_their_ranges() {
        let d = BudgetDistribution::mixed_default();
        let (mut short, mut long) = (Vec::new(), Vec::new());
        for i in 0..10_000 {
            let b = d.budget(i);
            match d.class(i).unwrap() {
                BudgetClass::Short => short.push(b),
                BudgetClass::Long => long.push(b),
            }
        }
        assert!((4_800..=5_200).contains(&short.len()), "{}", short.len());
        assert_eq!(short.len() + long.len(), 10_000);
        let ms = |v: &[Duration]| {
            v.iter().map(Duration::as_secs_f64).sum::<f64>() * 1000.0 / v.len() as f64
        };
        assert!(short.iter().all(|b| (200..600).contains(&b.as_millis())));
        assert!(long.iter().all(|b| (1000..2000).contains(&b.as_millis())));
        // Uniform: the means sit at the middle of the ranges.
        assert!((390.0..410.0).contains(&ms(&short)), "{}", ms(&short));
        assert!((1475.0..1525.0).contains(&ms(&long)), "{}", ms(&long));
        // Both ends of each range are reached (within 1 % of them).
        assert!(short.iter().any(|b| b.as_millis() < 204));
        assert!(short.iter().any(|b| b.as_millis() >= 596));
        assert_eq!(d.max(), Duration::from_secs(2));
    }

    #[test]
    fn a_request_s_budget_depends_on_its_index_and_the_seed_only() {
        let d = BudgetDistribution::mixed_default();
        let forward: Vec<Duration> = (0..100).map(|i| d.budget(i)).collect();
        let backward: Vec<Duration> = (0..100).rev().map(|i| d.budget(i)).collect();
        assert!(forward.iter().eq(backward.iter().rev()));
        let BudgetDistribution::Mixed { short, long, .. } = d else {
            unreachable!()
        };
        let other = BudgetDistribution::Mixed {
            short,
            long,
            seed: 2,
        };
        assert_ne!(
            forward,
            (0..100).map(|i| other.budget(i)).collect::<Vec<_>>()
        );
        let fixed = BudgetDistribution::Fixed(Duration::from_secs(2));
        assert_eq!(fixed.class(3), None);
        assert_eq!(fixed.describe(), "2000 ms");
    }
}
