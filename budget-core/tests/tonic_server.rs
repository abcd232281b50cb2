//! The budget layer on a tonic server (`Server::builder().layer(..)`), called
//! by a tonic client whose `Request::set_timeout` sends `grpc-timeout`: the
//! handler sees the budget, and what the layer refuses or cuts short comes
//! back to the client as a `tonic::Status` (issue 17, server side).
//!
//! The service is written by hand (no generated code): `/test.Echo/Echo`
//! answers the message it got, `/test.Echo/Hang` never answers; the client
//! uses a codec that passes bytes through.

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Duration;

use budget_core::context;
use budget_core::server::ServerConfig;
use bytes::{Buf, BufMut, Bytes};
use http::{HeaderMap, HeaderValue};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::time::Instant;
use tonic::Code;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::NamedService;
use tonic::transport::{Channel, Server};

/// The echo service: gRPC framing by hand, the budget left in the reply.
#[derive(Clone)]
struct Echo;

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

impl tower::Service<http::Request<Body>> for Echo {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        Box::pin(async move {
            if req.uri().path() == "/test.Echo/Hang" {
                std::future::pending::<()>().await;
            }
            let left = context::current_budget().map_or(0, |b| b.remaining().as_millis());
            let text = Bytes::from(left.to_string());
            let mut framed = bytes::BytesMut::new();
            framed.put_u8(0);
            framed.put_u32(u32::try_from(text.len()).unwrap());
            framed.put_slice(&text);
            let mut trailers = HeaderMap::new();
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            let frames = [
                Ok::<_, Infallible>(Frame::data(framed.freeze())),
                Ok(Frame::trailers(trailers)),
            ];
            let mut res = http::Response::new(Body::new(
                StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync(),
            ));
            res.headers_mut()
                .insert("content-type", HeaderValue::from_static("application/grpc"));
            Ok(res)
        })
    }
}

/// Bytes in, bytes out.
#[derive(Clone, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// The tonic server with the budget layer (floor 100 ms) on a loopback port.
async fn serve() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config: ServerConfig = toml::from_str("floor = \"100ms\"").unwrap();
    let layer = config.layer().unwrap();
    let incoming = tokio_stream_of(listener);
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(Echo)
            .serve_with_incoming(incoming),
    );
    addr
}

fn tokio_stream_of(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let next = listener.accept().await.map(|(stream, _)| stream);
        Some((next, listener))
    })
}

/// One unary call of `method` with `timeout` from a tonic client.
async fn call(
    addr: std::net::SocketAddr,
    method: &'static str,
    timeout: Duration,
) -> Result<Bytes, tonic::Status> {
    let mut req = tonic::Request::new(Bytes::new());
    req.set_timeout(timeout);
    send(addr, method, req).await
}

async fn send(
    addr: std::net::SocketAddr,
    method: &'static str,
    req: tonic::Request<Bytes>,
) -> Result<Bytes, tonic::Status> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static(method);
    grpc.unary(req, path, Raw)
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn the_handler_sees_the_callers_timeout_as_its_budget() {
    let addr = serve().await;
    let left: u128 = std::str::from_utf8(
        &call(addr, "/test.Echo/Echo", Duration::from_secs(2))
            .await
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();
    assert!(left > 1500 && left <= 2000, "{left}");
}

#[tokio::test]
async fn below_the_floor_is_deadline_exceeded_from_the_server() {
    let addr = serve().await;
    let status = call(addr, "/test.Echo/Echo", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(
        status.message().contains("floor"),
        "the layer's message: {status:?}"
    );
    assert!(
        status.metadata().get("server-timing").is_some(),
        "the ledger travels"
    );
}

/// The server cuts a hanging handler at the deadline: sent as
/// `request-budget-ms` here, because with `grpc-timeout` the tonic client
/// gives up on its own at the same instant (and reports `Cancelled`,
/// "Timeout expired", not the server's status).
#[tokio::test]
async fn a_hanging_handler_is_cut_at_the_deadline() {
    let addr = serve().await;
    let start = Instant::now();
    let mut req = tonic::Request::new(Bytes::new());
    req.metadata_mut()
        .insert("request-budget-ms", "300".parse().unwrap());
    let status = send(addr, "/test.Echo/Hang", req).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        status.message().contains("ran out"),
        "the layer's message: {status:?}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(300 + 200),
        "{:?}",
        start.elapsed()
    );

    let start = Instant::now();
    let status = call(addr, "/test.Echo/Hang", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(300 + 200),
        "{:?}",
        start.elapsed()
    );
}
