use std::io;
use std::net::SocketAddr;

use budget_core::config::ConfigError;

use crate::ConfigFileError;

/// Why an HTTP service of the chain (`edge`, `checkout`) could not start: a
/// config file, a config value, or the listening socket.
///
/// Its binary exits with 2 for the first two ([`is_config`](Self::is_config))
/// and with 1 for the last (see [`run_server`](crate::run_server)).
///
/// ```
/// use budget_core::config::ConfigError;
/// use service_kit::StartError;
///
/// let err = StartError::from(ConfigError::new("pricing_url", "must name a host"));
/// assert!(err.is_config());
/// assert_eq!(err.to_string(), "invalid config: `pricing_url` must name a host");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
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

impl StartError {
    /// True for a bad config (file or value): the binary exits with 2.
    ///
    /// ```
    /// let err = service_kit::StartError::Bind {
    ///     addr: "127.0.0.1:1".parse().unwrap(),
    ///     source: std::io::Error::other("in use"),
    /// };
    /// assert!(!err.is_config());
    /// assert_eq!(service_kit::error_chain(&err), "cannot listen on 127.0.0.1:1: in use");
    /// ```
    pub fn is_config(&self) -> bool {
        matches!(self, StartError::ConfigFile(_) | StartError::Config(_))
    }
}
