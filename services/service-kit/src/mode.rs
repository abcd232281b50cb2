use serde::{Deserialize, Serialize};

/// The `--budget-mode on|off` switch every binary takes.
///
/// `on`: the budget machinery (inbound budget, forwarded header, floors,
/// retries paid from the budget). `off`: the usual setup it is compared
/// with: generous fixed timeouts, fixed retries, nothing forwarded.
///
/// ```
/// use service_kit::BudgetMode;
/// let mode: BudgetMode = serde_json::from_str("\"on\"").unwrap();
/// assert!(mode.is_on());
/// ```
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum BudgetMode {
    /// The budget machinery.
    #[default]
    On,
    /// Generous fixed timeouts, fixed retries, nothing forwarded.
    Off,
}

impl BudgetMode {
    /// True for [`BudgetMode::On`].
    ///
    /// ```
    /// assert!(!service_kit::BudgetMode::Off.is_on());
    /// ```
    pub fn is_on(self) -> bool {
        self == BudgetMode::On
    }
}
