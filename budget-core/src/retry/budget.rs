//! The retry budget: [`RetryBudget`] and its [`RetryBudgetConfig`]
//! (docs/contract.md §2 rule 9).
//!
//! The module is private: its items are public in [`crate::retry`], and
//! their docs carry the design notes.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::config::ConfigError;

/// One retry, in the budget's unit.
const RETRY: i64 = 1_000_000;
/// How many slots the `ttl` is divided into.
const SLOTS: usize = 10;
/// The largest ratio accepted: 10 retries per request (1000 %).
const MAX_RATIO: f64 = 10.0;
/// The accepted `ttl` range (Finagle's and tower's).
const MIN_TTL: Duration = Duration::from_secs(1);
const MAX_TTL: Duration = Duration::from_secs(60);

/// Configuration of a [`RetryBudget`] (durations in humantime form).
///
/// Defaults: `ttl = "10s"`, `min_per_sec = 10`, `ratio = 0.2`, as tower's
/// and Finagle's.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::RetryBudgetConfig;
///
/// let c: RetryBudgetConfig = toml::from_str("ttl = \"5s\"\nratio = 0.1").unwrap();
/// assert_eq!(c.ttl, Duration::from_secs(5));
/// assert_eq!(c.min_per_sec, 10);
/// assert!(c.build().is_ok());
/// ```
///
/// In code, start from [`Default`] and set the fields that differ (they
/// are plain public fields: a config has no setters);
/// [`build`](Self::build) validates:
///
/// ```
/// use budget_core::retry::RetryBudgetConfig;
///
/// let mut config = RetryBudgetConfig::default();
/// config.ratio = 0.1;
/// config.min_per_sec = 5;
/// let budget = config.build().unwrap();
/// assert_eq!(budget.available(), 50); // 5 per second over the 10 s ttl
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetryBudgetConfig {
    /// How long a deposit counts, 1 s to 60 s.
    #[serde(with = "crate::config::duration")]
    pub ttl: Duration,
    /// Retries allowed per second regardless of deposits.
    pub min_per_sec: u32,
    /// Retries per request: 0.2 = 20 %; from 0 to 10 (1000 %).
    pub ratio: f64,
}

impl Default for RetryBudgetConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            min_per_sec: 10,
            ratio: 0.2,
        }
    }
}

impl RetryBudgetConfig {
    /// The same configuration with `ttl`: how long a deposit counts, 1 s
    /// to 60 s (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::retry::RetryBudgetConfig;
    /// let c = RetryBudgetConfig::default().ttl(Duration::from_secs(5));
    /// assert_eq!(c.ttl, Duration::from_secs(5));
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.ttl = ..."))]
    pub fn ttl(mut self, value: Duration) -> Self {
        self.ttl = value;
        self
    }

    /// The same configuration with `min_per_sec`: retries allowed per
    /// second regardless of deposits.
    ///
    /// ```
    /// # use budget_core::retry::RetryBudgetConfig;
    /// assert_eq!(RetryBudgetConfig::default().min_per_sec(1).min_per_sec, 1);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.min_per_sec = ...")
    )]
    pub fn min_per_sec(mut self, value: u32) -> Self {
        self.min_per_sec = value;
        self
    }

    /// The same configuration with `ratio`: retries per request, from 0
    /// to 10 (checked by [`build`](Self::build)).
    ///
    /// ```
    /// # use budget_core::retry::RetryBudgetConfig;
    /// assert_eq!(RetryBudgetConfig::default().ratio(0.1).ratio, 0.1);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.ratio = ..."))]
    pub fn ratio(mut self, value: f64) -> Self {
        self.ratio = value;
        self
    }

    /// Validates the configuration into a [`RetryBudget`], or a
    /// [`ConfigError`] naming the field: `ratio` negative, above 10 or not
    /// finite; `ttl` outside 1 s to 60 s.
    ///
    /// ```
    /// use budget_core::retry::RetryBudgetConfig;
    ///
    /// let mut config = RetryBudgetConfig::default();
    /// config.ratio = -0.1;
    /// let err = config.build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `ratio` must not be negative");
    /// let mut config = RetryBudgetConfig::default();
    /// config.ttl = std::time::Duration::ZERO;
    /// let err = config.build().unwrap_err();
    /// assert_eq!(err.field(), "ttl");
    /// ```
    pub fn build(&self) -> Result<RetryBudget, ConfigError> {
        if !self.ratio.is_finite() {
            return Err(ConfigError::new("ratio", "must be finite"));
        }
        if self.ratio < 0.0 {
            return Err(ConfigError::new("ratio", "must not be negative"));
        }
        if self.ratio > MAX_RATIO {
            return Err(ConfigError::new("ratio", "must be at most 10 (1000%)"));
        }
        if !(MIN_TTL..=MAX_TTL).contains(&self.ttl) {
            return Err(ConfigError::new("ttl", "must be from 1s to 60s"));
        }
        // ratio <= 10, so the deposit is at most 10^7: no overflow.
        let deposit = (self.ratio * RETRY as f64).round() as i64;
        // min_per_sec < 2^32 and ttl <= 60 s: at most about 2.6 * 10^17.
        let ttl_micros = i64::try_from(self.ttl.as_micros()).unwrap_or(i64::MAX);
        let reserve = i64::from(self.min_per_sec).saturating_mul(ttl_micros);
        Ok(RetryBudget {
            inner: Arc::new(Inner {
                deposit,
                reserve,
                window: self.ttl / SLOTS as u32,
                state: Mutex::new(State {
                    slots: [0; SLOTS],
                    current: 0,
                    index: 0,
                    window_start: Instant::now(),
                }),
            }),
        })
    }
}

