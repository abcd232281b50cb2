//! `rate-limit`: 1 request in 10 meets a pricing `429` with
//! `Retry-After: 5`.
//!
//! The partner has no random status. Its `script` is per `x-request-id`
//! and path (attempt N of an id gets entry N, the last repeats), so the
//! fraction comes from the ids: the generator gives `id_group`
//! consecutive requests one `x-request-id`, and the first of them to reach
//! pricing is that id's attempt 1. `script=429,200` with groups of 10 makes
//! 1 request in 10 meet the `429` (`pricing-flaky`: `script=503,200` with
//! groups of 2 makes 1 in 2 meet a `503`, and its retry, attempt 3 of the
//! id, the `200`). Nothing was added to the partner for this.

use crate::chain::{ChainSettings, PRICING};
use crate::scenario::{Scenario, Setup};

/// The `Retry-After` of the `rate-limit` scenario, seconds: longer than
/// any budget here, and within the 10 s a fixed-timeout client honours.
pub const RATE_LIMIT_RETRY_AFTER_S: u64 = 5;

/// The `rate-limit` scenario.
#[derive(Clone, Copy, Debug)]
pub struct RateLimit;

impl Scenario for RateLimit {
    fn name(&self) -> &'static str {
        "rate-limit"
    }

    fn about(&self) -> &'static str {
        "A fraction of pricing calls get `429` with a long `Retry-After`"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup {
            pricing: format!(
                "script=429,200&retry_after={RATE_LIMIT_RETRY_AFTER_S}&{}",
                PRICING.query(1)
            ),
            id_group: 10,
            ..Setup::new(
                self.name(),
                format!(
                    "1 request in 10 meets a pricing 429 with Retry-After: {RATE_LIMIT_RETRY_AFTER_S}"
                ),
                settings,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_id_in_ten_meets_the_429() {
        let rl = RateLimit.setup(&ChainSettings::default());
        assert_eq!(rl.id_group, 10);
        assert!(rl.pricing.starts_with("script=429,200&retry_after=5&"));
    }
}
