//! [`WebSocket`]: a WebSocket followed through a [`BudgetClient`] with the
//! same reconnect policy and breaker rules as an
//! [`EventSource`](super::sse::EventSource), resuming by a query
//! parameter (docs/streams.md, "WebSocket").

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};

use super::follow::Reconnects;
use super::{StreamConfig, StreamError, StreamStats};
use crate::Budget;
use crate::client::BudgetClient;
use crate::client::upgrade::{Socket, Upgrade};
use crate::config::ConfigError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

/// A WebSocket message (tokio-tungstenite's): a follower yields text and
/// binary ones; pings, pongs and closes are handled.
pub use tokio_tungstenite::tungstenite::Message;

type IdOf = Arc<dyn Fn(&Message) -> Option<String> + Send + Sync>;

/// How a reconnect resumes: the query parameter that carries the last id
/// seen, and how to read an id from a message.
///
/// # Example
///
/// ```
/// use budget_core::stream::ws::{Message, Resume};
///
/// // The slow partner's `/ws`: messages `{"id":N}`, resumed by `?last_id=N`.
/// let resume = Resume::query("last_id", |m: &Message| {
///     let v: serde_json::Value = serde_json::from_str(m.to_text().ok()?).ok()?;
///     Some(v.get("id")?.to_string())
/// });
/// ```
#[derive(Clone)]
pub struct Resume {
    param: String,
    id_of: IdOf,
    last: Option<String>,
}

impl fmt::Debug for Resume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resume")
            .field("param", &self.param)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl Resume {
    /// Resume by the query parameter `param`, set to the id `id_of` read
    /// from the last message that had one.
    ///
    /// ```
    /// # use budget_core::stream::ws::{Message, Resume};
    /// let resume = Resume::query("after", |m: &Message| m.to_text().ok().map(str::to_owned));
    /// ```
    pub fn query<F>(param: impl Into<String>, id_of: F) -> Self
    where
        F: Fn(&Message) -> Option<String> + Send + Sync + 'static,
    {
        Self {
            param: param.into(),
            id_of: Arc::new(id_of),
            last: None,
        }
    }

    /// The same, starting after id `last` (the first opening sends it).
    ///
    /// ```
    /// # use budget_core::stream::ws::{Message, Resume};
    /// let resume = Resume::query("last_id", |_: &Message| None).after("41");
    /// ```
    pub fn after(mut self, last: impl Into<String>) -> Self {
        self.last = Some(last.into());
        self
    }
}

type Messages = Pin<Box<dyn Stream<Item = Result<Message, StreamError>> + Send>>;

/// Follows a WebSocket endpoint of a [`BudgetClient`]'s dependency: a
/// `Stream<Item = Result<Message, StreamError>>` of its text and binary
/// messages that reconnects on its own.
///
/// Each handshake is a call through the client's engine (floor, breaker,
/// permits, ledger, [`StreamConfig::open_budget`]); the breaker hears its
/// status alone (an accepted upgrade a success; `5xx`, `401`, `429` and
/// transport failures failures; other `4xx` neutral), never how an open
/// socket ends. After a close (`1000` or `1001`: a clean end; any other
/// code, or an invalid one, is a [`StreamError::CloseCode`]), a
/// disconnect, or an idle timeout (no message, ping included), the follower waits its
/// [`ReconnectPolicy`](super::ReconnectPolicy)'s jittered wait and
/// reconnects, resuming by [`Resume`]. Errors are yielded as
/// [`EventSource`](super::sse::EventSource)'s are: transient ones as
/// items, then a reconnect; a final one, then the end. `wss://` needs
/// TLS, which this feature does not bring (a transport error).
///
/// # Example
///
/// ```no_run
/// use futures_util::StreamExt;
/// use budget_core::stream::StreamConfig;
/// use budget_core::stream::ws::{Message, Resume, WebSocket};
///
/// # async fn run(partner: budget_core::client::BudgetClient) -> Result<(), Box<dyn std::error::Error>> {
/// let resume = Resume::query("last_id", |m: &Message| {
///     let v: serde_json::Value = serde_json::from_str(m.to_text().ok()?).ok()?;
///     Some(v.get("id")?.to_string())
/// });
/// let mut messages = WebSocket::new(partner, "/ws", &StreamConfig::default(), Some(resume))?;
/// while let Some(item) = messages.next().await {
///     match item {
///         Ok(message) => println!("{message}"),
///         Err(e) => eprintln!("reconnecting after: {e}"),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct WebSocket {
    messages: Messages,
    stats: StreamStats,
}