/// A per-client retry budget, a cap on retries as a ratio of requests
/// (docs/contract.md §2 rule 9): each request deposits `ratio` of a retry,
/// each retry withdraws one. Clones share the same balance.
///
/// This is **not** the request time budget [`crate::Budget`]. That one
/// limits *how long* one request may take; this one limits *how many*
/// retries a client makes across all its requests, whatever each request's
/// own `max_attempts` says.
///
/// # Why a ratio and not only max attempts
///
/// With 3 attempts per request, a dependency that is down receives three
/// times the load at the moment it can least afford it, and every service
/// above it that also retries multiplies that again. A retry budget (as in
/// Finagle, and tower's `retry::budget`) lets each request *deposit* a
/// fraction of a retry, and each retry *withdraw* a whole one: when most
/// requests fail, retries stop at about `ratio` of the traffic, while an
/// isolated failure among successes is still retried. Deposits expire after
/// `ttl`, so old traffic does not pay for today's retry storm; `min_per_sec`
/// keeps a small allowance for clients that send few requests.
///
/// # Why not tower's `TpsBudget`
///
/// tower's `TpsBudget` (Finagle's algorithm, on tokio's clock) converts the
/// ratio into a whole number of deposits per retry, `(1 / ratio) as isize`:
/// a ratio of 0.3 becomes one retry per 3 requests (33 %), 0.15 one per 6
/// (16.7 %), so the configured ratio is not a bound. Its constructor also
/// panics on bad input. This one keeps the same design (10 sliding slots over
/// `ttl`, a reserve of `min_per_sec * ttl`) but counts in millionths of a
/// retry, so `retries <= ratio * requests + min_per_sec * ttl` holds as
/// configured, and with the `tower` feature it implements tower's
/// `tower::retry::budget::Budget` trait so it still plugs into `tower::retry`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::RetryBudgetConfig;
///
/// let mut config = RetryBudgetConfig::default();
/// config.min_per_sec = 1;
/// config.ratio = 0.0;
/// config.ttl = Duration::from_secs(2);
/// let budget = config.build().unwrap();
/// let shared = budget.clone();
/// assert!(budget.withdraw());
/// assert!(shared.withdraw()); // 1 per second over a 2 s ttl
/// assert!(!budget.withdraw());
/// ```
///
/// With `ratio = 0.2`, ten requests pay for two retries:
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::RetryBudgetConfig;
///
/// let mut config = RetryBudgetConfig::default();
/// config.ttl = Duration::from_secs(10);
/// config.min_per_sec = 0;
/// config.ratio = 0.2;
/// let budget = config.build().unwrap();
/// for _ in 0..10 {
///     budget.deposit(); // one per request
/// }
/// assert!(budget.withdraw()); // one per retry: 20 % of 10 requests = 2 retries
/// assert!(budget.withdraw());
/// assert!(!budget.withdraw());
/// ```
#[derive(Clone)]
pub struct RetryBudget {
    inner: Arc<Inner>,
}

struct Inner {
    /// Added per request, in millionths of a retry.
    deposit: i64,
    /// Always available: `min_per_sec * ttl` retries, in millionths.
    reserve: i64,
    /// One slot's share of the ttl.
    window: Duration,
    state: Mutex<State>,
}

struct State {
    /// Net deposits of the past windows, oldest overwritten first.
    slots: [i64; SLOTS],
    /// Net deposits of the current window.
    current: i64,
    /// The slot `current` is committed to when its window ends.
    index: usize,
    /// When the current window started.
    window_start: Instant,
}

