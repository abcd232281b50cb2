//! Which requests of a run carry `request-criticality: critical` (the
//! `criticality` scenario).
//!
//! A service under overload should shed what matters least first. The
//! scenario marks a fixed share of requests critical, deterministically by
//! index: request `i` is critical when `(i + 1) * percent / 100` (integer
//! division) is more than `i * percent / 100`, so the share is exact over
//! every hundred consecutive requests from a multiple of 100, and critical
//! requests are spread evenly (with 30 %, one every 3 or 4), not in bursts.
//! It reports the success rate of each class.
//!
//! ```
//! use load_tests::criticality::CriticalitySplit;
//!
//! let split = CriticalitySplit::new(30).unwrap();
//! assert!(!split.is_critical(0) && !split.is_critical(2) && split.is_critical(3));
//! assert_eq!((0..1000).filter(|&i| split.is_critical(i)).count(), 300);
//! ```

use serde::{Deserialize, Serialize};

/// The criticality header.
pub const REQUEST_CRITICALITY: &str = "request-criticality";

/// The value a critical request carries.
pub const CRITICAL: &str = "critical";

/// The report's class of a critical request.
pub const CRITICAL_CLASS: &str = "critical";

/// The report's class of the others (no header).
pub const REST_CLASS: &str = "rest";

/// `percent` of every hundred requests are critical.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalitySplit {
    percent: u8,
}

impl CriticalitySplit {
    /// `percent` in 0 to 100; `None` beyond.
    pub fn new(percent: u8) -> Option<Self> {
        (percent <= 100).then_some(Self { percent })
    }

    /// The share of critical requests, percent.
    pub fn percent(self) -> u8 {
        self.percent
    }

    /// Whether request `index` carries `request-criticality: critical`.
    pub fn is_critical(self, index: u64) -> bool {
        let p = u64::from(self.percent);
        // `index % 100` keeps the products small; the pattern repeats
        // every hundred.
        let i = index % 100;
        (i + 1) * p / 100 > i * p / 100
    }

    /// The report's class of request `index`: [`CRITICAL_CLASS`] or
    /// [`REST_CLASS`].
    pub fn class(self, index: u64) -> &'static str {
        if self.is_critical(index) {
            CRITICAL_CLASS
        } else {
            REST_CLASS
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_percent_exactly_over_every_hundred_spread_over_the_run() {
        let split = CriticalitySplit::new(30).unwrap();
        for start in [0, 100, 12_300] {
            let n = (start..start + 100)
                .filter(|&i| split.is_critical(i))
                .count();
            assert_eq!(n, 30);
        }
        // Spread: 15 in the first half, gaps of 3 or 4, never a burst.
        assert_eq!((0..50).filter(|&i| split.is_critical(i)).count(), 15);
        let marked: Vec<u64> = (0..300).filter(|&i| split.is_critical(i)).collect();
        assert!(marked.windows(2).all(|w| (3..=4).contains(&(w[1] - w[0]))));
        assert!((0..100).all(|i| CriticalitySplit::new(100).unwrap().is_critical(i)));
        assert_eq!(split.class(3), CRITICAL_CLASS);
        assert_eq!(split.class(5), REST_CLASS);
        assert!(CriticalitySplit::new(101).is_none());
        assert!((0..100).all(|i| !CriticalitySplit::new(0).unwrap().is_critical(i)));
    }
}
