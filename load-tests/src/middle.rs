//! `middle`: the extra hop of the `deep` scenario (edge -> checkout ->
//! middle -> partner), a small service written here.
//!
//! It serves the partner's paths (`/inventory`, `/pricing`,
//! `/recommendations`; `GET`, and `POST` with its body) and calls the
//! partner's same path with the same query, passing the answer up (status,
//! `Content-Type`, `Retry-After`, body). `x-request-id` goes along. One
//! attempt per call: the retries belong to checkout, the caller that knows
//! which dependency is required. It is built per mode of the chain:
//!
//! - [`ChainMode::Budget`]: budget-aware, as the README's usage example
//!   builds a service: `budget_core::server::ServerConfig::default().layer()`
//!   around the routes, and a [`BudgetClient`] per dependency (its default
//!   configuration: floor, reserve, forwarding what is left), so the budget
//!   checkout forwards reaches the partner less this hop's time;
//! - [`ChainMode::Naive`] and [`ChainMode::Envoy`]: no budget layer,
//!   clients in fixed-timeout mode (30 s per attempt), nothing forwarded,
//!   as checkout with budget mode off (in the `envoy` mode, checkout's
//!   sidecar is in front of middle);
//! - [`ChainMode::Peer`], [`ChainMode::Queue`] and [`ChainMode::P2c`]: plain tower, as
//!   [`crate::peer`]: a `TimeoutLayer` of 2 s around a reqwest call, no
//!   budget (middle has no limit of its own, so shedding or not is
//!   checkout's difference alone).
//!
//! # What it counts ([`MiddleStats`])
//!
//! Its own late work: a request whose answer is ready after the budget it
//! arrived with ran out (judged when the partner's answer, or the call's
//! error, is back). A budget arrives only in budget mode (checkout forwards
//! it); in the other modes nothing arrives and middle cannot judge, so its
//! late work is not measured there (`with_budget` is 0). In budget mode
//! the client gives up at the deadline (less the reserve) and middle
//! answers `504` in time, so late work is expected to be 0; work dropped
//! before its answer was ready (the budget layer's `504` winning the race
//! at the deadline, or a caller hanging up) is counted as `cut`, not late
//! (the partner's own `abandoned` and `late` say what happened to its
//! side).
//!
//! ```no_run
//! use load_tests::middle::Middle;
//! use load_tests::chain::ChainMode;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let middle = Middle::spawn(ChainMode::Budget, "http://127.0.0.1:9000", None, std::future::pending()).await?;
//! println!("middle on http://{}/pricing", middle.addr);
//! println!("{:?}", middle.stats());
//! # Ok(()) }
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use budget_core::Budget;
use budget_core::client::{BudgetClient, DependencyConfig, TimeoutMode};
use budget_core::server::ServerConfig;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use serde::{Deserialize, Serialize};
use service_kit::BudgetMode;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use crate::chain::ChainMode;
use crate::client::X_REQUEST_ID;
use crate::peer::{
    DepFailure, DepRequest, DepService, IDEMPOTENCY_KEY, PeerError, http_call, serve,
};

/// The paths middle serves (and calls on the partner).
pub const PATHS: [&str; 3] = ["inventory", "pricing", "recommendations"];

/// The peer middle's timeout per call.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// What middle counted (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MiddleStats {
    /// Requests received.
    pub requests: u64,
    /// Of those, the ones that arrived with a budget.
    pub with_budget: u64,
    /// Answers ready after the budget they arrived with had run out.
    pub late: u64,
    /// Requests whose work was dropped before its answer was ready (the
    /// budget layer's `504` at the deadline, or the caller hung up).
    pub cut: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    with_budget: AtomicU64,
    late: AtomicU64,
    cut: AtomicU64,
}

/// Counts a request as cut unless it is disarmed (its answer was ready).
struct CutGuard<'a>(Option<&'a AtomicU64>);

