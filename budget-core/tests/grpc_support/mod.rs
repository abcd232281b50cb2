//! A hand-written tonic service and a bytes codec for the gRPC tests (no
//! generated code): `/test.Echo/Echo` answers the budget its handler sees
//! (in ms), `/test.Echo/Hang` never answers, `/test.Echo/Flaky` answers
//! `UNAVAILABLE` (with `grpc-retry-pushback-ms: 20`) to its first call and
//! like `Echo` after, `/test.Echo/Down` always answers `UNAVAILABLE`,
//! `/test.Echo/Once` answers like `Echo` when it is the echo's first call
//! and `UNAVAILABLE` after (a dependency that went down),
//! `/test.Echo/Trace` answers the `traceparent` it was sent (`none`).
//! Every call is counted.

#![allow(dead_code)]

mod python;

#[allow(unused_imports)] // each test binary uses its own subset
pub use python::python;

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
            if req.uri().path() == "/test.Echo/Down"
                || (req.uri().path() == "/test.Echo/Once" && seen > 0)
            {
                let mut res = http::Response::new(Body::empty());
                let headers = res.headers_mut();
                headers.insert("content-type", HeaderValue::from_static("application/grpc"));
                headers.insert("grpc-status", HeaderValue::from_static("14"));
                return Ok(res);
            }
            if req.uri().path() == "/test.Echo/Flaky" && seen == 0 {
                let mut res = http::Response::new(Body::empty());
                let headers = res.headers_mut();
                headers.insert("content-type", HeaderValue::from_static("application/grpc"));
                headers.insert("grpc-status", HeaderValue::from_static("14"));
                headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("20"));
                return Ok(res);
            }
            if req.uri().path() == "/test.Echo/Slow" {
                tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            }
            if req.uri().path() == "/test.Echo/SlowFirst" && seen == 0 {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
            // The header these methods answer with, as it was sent.
            let echoed = match req.uri().path() {
                "/test.Echo/Timeout" => Some("grpc-timeout"),
                "/test.Echo/Trace" => Some("traceparent"),
                _ => None,
            };
            if let Some(name) = echoed {
                let sent = req.headers().get(name).and_then(|v| v.to_str().ok());
                return Ok(reply(sent.unwrap_or("none").to_owned()));
            }
            let left = context::current_budget().map_or(0, |b| b.remaining().as_millis());
            Ok(reply(left.to_string()))
        })
    }
}

/// A unary gRPC answer of `text`: one framed message, then `grpc-status: 0`
/// in the trailers.
pub fn reply(text: String) -> http::Response<Body> {
    let framed = message(text.as_bytes());
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = [
        Ok::<_, Infallible>(Frame::data(framed)),
        Ok(Frame::trailers(trailers)),
    ];
    let mut res = http::Response::new(Body::new(
        StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync(),
    ));
    res.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    res
}

/// One gRPC message frame of `text` (uncompressed, length-prefixed).
pub fn message(text: &[u8]) -> Bytes {
    let mut framed = bytes::BytesMut::new();
    framed.put_u8(0);
    framed.put_u32(u32::try_from(text.len()).unwrap());
    framed.put_slice(text);
    framed.freeze()
}

/// A middle hop: `/test.Relay/Call` asks the echo behind it, through
/// `GrpcBudgetLayer`, for the `grpc-timeout` it received, and answers
/// "{its own budget in ms} {that grpc-timeout}"; `/test.Relay/Hang` calls
/// the echo's `Hang` the same way.
#[derive(Clone)]
pub struct Relay {
    pub downstream: std::net::SocketAddr,
}

impl NamedService for Relay {
    const NAME: &'static str = "test.Relay";
}

impl tower::Service<http::Request<Body>> for Relay {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let downstream = self.downstream;
        // `/test.Relay/Hang` asks the echo's `Hang`, which never answers.
        let method = if req.uri().path() == "/test.Relay/Hang" {
            "/test.Echo/Hang"
        } else {
            "/test.Echo/Timeout"
        };
        Box::pin(async move {
            let own = context::current_budget().map_or(0, |b| b.remaining().as_millis());
            let channel = Channel::from_shared(format!("http://{downstream}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let channel = tower::ServiceBuilder::new()
                .layer(budget_core::grpc::GrpcBudgetLayer::new("echo"))
                .service(channel);
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready().await.unwrap();
            let path = http::uri::PathAndQuery::from_static(method);
            match grpc
                .unary(tonic::Request::new(Bytes::new()), path, Raw)
                .await
            {
                Ok(res) => {
                    let sent = String::from_utf8_lossy(&res.into_inner()).into_owned();
                    Ok(reply(format!("{own} {sent}")))
                }
                // The hop behind failed: so does this one, with its status.
                Err(status) => Ok(status.into_http()),
            }
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

/// The relay in front of `downstream`, behind the budget layer (reserve
/// 20 ms) on a loopback port.
pub async fn serve_relay(downstream: std::net::SocketAddr) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config: ServerConfig = toml::from_str("reserve = \"20ms\"").unwrap();
    let layer = config.layer().unwrap();
    let incoming = tokio_stream_of(listener);
    tokio::spawn(
        Server::builder()
            .layer(layer)
            .add_service(Relay { downstream })
            .serve_with_incoming(incoming),
    );
    addr
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

/// The connections `listener` accepts, as tonic's `serve_with_incoming` takes them.
pub fn tokio_stream_of(
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

/// A channel connected to `addr` (plain HTTP/2).
pub async fn channel(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The outcome of each attempt in `ledger`, in order (`200`, `grpc-14`,
/// `200 from 127.0.0.1:50051`, ...).
pub fn attempts(ledger: &budget_core::ledger::Ledger) -> Vec<String> {
    ledger
        .entries()
        .into_iter()
        .filter_map(|e| match e {
            budget_core::ledger::Entry::Attempt { outcome, .. } => Some(outcome),
            _ => None,
        })
        .collect()
}
