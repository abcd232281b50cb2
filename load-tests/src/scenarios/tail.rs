//! `tail`: healthy, but 5 % of calls on every path `slowdown` times
//! slower, at half the capacity; run in budget mode with and without
//! hedging ([`ChainMode::Hedged`] right after [`ChainMode::Budget`]).

use crate::chain::{ChainMode, ChainSettings, INVENTORY, PRICING, RECOMMENDATIONS};
use crate::scenario::{Scenario, Setup};

/// The `tail` scenario's share of slow partner calls, percent.
pub const TAIL_PERCENT: u8 = 5;

/// The `tail` scenario's offered load, as a share of the capacity: a
/// tail call holds a partner worker `slowdown` times longer.
pub const TAIL_RATE: f64 = 0.5;

/// The `tail` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Tail;

impl Scenario for Tail {
    fn name(&self) -> &'static str {
        "tail"
    }

    fn about(&self) -> &'static str {
        "The healthy partner, except that 5 % of its calls on every path are `slowdown` times \
         slower (a latency tail), at half the capacity; run in budget mode with and without \
         hedging"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let f = settings.slowdown;
        let capacity = settings.capacity();
        Setup {
            inventory: INVENTORY.with_tail(TAIL_PERCENT, f),
            pricing: PRICING.with_tail(TAIL_PERCENT, f),
            recommendations: RECOMMENDATIONS.with_tail(TAIL_PERCENT, f),
            rate: Some(TAIL_RATE * capacity),
            ..Setup::new(
                self.name(),
                format!(
                    "healthy partner, but {TAIL_PERCENT} % of its calls on every path are {f}x \
                     slower; at half the capacity ({:.0} req/s)",
                    TAIL_RATE * capacity
                ),
                settings,
            )
        }
    }

    /// `asked`, with [`ChainMode::Hedged`] right after
    /// [`ChainMode::Budget`], so that hedging is compared with budget mode
    /// without it in the same run.
    ///
    /// ```
    /// use load_tests::chain::ChainMode;
    /// use load_tests::scenario::Scenario as _;
    /// use load_tests::scenarios::tail::Tail;
    ///
    /// assert_eq!(Tail.modes(&ChainMode::ALL),
    ///     [ChainMode::Budget, ChainMode::Hedged, ChainMode::Naive, ChainMode::Peer, ChainMode::Queue,
    ///      ChainMode::Envoy]);
    /// assert_eq!(Tail.modes(&[ChainMode::Naive]), [ChainMode::Naive]);
    /// ```
    fn modes(&self, asked: &[ChainMode]) -> Vec<ChainMode> {
        ChainMode::insert_after(asked, ChainMode::Budget, ChainMode::Hedged)
    }
}
