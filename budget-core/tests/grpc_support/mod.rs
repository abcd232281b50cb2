//! A hand-written tonic service and a bytes codec for the gRPC tests (no
//! generated code): `/test.Echo/Echo` answers the budget its handler sees
//! (in ms), `/test.Echo/Hang` never answers, `/test.Echo/Flaky` answers
//! `UNAVAILABLE` (with `grpc-retry-pushback-ms: 20`) to its first call and
//! like `Echo` after. Every call is counted.

#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use budget_core::context;
use budget_core::server::ServerConfig;
use bytes::{Buf, BufMut, Bytes};
use http::{HeaderMap, HeaderValue};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::NamedService;
use tonic::transport::{Channel, Server};

/// The echo service: gRPC framing by hand, the budget left in the reply.
#[derive(Clone, Default)]
pub struct Echo {
    /// Calls received, of every method.
    pub calls: Arc<AtomicUsize>,
}

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
        let seen = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if req.uri().path() == "/test.Echo/Hang" {
                std::future::pending::<()>().await;
            }
            if req.uri().path() == "/test.Echo/Flaky" && seen == 0 {
                let mut res = http::Response::new(Body::empty());
                let headers = res.headers_mut();
                headers.insert("content-type", HeaderValue::from_static("application/grpc"));
                headers.insert("grpc-status", HeaderValue::from_static("14"));
                headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("20"));
                return Ok(res);
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
pub struct Raw;

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
pub async fn serve() -> std::net::SocketAddr {
    serve_echo(Echo::default()).await
}

/// [`serve`] with `echo`, to count its calls.
pub async fn serve_echo(echo: Echo) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config: ServerConfig = toml::from_str("floor = \"100ms\"").unwrap();
    let layer = config.layer().unwrap();
    let incoming = tokio_stream_of(listener);
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(echo)
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
pub async fn call(
    addr: std::net::SocketAddr,
    method: &'static str,
    timeout: Duration,
) -> Result<Bytes, tonic::Status> {
    let mut req = tonic::Request::new(Bytes::new());
    req.set_timeout(timeout);
    send(addr, method, req).await
}

pub async fn send(
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