impl RetryBudget {
    /// Records a request (call once per request, not per attempt).
    ///
    /// ```
    /// use budget_core::retry::RetryBudgetConfig;
    /// let mut config = RetryBudgetConfig::default();
    /// config.min_per_sec = 0;
    /// config.ratio = 1.0;
    /// let b = config.build().unwrap();
    /// b.deposit();
    /// assert!(b.withdraw());
    /// ```
    pub fn deposit(&self) {
        let mut state = self.lock();
        state.current = state.current.saturating_add(self.inner.deposit);
    }

    /// Takes one retry from the budget: `true` when there was one, `false`
    /// when the retry must not be made.
    ///
    /// ```
    /// use budget_core::retry::RetryBudgetConfig;
    /// let mut config = RetryBudgetConfig::default();
    /// config.min_per_sec = 0;
    /// let b = config.build().unwrap();
    /// assert!(!b.withdraw());
    /// ```
    pub fn withdraw(&self) -> bool {
        let mut state = self.lock();
        if self.balance(&state) >= RETRY {
            state.current = state.current.saturating_sub(RETRY);
            true
        } else {
            false
        }
    }

    /// Retries available now (whole ones).
    ///
    /// ```
    /// use budget_core::retry::RetryBudgetConfig;
    /// let mut config = RetryBudgetConfig::default();
    /// config.min_per_sec = 3;
    /// config.ratio = 0.0;
    /// config.ttl = std::time::Duration::from_secs(1);
    /// let b = config.build().unwrap();
    /// assert_eq!(b.available(), 3);
    /// ```
    pub fn available(&self) -> u64 {
        let state = self.lock();
        u64::try_from(self.balance(&state) / RETRY).unwrap_or(0)
    }

    /// The state with expired windows dropped.
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        let mut state = self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let window = self.inner.window;
        let elapsed = now.saturating_duration_since(state.window_start);
        if elapsed >= window {
            let ended = elapsed.as_nanos() / window.as_nanos().max(1);
            // Commit the window that just ended, then clear each slot the
            // clock has moved over (at most all of them).
            let index = state.index;
            state.slots[index] = std::mem::take(&mut state.current);
            for _ in 0..ended.min(SLOTS as u128) {
                state.index = (state.index + 1) % SLOTS;
                let index = state.index;
                state.slots[index] = 0;
            }
            // Keep windows aligned; past a whole ttl, start afresh from now.
            state.window_start = if ended > SLOTS as u128 {
                now
            } else {
                // `ended <= SLOTS`, so the product is at most the ttl.
                state.window_start + window * ended as u32
            };
        }
        state
    }

    fn balance(&self, state: &State) -> i64 {
        state
            .slots
            .iter()
            .fold(state.current, |sum, slot| sum.saturating_add(*slot))
            .saturating_add(self.inner.reserve)
    }
}

/// With the `tower` feature: the same balance as tower's retry budget, for
/// `tower::retry` policies.
///
/// ```
/// use tower::retry::budget::Budget;
/// use budget_core::retry::RetryBudgetConfig;
///
/// let mut config = RetryBudgetConfig::default();
/// config.min_per_sec = 0;
/// config.ratio = 1.0;
/// let budget = config.build().unwrap();
/// Budget::deposit(&budget);
/// assert!(Budget::withdraw(&budget));
/// assert!(!Budget::withdraw(&budget));
/// ```
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
impl tower::retry::budget::Budget for RetryBudget {
    fn deposit(&self) {
        RetryBudget::deposit(self)
    }

