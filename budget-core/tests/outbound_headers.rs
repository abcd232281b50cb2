//! One rule per outbound header, through every transport: the same
//! dependency configuration sends the same headers whether its calls go by
//! `BudgetClient` (reqwest), `GrpcBudgetLayer` (a tonic channel),
//! `BudgetMiddleware` (a reqwest-middleware stack) or `OutboundBudgetLayer`
//! (hyper-util's client), in budget and fixed mode, with `forward` on and
//! off, inside a request and outside one (docs/contract.md §1,
//! "Outbound"). The only difference is the protocol's own deadline
//! header: `request-budget-ms` over HTTP, `grpc-timeout` over gRPC (which
//! goes in budget mode whatever `forward` says: it is gRPC's deadline).
//!
//! A real axum server on 127.0.0.1 (HTTP/1 and HTTP/2) records what each
//! request carried.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use budget_core::adapters::reqwest_middleware::BudgetMiddleware;
use budget_core::adapters::tower::OutboundBudgetLayer;
use budget_core::admission::criticality::Criticality;
use budget_core::client::{CallErrorKind, DependencyConfig, TimeoutMode};
use budget_core::context::RequestContext;
use budget_core::grpc::GrpcBudgetLayer;
use budget_core::{Budget, client::BudgetClient};
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use tower::{Layer, ServiceExt};

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The headers the rules are about, as a request carried them.
const WATCHED: [&str; 4] = [
    "request-budget-ms",
    "grpc-timeout",
    "request-criticality",
    "traceparent",
];

type Seen = Arc<Mutex<Vec<BTreeMap<String, String>>>>;

/// An axum server that records the watched headers of every request.
async fn recorder() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .fallback(|State(seen): State<Seen>, req: Request| async move {
            let headers = req.headers();
            let watched = WATCHED
                .iter()
                .filter_map(|h| Some((h.to_string(), headers.get(*h)?.to_str().ok()?.to_owned())))
                .collect();
            seen.lock().unwrap().push(watched);
            "ok"
        })
        .with_state(Arc::clone(&seen));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

/// Where a call is made.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// Inside a request: 2 s, a 10 ms reserve, `critical`, a traceparent.
    Inside,
    /// Outside any request, the dependency's default budget of 1.5 s.
    OutsideWithDefault,
    /// Outside any request, no budget anywhere.
    OutsideWithout,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    mode: TimeoutMode,
    forward: bool,
    place: Place,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Reqwest,
    Tonic,
    Middleware,
    Tower,
}

const TRANSPORTS: [Transport; 4] = [
    Transport::Reqwest,
    Transport::Tonic,
    Transport::Middleware,
    Transport::Tower,
];

fn config(url: &str, case: Case) -> DependencyConfig {
    let mut config = DependencyConfig::new("partner", url);
    config.mode = case.mode;
    config.forward = case.forward;
    if let Place::OutsideWithDefault = case.place {
        config.default_budget = Some(Duration::from_millis(1500));
    }
    config
}

fn context() -> RequestContext {
    let mut inbound = http::HeaderMap::new();
    inbound.insert("traceparent", TRACEPARENT.parse().unwrap());
    RequestContext::new(Budget::new(Duration::from_secs(2)))
        .with_reserve(Duration::from_millis(10))
        .with_criticality(Criticality::Critical)
        .with_inbound_trace(&inbound)
}

/// One call to `url` by `transport`: `Ok` once it was sent (what the
/// server saw is in its record), or the `CallError`'s kind when it was
/// not.
async fn call(transport: Transport, url: &str, case: Case) -> Result<(), CallErrorKind> {
    let config = config(url, case);
    let sent = async {
        match transport {
            Transport::Reqwest => {
                let client: BudgetClient = config.build().unwrap();
                client
                    .get("/h")
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| e.kind())
            }
            Transport::Tonic => {
                let channel = tonic::transport::Channel::from_shared(url.to_owned())
                    .unwrap()
                    .connect_lazy();
                let svc = GrpcBudgetLayer::from_config(&config, None)
                    .unwrap()
                    .layer(channel);
                let req = http::Request::post(format!("{url}/pkg.Svc/Method"))
                    .header("content-type", "application/grpc")
                    .body(tonic::body::Body::empty())
                    .unwrap();
                svc.oneshot(req)
                    .await
                    .map(drop)
                    .map_err(|_| CallErrorKind::Other)
            }
            Transport::Middleware => {
                let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
                    .with(BudgetMiddleware::from_config(&config).unwrap())
                    .build();
                client
                    .get(format!("{url}/h"))
                    .send()
                    .await
                    .map(drop)
                    .map_err(|e| budget_core::client::CallError::from(e).kind())
            }
            Transport::Tower => {
                let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
                let svc = OutboundBudgetLayer::from_config(&config)
                    .unwrap()
                    .layer(http);
                let req = http::Request::get(format!("{url}/h"))
                    .body(Full::default())
                    .unwrap();
                svc.oneshot(req)
                    .await
                    .map(drop)
                    .map_err(|_| CallErrorKind::Other)
            }
        }
    };
    match case.place {
        Place::Inside => context().scope(sent).await,
        _ => sent.await,
    }
}

