//! The stale fallback: the third answer when a dependency cannot be called
//! in budget (beside failing and skipping an optional dependency). The
//! gRPC layer has it too, keyed by method and request message
//! (`budget_core::grpc::Stale`, feature `grpc`).
//!
//! With `on_unavailable = "stale"`, a [`BudgetClient`]
//! keeps the last good answer of each `GET` and `HEAD` URL it called, and
//! when a later call of the same URL ends without a usable answer, returns
//! that answer instead, if it is at most `max_stale` old:
//! [`BudgetResponse::stale`] is its age, the request's ledger says
//! `inventory;desc="stale 12s"` after the call's own attempts or skip note,
//! `budget_stale_served_total{dependency}` counts it, and a `budget.stale`
//! span records it. An answer older than `max_stale` is never served: the
//! call ends as it would have without the cache.
//!
//! # When a stale answer stands in
//!
//! | the call ended with | stale answer served |
//! | --- | --- |
//! | not made: below the floor, circuit open, no concurrency permit in time, no bearer token | yes |
//! | no usable answer: connect failure or timeout, timeout (the budget ran out), reset, body failure, other transport error | yes |
//! | `500`, `502`, `503`, `504` after the retries (a passed-up `503` included) | yes |
//! | any other status (`4xx`, `429` included, `501`, ...) | no: the dependency answered |
//! | no budget (a call outside a request), an invalid request | no: a bug in the caller |
//!
//! The statuses are those HTTP's `stale-if-error` (RFC 5861) treats as
//! errors. A `429` is passed up as before: the dependency asks its callers
//! to slow down, and an old answer would hide that.
//!
//! # What is kept
//!
//! - Only the answers to `GET` and `HEAD` (safe methods: their answer is
//!   the resource at the URL; a `PUT` that failed must not look as if it
//!   had succeeded), and only `2xx` answers. An answer with
//!   `Cache-Control: no-store` is not kept, and drops the one kept before.
//!   Error answers leave the last good one in place.
//! - The key is the method and the full URL, query included. Request
//!   headers are not part of it: do not use the stale fallback for a
//!   dependency whose answer depends on who asks (a per-user
//!   `Authorization`).
//! - The cache is per client (clones share it), bounded by
//!   `stale_cache.max_entries` (default 1024) and `stale_cache.max_bytes`
//!   (default 8 MiB, counting each entry's URL, header names and values
//!   and body). The body is copied when kept, so a small answer does not
//!   hold a larger read buffer alive. Past either bound the oldest entry
//!   goes first: all entries share one `max_stale`, so the oldest is the
//!   nearest to being useless. An entry past `max_stale` is dropped when it
//!   is next looked up or reaches the front. An answer larger than
//!   `max_bytes` is not kept.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::client::{DependencyConfig, OnUnavailable};
//!
//! let config: DependencyConfig = toml::from_str(r#"
//!     name = "inventory"
//!     url = "http://127.0.0.1:9000/inventory"
//!     on_unavailable = "stale"
//!     max_stale = "30s"
//!     stale_cache = { max_entries = 512, max_bytes = 1048576 }
//! "#).unwrap();
//! assert_eq!(config.on_unavailable, OnUnavailable::Stale);
//! assert_eq!(config.max_stale, Duration::from_secs(30));
//! assert!(config.build().is_ok());
//! ```
//!
//! and in a handler:
//!
//! ```no_run
//! # async fn run(inventory: budget_core::client::BudgetClient) -> Result<(), budget_core::client::CallError> {
//! let res = inventory.get("/stock/7").send().await?.error_for_status()?;
//! let degraded = res.stale().is_some(); // say so in the answer
//! # Ok(()) }
//! ```
//!
#![cfg_attr(feature = "client", doc = "[`BudgetClient`]: super::BudgetClient")]
#![cfg_attr(not(feature = "client"), doc = "[`BudgetClient`]: crate::docs::client")]
#![cfg_attr(
    feature = "client",
    doc = "[`BudgetResponse::stale`]: super::BudgetResponse::stale"
)]
#![cfg_attr(
    not(feature = "client"),
    doc = "[`BudgetResponse::stale`]: crate::docs::client"
)]

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;

// The cache itself: the HTTP client's and the gRPC layer's, not the
// tower adapter's (it has no stale fallback).
#[cfg(any(feature = "client", feature = "grpc"))]
mod cache;

#[cfg(any(feature = "client", feature = "grpc"))]
pub(crate) use cache::{StaleCache, build};
#[cfg(feature = "grpc")]
pub(crate) use cache::{StaleKey, stands_in_for_error};

/// The oldest answer served when the config does not say: 30 s, longer
/// than a circuit breaker's open period and a rolling restart's gap, short
/// enough that what a caller sees is still about now.
///
/// ```
/// use budget_core::client::{DependencyConfig, stale::DEFAULT_MAX_STALE};
/// assert_eq!(DependencyConfig::new("a", "http://a").max_stale, DEFAULT_MAX_STALE);
/// ```
pub const DEFAULT_MAX_STALE: Duration = Duration::from_secs(30);

