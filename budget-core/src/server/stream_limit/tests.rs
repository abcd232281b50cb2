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
    let mut policy = StreamPolicy::default();
    policy.idle_timeout = idle.map(Duration::from_millis);
    policy.max_duration = total.map(Duration::from_millis);
    policy
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
    for reason in ["idle", "duration", "complete", "client_gone", "error"] {
        let line = format!("budget_stream_ended_total{{reason=\"{reason}\"}} 1");
        assert!(rendered.contains(&line), "{line} in {rendered}");
    }
}
