//! gRPC server streaming behind the budget layer follows gRPC's rule: the
//! deadline covers the whole call, so a stream whose head came in time
//! still ends at the deadline, with `grpc-status: 4` (DEADLINE_EXCEEDED)
//! in its trailers (docs/streams.md, "Streams on the server"). A tonic
//! server with a hand-written streaming service, read by a tonic client.

#![cfg(all(feature = "server", feature = "grpc"))]

mod grpc_support;

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;

use budget_core::server::ServerConfig;
use bytes::Bytes;
use futures_util::StreamExt;
use grpc_support::{Raw, message, tokio_stream_of};
use http::{HeaderMap, HeaderValue};
use http_body_util::StreamBody;
use hyper::body::Frame;
use tokio::time::Instant;
use tonic::Code;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::{Channel, Server};

/// `/test.Feed/Ticks` streams a message every 50 ms for ever;
/// `/test.Feed/Five` streams five, then `grpc-status: 0`.
#[derive(Clone)]
struct Feed;

impl NamedService for Feed {
    const NAME: &'static str = "test.Feed";
}

impl tower::Service<http::Request<Body>> for Feed {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let count = (req.uri().path() == "/test.Feed/Five").then_some(5u32);
        let frames = futures_util::stream::unfold(0u32, move |n| async move {
            if count.is_some_and(|count| n > count) {
                return None;
            }
            if count == Some(n) {
                let mut trailers = HeaderMap::new();
                trailers.insert("grpc-status", HeaderValue::from_static("0"));
                return Some((Ok::<_, Infallible>(Frame::trailers(trailers)), n + 1));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some((Ok(Frame::data(message(n.to_string().as_bytes()))), n + 1))
        });
        let mut res = http::Response::new(Body::new(StreamBody::new(frames)));
        res.headers_mut()
            .insert("content-type", HeaderValue::from_static("application/grpc"));
        std::future::ready(Ok(res))
    }
}

async fn serve() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tokio_stream_of(listener);
    tokio::spawn(
        Server::builder()
            .layer(ServerConfig::default().layer().unwrap())
            .add_service(Feed)
            .serve_with_incoming(incoming),
    );
    addr
}

/// Calls `method` with a budget of `budget_ms` (sent as
/// `request-budget-ms`: with `grpc-timeout` the tonic client would give
/// up on its own at the same instant), and reads the stream to its end:
/// the messages, and the status it ended with.
async fn stream(
    addr: std::net::SocketAddr,
    method: &'static str,
    budget_ms: u64,
) -> (Vec<Bytes>, Result<(), tonic::Status>) {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(futures_util::stream::once(async { Bytes::new() }));
    req.metadata_mut()
        .insert("request-budget-ms", budget_ms.to_string().parse().unwrap());
    let path = http::uri::PathAndQuery::from_static(method);
    let res = grpc
        .streaming(req, path, Raw)
        .await
        .expect("the head comes in time");
    let mut messages = res.into_inner();
    let mut got = Vec::new();
    while let Some(next) = messages.next().await {
        match next {
            Ok(message) => got.push(message),
            Err(status) => return (got, Err(status)),
        }
    }
    (got, Ok(()))
}

#[tokio::test]
async fn a_server_stream_ends_at_the_deadline_with_deadline_exceeded() {
    let addr = serve().await;
    let start = Instant::now();
    let (messages, end) = stream(addr, "/test.Feed/Ticks", 400).await;
    let took = start.elapsed();
    let status = end.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("ran out"), "{status:?}");
    assert!(
        (5..=8).contains(&messages.len()),
        "{} messages",
        messages.len()
    );
    assert_eq!(messages[0], "0");
    assert!(
        took >= Duration::from_millis(380) && took < Duration::from_millis(900),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_server_stream_that_ends_in_time_ends_with_its_own_status() {
    let addr = serve().await;
    let (messages, end) = stream(addr, "/test.Feed/Five", 2000).await;
    assert!(end.is_ok(), "{end:?}");
    assert_eq!(messages, ["0", "1", "2", "3", "4"]);
}
