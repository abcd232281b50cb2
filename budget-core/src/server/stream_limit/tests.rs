//! Paused-clock tests of the body engine: each names the rule it pins.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{BodyLimit, LimitedBody, StreamEnd, StreamPolicy};

type Sent = Result<Frame<Bytes>, Infallible>;

/// A body fed by hand through the returned sender.
fn channel_body() -> (
    mpsc::UnboundedSender<Sent>,
    StreamBody<impl futures_util::Stream<Item = Sent>>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    (tx, StreamBody::new(stream))
}

/// A body that sends `text` every `every`, for ever.
fn ticking(every: Duration) -> StreamBody<impl futures_util::Stream<Item = Sent>> {
    let stream = futures_util::stream::unfold((), move |()| async move {
        tokio::time::sleep(every).await;
        Some((Ok(Frame::data(Bytes::from_static(b"data: tick\n\n"))), ()))
    });
    StreamBody::new(stream)
}

fn sse_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "text/event-stream".parse().unwrap());
    headers
}

fn policy(idle: Option<u64>, total: Option<u64>) -> StreamPolicy {
    StreamPolicy {
        idle_timeout: idle.map(Duration::from_millis),
        max_duration: total.map(Duration::from_millis),
        ..StreamPolicy::default()
    }
}

/// Reads `body` to its end: the data, the trailers, when it ended.
async fn read_all<B>(body: B) -> (String, Option<HeaderMap>, Instant)
where
    B: http_body::Body<Data = Bytes, Error = Infallible> + Unpin,
{
    let mut body = body;
    let (mut data, mut trailers) = (String::new(), None);
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        if let Some(bytes) = frame.data_ref() {
            data.push_str(std::str::from_utf8(bytes).unwrap());
        }
        if let Ok(t) = frame.into_trailers() {
            trailers = Some(t);
        }
    }
    (data, trailers, Instant::now())
}

#[tokio::test(start_paused = true)]
async fn the_idle_timer_restarts_at_every_frame_and_ends_with_the_final_event() {
    let (tx, inner) = channel_body();
    let start = Instant::now();
    let body = LimitedBody::new(inner, policy(Some(100), None).limit_for(&sse_headers()));
    let feeder = tokio::spawn(async move {
        // Ten gaps of 80 ms (800 ms in all), each under the idle limit.
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(80)).await;
            tx.send(Ok(Frame::data(Bytes::from_static(b"data: x\n\n"))))
                .unwrap();
        }
        // Then silence, the sender kept open.
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(tx);
    });
    let (data, _, ended) = read_all(Box::pin(body)).await;
    assert_eq!(data.matches("data: x\n\n").count(), 10, "{data}");
    assert!(
        data.ends_with("event: end\ndata: {\"reason\":\"idle\"}\n\n"),
        "{data}"
    );
    // The last frame at 800 ms, the idle limit 100 ms after it.
    assert_eq!(ended - start, Duration::from_millis(900));
    feeder.abort();
}

