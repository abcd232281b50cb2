//! `criticality`: healthy, but offered **2x the capacity** (`--rate`
//! overrides it); 30 % of requests (spread evenly by index,
//! [`CriticalitySplit`]) carry `request-criticality: critical`, the rest
//! none; reported per class.

use crate::chain::ChainSettings;
use crate::criticality::CriticalitySplit;
use crate::scenario::{Scenario, Setup};

/// The share of critical requests in the `criticality` scenario, percent.
pub const CRITICAL_PERCENT: u8 = 30;

/// The `criticality` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Criticality;

impl Scenario for Criticality {
    fn name(&self) -> &'static str {
        "criticality"
    }

    fn about(&self) -> &'static str {
        "The healthy partner at twice the capacity; 30 % of requests are critical"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let capacity = settings.capacity();
        Setup {
            criticality: CriticalitySplit::new(CRITICAL_PERCENT),
            rate: Some(2.0 * capacity),
            ..Setup::new(
                self.name(),
                format!(
                    "healthy partner at 2x capacity ({:.0} req/s); {} % of requests carry \
                     request-criticality: critical",
                    2.0 * capacity,
                    CRITICAL_PERCENT
                ),
                settings,
            )
        }
    }
}
