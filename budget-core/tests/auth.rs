//! Bearer tokens from a `TokenSource`, refreshed once on a `401`, over real
//! sockets on 127.0.0.1: an axum server that accepts only the token the
//! issuer minted last, a counting token source, and real reqwest calls
//! through `BudgetClient`. Real clock, generous bounds; the refresh rules
//! are pinned with a paused clock in the module's unit tests. Every test
//! runs under an outer timeout.

mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use budget_core::client::{
    BoxError, BudgetClient, CallErrorKind, DependencyConfig,
    auth::{Token, TokenSource},
};
use budget_core::ledger::{Entry, Ledger};
use budget_core::{Budget, floor::Floor};
use http::StatusCode;
use support::ms;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// Runs a test body under a 30 s outer timeout.
async fn bounded<F: Future<Output = ()>>(body: F) {
    support::bounded_by(30, body).await;
}

/// Who mints tokens and which one the server accepts: only the last one
/// minted, until it is revoked.
#[derive(Default)]
struct Issuer {
    minted: AtomicU32,
    accepted: Mutex<Option<String>>,
    /// `Authorization` values the server saw, and the bodies.
    seen: Mutex<Vec<(Option<String>, String)>>,
}

impl Issuer {
    fn mint(&self) -> String {
        let n = self.minted.fetch_add(1, Ordering::SeqCst) + 1;
        let token = format!("token-{n}");
        *self.accepted.lock().unwrap() = Some(token.clone());
        token
    }

    /// The token in use expires: the server accepts none until the next.
    fn revoke(&self) {
        *self.accepted.lock().unwrap() = None;
    }

    fn minted(&self) -> u32 {
        self.minted.load(Ordering::SeqCst)
    }

    fn seen(&self) -> Vec<(Option<String>, String)> {
        self.seen.lock().unwrap().clone()
    }
}

/// A token source that asks the issuer after `delay`; fails once `down`.
struct Source {
    issuer: Arc<Issuer>,
    delay: Duration,
    down: Arc<AtomicBool>,
}

impl TokenSource for Source {
    async fn fetch(&self) -> Result<Token, BoxError> {
        tokio::time::sleep(self.delay).await;
        if self.down.load(Ordering::SeqCst) {
            return Err("identity provider down".into());
        }
        Ok(Token::bearer(self.issuer.mint())?)
    }
}

