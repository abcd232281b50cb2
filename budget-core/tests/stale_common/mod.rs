//! What the stale fallback's test binaries (`stale.rs`, `stale_span.rs`)
//! share: the dependency they configure and the good answer they keep.

#![allow(dead_code)] // each test binary uses its own subset

use budget_core::client::{DependencyConfig, OnUnavailable};
use budget_core::retry::{BackoffConfig, Jitter, RetryConfig};
use std::time::Duration;

use crate::support::ms;

/// A dependency with the stale fallback, 2 attempts and a 10 ms backoff.
pub fn stale_dep(url: &str) -> DependencyConfig {
    let mut c = DependencyConfig::new("inventory", url);
    c.on_unavailable = OnUnavailable::Stale;
    c.max_stale = Duration::from_secs(10);
    c.retry = RetryConfig {
        max_attempts: 2,
        backoff: BackoffConfig {
            initial: ms(10),
            max: ms(10),
            multiplier: 1.0,
            jitter: Jitter::None,
        },
        ..RetryConfig::default()
    };
    c
}

pub const GOOD: &str = r#"{"stock":3}"#;