    fn withdraw(&self) -> bool {
        RetryBudget::withdraw(self)
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("ratio", &(self.inner.deposit as f64 / RETRY as f64))
            .field("window", &self.inner.window)
            .field("available", &self.available())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn budget(ttl_secs: u64, min_per_sec: u32, ratio: f64) -> RetryBudget {
        RetryBudgetConfig {
            ttl: Duration::from_secs(ttl_secs),
            min_per_sec,
            ratio,
        }
        .build()
        .unwrap()
    }

    /// N requests, each wanting `attempts_wanted` attempts against a
    /// dependency that always fails: the attempts actually made.
    fn storm(b: &RetryBudget, requests: u32, attempts_wanted: u32) -> u64 {
        let mut attempts = 0;
        for _ in 0..requests {
            b.deposit();
            attempts += 1;
            for _ in 1..attempts_wanted {
                if !b.withdraw() {
                    break;
                }
                attempts += 1;
            }
        }
        attempts
    }

    #[test]
    fn rule9_a_down_dependency_gets_at_most_one_plus_ratio_attempts_per_request() {
        let b = budget(10, 0, 0.2);
        let attempts = storm(&b, 1000, 3);
        assert!(attempts <= 1200, "{attempts}");
        assert!(
            attempts >= 1199,
            "the budget is spent, not hoarded: {attempts}"
        );
    }

    #[test]
    fn rule9_ratios_are_exact_not_rounded_to_one_in_n() {
        // tower's TpsBudget would allow one in 3 (33 %) here.
        let b = budget(10, 0, 0.3);
        assert!(storm(&b, 1000, 3) <= 1300);
        let b = budget(10, 0, 0.15);
        assert!(storm(&b, 1000, 3) <= 1150);
        let b = budget(10, 0, 2.5);
        assert_eq!(storm(&b, 100, 10), 350);
    }

    #[test]
    fn rule9_a_zero_ratio_allows_only_the_reserve() {
        let b = budget(2, 5, 0.0);
        assert_eq!(b.available(), 10);
        assert_eq!(storm(&b, 100, 3), 110);
        assert!(!b.withdraw());
    }

    #[tokio::test(start_paused = true)]
    async fn rule9_deposits_expire_after_the_ttl() {
        let b = budget(1, 0, 1.0);
        b.deposit();
        tokio::time::advance(Duration::from_millis(900)).await;
        assert_eq!(b.available(), 1, "still within the ttl");
        tokio::time::advance(Duration::from_millis(200)).await;
        assert_eq!(b.available(), 0, "expired");
        b.deposit();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(!b.withdraw(), "a long silence forgets everything");
    }

    #[tokio::test(start_paused = true)]
    async fn rule9_the_min_per_sec_allowance_comes_back_after_the_ttl() {
        let b = budget(1, 2, 0.0);
        assert!(b.withdraw());
        assert!(b.withdraw());
        assert!(!b.withdraw());
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(!b.withdraw(), "spent within the ttl");
        tokio::time::advance(Duration::from_millis(600)).await;
        assert_eq!(b.available(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn rule9_sliding_slots_keep_recent_deposits_only() {
        let b = budget(1, 0, 0.5);
        b.deposit();
        tokio::time::advance(Duration::from_millis(300)).await;
        b.deposit();
        tokio::time::advance(Duration::from_millis(800)).await;
        // The first deposit is gone, the second is still there.
        b.deposit();
        assert!(b.withdraw());
        assert!(!b.withdraw());
    }

    #[test]
    fn rule9_clones_share_one_balance() {
        let b = budget(10, 0, 1.0);
        let c = b.clone();
        c.deposit();
        assert!(b.withdraw());
        assert!(!c.withdraw());
        assert!(format!("{b:?}").contains("available: 0"));
    }

    #[cfg(feature = "tower")]
    #[test]
    fn rule9_clones_share_one_balance_and_tower_can_use_it() {
        let b = budget(10, 0, 1.0);
        let c = b.clone();
        tower::retry::budget::Budget::deposit(&c);
        assert!(tower::retry::budget::Budget::withdraw(&b));
        assert!(!c.withdraw());
        assert!(format!("{b:?}").contains("available: 0"));
    }

    #[test]
    fn rule9_validation_names_the_field() {
        let field = |c: RetryBudgetConfig| c.build().unwrap_err().field().to_owned();
        let d = RetryBudgetConfig::default;
        for ratio in [-0.01, 10.01, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(
                field(RetryBudgetConfig { ratio, ..d() }),
                "ratio",
                "{ratio}"
            );
        }
        for ttl in [
            Duration::ZERO,
            Duration::from_millis(999),
            Duration::from_secs(61),
        ] {
            assert_eq!(field(RetryBudgetConfig { ttl, ..d() }), "ttl", "{ttl:?}");
        }
        for ok in [
            RetryBudgetConfig { ratio: 0.0, ..d() },
            RetryBudgetConfig { ratio: 10.0, ..d() },
            RetryBudgetConfig {
                ttl: Duration::from_secs(1),
                min_per_sec: u32::MAX,
                ..d()
            },
            RetryBudgetConfig {
                ttl: Duration::from_secs(60),
                ..d()
            },
        ] {
            assert!(ok.build().is_ok(), "{ok:?}");
        }
    }

    proptest! {
        #[test]
        fn rule9_attempts_per_request_never_exceed_one_plus_ratio(
            permille in 0u32..=10_000,
            requests in 1u32..2_000,
            attempts_wanted in 1u32..6,
        ) {
            let ratio = f64::from(permille) / 1000.0;
            let b = budget(10, 0, ratio);
            let attempts = storm(&b, requests, attempts_wanted) as f64;
            prop_assert!(attempts / f64::from(requests) <= 1.0 + ratio + 1e-9);
        }
    }
}
