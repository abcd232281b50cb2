//! [`DatabaseConfig`]: a database's pool, floors, breaker and cancel
//! limit, as a service's configuration file gives them.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::breaker::BreakerConfig;
use crate::config::ConfigError;
use crate::floor::FloorConfig;
use crate::outbound::TimeoutMode;

/// The default [`DatabaseConfig::pool_size`]: deadpool-postgres's own
/// default on a small machine (four connections per core, two cores).
pub const DEFAULT_POOL_SIZE: usize = 8;

/// The default [`DatabaseConfig::cancel_timeout`]: a cancel request is a
/// fresh TCP connection to the server and one packet; one that has not
/// been confirmed in this long finds a server too busy to trust the
/// connection to, and the connection is closed instead of reused.
pub const DEFAULT_CANCEL_TIMEOUT: Duration = Duration::from_secs(1);

/// A database whose statements spend the request's budget (see the
/// [module docs](super) and docs/postgres.md).
///
/// ```
/// use std::time::Duration;
/// use budget_core::postgres::DatabaseConfig;
///
/// let config: DatabaseConfig = toml::from_str(r#"
///     name = "orders-db"
///     url = "postgres://app@127.0.0.1:5432/orders"
///     pool_size = 16
///     floor = "5ms"
///     [statements]
///     reserve-stock = "auto"
/// "#).unwrap();
/// assert_eq!(config.pool_size, 16);
/// assert_eq!(config.cancel_timeout, Duration::from_secs(1));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct DatabaseConfig {
    /// The database's name in the ledger, the logs and the metrics (an
    /// HTTP token): its pool wait is `NAME-queue`, a statement labelled
    /// `reserve-stock` is `NAME.reserve-stock`.
    pub name: String,
    /// A tokio-postgres connection string
    /// (`postgres://user:password@host:port/db` or `host=... port=...`).
    /// TLS is not supported: connect over a private network or a Unix
    /// socket.
    pub url: String,
    /// The pool's connections at most.
    #[serde(default = "default_pool_size")]
    pub pool_size: usize,
    /// Every statement's floor unless [`statements`](Self::statements)
    /// gives its own: fixed (`"5ms"`) or learned per statement label
    /// (`"auto"`).
    #[serde(default)]
    pub floor: FloorConfig,
    /// A floor per statement label, in place of [`floor`](Self::floor).
    #[serde(default)]
    pub statements: BTreeMap<String, FloorConfig>,
    /// The database's breaker: failures to connect, connections lost and
    /// the server's own failures (out of connections, shutting down) open
    /// it; a statement the server refused (a syntax error, a constraint)
    /// does not. Absent: no breaker.
    #[serde(default)]
    pub breaker: Option<BreakerConfig>,
    /// The longest a cancel request may take to be confirmed before the
    /// connection is closed instead of going back to the pool.
    #[serde(default = "default_cancel_timeout", with = "crate::config::duration")]
    pub cancel_timeout: Duration,
    /// `budget` (default) or `fixed`.
    #[serde(default)]
    pub mode: TimeoutMode,
    /// Each statement's timeout in [`TimeoutMode::Fixed`] (the pool wait
    /// included); ignored in budget mode.
    #[serde(default = "default_fixed_timeout", with = "crate::config::duration")]
    pub fixed_timeout: Duration,
    /// In budget mode, the budget of a statement run outside any request
    /// (a job, a migration at start-up). Absent (the default): such a
    /// statement runs as the bare driver runs it, with the connection's
    /// own `statement_timeout`.
    #[serde(default, with = "crate::config::duration")]
    pub default_budget: Option<Duration>,
}

fn default_pool_size() -> usize {
    DEFAULT_POOL_SIZE
}

fn default_cancel_timeout() -> Duration {
    DEFAULT_CANCEL_TIMEOUT
}

fn default_fixed_timeout() -> Duration {
    crate::client::DEFAULT_FIXED_TIMEOUT
}

impl DatabaseConfig {
    /// A database called `name` at `url`, every other field its default.
    ///
    /// ```
    /// use budget_core::postgres::DatabaseConfig;
    /// let config = DatabaseConfig::new("orders-db", "postgres://app@127.0.0.1/orders");
    /// assert_eq!(config.pool_size, budget_core::postgres::DEFAULT_POOL_SIZE);
    /// ```
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            pool_size: DEFAULT_POOL_SIZE,
            floor: FloorConfig::default(),
            statements: BTreeMap::new(),
            breaker: None,
            cancel_timeout: DEFAULT_CANCEL_TIMEOUT,
            mode: TimeoutMode::Budget,
            fixed_timeout: crate::client::DEFAULT_FIXED_TIMEOUT,
            default_budget: None,
        }
    }

    /// The fields that need no connection, checked: the name and every
    /// label are tokens without a `.`, the pool has a connection, the
    /// cancel has time.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        check_token("name", &self.name)?;
        for label in self.statements.keys() {
            check_label(label)?;
        }
        if self.pool_size == 0 {
            return Err(ConfigError::new("pool_size", "must be at least 1"));
        }
        if self.cancel_timeout.is_zero() {
            return Err(ConfigError::new("cancel_timeout", "must be more than zero"));
        }
        if self.mode == TimeoutMode::Fixed && self.fixed_timeout.is_zero() {
            return Err(ConfigError::new("fixed_timeout", "must be more than zero"));
        }
        Ok(())
    }
}

/// A statement label: a token without `.` (the ledger's
/// `database.label` keeps one dot between them).
pub(crate) fn check_label(label: &str) -> Result<(), ConfigError> {
    check_token("statements", label)
        .map_err(|e| ConfigError::new("statements", format!("label `{label}`: {e}")))?;
    if label.contains('.') {
        return Err(ConfigError::new(
            "statements",
            format!("label `{label}` must not contain `.`"),
        ));
    }
    Ok(())
}

fn check_token(field: &'static str, value: &str) -> Result<(), ConfigError> {
    if value.is_empty() {
        return Err(ConfigError::new(field, "must not be empty"));
    }
    if let Some(c) = value.chars().find(|c| !crate::ledger::is_tchar(*c)) {
        return Err(ConfigError::new(
            field,
            format!("must be a token (letters, digits, `-`, `_`, ...), found {c:?}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_name_label_or_size_is_named() {
        let mut config = DatabaseConfig::new("orders db", "postgres://127.0.0.1/x");
        assert_eq!(config.check().unwrap_err().field(), "name");
        config.name = "orders-db".into();
        config.pool_size = 0;
        assert_eq!(config.check().unwrap_err().field(), "pool_size");
        config.pool_size = 2;
        config
            .statements
            .insert("reserve.stock".into(), FloorConfig::default());
        let err = config.check().unwrap_err();
        assert!(err.to_string().contains("must not contain"), "{err}");
        config.statements.clear();
        assert!(config.check().is_ok());
    }
}