#[tokio::test(start_paused = true)]
async fn the_total_duration_ends_a_busy_stream_at_its_limit() {
    let start = Instant::now();
    let body = LimitedBody::new(
        ticking(Duration::from_millis(30)),
        policy(Some(100), Some(250)).limit_for(&sse_headers()),
    );
    let (data, _, ended) = read_all(Box::pin(body)).await;
    assert_eq!(ended - start, Duration::from_millis(250));
    assert_eq!(data.matches("data: tick\n\n").count(), 8, "{data}");
    assert!(
        data.ends_with("event: end\ndata: {\"reason\":\"duration\"}\n\n"),
        "{data}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_that_is_not_sse_ends_cleanly_with_nothing_added() {
    let (tx, inner) = channel_body();
    tx.send(Ok(Frame::data(Bytes::from_static(b"chunk"))))
        .unwrap();
    let body = LimitedBody::new(inner, policy(Some(50), None).limit_for(&HeaderMap::new()));
    let (data, trailers, _) = read_all(Box::pin(body)).await;
    assert_eq!(data, "chunk");
    assert!(trailers.is_none());
    drop(tx);
}

#[tokio::test(start_paused = true)]
async fn an_empty_end_event_writes_no_final_event() {
    let mut policy = policy(Some(50), None);
    policy.end_event = String::new();
    let (tx, inner) = channel_body();
    let body = LimitedBody::new(inner, policy.limit_for(&sse_headers()));
    let (data, _, _) = read_all(Box::pin(body)).await;
    assert_eq!(data, "");
    drop(tx);
}

#[tokio::test(start_paused = true)]
async fn a_grpc_body_ends_at_the_deadline_with_deadline_exceeded_trailers() {
    let start = Instant::now();
    let limit = BodyLimit::grpc_deadline(start + Duration::from_millis(300));
    let body = LimitedBody::new(ticking(Duration::from_millis(40)), limit);
    let (data, trailers, ended) = read_all(Box::pin(body)).await;
    assert_eq!(ended - start, Duration::from_millis(300));
    assert_eq!(data.matches("tick").count(), 7);
    let trailers = trailers.expect("trailers");
    assert_eq!(trailers["grpc-status"], "4");
    assert!(trailers.contains_key("grpc-message"));
}

#[tokio::test(start_paused = true)]
async fn a_complete_body_passes_through_untouched_and_its_trailers_too() {
    let (tx, inner) = channel_body();
    let mut sent = HeaderMap::new();
    sent.insert("grpc-status", "0".parse().unwrap());
    tx.send(Ok(Frame::data(Bytes::from_static(b"m")))).unwrap();
    tx.send(Ok(Frame::trailers(sent.clone()))).unwrap();
    drop(tx);
    let limit = BodyLimit::grpc_deadline(Instant::now() + Duration::from_secs(1));
    let (data, trailers, _) = read_all(Box::pin(LimitedBody::new(inner, limit))).await;
    assert_eq!(data, "m");
    assert_eq!(trailers, Some(sent));
}

#[test]
fn each_end_has_its_label() {
    let labels: Vec<_> = [
        StreamEnd::Complete,
        StreamEnd::Idle,
        StreamEnd::Duration,
        StreamEnd::Deadline,
        StreamEnd::ClientGone,
        StreamEnd::Error,
    ]
    .into_iter()
    .map(StreamEnd::as_str)
    .collect();
    assert_eq!(
        labels,
        [
            "complete",
            "idle",
            "duration",
            "deadline",
            "client_gone",
            "error"
        ]
    );
}

/// Every end is counted once, by its reason: a limit's end as that limit,
/// a body dropped early as `client_gone`, a failed one as `error`.
#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn every_end_is_counted_once_by_its_reason() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);

    // idle
    let (tx, inner) = channel_body();
    let body = LimitedBody::new(inner, policy(Some(50), None).limit_for(&sse_headers()));
    read_all(Box::pin(body)).await;
    drop(tx);
    // duration
    let body = LimitedBody::new(
        ticking(Duration::from_millis(10)),
        policy(None, Some(35)).limit_for(&sse_headers()),
    );
    read_all(Box::pin(body)).await;
    // complete
    let (tx, inner) = channel_body();
    tx.send(Ok(Frame::data(Bytes::from_static(b"x")))).unwrap();
    drop(tx);
    read_all(Box::pin(LimitedBody::new(
        inner,
        policy(Some(50), None).limit_for(&sse_headers()),
    )))
    .await;
    // complete, though never polled to its end: a whole body says it is
    // at its end after its one frame, and is dropped then
    let mut body = Box::pin(LimitedBody::new(
        http_body_util::Full::new(Bytes::from_static(b"whole")),
        policy(Some(50), None).limit_for(&HeaderMap::new()),
    ));
    body.frame().await.unwrap().unwrap();
    assert!(http_body::Body::is_end_stream(&*body));
    drop(body);
    // client gone: dropped after one frame
    let mut body = Box::pin(LimitedBody::new(
        ticking(Duration::from_millis(10)),
        policy(Some(50), None).limit_for(&sse_headers()),
    ));
    body.frame().await.unwrap().unwrap();
    drop(body);
    // error
    let failing = StreamBody::new(futures_util::stream::iter([Err::<Frame<Bytes>, _>("boom")]));
    let mut body = Box::pin(LimitedBody::new(
        failing,
        policy(None, None).limit_for(&sse_headers()),
    ));
    assert!(body.frame().await.unwrap().is_err());
    drop(body);

    let rendered = handle.render();
    for (reason, count) in [
        ("idle", 1),
        ("duration", 1),
        ("complete", 2),
        ("client_gone", 1),
        ("error", 1),
    ] {
        let line = format!("budget_stream_ended_total{{reason=\"{reason}\"}} {count}");
        assert!(rendered.contains(&line), "{line} in {rendered}");
    }
}

/// A `MakeWriter` into a shared buffer, for the tracing test.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// A limit's end is logged as a `stream ended` event with its reason,
/// how long the body streamed and how many frames it sent.
#[tokio::test(start_paused = true)]
async fn a_limits_end_is_a_stream_ended_event_with_its_reason() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let body = LimitedBody::new(
        ticking(Duration::from_millis(40)),
        policy(None, Some(100)).limit_for(&sse_headers()),
    );
    read_all(Box::pin(body)).await;
    let logged = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("stream ended"), "{logged}");
    assert!(logged.contains("reason=\"duration\""), "{logged}");
    assert!(logged.contains("elapsed_ms=100"), "{logged}");
    assert!(logged.contains("frames=2"), "{logged}");
}

/// The total limit is checked before every frame, so a body whose frames
/// are always ready is ended by it too; the idle limit is judged only when
/// the body has nothing ready, so a slow reader of a busy body is not cut
/// for idleness (its reads 10 ms apart, the idle limit 5 ms).
#[tokio::test(start_paused = true)]
async fn an_always_ready_body_read_slowly_ends_at_its_total_not_idle() {
    let busy = StreamBody::new(futures_util::stream::repeat_with(|| {
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"data: x\n\n")))
    }));
    let start = Instant::now();
    let mut body = Box::pin(LimitedBody::new(
        busy,
        policy(Some(5), Some(100)).limit_for(&sse_headers()),
    ));
    let mut data = String::new();
    while let Some(frame) = body.frame().await {
        data.push_str(std::str::from_utf8(frame.unwrap().data_ref().unwrap()).unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        data.ends_with("event: end\ndata: {\"reason\":\"duration\"}\n\n"),
        "{data}"
    );
    assert_eq!(data.matches("data: x\n\n").count(), 10, "{data}");
    assert_eq!(start.elapsed(), Duration::from_millis(110));
}
