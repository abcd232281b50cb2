//! The wall clock, injected.
//!
//! Budgets run on tokio's monotonic clock. Only one rule needs the calendar:
//! a `Retry-After` given as an HTTP-date. That read goes through
//! [`WallClock`], so tests pin "now" instead of reading the machine's clock.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use budget_core::clock::{FixedClock, SystemClock, WallClock};
//!
//! let fixed = FixedClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777));
//! assert_eq!(fixed.now(), SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777));
//! assert!(SystemClock.now() > fixed.now());
//! ```

use std::fmt;
use std::time::SystemTime;

/// A source of calendar time.
///
/// # Example
///
/// ```
/// use budget_core::clock::{SystemClock, WallClock};
/// let _now = SystemClock.now();
/// ```
pub trait WallClock: Send + Sync + fmt::Debug + 'static {
    /// The current calendar time.
    fn now(&self) -> std::time::SystemTime;
}

/// The machine's clock.
///
/// # Example
///
/// ```
/// use budget_core::clock::{SystemClock, WallClock};
/// assert!(SystemClock.now() > std::time::SystemTime::UNIX_EPOCH);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl WallClock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one sanctioned wall-clock read
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock stopped at one instant, for tests and replays.
///
/// # Example
///
/// ```
/// use std::time::SystemTime;
/// use budget_core::clock::{FixedClock, WallClock};
/// assert_eq!(FixedClock::new(SystemTime::UNIX_EPOCH).now(), SystemTime::UNIX_EPOCH);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FixedClock(SystemTime);

impl FixedClock {
    /// A clock that always answers `at`.
    ///
    /// ```
    /// # use std::time::SystemTime;
    /// # use budget_core::clock::FixedClock;
    /// let _ = FixedClock::new(SystemTime::UNIX_EPOCH);
    /// ```
    pub fn new(at: SystemTime) -> Self {
        Self(at)
    }
}

impl WallClock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}
