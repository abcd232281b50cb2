//! Configuration: serde-deserialisable policy structs with humantime
//! durations (`"250ms"`, `"2s"`), validated into typed errors that name the
//! field.
//!
//! Every policy of this crate has a `*Config` struct that deserialises from
//! TOML, JSON or anything serde reads, and a `validate` (or `build`) method
//! that turns it into the runtime type or a [`ConfigError`] naming the field
//! and what is wrong with it. Nothing falls back silently to a default.
//!
//! # Example
//!
//! ```
//! use budget_core::config::ConfigError;
//!
//! let err = ConfigError::new("retry.max_attempts", "must be at least 1");
//! assert_eq!(err.to_string(), "invalid config: `retry.max_attempts` must be at least 1");
//! assert_eq!(err.field(), "retry.max_attempts");
//! ```

use std::borrow::Cow;

pub mod duration;

/// A configuration value that cannot be used, with the field it came from.
///
/// # Example
///
/// ```
/// use budget_core::config::ConfigError;
///
/// let err = ConfigError::new("backoff.max", "is below backoff.initial");
/// assert_eq!(err.problem(), "is below backoff.initial");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid config: `{field}` {problem}")]
pub struct ConfigError {
    field: Cow<'static, str>,
    problem: Cow<'static, str>,
}

impl ConfigError {
    /// A new error for `field` (dotted path, e.g. `retry.backoff.max`).
    ///
    /// ```
    /// # use budget_core::config::ConfigError;
    /// let e = ConfigError::new("concurrency", "must be at least 1");
    /// assert_eq!(e.field(), "concurrency");
    /// ```
    pub fn new(field: impl Into<Cow<'static, str>>, problem: impl Into<Cow<'static, str>>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The same error with `prefix.` put before the field name, for nested
    /// configs.
    ///
    /// ```
    /// # use budget_core::config::ConfigError;
    /// let e = ConfigError::new("max", "is zero").within("backoff");
    /// assert_eq!(e.field(), "backoff.max");
    /// ```
    pub fn within(self, prefix: &str) -> Self {
        Self {
            field: Cow::Owned(format!("{prefix}.{}", self.field)),
            problem: self.problem,
        }
    }

    /// The field the error is about.
    ///
    /// ```
    /// # use budget_core::config::ConfigError;
    /// assert_eq!(ConfigError::new("a.b", "x").field(), "a.b");
    /// ```
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with the field.
    ///
    /// ```
    /// # use budget_core::config::ConfigError;
    /// assert_eq!(ConfigError::new("a", "is zero").problem(), "is zero");
    /// ```
    pub fn problem(&self) -> &str {
        &self.problem
    }
}
