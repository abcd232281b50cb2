//! The partner's errors: starting it, switching its mode, reading its config.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

use budget_core::config::ConfigError;

/// Why the partner could not start, switch mode or read its config.
///
/// ```
/// use slow_partner::PartnerError;
///
/// let err = PartnerError::Stopped;
/// assert_eq!(err.to_string(), "the partner has stopped");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PartnerError {
    /// A listening socket could not be opened (the port is taken, the
    /// address is not local, ...).
    #[error("cannot listen on {addr} for {purpose}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the socket is for: `mode normal`, `the admin listener`, ...
        purpose: String,
        /// The operating system's answer.
        #[source]
        source: io::Error,
    },
    /// Blackhole mode could not fill its accept queue with its own
    /// connections.
    #[error("cannot fill the accept queue of {addr} for mode blackhole")]
    Blackhole {
        /// The main port.
        addr: SocketAddr,
        /// The operating system's answer.
        #[source]
        source: io::Error,
    },
    /// A configuration value cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The config file could not be read.
    #[error("cannot read config file `{}`", path.display())]
    ReadConfig {
        /// The file.
        path: PathBuf,
        /// The operating system's answer.
        #[source]
        source: io::Error,
    },
    /// The config file is not valid TOML for a [`PartnerConfig`](crate::PartnerConfig).
    #[error("malformed config file `{}`", path.display())]
    ParseConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// The partner was shut down; it switches no more modes.
    #[error("the partner has stopped")]
    Stopped,
}

/// An error and its `source()` chain on one line: `a: b: c` (budget-core's
/// [`error_chain`](budget_core::error_chain), re-exported as
/// `slow_partner::error_chain`).
///
/// ```
/// # use slow_partner::PartnerError;
/// let err = PartnerError::Blackhole {
///     addr: "127.0.0.1:9".parse().unwrap(),
///     source: std::io::Error::other("boom"),
/// };
/// assert_eq!(
///     slow_partner::error_chain(&err),
///     "cannot fill the accept queue of 127.0.0.1:9 for mode blackhole: boom",
/// );
/// ```
pub use budget_core::error_chain as chain;
