//! Servers on 127.0.0.1 for the client tests: a scripted axum partner that
//! records what each request carried, and raw TCP servers for the failure
//! shapes a well-behaved HTTP server cannot produce (never accept, never
//! answer, drip, reset, notice a closed connection).

#![allow(dead_code)] // each test binary uses its own subset

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// `v` milliseconds.
pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// `max_attempts` attempts with a constant `backoff` between them and no
/// jitter: retries at known times.
pub fn constant_retry(max_attempts: u32, backoff: Duration) -> budget_core::retry::RetryConfig {
    use budget_core::retry::{Jitter, RetryConfig};
    let mut retry = RetryConfig::default();
    retry.max_attempts = max_attempts;
    retry.backoff.initial = backoff;
    retry.backoff.max = backoff;
    retry.backoff.multiplier = 1.0;
    retry.backoff.jitter = Jitter::None;
    retry
}

/// Runs a test body under an outer timeout (`secs`), so a bug hangs
/// nothing.
pub async fn bounded_by<F: std::future::Future<Output = ()>>(secs: u64, body: F) {
    tokio::time::timeout(Duration::from_secs(secs), body)
        .await
        .unwrap_or_else(|_| panic!("test took over {secs} s"));
}

/// One scripted answer of the [`Partner`].
#[derive(Clone, Debug)]
pub struct Answer {
    pub status: u16,
    pub delay: Duration,
    pub retry_after: Option<String>,
    pub body: Bytes,
}

impl Answer {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            delay: Duration::ZERO,
            retry_after: None,
            body: Bytes::from_static(b"{\"ok\":true}"),
        }
    }

    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn retry_after(mut self, value: &str) -> Self {
        self.retry_after = Some(value.to_owned());
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }
}

/// What the partner saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub budget_ms: Option<u64>,
    pub grpc_timeout: Option<String>,
    pub criticality: Option<String>,
    pub host: Option<String>,
    pub traceparent: Option<String>,
}

/// A scripted HTTP server: request N gets answer N (the last repeats).
pub struct Partner {
    pub addr: SocketAddr,
    state: Arc<PartnerState>,
}

struct PartnerState {
    script: Vec<Answer>,
    seen: Mutex<Vec<Seen>>,
}

impl Partner {
    pub async fn start(script: Vec<Answer>) -> Self {
        assert!(!script.is_empty());
        let state = Arc::new(PartnerState {
            script,
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&state));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, state }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn hits(&self) -> usize {
        self.state.seen.lock().unwrap().len()
    }
}

async fn answer(State(state): State<Arc<PartnerState>>, req: Request) -> Response {
    let (parts, _body) = req.into_parts();
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        budget_ms: header("request-budget-ms").and_then(|v| v.parse().ok()),
        grpc_timeout: header("grpc-timeout"),
        criticality: header("request-criticality"),
        host: header("host"),
        traceparent: header("traceparent"),
    };
    let index = {
        let mut all = state.seen.lock().unwrap();
        all.push(seen);
        all.len() - 1
    };
    let answer = state.script[index.min(state.script.len() - 1)].clone();
    tokio::time::sleep(answer.delay).await;
    let mut res = Response::builder().status(answer.status);
    if let Some(retry_after) = &answer.retry_after {
        res = res.header("retry-after", retry_after);
    }
    res.body(Body::from(answer.body)).unwrap()
}

/// A port nothing listens on: connecting is refused at once.
pub async fn refused_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// A listener with backlog 1 that never accepts, its queue filled with two
/// connections: a further connect gets no SYN-ACK, a true connect timeout.
pub struct Blackhole {
    pub addr: SocketAddr,
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl Blackhole {
    pub async fn start() -> Self {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        for _ in 0..2 {
            if let Ok(Ok(stream)) =
                tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await
            {
                queued.push(stream);
            }
        }
        Self {
            addr,
            _listener: listener,
            _queued: queued,
        }
    }
}

/// How a [`Raw`] server treats each connection once it has read the
/// request head.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Never answers; notices when the client closes.
    Silent,
    /// Answers 200 with a 100-byte body sent one byte per `pause`.
    Drip { pause: Duration },
    /// Writes half a response head, then resets the connection (RST).
    ResetMidResponse,
    /// Answers `200 ok` and keeps the connection open for more requests
    /// until the client closes it.
    KeepAlive,
}

/// A raw TCP server counting connections accepted and connections the
/// client closed (EOF or error seen while waiting).
pub struct Raw {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

impl Raw {
    pub async fn start(behaviour: Behaviour) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (a, c) = (Arc::clone(&accepted), Arc::clone(&closed));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let c = Arc::clone(&c);
                tokio::spawn(serve_raw(stream, behaviour, c));
            }
        });
        Self {
            addr,
            accepted,
            closed,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    pub fn closed(&self) -> usize {
        self.closed.load(Ordering::SeqCst)
    }
}

async fn serve_raw(mut stream: TcpStream, behaviour: Behaviour, closed: Arc<AtomicUsize>) {
    if !read_head(&mut stream).await {
        closed.fetch_add(1, Ordering::SeqCst);
        return;
    }
    match behaviour {
        Behaviour::Silent => {
            let mut buf = [0u8; 1024];
            loop {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            closed.fetch_add(1, Ordering::SeqCst);
        }
        Behaviour::Drip { pause } => {
            let head = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n";
            if stream.write_all(head).await.is_err() {
                return;
            }
            for _ in 0..100 {
                tokio::time::sleep(pause).await;
                if stream.write_all(b"x").await.is_err() {
                    closed.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        }
        Behaviour::KeepAlive => loop {
            let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            if stream.write_all(ok).await.is_err() || !read_head(&mut stream).await {
                closed.fetch_add(1, Ordering::SeqCst);
                return;
            }
        },
        Behaviour::ResetMidResponse => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-le").await;
            let _ = stream.flush().await;
            let _ = stream.set_zero_linger();
            drop(stream); // RST
        }
    }
}

/// Reads until the end of a request head; false on EOF or error first.
async fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

/// Polls `f` every 10 ms until it holds or `within` has passed.
pub async fn eventually(within: Duration, f: impl Fn() -> bool) -> bool {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

/// The attempts in `ledger`, as (dependency, outcome): `("pricing", "503")`,
/// `("pricing", "200 from 127.0.0.1:9001")` with replicas.
pub fn attempts(ledger: &budget_core::ledger::Ledger) -> Vec<(String, String)> {
    ledger
        .entries()
        .into_iter()
        .filter_map(|e| match e {
            budget_core::ledger::Entry::Attempt {
                dependency,
                outcome,
                ..
            } => Some((dependency, outcome)),
            _ => None,
        })
        .collect()
}
