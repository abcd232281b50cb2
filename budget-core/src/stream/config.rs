//! [`StreamConfig`]: how a follower opens, watches and reconnects a
//! stream.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ReconnectConfig, ReconnectPolicy};
use crate::config::ConfigError;

/// How a follower ([`EventSource`](super::sse::EventSource),
/// [`WebSocket`](super::ws::WebSocket)) opens, watches and reconnects a
/// stream, as read from TOML or JSON (durations in humantime form).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::stream::StreamConfig;
///
/// let c: StreamConfig = serde_json::from_str(
///     r#"{"idle_timeout": "45s", "reconnect": {"initial": "500ms", "max": "20s"}}"#,
/// ).unwrap();
/// assert_eq!(c.idle_timeout, Duration::from_secs(45));
/// assert_eq!(c.open_budget, Duration::from_secs(10));
/// c.validate().unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct StreamConfig {
    /// The reconnect schedule.
    pub reconnect: ReconnectConfig,
    /// Nothing received (not an event, a comment or a ping) for this long
    /// ends the connection and reconnects: a server that accepts and never
    /// sends is not waited for for ever. Default 60 s; set it above the
    /// server's heartbeat interval.
    #[serde(with = "crate::config::duration")]
    pub idle_timeout: Duration,
    /// The budget of each opening (up to the answer's head). Default 10 s.
    #[serde(with = "crate::config::duration")]
    pub open_budget: Duration,
    /// The longest event-stream line (SSE) or message (WebSocket) read, in
    /// bytes. Default 1 MiB.
    pub max_line: usize,
}

impl Default for StreamConfig {
    /// [`ReconnectConfig::default`], 60 s idle, 10 s to open, 1 MiB lines.
    fn default() -> Self {
        Self {
            reconnect: ReconnectConfig::default(),
            idle_timeout: Duration::from_secs(60),
            open_budget: Duration::from_secs(10),
            max_line: 1 << 20,
        }
    }
}

impl StreamConfig {
    /// Checks every field; errors name it (`reconnect.max`,
    /// `idle_timeout`, ...).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::stream::StreamConfig;
    /// let mut c = StreamConfig::default();
    /// c.idle_timeout = Duration::ZERO;
    /// assert_eq!(c.validate().unwrap_err().field(), "idle_timeout");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy().map(|_| ())
    }

    /// The validated reconnect policy (one per stream).
    pub(crate) fn policy(&self) -> Result<ReconnectPolicy, ConfigError> {
        let policy = self.reconnect.build().map_err(|e| e.within("reconnect"))?;
        if self.idle_timeout.is_zero() {
            return Err(ConfigError::new("idle_timeout", "must not be zero"));
        }
        if self.open_budget.is_zero() {
            return Err(ConfigError::new("open_budget", "must not be zero"));
        }
        if self.max_line == 0 {
            return Err(ConfigError::new("max_line", "must be at least 1"));
        }
        Ok(policy)
    }
}