/// The default [`StaleCacheConfig::max_entries`]: 1024.
///
/// ```
/// use budget_core::client::stale::{StaleCacheConfig, DEFAULT_STALE_MAX_ENTRIES};
/// assert_eq!(StaleCacheConfig::default().max_entries, DEFAULT_STALE_MAX_ENTRIES);
/// ```
pub const DEFAULT_STALE_MAX_ENTRIES: usize = 1024;

/// The default [`StaleCacheConfig::max_bytes`]: 8 MiB.
///
/// ```
/// use budget_core::client::stale::{StaleCacheConfig, DEFAULT_STALE_MAX_BYTES};
/// assert_eq!(StaleCacheConfig::default().max_bytes, DEFAULT_STALE_MAX_BYTES);
/// ```
pub const DEFAULT_STALE_MAX_BYTES: u64 = 8 * 1024 * 1024;

/// How much a client's stale cache keeps (the `stale_cache` table of a
/// [`DependencyConfig`](super::DependencyConfig); used with
/// `on_unavailable = "stale"`). See the [module docs](self).
///
/// ```
/// use budget_core::client::stale::StaleCacheConfig;
/// let mut c: StaleCacheConfig = toml::from_str("max_entries = 16").unwrap();
/// assert_eq!((c.max_entries, c.max_bytes), (16, 8 * 1024 * 1024));
/// c.max_bytes = 0;
/// let err = c.validate().unwrap_err();
/// assert_eq!(err.field(), "max_bytes");
/// ```
///
/// In code, start from [`Default`] and set the fields that differ (they
/// are plain public fields: a config has no setters):
///
/// ```
/// use budget_core::client::stale::StaleCacheConfig;
///
/// let mut c = StaleCacheConfig::default();
/// c.max_entries = 512;
/// c.max_bytes = 1 << 20;
/// assert_eq!((c.max_entries, c.max_bytes), (512, 1 << 20));
/// assert!(c.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct StaleCacheConfig {
    /// URLs kept at most; at least 1. Default 1024.
    pub max_entries: usize,
    /// Bytes kept at most (each entry's URL, header names and values, and
    /// body); at least 1. Default 8 MiB.
    pub max_bytes: u64,
}

impl Default for StaleCacheConfig {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_STALE_MAX_ENTRIES,
            max_bytes: DEFAULT_STALE_MAX_BYTES,
        }
    }
}

impl StaleCacheConfig {
    /// The same config with `max_entries`: the URLs kept at most, at
    /// least 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::client::stale::StaleCacheConfig;
    /// assert_eq!(StaleCacheConfig::default().max_entries(16).max_entries, 16);
    /// ```
    #[cfg_attr(
        not(test),
        deprecated(note = "set the field: config.max_entries = ...")
    )]
    pub fn max_entries(mut self, value: usize) -> Self {
        self.max_entries = value;
        self
    }

    /// The same config with `max_bytes`: the bytes kept at most, at least
    /// 1 (checked by [`validate`](Self::validate)).
    ///
    /// ```
    /// # use budget_core::client::stale::StaleCacheConfig;
    /// assert_eq!(StaleCacheConfig::default().max_bytes(1 << 20).max_bytes, 1 << 20);
    /// ```
    #[cfg_attr(not(test), deprecated(note = "set the field: config.max_bytes = ..."))]
    pub fn max_bytes(mut self, value: u64) -> Self {
        self.max_bytes = value;
        self
    }

    /// Checks both bounds.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `max_entries` or `max_bytes` when it is 0.
    ///
    /// ```
    /// use budget_core::client::stale::StaleCacheConfig;
    /// assert!(StaleCacheConfig::default().validate().is_ok());
    /// let mut c = StaleCacheConfig::default();
    /// c.max_entries = 0;
    /// let err = c.validate().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `max_entries` must be at least 1");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_entries == 0 {
            return Err(ConfigError::new("max_entries", "must be at least 1"));
        }
        if self.max_bytes == 0 {
            return Err(ConfigError::new("max_bytes", "must be at least 1 byte"));
        }
        Ok(())
    }
}

/// Checks `max_stale` and `stale_cache`, whatever `on_unavailable` says
/// (so that a bad value does not wait for the day someone turns the
/// fallback on) and whatever the features (a config is valid or not with
/// every feature).
pub(crate) fn check(max_stale: Duration, cache: &StaleCacheConfig) -> Result<(), ConfigError> {
    if max_stale.is_zero() {
        return Err(ConfigError::new("max_stale", "must be more than zero"));
    }
    cache.validate().map_err(|e| e.within("stale_cache"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_stale_and_the_bounds_are_checked_with_their_field_names() {
        let ok = StaleCacheConfig::default();
        let err =
            |max_stale, c: StaleCacheConfig| check(max_stale, &c).unwrap_err().field().to_owned();
        assert_eq!(err(Duration::ZERO, ok), "max_stale");
        let no_entries = StaleCacheConfig {
            max_entries: 0,
            ..ok
        };
        assert_eq!(
            err(Duration::from_millis(1), no_entries),
            "stale_cache.max_entries"
        );
        let no_bytes = StaleCacheConfig { max_bytes: 0, ..ok };
        assert_eq!(
            err(Duration::from_millis(1), no_bytes),
            "stale_cache.max_bytes"
        );
        assert!(check(Duration::from_millis(1), &ok).is_ok());
    }
}
