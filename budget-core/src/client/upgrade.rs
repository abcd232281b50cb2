//! A WebSocket's opening as a call: tokio-tungstenite as a [`Transport`]
//! whose answer is the upgrade (or its refusal), so that the handshake
//! gets the floor, admission, the breaker and the ledger like any call
//! (docs/streams.md, "WebSocket").

use std::io;

use http::{HeaderMap, StatusCode};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, tungstenite};

use super::budget_client::Inner;
use super::transport::Prepared;
use crate::clock::WallClock;
use crate::outbound::error::CallError;
use crate::outbound::{AttemptError, AttemptSpec, Call, Head, HeaderRules, Plan, Transport};
use crate::retry::{Outcome, TransportKind};
use crate::telemetry::trace;

/// An open WebSocket.
pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What a handshake came back with.
pub(crate) enum Upgrade {
    /// Upgraded (`101`).
    Open(Box<Socket>),
    /// Refused with this answer, and its `Retry-After` (read by the
    /// engine with the client's clock).
    Refused(http::Response<Option<Vec<u8>>>, Option<std::time::Duration>),
}

impl super::auth::Answered for Upgrade {
    fn status(&self) -> StatusCode {
        match self {
            Self::Open(_) => StatusCode::SWITCHING_PROTOCOLS,
            Self::Refused(res, _) => res.status(),
        }
    }
}

/// Handshakes of a [`Prepared`] request (its `http` URL made `ws`), each
/// ending when the upgrade is answered.
struct Handshake<'a> {
    prepared: &'a Prepared,
    config: WebSocketConfig,
}

impl Transport for Handshake<'_> {
    type Answer = Upgrade;
    type Error = tungstenite::Error;

    async fn send(&self, spec: AttemptSpec, rules: &HeaderRules) -> Result<Upgrade, Self::Error> {
        let mut url = self.prepared.url.clone();
        let target = spec.endpoint.target.as_ref();
        if let Some(target) = target {
            target.apply(&mut url);
        }
        let scheme = if url.scheme() == "https" { "wss" } else { "ws" };
        // http(s) and ws(s) are all special schemes: the change is allowed.
        let _ = url.set_scheme(scheme);
        trace::record_url(&tracing::Span::current(), &url, self.prepared.trace_query);
        let mut req = url.as_str().into_client_request()?;
        for (name, value) in &self.prepared.headers {
            req.headers_mut().append(name, value.clone());
        }
        if let Some(host) = target.and_then(|t| t.host_header.as_ref()) {
            req.headers_mut().insert(http::header::HOST, host.clone());
        }
        self.stamp(req.headers_mut(), rules, spec.budget);
        match tokio_tungstenite::connect_async_with_config(req, Some(self.config), false).await {
            Ok((socket, _)) => Ok(Upgrade::Open(Box::new(socket))),
            Err(tungstenite::Error::Http(res)) => Ok(Upgrade::Refused(*res, None)),
            Err(e) => Err(e),
        }
    }

    fn classify(&self, answer: &Upgrade, clock: &dyn WallClock) -> Outcome {
        match answer {
            // An accepted upgrade is the handshake's success: read as a
            // `200` (a `101` would be neutral, as every `1xx`, to the
            // breaker's one status rule).
            Upgrade::Open(_) => Outcome::from_response(StatusCode::OK, &HeaderMap::new(), clock),
            Upgrade::Refused(res, _) => Outcome::from_response(res.status(), res.headers(), clock),
        }
    }

    fn head<'a>(&self, answer: &'a Upgrade) -> Option<Head<'a>> {
        match answer {
            Upgrade::Open(_) => None,
            Upgrade::Refused(res, _) => Some(Head::new(res.headers(), res.body().as_deref())),
        }
    }

    fn classify_error(&self, error: tungstenite::Error) -> AttemptError {
        let kind = match &error {
            tungstenite::Error::Io(e) => io_kind(e),
            tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
                TransportKind::Reset
            }
            _ => TransportKind::Other,
        };
        AttemptError::new(kind, error)
    }
}

/// A socket error's kind, as reqwest's are sorted.
fn io_kind(e: &io::Error) -> TransportKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => TransportKind::Connect,
        io::ErrorKind::TimedOut => TransportKind::Timeout,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => TransportKind::Reset,
        _ => TransportKind::Other,
    }
}

/// One pass of the call engine over tokio-tungstenite, messages limited to
/// `max_message` bytes.
pub(crate) async fn engine(
    inner: &Inner,
    plan: Plan,
    prepared: Prepared,
    max_message: usize,
) -> Result<Upgrade, CallError> {
    let dep = &inner.settings.dependency;
    let transport = Handshake {
        prepared: &prepared,
        config: WebSocketConfig::default()
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message)),
    };
    let finished = Call {
        dep,
        clock: &*inner.clock,
        plan,
        transport: &transport,
    }
    .run()
    .await?;
    Ok(match finished.response {
        Upgrade::Refused(res, _) => Upgrade::Refused(res, finished.outcome.retry_after()),
        open => open,
    })
}
