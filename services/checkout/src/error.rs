//! Why checkout could not start.

use std::io;
use std::net::SocketAddr;

use budget_core::config::ConfigError;
use service_kit::ConfigFileError;

/// Why checkout could not start: a config file, a config value, or the
/// listening socket.
///
/// ```
/// use budget_core::config::ConfigError;
/// let err = checkout::Error::from(ConfigError::new("pricing_url", "must name a host"));
/// assert!(err.is_config());
/// assert_eq!(err.to_string(), "invalid config: `pricing_url` must name a host");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file could not be read or parsed.
    #[error(transparent)]
    ConfigFile(#[from] ConfigFileError),
    /// A config value cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's answer.
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// True for a bad config (file or value): the binary exits with 2.
    ///
    /// ```
    /// let err = checkout::Error::Bind {
    ///     addr: "127.0.0.1:1".parse().unwrap(),
    ///     source: std::io::Error::other("in use"),
    /// };
    /// assert!(!err.is_config());
    /// ```
    pub fn is_config(&self) -> bool {
        matches!(self, Error::ConfigFile(_) | Error::Config(_))
    }
}