/// The protected dependency: `200 {"ok":true}` for `Bearer <accepted>`,
/// `401` with `WWW-Authenticate` otherwise.
async fn protected(
    State(issuer): State<Arc<Issuer>>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, HeaderMap, &'static str) {
    let got = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    issuer.seen.lock().unwrap().push((got.clone(), body));
    let accepted = issuer.accepted.lock().unwrap().clone();
    let ok =
        matches!((&got, &accepted), (Some(got), Some(token)) if *got == format!("Bearer {token}"));
    let mut out = HeaderMap::new();
    if ok {
        return (StatusCode::OK, out, r#"{"ok":true}"#);
    }
    out.insert(
        "www-authenticate",
        "Bearer error=\"invalid_token\"".parse().unwrap(),
    );
    (StatusCode::UNAUTHORIZED, out, "")
}

async fn server(issuer: &Arc<Issuer>) -> SocketAddr {
    let app = Router::new()
        .fallback(protected)
        .with_state(Arc::clone(issuer));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

struct Setup {
    issuer: Arc<Issuer>,
    /// Makes the token source fail.
    down: Arc<AtomicBool>,
    client: BudgetClient,
}

async fn setup(delay: Duration, config: impl FnOnce(&mut DependencyConfig)) -> Setup {
    let issuer = Arc::new(Issuer::default());
    let addr = server(&issuer).await;
    let down = Arc::new(AtomicBool::new(false));
    let source = Source {
        issuer: Arc::clone(&issuer),
        delay,
        down: Arc::clone(&down),
    };
    let mut c = DependencyConfig::new("orders", format!("http://{addr}/orders"));
    config(&mut c);
    let client = BudgetClient::builder(c)
        .token_source(source)
        .build()
        .unwrap();
    Setup {
        issuer,
        down,
        client,
    }
}

fn auth_waits(ledger: &Ledger) -> Vec<(Duration, Option<String>)> {
    ledger
        .entries()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Local {
                name,
                duration,
                desc,
            } if name == "orders-auth" => Some((duration, desc)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_with_an_expired_token_cause_one_refresh_and_fifty_successes() {
    bounded(async {
        let s = setup(ms(100), |_| {}).await;
        let res = s
            .client
            .get("")
            .budget(Budget::new(ms(5000)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(s.issuer.minted(), 1);

        s.issuer.revoke();
        let calls: Vec<_> = (0..50)
            .map(|_| {
                let client = s.client.clone();
                tokio::spawn(async move {
                    let ledger = Ledger::new();
                    let res = client
                        .get("")
                        .budget(Budget::new(ms(10_000)))
                        .ledger(ledger.clone())
                        .send()
                        .await;
                    (res.map(|r| r.status()), ledger)
                })
            })
            .collect();
        let mut waited = 0;
        for call in calls {
            let (status, ledger) = call.await.unwrap();
            assert_eq!(status.unwrap(), StatusCode::OK);
            let waits = auth_waits(&ledger);
            assert!(
                waits.len() <= 1 && waits.iter().all(|(_, d)| d.is_none()),
                "{waits:?}"
            );
            waited += waits.len();
        }
        assert_eq!(s.issuer.minted(), 2, "exactly one refresh for 50 calls");
        assert!(
            waited >= 1,
            "the refresh was paid by the calls that waited for it"
        );
        let seen = s.issuer.seen();
        assert_eq!(seen.len(), 1 + 50 + 50, "each call: a 401, then one retry");
        let with = |t: &str| seen.iter().filter(|(a, _)| a.as_deref() == Some(t)).count();
        assert_eq!((with("Bearer token-1"), with("Bearer token-2")), (51, 50));
    })
    .await;
}

#[tokio::test]
async fn a_token_that_is_fine_causes_no_refresh() {
    bounded(async {
        let s = setup(ms(20), |_| {}).await;
        for i in 0..10 {
            let ledger = Ledger::new();
            let res = s
                .client
                .get("")
                .budget(Budget::new(ms(2000)))
                .ledger(ledger.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            assert_eq!(res.attempts(), 1);
            // Only the first call waited, for the first token.
            assert_eq!(auth_waits(&ledger).len(), usize::from(i == 0), "call {i}");
        }
        assert_eq!(s.issuer.minted(), 1);
        assert!(
            s.issuer
                .seen()
                .iter()
                .all(|(a, _)| a.as_deref() == Some("Bearer token-1"))
        );
    })
    .await;
}

#[tokio::test]
async fn a_refresh_that_fails_passes_the_401_up() {
    bounded(async {
        let s = setup(ms(10), |_| {}).await;
        s.client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        s.issuer.revoke();
        s.down.store(true, Ordering::SeqCst);
        let ledger = Ledger::new();
        let res = s
            .client
            .get("")
            .budget(Budget::new(ms(2000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            res.headers()["www-authenticate"],
            "Bearer error=\"invalid_token\""
        );
        assert_eq!(s.issuer.seen().len(), 2, "no retry without a new token");
        let waits = auth_waits(&ledger);
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0].1.as_deref(), Some("failed"));
        let err = res.error_for_status().unwrap_err();
        assert_eq!(err.status(), Some(StatusCode::UNAUTHORIZED));
    })
    .await;
}

#[tokio::test]
async fn a_refresh_slower_than_the_budget_ends_the_call_with_the_401_within_it() {
    bounded(async {
        let s = setup(ms(3000), |c| c.floor = Floor::new(ms(50)).into()).await;
        // The first token, with all the time it takes.
        s.client
            .get("")
            .budget(Budget::new(ms(10_000)))
            .send()
            .await
            .unwrap();
        s.issuer.revoke();
        let ledger = Ledger::new();
        let start = Instant::now();
        let res = s
            .client
            .get("")
            .budget(Budget::new(ms(500)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        let elapsed = start.elapsed();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        // Waited until only the 50 ms floor was left, not the 3 s refresh.
        assert!(elapsed >= ms(400) && elapsed < ms(1500), "{elapsed:?}");
        let waits = auth_waits(&ledger);
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0].1.as_deref(), Some("timeout"));
        assert_eq!(s.issuer.seen().len(), 2);
    })
    .await;
}

#[tokio::test]
async fn a_post_without_an_idempotency_key_is_sent_again_once_after_a_refresh() {
    bounded(async {
        let s = setup(ms(10), |_| {}).await;
        s.client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        s.issuer.revoke();
        let res = s
            .client
            .post("")
            .body(r#"{"sku":7}"#)
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let posts: Vec<_> = s.issuer.seen()[1..].to_vec();
        assert_eq!(
            posts,
            [
                (Some("Bearer token-1".to_owned()), r#"{"sku":7}"#.to_owned()),
                (Some("Bearer token-2".to_owned()), r#"{"sku":7}"#.to_owned()),
            ],
            "the same body, with the new token"
        );
    })
    .await;
}

#[tokio::test]
async fn a_request_with_its_own_authorization_is_sent_as_it_is() {
    bounded(async {
        let s = setup(ms(10), |_| {}).await;
        let res = s
            .client
            .get("")
            .header("authorization", "Basic dXNlcjpwdw==")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(s.issuer.minted(), 0, "no token fetched, none refreshed");
        assert_eq!(s.issuer.seen()[0].0.as_deref(), Some("Basic dXNlcjpwdw=="));
    })
    .await;
}

#[tokio::test]
async fn no_first_token_is_an_auth_error_and_nothing_is_sent() {
    bounded(async {
        let s = setup(ms(10), |_| {}).await;
        s.down.store(true, Ordering::SeqCst);
        let err = s
            .client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::Auth);
        assert_eq!(err.attempts(), 0);
        assert_eq!(err.problem().status, 502);
        assert!(s.issuer.seen().is_empty());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_401s_a_refresh_answers_do_not_open_the_circuit() {
    bounded(async {
        let s = setup(ms(50), |c| {
            let mut breaker = budget_core::breaker::BreakerConfig::default();
            breaker.failure_threshold = 3;
            c.breaker = Some(breaker);
        })
        .await;
        let first = s.client.get("").budget(Budget::new(ms(5000))).send().await;
        assert_eq!(first.unwrap().status(), StatusCode::OK);
        s.issuer.revoke();
        // Twenty 401s at once (far over the breaker's threshold of 3),
        // each answered by the one refresh and a retry.
        let calls: Vec<_> = (0..20)
            .map(|_| {
                let client = s.client.clone();
                tokio::spawn(async move {
                    client
                        .get("")
                        .budget(Budget::new(ms(10_000)))
                        .send()
                        .await
                        .map(|r| r.status())
                })
            })
            .collect();
        for call in calls {
            assert_eq!(call.await.unwrap().unwrap(), StatusCode::OK);
        }
        assert_eq!(s.issuer.minted(), 2);
        let after = s.client.get("").budget(Budget::new(ms(5000))).send().await;
        assert_eq!(
            after.unwrap().status(),
            StatusCode::OK,
            "the circuit is closed"
        );
    })
    .await;
}
