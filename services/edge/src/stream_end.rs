//! How a stream through edge (`GET /events`) ends: when the partner's
//! body ends, when it is cut (the partner's connection lost mid-stream),
//! or when edge shuts down, the caller's body ends cleanly, which a
//! browser's `EventSource` answers by reconnecting with `Last-Event-ID`:
//! a caller is never left hanging on a stream that no longer has a
//! source, and a cut is not made a dropped connection.
//!
//! The opening is held to the request's budget by the budget layer, and
//! the body to the route's idle timeout and total duration by its
//! [`StreamPolicy`](budget_core::server::StreamPolicy) (docs/streams.md,
//! "Through edge, and in a browser").

use std::convert::Infallible;
use std::fmt::Display;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

/// Why a stream through edge ended, before any limit of its route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The partner ended its body.
    Ended,
    /// The partner's connection was lost mid-stream.
    Cut,
    /// Edge is shutting down.
    Shutdown,
}

impl StreamEnd {
    /// The name in logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ended => "ended",
            Self::Cut => "cut",
            Self::Shutdown => "shutdown",
        }
    }
}

/// `body` as the caller's stream, ended cleanly at the first of: the
/// partner's end, a cut, or `stop`. `on_end` hears why, once.
pub(crate) fn ended_cleanly<S, E>(
    body: S,
    stop: CancellationToken,
    on_end: impl FnOnce(StreamEnd) + Send + 'static,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Display,
{
    let state = (Box::pin(body), Some(on_end));
    futures_util::stream::unfold(state, move |(mut body, mut on_end)| {
        let stop = stop.clone();
        async move {
            let end = tokio::select! {
                biased;
                () = stop.cancelled() => StreamEnd::Shutdown,
                next = body.next() => match next {
                    Some(Ok(chunk)) => return Some((Ok(chunk), (body, on_end))),
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "the partner's stream was cut");
                        StreamEnd::Cut
                    }
                    None => StreamEnd::Ended,
                },
            };
            if let Some(on_end) = on_end.take() {
                on_end(end);
            }
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::*;

    /// A stream fed by the test, the stream through edge, and why it ended.
    #[allow(clippy::type_complexity)]
    fn through(
        stop: CancellationToken,
    ) -> (
        mpsc::UnboundedSender<Result<Bytes, &'static str>>,
        impl Stream<Item = Result<Bytes, Infallible>>,
        Arc<Mutex<Vec<StreamEnd>>>,
    ) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let body = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let ends = Arc::new(Mutex::new(Vec::new()));
        let heard = Arc::clone(&ends);
        let out = ended_cleanly(body, stop, move |end| {
            heard.lock().unwrap().push(end);
        });
        (tx, out, ends)
    }

    async fn chunks(out: impl Stream<Item = Result<Bytes, Infallible>>) -> Vec<Bytes> {
        out.map(|c| c.unwrap()).collect().await
    }

    /// Rule: chunks pass through as they come, however far apart; the
    /// partner's end ends the caller's stream.
    #[tokio::test(start_paused = true)]
    async fn chunks_pass_as_they_come_and_the_partners_end_ends_it() {
        let (tx, out, ends) = through(CancellationToken::new());
        tokio::spawn(async move {
            for i in 0..5u8 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                tx.send(Ok(Bytes::from(vec![i]))).unwrap();
            }
        });
        let got = chunks(out).await;
        assert_eq!(got.len(), 5);
        assert_eq!(got[4], Bytes::from(vec![4]));
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Ended]);
    }

    /// Rule: a cut (an error mid-stream) is a clean end for the caller.
    #[tokio::test(start_paused = true)]
    async fn a_cut_ends_the_stream_cleanly() {
        let (tx, out, ends) = through(CancellationToken::new());
        tx.send(Ok(Bytes::from_static(b"id: 1\n\n"))).unwrap();
        tx.send(Err("connection reset")).unwrap();
        tx.send(Ok(Bytes::from_static(b"never"))).unwrap();
        assert_eq!(chunks(out).await, [Bytes::from_static(b"id: 1\n\n")]);
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Cut]);
    }

    /// Rule: edge's shutdown ends every stream at once.
    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_the_stream_at_once() {
        let stop = CancellationToken::new();
        let (tx, out, ends) = through(stop.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            stop.cancel();
        });
        let start = Instant::now();
        assert!(chunks(out).await.is_empty());
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Shutdown]);
        drop(tx);
    }
}
