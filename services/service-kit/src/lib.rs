//! What every binary of the budget chain (`edge`, `checkout`,
//! `slow-partner`) shares, written once: the `--budget-mode on|off` switch,
//! structured logs, the shutdown signal, TOML config files and error chains;
//! and what the HTTP services (`edge`, `checkout`) share on top: the config
//! fields and flags every service has, the routes' request ids and logs,
//! the ledger of a handler, the client of a dependency, serving with a
//! graceful shutdown, and the `main` with its exit codes.
//!
//! Process-global state is installed here, by the binaries, never by
//! budget-core: the library only emits its spans and metrics, and
//! [`telemetry`] (subscriber, exporter, propagator) and [`prometheus`]
//! (the `metrics` recorder) are what the binaries install to collect them.
//!
//! | piece | what it holds |
//! | --- | --- |
//! | [`BudgetMode`] | the `--budget-mode on\|off` switch |
//! | [`ServiceSettings`], [`service_config!`], [`ServiceConfig`] | the config fields every HTTP service has, its TOML file and defaults |
//! | [`ServiceFlags`], [`BudgetFlags`], [`show_defaults`], [`overlay`] | the shared flags (each also an environment variable) put over the config file |
//! | [`router`], [`X_REQUEST_ID`], [`BodyBytes`] | `/healthz`, the budget layer, request ids and request logs; problem+json for unknown routes and methods and unreadable bodies |
//! | [`RequestLedger`] | the ledger a handler records in, with or without the budget layer |
//! | [`ClientSettings`], [`client_settings!`], [`dependency_client`], [`DEFAULT_DEPENDENCY_FLOOR`] | a dependency's TOML table and client, its errors named as the config names them |
//! | [`bind`], [`Bound`], [`HttpLimits`] | serving until shutdown, then letting requests finish; the header and idle timeouts and the connection limit |
//! | [`run_server`], [`exit_usage`], [`exit_failure`], [`StartError`] | `main`: logs, start, exit codes `0`, `1`, `2` |
//! | [`init_telemetry`], [`flush_telemetry`], [`init_tracing`], [`shutdown_signal`], [`error_chain`] | logs and OTLP trace export, Ctrl-C and SIGTERM, one-line errors |
//! | [`telemetry`] ([`telemetry::init_from_env`], [`telemetry::TelemetryConfig`], [`telemetry::otel_layer`], ...) | the global tracing subscriber, the OTLP exporter and the W3C propagator a binary installs |
//! | [`prometheus`] ([`prometheus::install_prometheus`], [`prometheus::prometheus_router`], [`prometheus::METRICS_PATH`], ...) | the global Prometheus `metrics` recorder a binary installs, and its `/metrics` route |
//! | [`pg_cluster`] ([`pg_cluster::Cluster`], [`pg_cluster::ClusterError`]) | a throwaway PostgreSQL server on 127.0.0.1 for the demo and load tests, the file budget-core's tests use |
//! | [`load_toml`], [`parse_toml`], [`ConfigFileError`] | config files, their path in every error |
//! | [`assert_cli_conventions`], [`assert_usage_errors`], [`SHARED_FLAGS`], [`assert_shared_flags_set`], [`TestConfigFile`], [`assert_promtool_clean`] | the binaries' command line and metrics tests |
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

#![deny(missing_docs)]

mod cli_checks;
mod client_settings;
mod config_file;
mod connection;
mod dependency_client;
mod exit;
mod flags;
mod http_limits;
mod mode;
mod overlay;
mod refusals;
mod request_layer;
mod request_ledger;
mod router;
mod run;
mod serve;
mod service_config;
mod service_settings;
mod start_error;

/// A throwaway PostgreSQL cluster on 127.0.0.1 ([`pg_cluster::Cluster`]):
/// the same file budget-core's tests use (`budget-core/tests/support/pg_cluster.rs`),
/// published here for the demo binary and the load tests, which start one at
/// run time.
#[path = "../../../budget-core/tests/support/pg_cluster.rs"]
pub mod pg_cluster;
pub mod prometheus;
pub mod telemetry;

pub use cli_checks::{
    SHARED_FLAGS, TestConfigFile, assert_cli_conventions, assert_promtool_clean,
    assert_shared_flags_set, assert_usage_errors,
};
pub use client_settings::ClientSettings;
pub use config_file::{ConfigFileError, load_toml, parse_toml};
pub use connection::{refuse_connection, serve_connection};
pub use dependency_client::{
    DEFAULT_DEPENDENCY_BREAKER, DEFAULT_DEPENDENCY_FLOOR, default_dependency_concurrency,
    dependency_client,
};
pub use exit::{EXIT_USAGE, exit_failure, exit_usage};
pub use flags::{BudgetFlags, ServiceFlags, show_defaults};
pub use http_limits::{
    DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, HttpLimits,
};
pub use mode::BudgetMode;
pub use overlay::overlay;
pub use refusals::BodyBytes;
pub use request_layer::RequestLayer;
pub use request_ledger::RequestLedger;
pub use router::{X_REQUEST_ID, install_metrics, router, router_of};
pub use run::{
    error_chain, flush_telemetry, init_telemetry, init_tracing, run_server, shutdown_signal,
};
pub use serve::{ACCEPT_BACKLOG, Bound, bind};
pub use service_config::ServiceConfig;
pub use service_settings::{DEFAULT_BUDGET, DEFAULT_FLOOR, DEFAULT_MAX_BUDGET, ServiceSettings};
pub use start_error::StartError;

/// What [`service_config!`] and [`client_settings!`] expand to need; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use budget_core::admission::{limit::LimitConfig, queue::QueueConfig};
    pub use budget_core::breaker::BreakerConfig;
    pub use budget_core::client::HedgeConfig;
    pub use budget_core::config::ConfigError;
    pub use budget_core::floor::FloorConfig;
    pub use budget_core::ledger::LedgerLimits;
}
