//! [`ReconnectPolicy`]: how long a follower waits before reconnecting,
//! built from a [`ReconnectConfig`] (docs/streams.md, "Following a
//! stream").

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::config::ConfigError;
use crate::retry::{Backoff, Jitter};

/// The reconnect schedule's configuration, as read from TOML or JSON
/// (durations in humantime form); validate it with [`build`](Self::build).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::stream::ReconnectConfig;
///
/// let c: ReconnectConfig = serde_json::from_str(r#"{"initial": "500ms", "max": "10s"}"#).unwrap();
/// assert_eq!(c.initial, Duration::from_millis(500));
/// assert_eq!(c.multiplier, 2.0);
/// let err = serde_json::from_str::<ReconnectConfig>(r#"{"max": "0s"}"#).unwrap().build().unwrap_err();
/// assert_eq!(err.field(), "max");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReconnectConfig {
    /// The first reconnect's ceiling (the base a server's `retry:`
    /// replaces). Default 1 s.
    #[serde(with = "crate::config::duration")]
    pub initial: Duration,
    /// The cap of every wait, and of a server's `retry:`. Default 30 s.
    #[serde(with = "crate::config::duration")]
    pub max: Duration,
    /// The growth per reconnect, at least 1. Default 2.
    pub multiplier: f64,
    /// `"full"` (default: uniform in `[0, ceiling]`) or `"none"`.
    pub jitter: Jitter,
}

impl Default for ReconnectConfig {
    /// 1 s, doubling, capped at 30 s, full jitter.
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            multiplier: 2.0,
            jitter: Jitter::Full,
        }
    }
}

impl ReconnectConfig {
    /// The validated policy. Errors name the field: `initial` zero, `max`
    /// below `initial`, `multiplier` below 1 or not finite.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::stream::ReconnectConfig;
    /// let mut c = ReconnectConfig::default();
    /// c.multiplier = 0.5;
    /// assert_eq!(c.build().unwrap_err().field(), "multiplier");
    /// ```
    pub fn build(&self) -> Result<ReconnectPolicy, ConfigError> {
        let backoff = backoff(self.initial, self.max, self.multiplier, self.jitter)?;
        Ok(ReconnectPolicy {
            backoff,
            configured: backoff,
            attempt: 0,
        })
    }
}

/// [`Backoff::new`]'s rules, its errors naming this config's fields.
fn backoff(
    initial: Duration,
    max: Duration,
    multiplier: f64,
    jitter: Jitter,
) -> Result<Backoff, ConfigError> {
    Backoff::new(initial, max, multiplier, jitter).map_err(|e| {
        let field = e.field().trim_start_matches("backoff.").to_owned();
        ConfigError::new(field, e.problem().replace("backoff.", ""))
    })
}

/// What a server's `retry:` did to the schedule.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::stream::{ReconnectConfig, RetryField};
/// let mut p = ReconnectConfig::default().build().unwrap();
/// assert_eq!(p.server_retry(Some(Duration::from_secs(2))), RetryField::Honoured);
/// assert_eq!(p.server_retry(Some(Duration::from_secs(3600))), RetryField::Clamped);
/// assert_eq!(p.server_retry(None), RetryField::Clamped); // a value that overflowed
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryField {
    /// Within the cap: the new base.
    Honoured,
    /// Over the cap (or too large to read): the cap is the new base.
    Clamped,
}

/// The wait before each reconnect of one stream: full-jittered, capped
/// exponential ([`Backoff`], the retries' own), reconnect `n`'s wait
/// uniform in `[0, min(max, base * multiplier^(n-1))]`, so that clients
/// cut off together do not come back together.
///
/// The base is the configured `initial` until the server sends `retry:`,
/// which replaces it within the cap ([`server_retry`](Self::server_retry));
/// the count starts again after a stream that stayed healthy (it
/// delivered an event: [`healthy`](Self::healthy)). Built by
/// [`ReconnectConfig::build`]; one per stream (it counts).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::retry::Jitter;
/// use budget_core::stream::ReconnectConfig;
/// use rand::SeedableRng;
///
/// let mut config = ReconnectConfig::default();
/// config.jitter = Jitter::None;
/// let mut p = config.build().unwrap();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(1);
/// let waits: Vec<u64> = (0..7).map(|_| p.next_wait(&mut rng).as_secs()).collect();
/// assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
/// p.healthy();
/// assert_eq!(p.next_wait(&mut rng), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReconnectPolicy {
    /// The schedule in force (its base maybe the server's).
    backoff: Backoff,
    /// The configured one (its cap bounds a server's `retry:`).
    configured: Backoff,
    /// Reconnects since the last healthy stream.
    attempt: u32,
}

