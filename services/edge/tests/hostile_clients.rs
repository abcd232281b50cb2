//! Hostile and broken clients against a real edge on loopback, over raw
//! sockets: slowloris (trickling and silent connections), idle kept-alive
//! connections, and more connections than edge allows (docs/operations.md,
//! "HTTP server limits and errors"). Edge runs with short limits so that the tests take
//! seconds; the defaults are checked in service-kit's unit tests.
//!
//! The tests of this file run one at a time (`SERIAL`): one of them counts
//! the process's open file descriptors.

use std::time::Duration;

use edge::EdgeConfig;
use service_kit::HttpLimits;
use test_support::ms;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::time::{Instant, sleep, timeout};

static SERIAL: Mutex<()> = Mutex::const_new(());

const HEADER_TIMEOUT: Duration = Duration::from_secs(1);
const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Edge with a 1 s header timeout, a 4 s idle timeout and `max_connections`
/// (its checkout is never called here).
async fn edge(max_connections: usize) -> std::net::SocketAddr {
    let mut config = EdgeConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:9");
    config.http = HttpLimits {
        header_timeout: HEADER_TIMEOUT,
        idle_timeout: IDLE_TIMEOUT,
        max_connections,
    };
    let (addr, _) = edge::spawn(&config, std::future::pending())
        .await
        .expect("edge starts");
    addr
}

/// Reads until the peer closes (`Ok` with what came) or `within` passes.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> Result<Vec<u8>, ()> {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return Err(()),
            Ok(Ok(0) | Err(_)) => return Ok(got),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// One `GET /healthz` on a new connection: how long it took.
async fn healthz(addr: std::net::SocketAddr) -> Duration {
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    start.elapsed()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// 100 trickling connections (a partial head, one byte every 200 ms) and
/// 100 silent ones are all closed within the header timeout (plus slack),
/// none before it; `/healthz` keeps its latency meanwhile; the file
/// descriptors come back to where they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slowloris_connections_are_closed_at_the_header_timeout() {
    let _serial = SERIAL.lock().await;
    let addr = edge(10_000).await;
    healthz(addr).await;
    let before = open_fds();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..200 {
        tasks.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let trickle = i % 2 == 0;
            if trickle {
                stream
                    .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .await
                    .unwrap();
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut buf = [0u8; 64];
            loop {
                if trickle {
                    // Keeps trickling until the server closes; a write
                    // after the close fails or is dropped, either way the
                    // read below sees the end.
                    let _ = stream.write_all(b"a").await;
                }
                match timeout(ms(200), stream.read(&mut buf)).await {
                    Ok(Ok(0) | Err(_)) => return (trickle, Instant::now()),
                    Ok(Ok(_)) => {}
                    Err(_) if Instant::now() > deadline => {
                        panic!("never closed (trickle: {trickle})")
                    }
                    Err(_) => {}
                }
            }
        }));
    }
    let mut latencies = Vec::new();
    while start.elapsed() < ms(900) {
        latencies.push(healthz(addr).await);
        sleep(ms(50)).await;
    }
    for task in tasks {
        let (trickle, closed) = task.await.unwrap();
        let after = closed - start;
        assert!(
            after >= ms(900) && after <= ms(2500),
            "a {} connection closed after {after:?}",
            if trickle { "trickling" } else { "silent" }
        );
    }
    latencies.sort();
    let worst = *latencies.last().unwrap();
    assert!(latencies.len() >= 5 && worst < ms(250), "{latencies:?}");
    // The server's side of each connection is gone too.
    let deadline = Instant::now() + Duration::from_secs(3);
    while open_fds() > before && Instant::now() < deadline {
        sleep(ms(50)).await;
    }
    assert!(
        open_fds() <= before,
        "{} fds open, {before} before",
        open_fds()
    );
}

/// A kept-alive connection may stay idle past the header timeout (up to
/// the idle timeout) and is then served; idle past the idle timeout, it
/// is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_is_bounded_by_the_idle_timeout_not_the_header_timeout() {
    let _serial = SERIAL.lock().await;
    let addr = edge(10_000).await;
    let request = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 1024];
    stream.write_all(request).await.unwrap();
    let n = stream.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200 OK"));
    // Idle for twice the header timeout: still open, and served.
    sleep(HEADER_TIMEOUT * 2).await;
    stream.write_all(request).await.unwrap();
    let n = timeout(Duration::from_secs(2), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    // Then idle: closed at the idle timeout, not before.
    let idle_from = Instant::now();
    let rest = closed_within(&mut stream, IDLE_TIMEOUT + Duration::from_secs(2))
        .await
        .expect("closed at the idle timeout");
    assert!(rest.is_empty());
    let idle = idle_from.elapsed();
    assert!(idle >= IDLE_TIMEOUT - ms(100), "closed after {idle:?}");
}

