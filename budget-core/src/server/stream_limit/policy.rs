use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::ConfigError;
use crate::server::{BodyLimit, StreamLimitLayer};

/// The default name of the final SSE event of a stream ended by its limit.
const DEFAULT_END_EVENT: &str = "end";

/// A streaming route's own limits, which hold once its head (status and
/// headers) is sent: until then the request's budget holds
/// ([`BudgetLayer`](crate::server::BudgetLayer)).
///
/// | field | meaning | default |
/// | --- | --- | --- |
/// | `idle_timeout` | the longest the body may have nothing ready since the last frame sent (or the head) | none |
/// | `max_duration` | the longest a body streams, counted from the head | none |
/// | `end_event` | the `event:` name of the last event written to a `text/event-stream` answer ended by a limit, its data `{"reason":"idle"}` or `{"reason":"duration"}`; `""` writes none | `"end"` |
///
/// A stream ended by a limit ends cleanly: an SSE answer gets its final
/// event then a clean end of body, any other answer a clean end of body
/// (a gRPC answer, trailers with `grpc-status: 4`). It is counted in
/// `budget_stream_ended_total` by its reason, not as an error.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::server::StreamPolicy;
///
/// let policy: StreamPolicy = toml::from_str(r#"
///     idle_timeout = "15s"
///     max_duration = "10m"
/// "#).unwrap();
/// assert_eq!(policy.idle_timeout, Some(Duration::from_secs(15)));
/// assert_eq!(policy.end_event, "end");
/// assert!(policy.layer().is_ok());
///
/// let bad: StreamPolicy = toml::from_str(r#"idle_timeout = "0s""#).unwrap();
/// assert_eq!(bad.layer().unwrap_err().field(), "idle_timeout");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct StreamPolicy {
    /// The longest gap between body frames; `None`: no idle limit.
    #[serde(with = "crate::config::duration")]
    pub idle_timeout: Option<Duration>,
    /// The longest a body streams after its head; `None`: no limit.
    #[serde(with = "crate::config::duration")]
    pub max_duration: Option<Duration>,
    /// The name of the final SSE event; empty: none is written.
    pub end_event: String,
}

impl Default for StreamPolicy {
    fn default() -> Self {
        Self {
            idle_timeout: None,
            max_duration: None,
            end_event: DEFAULT_END_EVENT.to_owned(),
        }
    }
}

impl StreamPolicy {
    /// Checks the policy: a limit that is set is more than zero, and
    /// `end_event` is one line (no CR or LF, which would end the `event:`
    /// field early and forge another one).
    ///
    /// ```
    /// use budget_core::server::StreamPolicy;
    ///
    /// let mut policy = StreamPolicy::default();
    /// policy.end_event = "end\ndata: x".to_owned();
    /// assert_eq!(policy.validate().unwrap_err().field(), "end_event");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.idle_timeout.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("idle_timeout", "must be more than zero"));
        }
        if self.max_duration.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("max_duration", "must be more than zero"));
        }
        if self.end_event.contains(['\r', '\n']) {
            return Err(ConfigError::new(
                "end_event",
                "must not contain a line break",
            ));
        }
        Ok(())
    }

    /// The validated policy as a layer for a route (axum's
    /// `MethodRouter::layer` or `Router::route_layer`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use axum::{Router, routing::get};
    /// use budget_core::server::StreamPolicy;
    ///
    /// let mut policy = StreamPolicy::default();
    /// policy.idle_timeout = Some(Duration::from_secs(15));
    /// let app: Router = Router::new().route("/events", get(|| async { "" }).layer(policy.layer().unwrap()));
    /// # let _ = app;
    /// ```
    pub fn layer(&self) -> Result<StreamLimitLayer, ConfigError> {
        self.validate()?;
        Ok(StreamLimitLayer::from_policy(Arc::new(self.clone())))
    }

    /// The limit of a response with `headers` whose head goes out now:
    /// how [`StreamLimitLayer`] holds a route's bodies to this policy, for
    /// a body wrapped by hand ([`LimitedBody::new`](crate::server::LimitedBody::new)).
    /// The policy is taken as it is (see [`validate`](Self::validate)).
    ///
    /// ```
    /// use budget_core::server::{LimitedBody, StreamPolicy};
    ///
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("content-type", "text/event-stream".parse().unwrap());
    /// let limit = StreamPolicy::default().limit_for(&headers);
    /// let _body = LimitedBody::new(axum::body::Body::empty(), limit);
    /// ```
    pub fn limit_for(&self, headers: &http::HeaderMap) -> BodyLimit {
        BodyLimit::for_response(self, headers, tokio::time::Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_is_off_by_default_and_the_end_event_is_end() {
        let policy: StreamPolicy = toml::from_str("").unwrap();
        assert_eq!(policy, StreamPolicy::default());
        assert_eq!(policy.end_event, "end");
        assert!(policy.validate().is_ok());
    }

    #[test]
    fn a_zero_limit_is_refused_by_its_field() {
        let bad: StreamPolicy = toml::from_str(r#"max_duration = "0s""#).unwrap();
        assert_eq!(bad.validate().unwrap_err().field(), "max_duration");
    }

    #[test]
    fn an_unknown_field_does_not_parse() {
        assert!(toml::from_str::<StreamPolicy>(r#"idle = "1s""#).is_err());
    }
}
