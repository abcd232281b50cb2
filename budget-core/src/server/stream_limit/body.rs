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
    /// - The total limit (a route's `max_duration`, a gRPC call's
    ///   deadline) is checked before each frame: on a tie it wins, and a
    ///   body whose frames are always ready is ended by it too.
    /// - The idle limit runs from the last frame sent and is judged only
    ///   when the handler's body has nothing ready: a frame ready at the
    ///   idle instant is sent, and restarts it.
    ///
    /// When a limit passes, the handler's body is dropped on the spot and
    /// the stream ends cleanly: a final SSE event, gRPC trailers with
    /// `grpc-status: 4`, or just the end of body. Every end is counted
    /// once in `budget_stream_ended_total` by its [`StreamEnd`] and
    /// logged as a `stream ended` debug event. A timer is armed only once
    /// the body waits: a body whose frames are all ready at once never
    /// touches the timer wheel (it reads the clock once a frame while a
    /// total limit is set).
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
        // Armed once the body waits: at the total limit, and at the idle
        // limit (reset as frames come).
        total_timer: Option<Pin<Box<Sleep>>>,
        idle_timer: Option<Pin<Box<Sleep>>>,
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
            total_timer: None,
            idle_timer: None,
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
            let mut inner = match this.state.as_mut().project() {
                StateProj::Done => return Poll::Ready(None),
                StateProj::Ending { frame } => {
                    let frame = frame.take();
                    this.state.set(State::Done);
                    return Poll::Ready(frame.map(Ok));
                }
                StateProj::Streaming { inner } => inner,
            };
            // The total limit first: on a tie, it wins.
            let mut ended = total_passed(this.total_timer, this.limit, cx);
            if ended.is_none() {
                match inner.as_mut().poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        this.counted.frames = this.counted.frames.saturating_add(1);
                        // A body that says it is at its end is not polled
                        // again (nor is one after its trailers): dropped
                        // then, it ended on its own, the client did not
                        // leave.
                        if frame.is_trailers() || inner.is_end_stream() {
                            this.counted.count(StreamEnd::Complete);
                        } else if this.limit.idle.is_some() {
                            *this.last_frame = Instant::now();
                        }
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    Poll::Ready(other) => {
                        let end = if other.is_some() {
                            StreamEnd::Error
                        } else {
                            StreamEnd::Complete
                        };
                        this.counted.count(end);
                        this.state.set(State::Done);
                        return Poll::Ready(other);
                    }
                    Poll::Pending => {
                        ended = waiting(
                            this.total_timer,
                            this.idle_timer,
                            this.limit,
                            *this.last_frame,
                            cx,
                        );
                    }
                }
            }
            let Some(reason) = ended else {
                return Poll::Pending;
            };
            let frame = this.limit.last_frame(reason, this.started.elapsed());
            this.counted.count(reason);
            // Drops the handler's body now.
            this.state.set(State::Ending { frame });
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

/// Whether the total limit has passed, before a frame: by its timer once
/// armed, else by the clock.
fn total_passed(
    timer: &mut Option<Pin<Box<Sleep>>>,
    limit: &BodyLimit,
    cx: &mut Context<'_>,
) -> Option<StreamEnd> {
    let (at, reason) = limit.ends_at?;
    let passed = match timer {
        Some(sleep) => sleep.as_mut().poll(cx).is_ready(),
        None => Instant::now() >= at,
    };
    passed.then_some(reason)
}

/// The handler's body has nothing ready: arms the timers (the total
/// limit, the idle limit from `last_frame`) and says which limit, if any,
/// has passed; a pending timer wakes the body when it does.
fn waiting(
    total_timer: &mut Option<Pin<Box<Sleep>>>,
    idle_timer: &mut Option<Pin<Box<Sleep>>>,
    limit: &BodyLimit,
    last_frame: Instant,
    cx: &mut Context<'_>,
) -> Option<StreamEnd> {
    if let Some((at, reason)) = limit.ends_at
        && armed(total_timer, at).poll(cx).is_ready()
    {
        return Some(reason);
    }
    let at = last_frame.checked_add(limit.idle?)?;
    armed(idle_timer, at)
        .poll(cx)
        .is_ready()
        .then_some(StreamEnd::Idle)
}

/// `timer`, set to `at` (made the first time).
fn armed(timer: &mut Option<Pin<Box<Sleep>>>, at: Instant) -> Pin<&mut Sleep> {
    let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
    if sleep.deadline() != at {
        sleep.as_mut().reset(at);
    }
    sleep.as_mut()
}
