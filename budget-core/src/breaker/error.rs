//! [`CircuitOpen`]: the call was refused because the breaker is open.

use std::time::Duration;

/// A call was refused without being made: the endpoint's breaker is open
/// (or half-open with its one probe already out).
///
/// [`retry_after`](Self::retry_after) is the time until a probe may be
/// admitted; a server answering `503` for a required dependency puts it in
/// `Retry-After`.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::breaker::{BreakerConfig, CircuitBreaker, Verdict};
///
/// let mut config = BreakerConfig::default();
/// config.failure_threshold = 1;
/// config.open_for = Duration::from_secs(3);
/// let policy = config.build().unwrap();
/// let breaker = CircuitBreaker::new("http://inventory:80", policy);
/// breaker.try_acquire().unwrap().record(Verdict::Failure);
///
/// let err = breaker.try_acquire().unwrap_err();
/// assert_eq!(err.key(), "http://inventory:80");
/// assert!(err.retry_after() <= Duration::from_secs(3));
/// assert!(err.to_string().starts_with("circuit open for http://inventory:80"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("circuit open for {key}; retry after {}ms", retry_after.as_millis())]
pub struct CircuitOpen {
    key: String,
    retry_after: Duration,
    no_answer_for: Option<Duration>,
}

impl CircuitOpen {
    pub(super) fn new(key: &str, retry_after: Duration) -> Self {
        Self {
            key: key.to_owned(),
            retry_after,
            no_answer_for: None,
        }
    }

    pub(super) fn with_no_answer_for(mut self, silence: Duration) -> Self {
        self.no_answer_for = Some(silence);
        self
    }

    /// The endpoint key (`scheme://host:port`) of the open breaker.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::{BreakerConfig, CircuitBreaker, Verdict};
    /// let mut config = BreakerConfig::default();
    /// config.failure_threshold = 1;
    /// let policy = config.build().unwrap();
    /// let breaker = CircuitBreaker::new("https://auth:443", policy);
    /// breaker.try_acquire().unwrap().record(Verdict::Failure);
    /// assert_eq!(breaker.try_acquire().unwrap_err().key(), "https://auth:443");
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Time until the breaker admits a probe. While a probe is already out
    /// this is the breaker's `open_for`: the soonest a new probe can be
    /// admitted is when that one ends, and if it fails, `open_for` later.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::breaker::{BreakerConfig, CircuitBreaker, Verdict};
    /// let mut config = BreakerConfig::default();
    /// config.failure_threshold = 1;
    /// config.open_for = Duration::from_secs(2);
    /// let policy = config.build().unwrap();
    /// let breaker = CircuitBreaker::new("http://a:80", policy);
    /// breaker.try_acquire().unwrap().record(Verdict::Failure);
    /// assert!(breaker.try_acquire().unwrap_err().retry_after() <= Duration::from_secs(2));
    /// ```
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// For a breaker opened because its endpoint stopped answering (see the
    /// [module docs](super#a-dependency-that-stops-answering)): how long
    /// since any attempt got an answer. `None` for a breaker opened by
    /// failures.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerConfig, CircuitBreaker, Verdict};
    /// let mut config = BreakerConfig::default();
    /// config.failure_threshold = 1;
    /// let policy = config.build().unwrap();
    /// let breaker = CircuitBreaker::new("http://a:80", policy);
    /// breaker.try_acquire().unwrap().record(Verdict::Failure);
    /// assert_eq!(breaker.try_acquire().unwrap_err().no_answer_for(), None);
    /// ```
    pub fn no_answer_for(&self) -> Option<Duration> {
        self.no_answer_for
    }

    /// The ledger's note for a call this refusal kept from being made
    /// (docs/contract.md §4): `skipped: circuit open`, or, for a breaker
    /// opened because its endpoint stopped answering,
    /// `skipped: circuit open (no answer for 2100ms)`.
    #[cfg(outbound)]
    pub(crate) fn skip_note(&self) -> String {
        match self.no_answer_for {
            Some(silence) => format!(
                "skipped: circuit open (no answer for {}ms)",
                silence.as_millis()
            ),
            None => "skipped: circuit open".to_owned(),
        }
    }
}