/// Over `max_connections`, a new connection gets a `503` problem with
/// `Retry-After` and is closed; once connections close, new ones are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_limit_gets_a_503_problem() {
    let _serial = SERIAL.lock().await;
    let addr = edge(20).await;
    let mut held = Vec::new();
    for _ in 0..20 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    sleep(ms(100)).await;
    let mut extra = TcpStream::connect(addr).await.unwrap();
    let answer = closed_within(&mut extra, Duration::from_secs(2))
        .await
        .unwrap();
    let text = String::from_utf8(answer).unwrap();
    assert!(
        text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{text}"
    );
    assert!(text.contains("\r\nretry-after: 1\r\n"), "{text}");
    assert!(
        text.contains("\r\ncontent-type: application/problem+json\r\n"),
        "{text}"
    );
    let body = text.split_once("\r\n\r\n").unwrap().1;
    let problem: budget_core::problem::Problem = serde_json::from_str(body).unwrap();
    assert_eq!(
        (problem.status, problem.title.as_str()),
        (503, "Overloaded")
    );
    drop(held);
    sleep(ms(200)).await;
    assert!(healthz(addr).await < Duration::from_secs(1));
}

/// Sends `request` on a new connection, half-closes, and reads the answer.
async fn raw(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    stream.shutdown().await.unwrap();
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// The problem body of a raw answer, after checking its head.
fn problem_of(answer: &str, status: &str) -> budget_core::problem::Problem {
    assert!(
        answer.starts_with(&format!("HTTP/1.1 {status}")),
        "{answer}"
    );
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\ncontent-type: application/problem+json\r\n"),
        "{head}"
    );
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Every refusal edge makes before its handler runs is problem+json: a body
/// over the limit (`413`), a body cut short or with broken chunked framing
/// (`400`), an unknown route (`404`), a method the route does not take
/// (`405`, with `Allow`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_before_the_handler_are_problems() {
    let _serial = SERIAL.lock().await;
    let addr = edge(10_000).await;

    let res = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap()
        .post(format!("http://{addr}/checkout"))
        .header("content-type", "application/json")
        .body(vec![0u8; 3_000_000])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let problem: budget_core::problem::Problem = res.json().await.unwrap();
    assert_eq!(problem.type_uri, "urn:budget:problem:body-too-large");
    assert!(
        problem.detail.contains("length limit"),
        "{}",
        problem.detail
    );

    let cut = raw(
        addr,
        b"POST /checkout HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"a\":",
    )
    .await;
    let problem = problem_of(&cut, "400");
    assert_eq!(problem.type_uri, "urn:budget:problem:bad-body");

    let chunked = raw(
        addr,
        b"POST /checkout HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n",
    )
    .await;
    let problem = problem_of(&chunked, "400");
    assert_eq!(problem.type_uri, "urn:budget:problem:bad-body");

    let res = reqwest::get(format!("http://{addr}/nowhere?secret=1"))
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let problem: budget_core::problem::Problem = res.json().await.unwrap();
    assert_eq!(problem.detail, "no route for /nowhere");

    let res = reqwest::Client::builder()
        .tls_backend_rustls()
        .build()
        .unwrap()
        .delete(format!("http://{addr}/checkout"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "GET,HEAD,POST");
    assert_eq!(res.headers()["content-type"], "application/problem+json");
}

/// A checkout (anything at its URL) answering 10 000 `Server-Timing`
/// metrics (about 230 KB): edge's public header stays within its ledger's
/// 4 KiB, with its own ingress budget first and what it left out counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downstream_with_ten_thousand_metrics_gives_a_bounded_header() {
    let _serial = SERIAL.lock().await;
    let metrics = (0..10_000)
        .map(|i| format!("step{i};dur=1;desc=\"x\""))
        .collect::<Vec<_>>()
        .join(", ");
    let fake = axum::Router::new().route(
        "/checkout",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            async move { ([("server-timing", metrics)], "{}") }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let checkout = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, fake).await });
    let mut config = EdgeConfig::new("127.0.0.1:0".parse().unwrap(), format!("http://{checkout}"));
    config.http.header_timeout = HEADER_TIMEOUT;
    let (addr, _) = edge::spawn(&config, std::future::pending()).await.unwrap();

    let res = reqwest::get(format!("http://{addr}/checkout"))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let header = res.headers()["server-timing"].to_str().unwrap().to_owned();
    assert!(header.len() <= 4096, "{} bytes", header.len());
    let parsed = budget_core::ledger::parse_server_timing(&header);
    assert_eq!(parsed[0].name, "budget", "{header}");
    assert!(
        parsed.iter().any(|m| m.name == "checkout.step0"),
        "{header}"
    );
    let marker = parsed
        .iter()
        .find(|m| m.name == "ledger")
        .expect("a +N more metric");
    let more: usize = marker.desc.as_deref().unwrap()[1..]
        .trim_end_matches(" more")
        .parse()
        .unwrap();
    let shown = parsed.iter().filter(|m| m.name != "ledger").count();
    // edge's ingress, its call to checkout, and checkout's 10 000 metrics.
    assert_eq!(shown + more, 10_002, "{header}");
}
