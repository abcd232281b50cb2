//! What every binary of the budget chain (`edge`, `checkout`,
//! `slow-partner`) shares, written once: the `--budget-mode on|off` switch,
//! structured logs, the shutdown signal, TOML config files and error chains.
//!
//! # Example
//!
//! ```
//! use service_kit::{BudgetMode, error_chain};
//!
//! let mode: BudgetMode = serde_json::from_str("\"off\"").unwrap();
//! assert_eq!(mode, BudgetMode::Off);
//! let err = std::io::Error::other("boom");
//! assert_eq!(error_chain(&err), "boom");
//! ```

mod config_file;
mod mode;
mod run;

pub use config_file::{ConfigFileError, load_toml, parse_toml};
pub use mode::BudgetMode;
pub use run::{error_chain, init_tracing, shutdown_signal};
