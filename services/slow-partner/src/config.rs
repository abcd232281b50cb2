//! The partner's configuration: the same fields as the binary's flags, from
//! TOML with humantime durations.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slow_partner::{FaultMode, PartnerConfig};
//!
//! let config = PartnerConfig::from_toml(r#"
//!     listen = "127.0.0.1:9000"
//!     admin_listen = "127.0.0.1:9001"
//!     mode = "blackhole"
//!     shutdown_grace = "500ms"
//!     workers = 8
//!
//!     [path_workers]
//!     "/pricing" = 2
//! "#).unwrap();
//! assert_eq!(config.workers, Some(8));
//! assert_eq!(config.path_workers["/pricing"], 2);
//! assert_eq!(config.mode, FaultMode::Blackhole);
//! assert_eq!(config.shutdown_grace, Duration::from_millis(500));
//!
//! let err = PartnerConfig::from_toml("mode = \"sleep\"").unwrap_err();
//! let message = slow_partner::error_chain(&err);
//! assert!(message.contains("unknown variant `sleep`"), "{message}");
//! ```

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use budget_core::config::ConfigError;
use serde::{Deserialize, Serialize};
use service_kit::HttpLimits;

use crate::error::PartnerError;
use crate::mode::{BudgetMode, FaultMode};
use crate::stats::{DEFAULT_MAX_TRACKED_IDS, MAX_PATH_LEN};
use crate::workers::{MAX_WORKER_POOLS, MAX_WORKERS, is_reserved_path};

/// The default main address: loopback, port 9000.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 9000);

/// The default [`PartnerConfig::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How a partner starts. Every field has a default, so a TOML file needs
/// only the fields it changes; unknown fields are an error.
///
/// Build one with [`PartnerConfig::new`] and the `with_*` methods, or from
/// TOML with [`from_toml`](Self::from_toml) / [`load`](Self::load).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct PartnerConfig {
    /// The main address (default `127.0.0.1:9000`). Port 0 picks a free
    /// port once, at start; every mode switch rebinds that same port.
    pub listen: SocketAddr,
    /// A separate address that serves only the admin endpoints, `/stats` and
    /// `/healthz`, reachable whatever the main port's mode.
    pub admin_listen: Option<SocketAddr>,
    /// The mode at start.
    pub mode: FaultMode,
    /// Accepted for symmetry with the other binaries; the partner never
    /// enforces budgets either way (see [`BudgetMode`]).
    pub budget_mode: BudgetMode,
    /// How many `x-request-id`s `/stats` remembers (at least 1; default
    /// 10 000; first in, first out).
    pub max_tracked_ids: usize,
    /// How long requests in flight may finish when the main port leaves
    /// normal mode or the partner stops; then their connections are closed.
    #[serde(with = "budget_core::config::duration")]
    pub shutdown_grace: Duration,
    /// How many requests *per path* do their work at once (`1..=`
    /// [`MAX_WORKERS`](crate::MAX_WORKERS)); further requests of the path
    /// wait in its FIFO queue before their delay starts. `None` (the
    /// default): unlimited. Reserved paths never take a worker.
    pub workers: Option<usize>,
    /// Per path (starting with `/`, not reserved), a worker count that
    /// replaces [`workers`](Self::workers) for that path; in TOML a table
    /// `[path_workers]` with `"/pricing" = 8`. At most
    /// [`MAX_WORKER_POOLS`](crate::MAX_WORKER_POOLS) entries.
    pub path_workers: BTreeMap<String, usize>,
    /// The HTTP server's limits, as every binary's (header and idle
    /// timeouts, open connections per listener; the `[http]` table; see
    /// [`HttpLimits`]).
    pub http: HttpLimits,
}

impl Default for PartnerConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            admin_listen: None,
            mode: FaultMode::Normal,
            budget_mode: BudgetMode::On,
            max_tracked_ids: DEFAULT_MAX_TRACKED_IDS,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            workers: None,
            path_workers: BTreeMap::new(),
            http: HttpLimits::default(),
        }
    }
}