impl Drop for CutGuard<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.0 {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How middle calls one dependency.
#[derive(Clone)]
enum Upstream {
    /// Budget-aware (budget or naive mode, by the client's mode).
    Budget(BudgetClient),
    /// Plain tower.
    Peer(DepService),
}

#[derive(Clone)]
struct App {
    upstreams: Arc<[(&'static str, Upstream)]>,
    counters: Arc<Counters>,
}

/// A running middle.
#[derive(Debug)]
pub struct Middle {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its server task.
    pub server: JoinHandle<std::io::Result<()>>,
    counters: Arc<Counters>,
}

impl Middle {
    /// Starts middle in `mode` on `127.0.0.1:0`, calling `partner` (a base
    /// URL: `http://127.0.0.1:9000`), until `shutdown` resolves.
    /// `pool_idle_timeout` as the chain's.
    ///
    /// # Errors
    ///
    /// A partner URL a client cannot be built for, or no port to bind.
    pub async fn spawn<F>(
        mode: ChainMode,
        partner: &str,
        pool_idle_timeout: Option<Duration>,
        shutdown: F,
    ) -> Result<Self, PeerError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let base = partner.trim_end_matches('/');
        let mut upstreams = Vec::new();
        let mut http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .http1_only();
        if let Some(idle) = pool_idle_timeout {
            http = http.pool_idle_timeout(idle);
        }
        let http = http.build()?;
        for path in PATHS {
            let url = format!("{base}/{path}");
            let upstream = match mode {
                ChainMode::Peer | ChainMode::Queue | ChainMode::P2c => {
                    Upstream::Peer(DepService::new(
                        tower::ServiceBuilder::new()
                            .timeout(PEER_TIMEOUT)
                            .service(http_call(http.clone(), url)),
                    ))
                }
                ChainMode::Budget | ChainMode::Hedged | ChainMode::Naive | ChainMode::Envoy => {
                    let mut c = DependencyConfig::new(path, url);
                    // One attempt: checkout retries.
                    c.retry.max_attempts = 1;
                    if mode.checkout_budget_mode() == BudgetMode::Off {
                        c.mode = TimeoutMode::Fixed;
                    }
                    if let Some(idle) = pool_idle_timeout {
                        c.pool_idle_timeout = idle;
                    }
                    Upstream::Budget(c.build()?)
                }
            };
            upstreams.push((path, upstream));
        }
        let counters = Arc::new(Counters::default());
        let app = App {
            upstreams: upstreams.into(),
            counters: Arc::clone(&counters),
        };
        let mut router = Router::new();
        for path in PATHS {
            router = router.route(&format!("/{path}"), get(handle).post(handle));
        }
        let mut router = router
            .with_state(app)
            .route("/healthz", get(|| async { "ok" }));
        if matches!(mode, ChainMode::Budget | ChainMode::Hedged) {
            router = router.layer(ServerConfig::default().layer()?);
        }
        let (addr, server) = serve(SocketAddr::from(([127, 0, 0, 1], 0)), router, shutdown).await?;
        Ok(Self {
            addr,
            server,
            counters,
        })
    }

    /// Its counters now.
    pub fn stats(&self) -> MiddleStats {
        let c = &self.counters;
        MiddleStats {
            requests: c.requests.load(Ordering::Relaxed),
            with_budget: c.with_budget.load(Ordering::Relaxed),
            late: c.late.load(Ordering::Relaxed),
            cut: c.cut.load(Ordering::Relaxed),
        }
    }

    /// Its base URL, `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn handle(
    State(app): State<App>,
    budget: Option<Budget>,
    method: Method,
    uri: Uri,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_start_matches('/');
    let counters = &app.counters;
    counters.requests.fetch_add(1, Ordering::Relaxed);
    if budget.is_some() {
        counters.with_budget.fetch_add(1, Ordering::Relaxed);
    }
    let mut guard = CutGuard(Some(&counters.cut));
    let Some((_, upstream)) = app.upstreams.iter().find(|(p, _)| *p == path) else {
        guard.0 = None;
        return plain(StatusCode::NOT_FOUND, "no such path");
    };
    let res = match upstream {
        Upstream::Budget(client) => {
            let suffix = query.as_deref().map_or(String::new(), |q| format!("?{q}"));
            let mut req = client.request(method, &suffix).body(body);
            for name in [X_REQUEST_ID, CONTENT_TYPE.as_str(), IDEMPOTENCY_KEY] {
                if let Some(v) = headers.get(name) {
                    req = req.header(name, v.clone());
                }
            }
            match req.send().await {
                Ok(answer) => pass_up(answer.status(), answer.headers(), answer.bytes()),
                Err(e) => e.problem().into_response(),
            }
        }
        Upstream::Peer(stack) => {
            let mut req = DepRequest::get(&headers);
            req.method = method;
            req.query = query;
            req.body = body;
            for name in [CONTENT_TYPE, HeaderName::from_static(IDEMPOTENCY_KEY)] {
                if let Some(v) = headers.get(&name) {
                    req.headers.insert(name, v.clone());
                }
            }
            match stack.clone().oneshot(req).await {
                Ok(answer) => pass_up(answer.status, &HeaderMap::new(), answer.body),
                Err(e) => match DepFailure::of(&e) {
                    DepFailure::Timeout => plain(StatusCode::GATEWAY_TIMEOUT, "partner timed out"),
                    other => plain(StatusCode::SERVICE_UNAVAILABLE, &format!("{other:?}")),
                },
            }
        }
    };
    // The answer is ready.
    guard.0 = None;
    if budget.is_some_and(|b| b.is_exhausted()) {
        counters.late.fetch_add(1, Ordering::Relaxed);
    }
    res
}

fn pass_up(status: StatusCode, headers: &HeaderMap, body: Bytes) -> Response {
    let mut res = Response::new(Body::from(body));
    *res.status_mut() = status;
    for name in [CONTENT_TYPE, RETRY_AFTER] {
        if let Some(value) = headers.get(&name) {
            res.headers_mut().insert(name, value.clone());
        }
    }
    if !res.headers().contains_key(CONTENT_TYPE) {
        res.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    res
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut res = Response::new(Body::from(text.to_owned()));
    *res.status_mut() = status;
    res
}

#[cfg(test)]
mod tests {
    use slow_partner::FaultMode;
    use test_support::partner;
    use tokio::time::Instant;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn budget_mode_forwards_path_query_and_what_is_left_and_counts_cut_work() {
        let partner = partner(FaultMode::Normal).await;
        let middle = Middle::spawn(
            ChainMode::Budget,
            &partner.url(""),
            None,
            std::future::pending(),
        )
        .await
        .unwrap();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let started = Instant::now();
        let res = http
            .get(format!("{}/pricing?delay=200ms", middle.url()))
            .header("request-budget-ms", "1000")
            .header(X_REQUEST_ID, "m-1")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "the query went along"
        );
        let stats = partner.stats();
        let call = &stats.ids["m-1"].calls[0];
        assert_eq!(call.path, "/pricing");
        let forwarded = call.budget_ms.expect("a budget forwarded");
        assert!((900..1000).contains(&forwarded), "{forwarded}");
        assert_eq!(
            middle.stats(),
            MiddleStats {
                requests: 1,
                with_budget: 1,
                late: 0,
                cut: 0
            }
        );
        // 150 ms of budget for 1 s of work: the client gives up at the
        // deadline (less the reserve) and middle answers 504 in time.
        let started = Instant::now();
        let res = http
            .get(format!("{}/inventory?delay=1s", middle.url()))
            .header("request-budget-ms", "150")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::GATEWAY_TIMEOUT);
        assert!(started.elapsed() < Duration::from_millis(400));
        let s = middle.stats();
        assert_eq!((s.requests, s.with_budget, s.late, s.cut), (2, 2, 0, 0));
        // A caller that hangs up before the answer: the work is cut.
        let gone = http
            .get(format!("{}/inventory?delay=1s", middle.url()))
            .header("request-budget-ms", "2000")
            .timeout(Duration::from_millis(100))
            .send()
            .await;
        assert!(gone.unwrap_err().is_timeout());
        tokio::time::timeout(Duration::from_secs(2), async {
            while middle.stats().cut == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the dropped work is counted as cut");
        assert_eq!(middle.stats().late, 0);
        middle.server.abort();
        partner.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn naive_and_peer_middles_forward_no_budget_and_pass_statuses_up() {
        let partner = partner(FaultMode::Normal).await;
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        for mode in [ChainMode::Naive, ChainMode::Peer, ChainMode::Queue] {
            partner.reset_stats();
            let middle = Middle::spawn(mode, &partner.url(""), None, std::future::pending())
                .await
                .unwrap();
            let res = http
                .get(format!(
                    "{}/recommendations?status=503&retry_after=2",
                    middle.url()
                ))
                .header("request-budget-ms", "1000")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{mode:?}");
            let stats = partner.stats();
            assert_eq!((stats.requests, stats.with_budget), (1, 0), "{mode:?}");
            assert_eq!(middle.stats().with_budget, 0, "{mode:?}: not judged");
            assert_eq!(middle.stats().requests, 1, "{mode:?}");
            middle.server.abort();
        }
        partner.shutdown().await;
    }
}
