//! [`EventSource`]: server-sent events followed through a
//! [`BudgetClient`], reconnecting by a [`ReconnectPolicy`] and resuming
//! with `Last-Event-ID` (docs/streams.md, "Following a stream").
//!
//! [`ReconnectPolicy`]: super::ReconnectPolicy

mod parser;

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};

use super::follow::Reconnects;
use super::{BodyStream, StreamConfig, StreamError, StreamStats};
use crate::Budget;
use crate::client::BudgetClient;
use crate::config::ConfigError;
use parser::{Parsed, Parser};

/// One server-sent event.
///
/// # Example
///
/// ```no_run
/// use futures_util::StreamExt;
/// use budget_core::stream::{StreamConfig, sse::EventSource};
/// # async fn run(c: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
/// let mut events = EventSource::new(c, "/events", &StreamConfig::default())?;
/// if let Some(Ok(event)) = events.next().await {
///     println!("{:?} {} {}", event.id, event.event, event.data);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// The last event id (this event's `id:`, or the latest before it);
    /// `None` when none was set (or an empty `id:` reset it).
    pub id: Option<String>,
    /// The event type (`event:`), `message` when none was given.
    pub event: String,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

type Events = Pin<Box<dyn Stream<Item = Result<Event, StreamError>> + Send>>;

/// Follows an SSE endpoint of a [`BudgetClient`]'s dependency: a
/// `Stream<Item = Result<Event, StreamError>>` that reconnects on its own.
///
/// Each opening is a call ([`RequestBuilder::open`], with
/// `Accept: text/event-stream`, `Last-Event-ID` once an id was seen, and
/// [`StreamConfig::open_budget`]): the dependency's floor, breaker and
/// permits apply, and its breaker hears the opening's status alone. After
/// a stream ends (cleanly, cut, idle for
/// [`idle_timeout`](StreamConfig::idle_timeout), or a malformed frame)
/// the follower waits its [`ReconnectPolicy`](super::ReconnectPolicy)'s
/// jittered wait (the server's `retry:` the base, within the cap) and
/// reconnects where it left off.
///
/// Errors: a transient one (a cut, an idle stream, a malformed frame, an
/// opening answered `5xx`, `408`, `429`, or not answered) is yielded as
/// an item, and the follower reconnects; a clean end is not an error
/// (counted in [`stats`](Self::stats)). A final one
/// ([`StreamError::is_final`]: a `204`, another `4xx`, an answer that is
/// not an event stream) is yielded, and the stream ends.
///
/// [`RequestBuilder::open`]: crate::client::RequestBuilder::open
///
/// # Example
///
/// ```no_run
/// use futures_util::StreamExt;
/// use budget_core::stream::{StreamConfig, sse::EventSource};
///
/// # async fn run(partner: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
/// let mut events = EventSource::new(partner, "/events?rate=5", &StreamConfig::default())?;
/// while let Some(item) = events.next().await {
///     match item {
///         Ok(event) => println!("{}: {}", event.id.unwrap_or_default(), event.data),
///         Err(e) => eprintln!("reconnecting after: {e}"), // a final error ends the loop
///     }
/// }
/// # Ok(()) }
/// ```
pub struct EventSource {
    events: Events,
    stats: StreamStats,
}

