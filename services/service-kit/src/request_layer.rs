//! [`RequestLayer`]: what stands in front of a service's route in each
//! budget mode.

use budget_core::server::{BudgetLayer, LedgerLayer};

/// The layer in front of a service's route: the budget layer with
/// `budget_mode = on`; with `off`, the ledger layer alone (no budget, the
/// same `Server-Timing` ledger), so the header has one writer in both
/// modes.
///
/// ```
/// use std::time::Duration;
/// use service_kit::{BudgetMode, RequestLayer, ServiceSettings};
///
/// let mut settings = ServiceSettings::new("127.0.0.1:0".parse().unwrap(), Duration::from_millis(5));
/// assert!(matches!(settings.request_layer().unwrap(), RequestLayer::Budget(_)));
/// settings.budget_mode = BudgetMode::Off;
/// assert!(matches!(settings.request_layer().unwrap(), RequestLayer::Ledger(_)));
/// ```
#[derive(Clone, Debug)]
pub enum RequestLayer {
    /// `budget_mode = on`.
    Budget(BudgetLayer),
    /// `budget_mode = off`.
    Ledger(LedgerLayer),
}

impl RequestLayer {
    /// True for [`RequestLayer::Budget`].
    ///
    /// ```
    /// let layer = service_kit::RequestLayer::Ledger(Default::default());
    /// assert!(!layer.is_budget());
    /// ```
    pub fn is_budget(&self) -> bool {
        matches!(self, RequestLayer::Budget(_))
    }
}

impl From<BudgetLayer> for RequestLayer {
    fn from(layer: BudgetLayer) -> Self {
        RequestLayer::Budget(layer)
    }
}
