//! The limits every binary's HTTP server holds its connections to, so that
//! a hostile or broken client costs a bounded number of sockets for a
//! bounded time.
//!
//! | field | default | what it bounds |
//! | --- | --- | --- |
//! | `header_timeout` | `10s` | a request head (request line and headers) must be complete this long after its first byte; for a new connection, after the connection was accepted. A silent or trickling (slowloris) connection is closed when it runs out. |
//! | `idle_timeout` | `75s` | how long a kept-alive HTTP/1 connection may wait for its next request before it is closed |
//! | `max_connections` | `10000` | connections open at once; one more is answered `503` problem+json with `Retry-After: 1` and closed |
//!
//! The idle timeout is longer than the services' clients reuse an idle
//! pooled connection (`pool_idle_timeout`, `60s`), so that a client never
//! sends a request on a connection the server is about to close.
//!
//! Enforced by hyper itself, not configurable here (the values of hyper
//! 1.12): at most 100 header fields and 408 KiB (8 KiB + 100 x 4 KiB) of
//! buffered request head per HTTP/1 connection (more is `431`), a request
//! line hyper can parse (else `400`); over HTTP/2 a header list of at most
//! 16 KiB and 200 concurrent streams per connection. hyper answers those itself, with an
//! empty body: it does not let the application write that answer.
//!
//! HTTP/2 connections have no idle timeout: hyper closes none, and a client
//! that opens one and never uses it holds it until `max_connections`
//! refuses others.
//!
//! ```
//! use std::time::Duration;
//! use service_kit::HttpLimits;
//!
//! let limits: HttpLimits = toml::from_str("header_timeout = \"5s\"").unwrap();
//! assert_eq!(limits.header_timeout, Duration::from_secs(5));
//! assert_eq!(limits.idle_timeout, Duration::from_secs(75));
//! let bad = HttpLimits { max_connections: 0, ..HttpLimits::default() };
//! assert_eq!(bad.validate().unwrap_err().field(), "max_connections");
//! ```

use std::time::Duration;

use budget_core::config::ConfigError;

/// The default [`HttpLimits::header_timeout`]: 10 s.
///
/// ```
/// assert_eq!(service_kit::DEFAULT_HEADER_TIMEOUT.as_secs(), 10);
/// ```
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The default [`HttpLimits::idle_timeout`]: 75 s (nginx's
/// `keepalive_timeout`).
///
/// ```
/// assert_eq!(service_kit::DEFAULT_IDLE_TIMEOUT.as_secs(), 75);
/// ```
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);

/// The default [`HttpLimits::max_connections`]: 10 000.
///
/// ```
/// assert_eq!(service_kit::DEFAULT_MAX_CONNECTIONS, 10_000);
/// ```
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;

/// How long a connection may take to send a request head or sit idle, and
/// how many may be open (see the [module docs](self) for what each bounds
/// and what hyper bounds itself).
///
/// In a service's TOML config it is the `[http]` table; every field has a
/// default, an unknown one is an error.
///
/// ```
/// use service_kit::HttpLimits;
/// let limits = HttpLimits::default();
/// assert!(limits.validate().is_ok());
/// assert_eq!(limits.max_connections, 10_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpLimits {
    /// A request head must be complete this long after its first byte (for
    /// a connection's first request: after the connection was accepted).
    #[serde(with = "budget_core::config::duration")]
    pub header_timeout: Duration,
    /// A kept-alive HTTP/1 connection waiting this long for its next
    /// request is closed.
    #[serde(with = "budget_core::config::duration")]
    pub idle_timeout: Duration,
    /// Connections open at once; over it, a new one gets a `503` and is
    /// closed.
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl HttpLimits {
    /// Checks every field: both timeouts more than zero, at least one
    /// connection.
    ///
    /// # Errors
    ///
    /// The first bad field (`header_timeout`, `idle_timeout`,
    /// `max_connections`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use service_kit::HttpLimits;
    /// let bad = HttpLimits { header_timeout: Duration::ZERO, ..HttpLimits::default() };
    /// assert_eq!(bad.validate().unwrap_err().to_string(), "invalid config: `header_timeout` must be more than zero");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.header_timeout.is_zero() {
            return Err(ConfigError::new("header_timeout", "must be more than zero"));
        }
        if self.idle_timeout.is_zero() {
            return Err(ConfigError::new("idle_timeout", "must be more than zero"));
        }
        if self.max_connections == 0 {
            return Err(ConfigError::new("max_connections", "must be at least 1"));
        }
        Ok(())
    }
}
