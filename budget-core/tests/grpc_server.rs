//! The budget layer in front of a gRPC service, over real HTTP/2 on
//! loopback: what it refuses or cuts short is answered the gRPC way
//! (trailers-only, `grpc-status`), read by reqwest speaking HTTP/2 and by
//! Python's `grpcio`, an outside gRPC client.
//!
//! The service is a hand-written unary echo (`/test.Echo/Echo` answers the
//! message it got, `/test.Echo/Hang` never answers), so that the layer is
//! tested around a plain hyper service with no generated code.

mod grpc_support;

use std::convert::Infallible;
use std::time::Duration;

use tokio::time::Instant;

use budget_core::server::ServerConfig;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tower::{Layer, service_fn};

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A unary gRPC answer: the message, then `grpc-status: 0` in trailers.
fn grpc_ok(message: Bytes) -> Response<Body> {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = [
        Ok::<_, Infallible>(Frame::data(message)),
        Ok(Frame::trailers(trailers)),
    ];
    let mut res = Response::new(StreamBody::new(futures_util::stream::iter(frames)).boxed_unsync());
    res.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/grpc"));
    res
}

async fn echo(req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    if req.uri().path() == "/test.Echo/Hang" {
        std::future::pending::<()>().await;
    }
    let message = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok(grpc_ok(message))
}

/// Serves the echo behind the budget layer (floor 100 ms) on a loopback
/// port, HTTP/1 and HTTP/2 (prior knowledge) alike.
async fn serve() -> std::net::SocketAddr {
    serve_with("floor = \"100ms\"").await
}

/// [`serve`] with the layer configured by `config` (TOML).
async fn serve_with(config: &str) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config: ServerConfig = toml::from_str(config).unwrap();
    let layer = config.layer().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let svc = TowerToHyperService::new(layer.layer(service_fn(echo)));
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn h2() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_rustls()
        .http2_prior_knowledge()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A gRPC request of one empty message to `method` with `headers`.
async fn call(
    addr: std::net::SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    call_on(&h2(), addr, method, headers).await
}

/// [`call`] on a client made beforehand: what a test that times the call
/// uses, so that the time is the server's, not the client's set-up (with
/// native-tls, building a client loads the system's CA store).
async fn call_on(
    client: &reqwest::Client,
    addr: std::net::SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = client
        .post(format!("http://{addr}/test.Echo/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(vec![0u8, 0, 0, 0, 0]);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn a_malformed_grpc_timeout_is_invalid_argument_naming_the_header() {
    let addr = serve().await;
    let res = call(addr, "Echo", &[("grpc-timeout", "5X")]).await;
    assert_eq!(res.status(), 200, "trailers-only answers are HTTP 200");
    assert_eq!(res.headers()["grpc-status"], "3");
    let message = res.headers()["grpc-message"].to_str().unwrap().to_owned();
    assert!(message.contains("grpc-timeout"), "{message}");
    assert!(res.headers().contains_key("server-timing"));
    assert!(
        res.bytes().await.unwrap().is_empty(),
        "no body: trailers-only"
    );
}

#[tokio::test]
async fn below_the_floor_and_past_the_deadline_are_deadline_exceeded() {
    let addr = serve().await;
    let res = call(addr, "Echo", &[("grpc-timeout", "50m")]).await;
    assert_eq!(res.headers()["grpc-status"], "4");
    assert!(
        res.headers()["server-timing"]
            .to_str()
            .unwrap()
            .contains("budget")
    );

    let start = Instant::now();
    let res = call(addr, "Hang", &[("grpc-timeout", "300m")]).await;
    assert_eq!(res.headers()["grpc-status"], "4");
    assert!(
        start.elapsed() < Duration::from_millis(300 + 200),
        "{:?}",
        start.elapsed()
    );
}

/// At `max_in_flight` a call waits for a slot while its budget covers the
/// wait: one whose budget runs out in line is `DEADLINE_EXCEEDED`, at its
/// deadline (the floor is 0 here).
#[tokio::test]
async fn a_call_whose_budget_does_not_cover_the_wait_is_deadline_exceeded() {
    let addr = serve_with("max_in_flight = 1").await;
    let hanging = tokio::spawn(async move { call(addr, "Hang", &[("grpc-timeout", "5S")]).await });
    // The first call holds the one slot (it never answers).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    let res = call(addr, "Echo", &[("grpc-timeout", "300m")]).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["grpc-status"], "4");
    let message = res.headers()["grpc-message"].to_str().unwrap().to_owned();
    assert!(message.contains("in-flight slot"), "{message}");
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_millis(300 + 500), "{took:?}");
    hanging.abort();
}

/// A call the line predicts cannot get a slot in time is refused at
/// arrival, not at its deadline: once a slot has been seen held 300 ms, a
/// call with 150 ms behind a holder is over the limit, `UNAVAILABLE` at
/// once with a pushback, its message saying what the line expected.
#[tokio::test]
async fn a_call_predicted_not_to_fit_is_unavailable_at_arrival() {
    let addr = serve_with("max_in_flight = 1").await;
    // The line learns that a slot is held about 300 ms.
    let res = call(addr, "Hang", &[("grpc-timeout", "300m")]).await;
    assert_eq!(res.headers()["grpc-status"], "4");
    let holder = tokio::spawn(async move { call(addr, "Hang", &[("grpc-timeout", "5S")]).await });
    let client = h2();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let start = Instant::now();
    let res = call_on(&client, addr, "Echo", &[("grpc-timeout", "150m")]).await;
    let took = start.elapsed();
    assert_eq!(res.headers()["grpc-status"], "14");
    assert!(res.headers().contains_key("grpc-retry-pushback-ms"));
    let message = res.headers()["grpc-message"].to_str().unwrap().to_owned();
    assert!(message.contains("expected wait"), "{message}");
    assert!(took < Duration::from_millis(100), "{took:?}");
    holder.abort();
}

#[tokio::test]
async fn an_answered_call_passes_through_with_the_ledger() {
    let addr = serve().await;
    let res = call(addr, "Echo", &[("grpc-timeout", "2S")]).await;
    assert_eq!(res.status(), 200);
    assert!(
        !res.headers().contains_key("grpc-status"),
        "the status is in the trailers"
    );
    assert_eq!(
        res.headers()["server-timing"],
        "budget;dur=2000;desc=\"ingress\""
    );
    assert_eq!(&res.bytes().await.unwrap()[..], &[0, 0, 0, 0, 0]);
}

/// The same with grpcio, a real gRPC client from outside (installed by
/// `.ci/run`); the calls carry raw bytes, so no generated code is needed.
#[tokio::test]
async fn grpcio_reads_the_layer_s_statuses() {
    let addr = serve().await;
    let script = format!(
        r#"
import time, grpc
ch = grpc.insecure_channel("127.0.0.1:{port}")
ident = lambda b: b
echo = ch.unary_unary("/test.Echo/Echo", request_serializer=ident, response_deserializer=ident)
hang = ch.unary_unary("/test.Echo/Hang", request_serializer=ident, response_deserializer=ident)
assert echo(b"hi", timeout=2) == b"hi"
try:
    echo(b"hi", timeout=0.05)
    raise SystemExit("below the floor was answered")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.code()
    assert "floor" in e.details(), e.details()
start = time.monotonic()
try:
    hang(b"hi", timeout=0.5)
    raise SystemExit("the hanging call was answered")
except grpc.RpcError as e:
    took = time.monotonic() - start
    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.code()
    assert took < 0.55, took
print("ok")
"#,
        port = addr.port()
    );
    grpc_support::python(&script).await;
}