impl fmt::Debug for WebSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocket")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl WebSocket {
    /// Follows `path` (with its query) under `client`'s dependency URL
    /// (`http` made `ws`), resuming by `resume` (`None`: a reconnect
    /// starts afresh). Errors name an invalid `config` field.
    ///
    /// ```no_run
    /// # use budget_core::stream::{StreamConfig, ws::WebSocket};
    /// # fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::config::ConfigError> {
    /// let messages = WebSocket::new(c, "/ws", &StreamConfig::default(), None)?;
    /// # Ok(()) }
    /// ```
    pub fn new(
        client: BudgetClient,
        path: impl Into<String>,
        config: &StreamConfig,
        resume: Option<Resume>,
    ) -> Result<Self, ConfigError> {
        let reconnects = Reconnects::new(config.policy()?);
        let stats = reconnects.stats.clone();
        let follow = Follow {
            client,
            path: path.into(),
            idle: config.idle_timeout,
            open_budget: config.open_budget,
            max_message: config.max_line,
            resume,
            socket: None,
            done: false,
            reconnects,
        };
        let messages = futures_util::stream::unfold(follow, |mut follow| async move {
            let item = follow.next().await?;
            Some((item, follow))
        });
        Ok(Self {
            messages: Box::pin(messages),
            stats,
        })
    }

    /// What the follower did so far (a handle: it stays current).
    ///
    /// ```no_run
    /// # use budget_core::stream::{StreamConfig, ws::WebSocket};
    /// # fn run(c: budget_core::client::BudgetClient) -> Result<(), budget_core::config::ConfigError> {
    /// let messages = WebSocket::new(c, "/ws", &StreamConfig::default(), None)?;
    /// assert_eq!(messages.stats().opens(), 0);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> StreamStats {
        self.stats.clone()
    }
}

impl Stream for WebSocket {
    type Item = Result<Message, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.messages.as_mut().poll_next(cx)
    }
}

/// The follower's state between messages.
struct Follow {
    client: BudgetClient,
    path: String,
    idle: Duration,
    open_budget: Duration,
    max_message: usize,
    resume: Option<Resume>,
    socket: Option<Box<Socket>>,
    done: bool,
    reconnects: Reconnects,
}

impl Follow {
    /// The next message or error; `None` after a final error.
    async fn next(&mut self) -> Option<Result<Message, StreamError>> {
        loop {
            if self.done {
                return None;
            }
            let Some(socket) = self.socket.as_mut() else {
                if let Err(e) = self.connect().await {
                    return Some(Err(self.refused(e)));
                }
                continue;
            };
            let read = tokio::time::timeout(self.idle, socket.next()).await;
            match read {
                Ok(Some(Ok(message))) => {
                    if let Some(item) = self.read(message) {
                        return Some(item);
                    }
                }
                Ok(Some(Err(e))) => {
                    return Some(Err(self.cut(StreamError::WebSocket(Box::new(e)))));
                }
                Ok(None) => self.cut(()),
                Err(_) => return Some(Err(self.cut(StreamError::Idle { after: self.idle }))),
            }
        }
    }

    /// What `message` gives the caller: a text or binary message (its id
    /// kept for resuming), an invalid close code's error, or nothing.
    fn read(&mut self, message: Message) -> Option<Result<Message, StreamError>> {
        match message {
            Message::Text(_) | Message::Binary(_) => {
                if let Some(resume) = &mut self.resume
                    && let Some(id) = (resume.id_of)(&message)
                {
                    resume.last = Some(id);
                }
                self.reconnects.delivered();
                Some(Ok(message))
            }
            Message::Close(Some(frame))
                if !matches!(frame.code, CloseCode::Normal | CloseCode::Away) =>
            {
                let (code, reason) = (u16::from(frame.code), frame.reason.to_string());
                Some(Err(self.cut(StreamError::CloseCode { code, reason })))
            }
            Message::Close(_) => {
                self.cut(());
                None
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => None,
        }
    }

    /// The handshake after the wait due, resuming after the last id.
    async fn connect(&mut self) -> Result<(), StreamError> {
        self.reconnects.before_open().await;
        let mut req = self
            .client
            .get(&self.path)
            .budget(Budget::new(self.open_budget));
        if let Some(Resume {
            param,
            last: Some(last),
            ..
        }) = &self.resume
        {
            req = req.query(&[(param.as_str(), last.as_str())]);
        }
        match req.upgrade(self.max_message).await {
            Ok(Upgrade::Open(socket)) => {
                self.socket = Some(socket);
                Ok(())
            }
            Ok(Upgrade::Refused(res, retry_after)) => Err(StreamError::Status {
                status: res.status(),
                retry_after,
            }),
            Err(e) => Err(StreamError::Open(e)),
        }
    }

    /// The open socket ended with `why`: drop it, wait before the next.
    fn cut<E>(&mut self, why: E) -> E {
        self.socket = None;
        self.reconnects.cut();
        why
    }

    /// The handshake failed with `error`: end after a final one, else wait.
    fn refused(&mut self, error: StreamError) -> StreamError {
        self.done = self.reconnects.refused(&error);
        error
    }
}