impl Default for ReconnectPolicy {
    /// [`ReconnectConfig::default`], built.
    fn default() -> Self {
        let c = ReconnectConfig::default();
        let backoff = Backoff::new(c.initial, c.max, c.multiplier, c.jitter)
            .unwrap_or_else(|_| Backoff::default());
        Self {
            backoff,
            configured: backoff,
            attempt: 0,
        }
    }
}

impl ReconnectPolicy {
    /// The wait before the next reconnect, counting it, drawn from `rng`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::stream::ReconnectPolicy;
    /// let mut p = ReconnectPolicy::default();
    /// let w = p.next_wait(&mut rand::rng());
    /// assert!(w <= Duration::from_secs(1));
    /// assert_eq!(p.attempt(), 1);
    /// ```
    pub fn next_wait<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        self.attempt = self.attempt.saturating_add(1);
        self.backoff.wait(self.attempt, None, rng)
    }

    /// The server's `retry:` (`None`: a value too large to read): the new
    /// base, within the cap; a `retry: 0` is taken as 1 ms (no schedule of
    /// zeros).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::stream::ReconnectPolicy;
    /// let mut p = ReconnectPolicy::default();
    /// p.server_retry(Some(Duration::from_millis(200)));
    /// assert_eq!(p.base(), Duration::from_millis(200));
    /// ```
    pub fn server_retry(&mut self, retry: Option<Duration>) -> RetryField {
        let max = self.configured.max();
        let (base, read) = match retry {
            Some(d) if d <= max => (d.max(Duration::from_millis(1)), RetryField::Honoured),
            _ => (max, RetryField::Clamped),
        };
        let c = self.configured;
        // `base` is within (0, max]: the rules `configured` passed hold.
        if let Ok(backoff) = Backoff::new(base, max, c.multiplier(), c.jitter()) {
            self.backoff = backoff;
        }
        read
    }

    /// The stream stayed healthy (it delivered an event): the next
    /// reconnect is the first again.
    ///
    /// ```
    /// use budget_core::stream::ReconnectPolicy;
    /// let mut p = ReconnectPolicy::default();
    /// p.next_wait(&mut rand::rng());
    /// p.healthy();
    /// assert_eq!(p.attempt(), 0);
    /// ```
    pub fn healthy(&mut self) {
        self.attempt = 0;
    }

    /// Reconnects since the last healthy stream.
    ///
    /// ```
    /// assert_eq!(budget_core::stream::ReconnectPolicy::default().attempt(), 0);
    /// ```
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The first reconnect's ceiling now: the configured `initial`, or
    /// the server's `retry:`.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(budget_core::stream::ReconnectPolicy::default().base(), Duration::from_secs(1));
    /// ```
    pub fn base(&self) -> Duration {
        self.backoff.initial()
    }

    /// The cap of every wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(budget_core::stream::ReconnectPolicy::default().max(), Duration::from_secs(30));
    /// ```
    pub fn max(&self) -> Duration {
        self.configured.max()
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn policy(initial: u64, max: u64, jitter: Jitter) -> ReconnectPolicy {
        let mut c = ReconnectConfig::default();
        (c.initial, c.max, c.jitter) = (ms(initial), ms(max), jitter);
        c.build().unwrap()
    }

    #[test]
    fn every_wait_is_within_its_jittered_capped_ceiling_and_spread() {
        let mut rng = StdRng::seed_from_u64(42);
        let mut first = Vec::new();
        for _ in 0..1000 {
            let mut p = policy(1000, 8000, Jitter::Full);
            let waits: Vec<Duration> = (0..6).map(|_| p.next_wait(&mut rng)).collect();
            for (n, w) in waits.iter().enumerate() {
                let ceiling = ms(1000 * 2u64.pow(n as u32)).min(ms(8000));
                assert!(*w <= ceiling, "reconnect {} waited {w:?}", n + 1);
            }
            first.push(waits[0]);
        }
        // Full jitter: the first reconnects spread over [0, 1 s], not one instant.
        let in_tenth = |lo: u64| {
            first
                .iter()
                .filter(|w| **w >= ms(lo) && **w < ms(lo + 100))
                .count()
        };
        for lo in (0..1000).step_by(100) {
            let n = in_tenth(lo);
            assert!(
                (50..=150).contains(&n),
                "{n} of 1000 in [{lo}, {lo}+100) ms"
            );
        }
    }

    #[test]
    fn the_cap_holds_for_any_count() {
        let mut p = policy(1000, 5000, Jitter::None);
        let mut rng = StdRng::seed_from_u64(1);
        let waits: Vec<u128> = (0..100)
            .map(|_| p.next_wait(&mut rng).as_millis())
            .collect();
        assert_eq!(&waits[..4], [1000, 2000, 4000, 5000]);
        assert!(waits.iter().all(|w| *w <= 5000));
    }

    #[test]
    fn a_server_retry_replaces_the_base_within_the_cap() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut p = policy(1000, 5000, Jitter::None);
        assert_eq!(p.server_retry(Some(ms(250))), RetryField::Honoured);
        let waits: Vec<u128> = (0..3).map(|_| p.next_wait(&mut rng).as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000]);
        assert_eq!(p.server_retry(Some(ms(60_000))), RetryField::Clamped);
        p.healthy();
        assert_eq!(p.next_wait(&mut rng), ms(5000), "clamped to the cap");
        assert_eq!(p.server_retry(None), RetryField::Clamped);
        assert_eq!(p.base(), ms(5000));
        assert_eq!(p.server_retry(Some(Duration::ZERO)), RetryField::Honoured);
        assert_eq!(p.base(), ms(1), "no schedule of zeros");
    }

    #[test]
    fn a_healthy_stream_resets_the_count() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut p = policy(100, 10_000, Jitter::None);
        for _ in 0..5 {
            p.next_wait(&mut rng);
        }
        assert_eq!(p.next_wait(&mut rng), ms(3200));
        p.healthy();
        assert_eq!(p.next_wait(&mut rng), ms(100));
    }

    #[test]
    fn invalid_configs_name_their_field() {
        let bad = |f: &dyn Fn(&mut ReconnectConfig)| {
            let mut c = ReconnectConfig::default();
            f(&mut c);
            c.build().unwrap_err().field().to_owned()
        };
        assert_eq!(bad(&|c| c.initial = Duration::ZERO), "initial");
        assert_eq!(bad(&|c| c.max = ms(1)), "max");
        assert_eq!(bad(&|c| c.multiplier = f64::INFINITY), "multiplier");
        let err = serde_json::from_str::<ReconnectConfig>(r#"{"cap": "1s"}"#).unwrap_err();
        assert!(err.to_string().contains("cap"), "{err}");
    }

    /// The schedule on tokio's paused clock: a follower sleeping its
    /// waits reconnects at the instants the policy drew.
    #[tokio::test(start_paused = true)]
    async fn the_waits_are_slept_on_the_clock() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut p = policy(1000, 4000, Jitter::Full);
        let start = tokio::time::Instant::now();
        let mut total = Duration::ZERO;
        for _ in 0..5 {
            let w = p.next_wait(&mut rng);
            total += w;
            tokio::time::sleep(w).await;
        }
        // The paused clock rounds each sleep up to its millisecond.
        let elapsed = start.elapsed();
        assert!(
            elapsed >= total && elapsed <= total + ms(5),
            "{elapsed:?} for {total:?}"
        );
        assert!(total <= ms(1000 + 2000 + 4000 + 4000 + 4000));
    }
}
