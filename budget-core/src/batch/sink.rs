//! Where a batch goes: the [`Sink`] seam, and [`ClientSink`], a
//! `BudgetClient` POST (floor, breaker, ledger, metrics all apply).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};

use crate::Budget;
use crate::breaker::BreakerState;
use crate::client::{BudgetClient, CallErrorKind};
use crate::retry::IDEMPOTENCY_KEY;

/// How one send of a batch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// A 2xx: the server has the batch.
    Acked,
    /// The server said the batch is bad (400, 413, 422), or it could not
    /// be sent at all: set it aside.
    Refused {
        status: Option<StatusCode>,
        reason: String,
    },
    /// Anything else (5xx, 429, other 4xx, no answer): retry, after the
    /// server's `Retry-After` if it gave one.
    Failed { retry_after: Option<Duration> },
    /// Not sent: the endpoint's breaker is open; it admits a probe after
    /// `retry_after`.
    CircuitOpen { retry_after: Duration },
}

/// The statuses that say the batch itself is bad: retrying cannot help.
fn is_bad_batch(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE | StatusCode::UNPROCESSABLE_ENTITY
    )
}

pub(crate) type SendFuture = Pin<Box<dyn Future<Output = Attempt> + Send + 'static>>;

/// Sends one batch body under its key within `budget`.
pub(crate) trait Sink: Send + Sync + 'static {
    fn send(&self, key: &str, body: Bytes, budget: Budget) -> SendFuture;
    /// The endpoint's breaker state before a send, to count probes.
    fn breaker_state(&self) -> Option<BreakerState>;
}

/// A POST of the batch through a [`BudgetClient`].
pub(crate) struct ClientSink {
    pub(crate) client: BudgetClient,
    pub(crate) path: String,
}

impl Sink for ClientSink {
    fn send(&self, key: &str, body: Bytes, budget: Budget) -> SendFuture {
        let request = self
            .client
            .post(&self.path)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(IDEMPOTENCY_KEY, key)
            .body(body)
            .budget(budget)
            .send();
        Box::pin(async move {
            match request.await {
                Ok(res) if res.status().is_success() => Attempt::Acked,
                Ok(res) if is_bad_batch(res.status()) => Attempt::Refused {
                    status: Some(res.status()),
                    reason: format!("{}: {}", res.status(), snippet(&res.text())),
                },
                Ok(res) => Attempt::Failed {
                    retry_after: res.retry_after(),
                },
                Err(e) if e.kind() == CallErrorKind::CircuitOpen => Attempt::CircuitOpen {
                    retry_after: e.retry_after().unwrap_or_default(),
                },
                Err(e) if e.kind() == CallErrorKind::Request => Attempt::Refused {
                    status: None,
                    reason: crate::error_chain(&e),
                },
                Err(e) => Attempt::Failed {
                    retry_after: e.retry_after(),
                },
            }
        })
    }

    fn breaker_state(&self) -> Option<BreakerState> {
        self.client.breaker().map(|b| b.state())
    }
}

/// The start of a server's answer, for a set-aside batch's reason.
fn snippet(text: &str) -> &str {
    let end = text.char_indices().nth(200).map_or(text.len(), |(i, _)| i);
    &text[..end]
}
