//! The limits of a stream through edge (`GET /events`): an idle timeout
//! between two chunks from the partner, a total duration, and edge's own
//! shutdown. Each ends the client's stream cleanly (the end of the body,
//! which a browser's `EventSource` answers by reconnecting with
//! `Last-Event-ID`), as do the partner's own end and a cut (its
//! connection lost mid-stream): a client is never left hanging on a
//! stream that no longer has a source.
//!
//! The opening is held to the request's budget by the budget layer (the
//! head must come in budget); these limits take over once the head is
//! sent (docs/streams.md, "Through edge, and in a browser").

use std::convert::Infallible;
use std::fmt::Display;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

/// How long a stream through edge may stay silent, and last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamLimits {
    /// The longest wait for the partner's next chunk.
    pub(crate) idle: Duration,
    /// The longest a stream lasts.
    pub(crate) total: Duration,
}

/// Why a stream through edge ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The partner ended its body.
    Ended,
    /// The partner's connection was lost mid-stream.
    Cut,
    /// No chunk within the idle timeout.
    Idle,
    /// The total duration ran out.
    Total,
    /// Edge is shutting down.
    Shutdown,
}

impl StreamEnd {
    /// The name in logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ended => "ended",
            Self::Cut => "cut",
            Self::Idle => "idle",
            Self::Total => "total",
            Self::Shutdown => "shutdown",
        }
    }
}

/// `body` as the client's stream, ended cleanly at the first of: the
/// partner's end, a cut, `limits`, or `stop`. `on_end` hears why, once.
pub(crate) fn limited<S, E>(
    body: S,
    limits: StreamLimits,
    stop: CancellationToken,
    on_end: impl FnOnce(StreamEnd) + Send + 'static,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Display,
{
    // A duration too long to add is no limit at all.
    let until = Instant::now()
        .checked_add(limits.total)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
    let state = (Box::pin(body), Some(on_end));
    futures_util::stream::unfold(state, move |(mut body, mut on_end)| {
        let stop = stop.clone();
        async move {
            let end = tokio::select! {
                biased;
                () = stop.cancelled() => StreamEnd::Shutdown,
                () = sleep_until(until) => StreamEnd::Total,
                next = timeout(limits.idle, body.next()) => match next {
                    Ok(Some(Ok(chunk))) => return Some((Ok(chunk), (body, on_end))),
                    Ok(Some(Err(e))) => {
                        tracing::debug!(error = %e, "the partner's stream was cut");
                        StreamEnd::Cut
                    }
                    Ok(None) => StreamEnd::Ended,
                    Err(_) => StreamEnd::Idle,
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

    use tokio::sync::mpsc;

    use super::*;

    const LIMITS: StreamLimits = StreamLimits {
        idle: Duration::from_secs(5),
        total: Duration::from_secs(600),
    };

    /// A stream fed by the test, the stream through edge, and why it ended.
    #[allow(clippy::type_complexity)]
    fn through(
        limits: StreamLimits,
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
        let out = limited(body, limits, stop, move |end| {
            heard.lock().unwrap().push(end);
        });
        (tx, out, ends)
    }

    async fn chunks(out: impl Stream<Item = Result<Bytes, Infallible>>) -> Vec<Bytes> {
        out.map(|c| c.unwrap()).collect().await
    }

    /// Rule: chunks pass through as they come; gaps shorter than the idle
    /// timeout, however many, never end the stream.
    #[tokio::test(start_paused = true)]
    async fn chunks_with_short_gaps_pass_and_the_partners_end_ends_it() {
        let (tx, out, ends) = through(LIMITS, CancellationToken::new());
        tokio::spawn(async move {
            for i in 0..20u8 {
                tokio::time::sleep(Duration::from_millis(4_900)).await;
                tx.send(Ok(Bytes::from(vec![i]))).unwrap();
            }
        });
        let got = chunks(out).await;
        assert_eq!(got.len(), 20);
        assert_eq!(got[19], Bytes::from(vec![19]));
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Ended]);
    }

    /// Rule: a cut (an error mid-stream) is a clean end for the client.
    #[tokio::test(start_paused = true)]
    async fn a_cut_ends_the_stream_cleanly() {
        let (tx, out, ends) = through(LIMITS, CancellationToken::new());
        tx.send(Ok(Bytes::from_static(b"id: 1\n\n"))).unwrap();
        tx.send(Err("connection reset")).unwrap();
        tx.send(Ok(Bytes::from_static(b"never"))).unwrap();
        assert_eq!(chunks(out).await, [Bytes::from_static(b"id: 1\n\n")]);
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Cut]);
    }

    /// Rule: no chunk within the idle timeout ends the stream at that
    /// timeout, not later.
    #[tokio::test(start_paused = true)]
    async fn silence_ends_the_stream_at_the_idle_timeout() {
        let (tx, out, ends) = through(LIMITS, CancellationToken::new());
        tx.send(Ok(Bytes::from_static(b"a"))).unwrap();
        let start = Instant::now();
        assert_eq!(chunks(out).await.len(), 1);
        assert_eq!(start.elapsed(), LIMITS.idle);
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Idle]);
        drop(tx);
    }

    /// Rule: a busy stream is ended at its total duration.
    #[tokio::test(start_paused = true)]
    async fn a_busy_stream_ends_at_its_total_duration() {
        let limits = StreamLimits {
            idle: Duration::from_secs(5),
            total: Duration::from_secs(10),
        };
        let (tx, out, ends) = through(limits, CancellationToken::new());
        tokio::spawn(async move {
            while tx.send(Ok(Bytes::from_static(b"x"))).is_ok() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let start = Instant::now();
        let got = chunks(out).await;
        assert_eq!(start.elapsed(), limits.total);
        assert_eq!(got.len(), 10);
        assert_eq!(*ends.lock().unwrap(), [StreamEnd::Total]);
    }

    /// Rule: edge's shutdown ends every stream at once.
    #[tokio::test(start_paused = true)]
    async fn shutdown_ends_the_stream_at_once() {
        let stop = CancellationToken::new();
        let (tx, out, ends) = through(LIMITS, stop.clone());
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