/// What the rules say the dependency sees (the budget's value checked for
/// its range, then written `budget`): `None` when the call is not made.
fn expected(transport: Transport, case: Case) -> Option<BTreeMap<String, String>> {
    let mut want = BTreeMap::new();
    let inside = matches!(case.place, Place::Inside);
    if inside {
        want.insert("traceparent".into(), TRACEPARENT.into());
    }
    let has_budget =
        case.mode == TimeoutMode::Budget && !matches!(case.place, Place::OutsideWithout);
    if case.mode == TimeoutMode::Budget && matches!(case.place, Place::OutsideWithout) {
        // No budget to spend: the client refuses, a layer passes the call
        // through as it came.
        return (transport != Transport::Reqwest).then_some(want);
    }
    if has_budget && case.forward {
        if transport != Transport::Tonic {
            want.insert("request-budget-ms".into(), "budget".into());
        }
        let criticality = if inside { "critical" } else { "default" };
        want.insert("request-criticality".into(), criticality.into());
    }
    if has_budget && transport == Transport::Tonic {
        want.insert("grpc-timeout".into(), "budget".into());
    }
    Some(want)
}

/// `seen` with the budget's value checked against what was left (2 s less
/// the 10 ms reserve inside, 1.5 s outside) and written `budget`.
fn normalised(mut seen: BTreeMap<String, String>, case: Case) -> BTreeMap<String, String> {
    let most: u64 = match case.place {
        Place::Inside => 1990,
        _ => 1500,
    };
    if let Some(ms) = seen.get("request-budget-ms") {
        let ms: u64 = ms.parse().unwrap();
        assert!((most - 500..=most).contains(&ms), "{case:?}: {ms} ms");
        seen.insert("request-budget-ms".into(), "budget".into());
    }
    if let Some(timeout) = seen.get("grpc-timeout") {
        assert!(
            timeout.ends_with('u') || timeout.ends_with('m'),
            "{timeout}"
        );
        seen.insert("grpc-timeout".into(), "budget".into());
    }
    seen
}

#[tokio::test]
async fn every_transport_sends_the_same_headers_by_the_same_rules() {
    let (url, seen) = recorder().await;
    let mut table = Vec::new();
    for mode in [TimeoutMode::Budget, TimeoutMode::Fixed] {
        for forward in [true, false] {
            for place in [
                Place::Inside,
                Place::OutsideWithDefault,
                Place::OutsideWithout,
            ] {
                let case = Case {
                    mode,
                    forward,
                    place,
                };
                let mut row = Vec::new();
                for transport in TRANSPORTS {
                    seen.lock().unwrap().clear();
                    let result = call(transport, &url, case).await;
                    let got = seen.lock().unwrap().pop().map(|s| normalised(s, case));
                    let want = expected(transport, case);
                    assert_eq!(got, want, "{transport:?} {case:?} ({result:?})");
                    if want.is_none() {
                        assert_eq!(result, Err(CallErrorKind::NoBudget), "{case:?}");
                    }
                    // The same headers as the others, the protocol's own
                    // deadline header aside.
                    row.push(got.map(|mut g| {
                        g.remove("grpc-timeout");
                        g.remove("request-budget-ms");
                        g
                    }));
                }
                table.push((case, row));
            }
        }
    }
    for (case, row) in table {
        let sent: Vec<_> = row.iter().flatten().collect();
        assert!(sent.windows(2).all(|w| w[0] == w[1]), "{case:?}: {row:?}");
    }
}