impl fmt::Debug for EventSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventSource")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl EventSource {
    /// Follows `path` (with its query) under `client`'s dependency URL,
    /// from the start. Errors name an invalid `config` field.
    ///
    /// ```no_run
    /// # use budget_core::stream::{StreamConfig, sse::EventSource};
    /// # fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::config::ConfigError> {
    /// let events = EventSource::new(c, "/events", &StreamConfig::default())?;
    /// # Ok(()) }
    /// ```
    pub fn new(
        client: BudgetClient,
        path: impl Into<String>,
        config: &StreamConfig,
    ) -> Result<Self, ConfigError> {
        Self::resume(client, path, config, "")
    }

    /// Like [`new`](Self::new), resuming after event `last_event_id` (its
    /// first opening sends it as `Last-Event-ID`; empty: none).
    ///
    /// ```no_run
    /// # use budget_core::stream::{StreamConfig, sse::EventSource};
    /// # fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::config::ConfigError> {
    /// let events = EventSource::resume(c, "/events", &StreamConfig::default(), "41")?;
    /// # Ok(()) }
    /// ```
    pub fn resume(
        client: BudgetClient,
        path: impl Into<String>,
        config: &StreamConfig,
        last_event_id: &str,
    ) -> Result<Self, ConfigError> {
        let reconnects = Reconnects::new(config.policy()?);
        let stats = reconnects.stats.clone();
        let follow = Follow {
            client,
            path: path.into(),
            idle: config.idle_timeout,
            open_budget: config.open_budget,
            parser: Parser::new(config.max_line, last_event_id.to_owned()),
            body: None,
            done: false,
            failed: None,
            reconnects,
        };
        let events = futures_util::stream::unfold(follow, |mut follow| async move {
            let item = follow.next().await?;
            Some((item, follow))
        });
        Ok(Self {
            events: Box::pin(events),
            stats,
        })
    }

    /// What the follower did so far (a handle: it stays current).
    ///
    /// ```no_run
    /// # use budget_core::stream::{StreamConfig, sse::EventSource};
    /// # fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::config::ConfigError> {
    /// let events = EventSource::new(c, "/events", &StreamConfig::default())?;
    /// assert_eq!(events.stats().opens(), 0); // nothing happens until polled
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> StreamStats {
        self.stats.clone()
    }
}

impl Stream for EventSource {
    type Item = Result<Event, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// The follower's state between items.
struct Follow {
    client: BudgetClient,
    path: String,
    idle: Duration,
    open_budget: Duration,
    parser: Parser,
    /// The open stream's body; `None` between connections.
    body: Option<BodyStream>,
    /// A final error was yielded.
    done: bool,
    /// A malformed frame, yielded after the events read before it.
    failed: Option<StreamError>,
    reconnects: Reconnects,
}

impl Follow {
    /// The next event or error; `None` after a final error.
    async fn next(&mut self) -> Option<Result<Event, StreamError>> {
        loop {
            if self.done {
                return None;
            }
            match self.parser.pop() {
                Some(Parsed::Event(event)) => {
                    self.reconnects.delivered();
                    return Some(Ok(event));
                }
                Some(Parsed::Retry(retry)) => {
                    self.reconnects.server_retry(retry);
                    continue;
                }
                None => {}
            }
            if let Some(e) = self.failed.take() {
                return Some(Err(e));
            }
            let Some(body) = self.body.as_mut() else {
                if let Err(e) = self.connect().await {
                    return Some(Err(self.refused(e)));
                }
                continue;
            };
            match tokio::time::timeout(self.idle, body.next()).await {
                Ok(Some(Ok(chunk))) => {
                    if let Err(e) = self.parser.feed(&chunk) {
                        self.failed = Some(self.cut(e));
                    }
                }
                // A clean end: reconnect, no error.
                Ok(None) => self.cut(()),
                Ok(Some(Err(e))) => return Some(Err(self.cut(e))),
                Err(_) => return Some(Err(self.cut(StreamError::Idle { after: self.idle }))),
            }
        }
    }

    /// Opens the stream after the wait due, resuming after the last id.
    async fn connect(&mut self) -> Result<(), StreamError> {
        self.reconnects.before_open().await;
        let mut req = self
            .client
            .get(&self.path)
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .header(CACHE_CONTROL, HeaderValue::from_static("no-cache"))
            .budget(Budget::new(self.open_budget));
        // An id that is no header value (a control character) is not sent.
        if let Ok(id) = HeaderValue::from_str(self.parser.last_id())
            && !id.is_empty()
        {
            req = req.header("last-event-id", id);
        }
        let res = req.open().await.map_err(StreamError::Open)?;
        if res.status() != StatusCode::OK {
            return Err(StreamError::Status {
                status: res.status(),
                retry_after: res.retry_after(),
            });
        }
        let content_type = res.headers().get(CONTENT_TYPE);
        let is_sse = content_type
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("text/event-stream"));
        if !is_sse {
            return Err(StreamError::NotEventStream {
                content_type: content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into()),
            });
        }
        self.parser.reconnected();
        self.body = Some(res.bytes_stream());
        Ok(())
    }

    /// The open stream ended with `why`: drop it, wait before the next.
    fn cut<E>(&mut self, why: E) -> E {
        self.body = None;
        self.parser.reconnected();
        self.reconnects.cut();
        why
    }

    /// The opening failed with `error`: end after a final one, else wait.
    fn refused(&mut self, error: StreamError) -> StreamError {
        self.done = self.reconnects.refused(&error);
        error
    }
}
