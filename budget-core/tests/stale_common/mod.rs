//! What the stale fallback's test binaries (`stale.rs`, `stale_span.rs`)
//! share: the dependency they configure and the good answer they keep.

#![allow(dead_code)] // each test binary uses its own subset

use std::time::Duration;

use budget_core::client::{DependencyConfig, OnUnavailable};

use crate::support::{constant_retry, ms};

/// A dependency with the stale fallback, 2 attempts and a 10 ms backoff.
pub fn stale_dep(url: &str) -> DependencyConfig {
    let mut c = DependencyConfig::new("inventory", url);
    c.on_unavailable = OnUnavailable::Stale;
    c.max_stale = Duration::from_secs(10);
    c.retry = constant_retry(2, ms(10));
    c
}

/// The good answer the partner gives first.
pub const GOOD: &str = r#"{"stock":3}"#;
