//! [`ResponseFuture`]: the answer of an [`OutboundBudget`](super::OutboundBudget),
//! bounded by what was left of the budget.

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Response;
use pin_project_lite::pin_project;
use tokio::time::{Sleep, sleep_until};

use super::BudgetElapsed;
use crate::adapters::outbound::{Sent, failure_kind};
use crate::floor::BelowFloor;
use crate::retry::{Outcome, TransportKind};

type BoxError = Box<dyn StdError + Send + Sync>;

pin_project! {
    /// The response future of [`OutboundBudget`](super::OutboundBudget):
    /// the inner client's answer, or a [`BelowFloor`] for a request not
    /// made, or a [`BudgetElapsed`] once what was left of the budget ran
    /// out (the inner future is then dropped, and with it its request).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::adapters::tower::{OutboundBudget, future::ResponseFuture};
    /// use budget_core::{Budget, context::RequestContext};
    /// use tower::{Service, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let never = tower::service_fn(|_: http::Request<()>| std::future::pending::<Result<http::Response<()>, std::io::Error>>());
    /// let mut svc = OutboundBudget::new(never, "pricing");
    /// let cx = RequestContext::new(Budget::new(Duration::from_millis(20)));
    /// let err = cx.clone().scope(async {
    ///     let fut: ResponseFuture<_> = svc.ready().await.unwrap().call(http::Request::new(()));
    ///     fut.await.unwrap_err()
    /// }).await;
    /// assert!(err.is::<budget_core::adapters::tower::BudgetElapsed>());
    /// assert!(cx.ledger().server_timing().ends_with("desc=\"timeout\""));
    /// # }
    /// ```
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // Outside any budget scope: the inner future as it is.
        Passthrough {
            #[pin]
            inner: F,
        },
        // Not made: below the floor (taken when answered).
        Refused {
            below: Option<BelowFloor>,
        },
        // Made: the inner future until the deadline.
        Bounded {
            #[pin]
            inner: F,
            #[pin]
            deadline: Sleep,
            sent: Sent,
        },
    }
}

impl<F> ResponseFuture<F> {
    pub(super) fn passthrough(inner: F) -> Self {
        Self {
            state: State::Passthrough { inner },
        }
    }

    pub(super) fn refused(below: BelowFloor) -> Self {
        Self {
            state: State::Refused { below: Some(below) },
        }
    }

    pub(super) fn bounded(inner: F, sent: Sent) -> Self {
        Self {
            state: State::Bounded {
                inner,
                deadline: sleep_until(sent.deadline()),
                sent,
            },
        }
    }
}

impl<F, RB, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<RB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Passthrough { inner } => inner.poll(cx).map_err(Into::into),
            StateProj::Refused { below } => Poll::Ready(Err(match below.take() {
                Some(below) => Box::new(below),
                None => "the request was refused, and its future polled again".into(),
            })),
            StateProj::Bounded {
                inner,
                deadline,
                sent,
            } => {
                if let Poll::Ready(result) = inner.poll(cx) {
                    let result = result.map_err(Into::into);
                    let outcome = match &result {
                        Ok(res) => Outcome::status(res.status()),
                        Err(e) => Outcome::Transport(failure_kind(&**e)),
                    };
                    sent.record(&outcome);
                    return Poll::Ready(result);
                }
                if deadline.poll(cx).is_ready() {
                    sent.record(&Outcome::Transport(TransportKind::Timeout));
                    return Poll::Ready(Err(Box::new(BudgetElapsed::new(sent.limit()))));
                }
                Poll::Pending
            }
        }
    }
}
