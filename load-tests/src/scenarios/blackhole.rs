//! `blackhole`: inventory on the blackholed partner (connects time out at
//! its 300 ms connect cap, [`crate::chain::INVENTORY_CONNECT_CAP`]).

use crate::chain::ChainSettings;
use crate::scenario::{Scenario, Setup};

/// The `blackhole` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Blackhole;

impl Scenario for Blackhole {
    fn name(&self) -> &'static str {
        "blackhole"
    }

    fn about(&self) -> &'static str {
        "Inventory's partner is blackholed"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup {
            blackholed_inventory: true,
            ..Setup::new(
                self.name(),
                "inventory on a blackholed partner (connects time out)",
                settings,
            )
        }
    }
}