impl PartnerConfig {
    /// The defaults, listening on `listen`.
    ///
    /// ```
    /// # use slow_partner::PartnerConfig;
    /// let config = PartnerConfig::new("127.0.0.1:0".parse().unwrap());
    /// assert_eq!(config.listen.port(), 0);
    /// ```
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            ..Self::default()
        }
    }

    /// The same config starting in `mode`.
    ///
    /// ```
    /// # use slow_partner::{FaultMode, PartnerConfig};
    /// assert_eq!(PartnerConfig::default().with_mode(FaultMode::Hang).mode, FaultMode::Hang);
    /// ```
    pub fn with_mode(mut self, mode: FaultMode) -> Self {
        self.mode = mode;
        self
    }

    /// The same config with an admin listener on `addr`.
    ///
    /// ```
    /// # use slow_partner::PartnerConfig;
    /// let addr = "127.0.0.1:0".parse().unwrap();
    /// assert_eq!(PartnerConfig::default().with_admin_listen(addr).admin_listen, Some(addr));
    /// ```
    pub fn with_admin_listen(mut self, addr: SocketAddr) -> Self {
        self.admin_listen = Some(addr);
        self
    }

    /// The same config with another [`shutdown_grace`](Self::shutdown_grace).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slow_partner::PartnerConfig;
    /// let c = PartnerConfig::default().with_shutdown_grace(Duration::from_millis(100));
    /// assert_eq!(c.shutdown_grace, Duration::from_millis(100));
    /// ```
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// The same config with [`workers`](Self::workers) per path (`None`:
    /// unlimited).
    ///
    /// ```
    /// # use slow_partner::PartnerConfig;
    /// assert_eq!(PartnerConfig::default().with_workers(Some(4)).workers, Some(4));
    /// assert_eq!(PartnerConfig::default().workers, None);
    /// ```
    pub fn with_workers(mut self, workers: Option<usize>) -> Self {
        self.workers = workers;
        self
    }

    /// The same config with `workers` for `path` alone, whatever
    /// [`workers`](Self::workers) says.
    ///
    /// ```
    /// # use slow_partner::PartnerConfig;
    /// let config = PartnerConfig::default().with_path_workers("/pricing", 8);
    /// assert_eq!(config.path_workers["/pricing"], 8);
    /// ```
    pub fn with_path_workers(mut self, path: impl Into<String>, workers: usize) -> Self {
        self.path_workers.insert(path.into(), workers);
        self
    }

    /// Parses TOML text (fields as in the struct, durations in humantime
    /// form) and [validates](Self::validate) it.
    ///
    /// ```
    /// # use slow_partner::PartnerConfig;
    /// assert_eq!(PartnerConfig::from_toml("").unwrap(), PartnerConfig::default());
    /// assert!(PartnerConfig::from_toml("max_tracked_ids = 0").is_err());
    /// assert!(PartnerConfig::from_toml("lisen = \"127.0.0.1:1\"").is_err());
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, PartnerError> {
        Self::parse(text, Path::new("<inline>"))
    }

    /// Reads, parses and validates a TOML config file.
    ///
    /// ```
    /// # use slow_partner::{PartnerConfig, PartnerError};
    /// let err = PartnerConfig::load("/no/such/file.toml".as_ref()).unwrap_err();
    /// assert!(matches!(err, PartnerError::ReadConfig { .. }));
    /// ```
    pub fn load(path: &Path) -> Result<Self, PartnerError> {
        let text = std::fs::read_to_string(path).map_err(|source| PartnerError::ReadConfig {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    fn parse(text: &str, path: &Path) -> Result<Self, PartnerError> {
        let config: Self = toml::from_str(text).map_err(|source| PartnerError::ParseConfig {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the values serde cannot: `max_tracked_ids` is at least 1;
    /// `workers` and every `path_workers` count are in `1..=MAX_WORKERS`;
    /// every `path_workers` path starts with `/`, is at most
    /// [`MAX_PATH_LEN`](crate::MAX_PATH_LEN) bytes and is not reserved;
    /// `path_workers` has at most `MAX_WORKER_POOLS` entries.
    ///
    /// ```
    /// # use slow_partner::PartnerConfig;
    /// let mut config = PartnerConfig::default();
    /// config.max_tracked_ids = 0;
    /// assert_eq!(
    ///     config.validate().unwrap_err().to_string(),
    ///     "invalid config: `max_tracked_ids` must be at least 1",
    /// );
    /// let config = PartnerConfig::default().with_path_workers("pricing", 2);
    /// assert_eq!(
    ///     config.validate().unwrap_err().to_string(),
    ///     "invalid config: `path_workers` path `pricing` must start with `/`",
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.http.validate().map_err(|e| e.within("http"))?;
        if self.max_tracked_ids == 0 {
            return Err(ConfigError::new("max_tracked_ids", "must be at least 1"));
        }
        if let Some(workers) = self.workers {
            check_workers(workers).map_err(|problem| ConfigError::new("workers", problem))?;
        }
        if self.path_workers.len() > MAX_WORKER_POOLS {
            return Err(ConfigError::new(
                "path_workers",
                format!("has more than {MAX_WORKER_POOLS} paths"),
            ));
        }
        for (path, &workers) in &self.path_workers {
            let problem = if !path.starts_with('/') {
                Some("must start with `/`".to_owned())
            } else if path.len() > MAX_PATH_LEN {
                Some(format!("is longer than {MAX_PATH_LEN} bytes"))
            } else if is_reserved_path(path) {
                Some("is reserved and never takes a worker".to_owned())
            } else {
                check_workers(workers).err()
            };
            if let Some(problem) = problem {
                return Err(ConfigError::new(
                    "path_workers",
                    format!("path `{path}` {problem}"),
                ));
            }
        }
        Ok(())
    }
}

/// `Err(problem)` unless `workers` is in `1..=MAX_WORKERS`.
fn check_workers(workers: usize) -> Result<(), String> {
    if workers == 0 {
        Err("must be at least 1".to_owned())
    } else if workers > MAX_WORKERS {
        Err(format!("must be at most {MAX_WORKERS}"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_from_toml() {
        let config = PartnerConfig::from_toml(
            r#"
            listen = "127.0.0.1:9100"
            admin_listen = "127.0.0.1:9101"
            mode = "hang"
            budget_mode = "off"
            max_tracked_ids = 5
            shutdown_grace = "2s"
            workers = 3

            [path_workers]
            "/pricing" = 8
            "/inventory" = 1
            "#,
        )
        .unwrap();
        assert_eq!(config.workers, Some(3));
        assert_eq!(
            config.path_workers,
            BTreeMap::from([("/pricing".to_owned(), 8), ("/inventory".to_owned(), 1)])
        );
        assert_eq!(config.listen.port(), 9100);
        assert_eq!(config.admin_listen.unwrap().port(), 9101);
        assert_eq!(config.mode, FaultMode::Hang);
        assert_eq!(config.budget_mode, BudgetMode::Off);
        assert_eq!(config.max_tracked_ids, 5);
        assert_eq!(config.shutdown_grace, Duration::from_secs(2));
    }

    #[test]
    fn the_default_listen_address_is_loopback() {
        assert!(PartnerConfig::default().listen.ip().is_loopback());
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_the_file_and_the_field() {
        let err = PartnerConfig::from_toml("shutdown_grace = \"soon\"").unwrap_err();
        let text = crate::error::chain(&err);
        assert!(
            text.starts_with("malformed config file `<inline>`"),
            "{text}"
        );
        assert!(text.contains("shutdown_grace"), "{text}");
    }

    #[test]
    fn the_config_round_trips_through_toml() {
        let config = PartnerConfig::default().with_mode(FaultMode::Reset);
        let text = toml::to_string(&config).unwrap();
        assert_eq!(PartnerConfig::from_toml(&text).unwrap(), config);
        let config = config
            .with_workers(Some(4))
            .with_path_workers("/pricing", 2);
        let text = toml::to_string(&config).unwrap();
        assert_eq!(PartnerConfig::from_toml(&text).unwrap(), config);
    }

    #[test]
    fn workers_default_to_unlimited() {
        let config = PartnerConfig::from_toml("").unwrap();
        assert_eq!(config.workers, None);
        assert!(config.path_workers.is_empty());
    }

    #[test]
    fn a_bad_worker_count_or_path_is_an_error_naming_the_field() {
        for (text, field, problem) in [
            ("workers = 0", "workers", "must be at least 1"),
            ("workers = 1000001", "workers", "must be at most 1000000"),
            (
                "[path_workers]\n\"/p\" = 0",
                "path_workers",
                "path `/p` must be at least 1",
            ),
            (
                "[path_workers]\n\"pricing\" = 2",
                "path_workers",
                "path `pricing` must start with `/`",
            ),
            (
                "[path_workers]\n\"/stats\" = 2",
                "path_workers",
                "path `/stats` is reserved and never takes a worker",
            ),
            (
                "[path_workers]\n\"/admin/mode\" = 2",
                "path_workers",
                "path `/admin/mode` is reserved and never takes a worker",
            ),
        ] {
            let err = PartnerConfig::from_toml(text).unwrap_err();
            let PartnerError::Config(err) = err else {
                panic!("{text}: {err:?}");
            };
            assert_eq!(err.field(), field, "{text}");
            assert_eq!(
                err.to_string(),
                format!("invalid config: `{field}` {problem}"),
                "{text}"
            );
        }
        assert!(PartnerConfig::from_toml("workers = -1").is_err());
        let long = format!("/{}", "x".repeat(MAX_PATH_LEN));
        let err = PartnerConfig::default()
            .with_path_workers(long, 1)
            .validate()
            .unwrap_err();
        assert_eq!(err.field(), "path_workers");
    }
}
