use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::server::StreamEnd;
use crate::server::stream_limit::end::BodyLimit;
use crate::telemetry::meter;

pin_project! {
    /// A response body held to its [`BodyLimit`]: the one engine behind a
    /// route's [`StreamPolicy`](crate::server::StreamPolicy) and a gRPC
    /// call's whole-call deadline.
    ///
    /// The idle timer restarts at every frame; the total limit does not.
    /// When one passes first (on a tie, the limit wins, as in the budget
    /// layer's race), the handler's body is dropped on the spot and the
    /// stream ends cleanly: a final SSE event, gRPC trailers with
    /// `grpc-status: 4`, or just the end of body. Every end is counted
    /// once in `budget_stream_ended_total` by its [`StreamEnd`] and
    /// logged as a `stream ended` tracing event. The timer is armed only
    /// once the body waits: a body whose frames are all ready at once
    /// never touches the timer wheel.
    ///
    /// The wrapped body's size is not passed on (a body that may be cut
    /// short or get a last event has no exact length).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::server::{LimitedBody, StreamPolicy};
    /// use http_body_util::BodyExt;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let mut policy = StreamPolicy::default();
    /// policy.idle_timeout = Some(Duration::from_millis(50));
    /// let headers = http::HeaderMap::new();
    /// let body = LimitedBody::new(axum::body::Body::from("whole"), policy.limit_for(&headers));
    /// assert_eq!(body.collect().await.unwrap().to_bytes(), "whole");
    /// # }
    /// ```
    pub struct LimitedBody<B> {
        #[pin]
        state: State<B>,
        limit: BodyLimit,
        // When the head went out, and the last frame since.
        started: Instant,
        last_frame: Instant,
        // Armed once the body waits; reset to the next limit.
        timer: Option<Pin<Box<Sleep>>>,
        // Whether the end was counted (a body dropped before its end is
        // counted as `client_gone` when dropped).
        counted: Counted,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<B> {
        Streaming { #[pin] inner: B },
        // Ended by a limit: its last frame, if any, still to send.
        Ending { frame: Option<Frame<Bytes>> },
        Done,
    }
}

/// Whether a body's end was counted; counts `client_gone` on drop if not.
#[derive(Debug)]
struct Counted {
    done: bool,
    started: Instant,
    frames: u64,
}

impl Counted {
    fn count(&mut self, reason: StreamEnd) {
        if self.done {
            return;
        }
        self.done = true;
        let elapsed = self.started.elapsed();
        meter::stream_ended(reason.as_str());
        tracing::debug!(
            reason = reason.as_str(),
            elapsed_ms = crate::budget::whole_millis(elapsed),
            frames = self.frames,
            "stream ended"
        );
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.count(StreamEnd::ClientGone);
    }
}

impl<B: Body> LimitedBody<B> {
    /// `inner` held to `limit` from now (its head going out). A body that
    /// is already at its end is not a stream and is not counted.
    pub fn new(inner: B, limit: BodyLimit) -> Self {
        let now = Instant::now();
        Self {
            counted: Counted {
                done: inner.is_end_stream(),
                started: now,
                frames: 0,
            },
            state: State::Streaming { inner },
            limit,
            started: now,
            last_frame: now,
            timer: None,
        }
    }
}

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let mut this = self.project();
        loop {
            let inner = match this.state.as_mut().project() {
                StateProj::Done => return Poll::Ready(None),
                StateProj::Ending { frame } => {
                    let frame = frame.take();
                    this.state.set(State::Done);
                    return Poll::Ready(frame.map(Ok));
                }
                StateProj::Streaming { inner } => inner,
            };
            // The limit first: on a tie, it wins.
            if let Some(reason) = passed(this.timer, this.limit, *this.last_frame, cx) {
                let frame = this.limit.last_frame(reason, this.started.elapsed());
                this.counted.count(reason);
                // Drops the handler's body now.
                this.state.set(State::Ending { frame });
                continue;
            }
            match inner.poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    this.counted.frames = this.counted.frames.saturating_add(1);
                    if frame.is_trailers() {
                        this.counted.count(StreamEnd::Complete);
                    } else if this.limit.idle.is_some() {
                        *this.last_frame = Instant::now();
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(error))) => {
                    this.counted.count(StreamEnd::Error);
                    this.state.set(State::Done);
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(None) => {
                    this.counted.count(StreamEnd::Complete);
                    this.state.set(State::Done);
                    return Poll::Ready(None);
                }
                Poll::Pending if this.limit.idle.is_none() && this.limit.ends_at.is_none() => {
                    return Poll::Pending;
                }
                Poll::Pending => {
                    arm(this.timer, this.limit, *this.last_frame);
                    if this.timer.is_none() {
                        return Poll::Pending;
                    }
                    // Registered; a limit that passed meanwhile ends it
                    // on the next turn of the loop.
                    if let Some(timer) = this.timer.as_mut()
                        && timer.as_mut().poll(cx).is_pending()
                    {
                        return Poll::Pending;
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Streaming { inner } => inner.is_end_stream(),
            State::Ending { frame } => frame.is_none(),
            State::Done => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            State::Streaming { inner } if inner.is_end_stream() => SizeHint::with_exact(0),
            State::Done | State::Ending { frame: None } => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

/// The next instant a limit passes: the earlier of the idle limit (from
/// `last_frame`) and the total one.
fn next_limit(limit: &BodyLimit, last_frame: Instant) -> Option<(Instant, StreamEnd)> {
    let idle = limit
        .idle
        .and_then(|idle| last_frame.checked_add(idle))
        .map(|at| (at, StreamEnd::Idle));
    match (idle, limit.ends_at) {
        // On a tie the total limit names the end.
        (Some(idle), Some(total)) if idle.0 < total.0 => Some(idle),
        (Some(idle), None) => Some(idle),
        (_, total) => total,
    }
}

/// Sets the timer to the next limit (creating it the first time).
fn arm(timer: &mut Option<Pin<Box<Sleep>>>, limit: &BodyLimit, last_frame: Instant) {
    let Some((at, _)) = next_limit(limit, last_frame) else {
        return;
    };
    match timer {
        Some(sleep) if sleep.deadline() != at => sleep.as_mut().reset(at),
        Some(_) => {}
        None => *timer = Some(Box::pin(tokio::time::sleep_until(at))),
    }
}

/// The limit that has passed, if the armed timer says one has: the timer
/// is checked against the next limit (a frame since it was armed moved
/// the idle one on).
fn passed(
    timer: &mut Option<Pin<Box<Sleep>>>,
    limit: &BodyLimit,
    last_frame: Instant,
    cx: &mut Context<'_>,
) -> Option<StreamEnd> {
    let sleep = timer.as_mut()?;
    let (at, reason) = next_limit(limit, last_frame)?;
    if sleep.deadline() != at {
        sleep.as_mut().reset(at);
    }
    sleep.as_mut().poll(cx).is_ready().then_some(reason)
}
