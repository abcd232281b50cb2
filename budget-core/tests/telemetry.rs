//! Traces over a real chain on 127.0.0.1 (docs/contract.md §4: the ledger is
//! also recorded on the request's span; one trace across hops):
//!
//!     test client -> A (BudgetLayer + BudgetClient) -> B (BudgetLayer + BudgetClient) -> partner
//!
//! Spans go to an in-memory exporter through `tracing-opentelemetry`; the
//! subscriber is the thread's default, so every test runs on a
//! current-thread runtime with its servers spawned on it.

mod support;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::get;
use axum::{Json, Router};
use budget_core::Budget;
use budget_core::client::{BudgetClient, CallError, DependencyConfig, OnUnavailable};
use budget_core::server::ServerConfig;
use budget_core::telemetry::semconv::*;
use budget_core::{floor::Floor, ledger::parse_server_timing};
use opentelemetry::trace::{SpanId, SpanKind, TraceId, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use support::{constant_retry, ms};
use tracing::Instrument;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// Runs a test body under a 20 s outer timeout.
async fn bounded<F: Future<Output = ()>>(body: F) {
    support::bounded_by(20, body).await;
}

/// A `tracing-opentelemetry` layer exporting the budget spans only (target
/// [`SPAN_TARGET`], at `INFO`), with log events at `WARN` and above as
/// span events and no source locations, thread names or busy/idle times:
/// the layer the project's binaries install
/// (`service_kit::telemetry::otel_layer`), which budget-core cannot depend
/// on.
fn budget_spans<S, T>(tracer: T) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    T: opentelemetry::trace::Tracer + Send + Sync + 'static,
    T::Span: Send + Sync,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            if meta.is_span() {
                meta.target() == SPAN_TARGET && *meta.level() <= tracing::Level::INFO
            } else {
                *meta.level() <= tracing::Level::WARN
            }
        }))
}

/// An in-memory span exporter behind a `tracing-opentelemetry` layer,
/// installed as this thread's default subscriber until the guard drops.
struct Traces {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    _guard: DefaultGuard,
}

impl Traces {
    fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry().with(budget_spans(provider.tracer("test")));
        let guard = tracing::subscriber::set_default(subscriber);
        Self {
            exporter,
            provider,
            _guard: guard,
        }
    }

    fn spans(&self) -> Vec<SpanData> {
        self.provider.force_flush().unwrap();
        self.exporter.get_finished_spans().unwrap()
    }

    /// Waits until `n` spans named with the tracing name `name` have ended
    /// (a server span ends when hyper drops the response future, a moment
    /// after the client has read the answer).
    async fn wait_for(&self, kind: SpanKind, n: usize) -> Vec<SpanData> {
        for _ in 0..200 {
            let spans = self.spans();
            if spans.iter().filter(|s| s.span_kind == kind).count() >= n {
                return spans;
            }
            tokio::time::sleep(ms(10)).await;
        }
        panic!("fewer than {n} {kind:?} spans: {:#?}", self.spans());
    }
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| kv.value.clone())
}

fn int(span: &SpanData, key: &str) -> i64 {
    match attr(span, key) {
        Some(Value::I64(v)) => v,
        other => panic!("{key} of span {:?} is {other:?}", span.name),
    }
}

fn text(span: &SpanData, key: &str) -> String {
    match attr(span, key) {
        Some(Value::String(v)) => v.to_string(),
        other => panic!("{key} of span {:?} is {other:?}", span.name),
    }
}

fn by_kind<'a>(spans: &'a [SpanData], kind: &SpanKind) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| &s.span_kind == kind).collect()
}

fn server_of<'a>(spans: &'a [SpanData], route: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| {
            s.span_kind == SpanKind::Server
                && attr(s, HTTP_ROUTE).is_some_and(|r| r.as_str() == route)
        })
        .unwrap_or_else(|| panic!("no server span for {route}"))
}

fn attempts_to<'a>(spans: &'a [SpanData], dependency: &str) -> Vec<&'a SpanData> {
    let mut found: Vec<_> = spans
        .iter()
        .filter(|s| {
            s.span_kind == SpanKind::Client
                && attr(s, BUDGET_DEPENDENCY).is_some_and(|d| d.as_str() == dependency)
                && attr(s, URL_FULL).is_some()
        })
        .collect();
    found.sort_by_key(|s| s.start_time);
    found
}

/// A plain axum partner: answers the statuses of `script` in turn (the
/// last repeats) and keeps each request's `traceparent` and budget.
#[derive(Clone, Default)]
struct Partner {
    hits: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<HashMap<String, String>>>>,
}

impl Partner {
    async fn start(script: &'static [u16]) -> (SocketAddr, Self) {
        let partner = Partner::default();
        let state = (partner.clone(), script);
        let app =
            Router::new()
                .route(
                    "/partner",
                    get(
                        |State((p, script)): State<(Partner, &'static [u16])>,
                         headers: HeaderMap| async move {
                            let n = p.hits.fetch_add(1, Ordering::SeqCst);
                            let kept = ["traceparent", "request-budget-ms"]
                                .into_iter()
                                .filter_map(|h| {
                                    Some((h.to_owned(), headers.get(h)?.to_str().ok()?.to_owned()))
                                })
                                .collect();
                            p.seen.lock().unwrap().push(kept);
                            let status = script[n.min(script.len() - 1)];
                            (http::StatusCode::from_u16(status).unwrap(), "{\"ok\":true}")
                        },
                    ),
                )
                .with_state(state);
        (serve(app).await, partner)
    }
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A dependency retried at once (no jitter, 10 ms backoff).
fn dependency(name: &str, url: String) -> DependencyConfig {
    let mut c = DependencyConfig::new(name, url);
    c.retry = constant_retry(3, ms(10));
    c
}

/// A budget-aware hop: `GET /{route}` calls `next` and answers its body.
async fn hop(route: &'static str, next: BudgetClient, server: ServerConfig) -> SocketAddr {
    let app = Router::new()
        .route(
            &format!("/{route}"),
            get(|State(next): State<BudgetClient>| async move {
                let res = next.get("").send().await?.error_for_status()?;
                Ok::<_, CallError>(Json(res.json::<serde_json::Value>()?))
            }),
        )
        .with_state(next)
        .layer(server.layer().unwrap());
    serve(app).await
}

fn server_config() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.reserve = ms(5);
    config
}

#[tokio::test(flavor = "current_thread")]
async fn one_trace_spans_every_hop_with_the_budget_shrinking_and_the_retry_counted() {
    let traces = Traces::install();
    bounded(async {
        let (partner_addr, partner) = Partner::start(&[503, 200]).await;
        let to_partner = dependency("partner", format!("http://{partner_addr}/partner"))
            .build()
            .unwrap();
        let b_addr = hop("b", to_partner, server_config()).await;
        let to_b = dependency("b", format!("http://{b_addr}/b"))
            .build()
            .unwrap();
        let a_addr = hop("a", to_b, server_config()).await;
        let to_a = dependency("a", format!("http://user:secret@{a_addr}/a?q=1"))
            .build()
            .unwrap();

        let root = tracing::info_span!("test client");
        let res = to_a
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .instrument(root)
            .await
            .unwrap();
        assert_eq!(res.status(), 200);

        // The root, two server spans (A, B) and four attempts.
        let spans = traces.wait_for(SpanKind::Server, 2).await;
        let trace_id: TraceId = spans[0].span_context.trace_id();
        assert!(
            spans.iter().all(|s| s.span_context.trace_id() == trace_id),
            "one trace id across all hops: {spans:#?}"
        );

        let client_to_a = attempts_to(&spans, "a");
        let a_server = server_of(&spans, "/a");
        let a_to_b = attempts_to(&spans, "b");
        let b_server = server_of(&spans, "/b");
        let b_to_partner = attempts_to(&spans, "partner");
        assert_eq!(
            (client_to_a.len(), a_to_b.len(), b_to_partner.len()),
            (1, 1, 2)
        );

        // Parent links: each hop's server span is the child of the caller's attempt span.
        assert_eq!(
            a_server.parent_span_id,
            client_to_a[0].span_context.span_id()
        );
        assert!(a_server.parent_span_is_remote);
        assert_eq!(a_to_b[0].parent_span_id, a_server.span_context.span_id());
        assert_eq!(b_server.parent_span_id, a_to_b[0].span_context.span_id());
        for attempt in &b_to_partner {
            assert_eq!(attempt.parent_span_id, b_server.span_context.span_id());
        }
        // The partner saw the second attempt's span as its parent.
        let seen = partner.seen.lock().unwrap().clone();
        let traceparent = &seen[1]["traceparent"];
        assert_eq!(
            traceparent,
            &format!(
                "00-{}-{}-01",
                trace_id,
                b_to_partner[1].span_context.span_id()
            )
        );
        assert_ne!(b_to_partner[1].span_context.span_id(), SpanId::INVALID);

        // Server spans: semantic conventions and the budget.
        for (server, route) in [(a_server, "/a"), (b_server, "/b")] {
            assert_eq!(server.name, format!("GET {route}"));
            assert_eq!(text(server, HTTP_REQUEST_METHOD), "GET");
            assert_eq!(text(server, URL_PATH), route);
            assert_eq!(int(server, HTTP_RESPONSE_STATUS_CODE), 200);
            assert_eq!(text(server, BUDGET_OUTCOME), OUTCOME_OK);
            assert_eq!(int(server, BUDGET_FLOOR_MS), 0);
        }
        // The budget shrinks hop by hop.
        let (a_in, b_in) = (
            int(a_server, BUDGET_INGRESS_MS),
            int(b_server, BUDGET_INGRESS_MS),
        );
        assert!(a_in <= 2000 && a_in > 1900, "A got {a_in}");
        assert!(b_in < a_in, "B got {b_in} after A's {a_in}");
        let sent_by_a = int(a_to_b[0], BUDGET_REMAINING_MS);
        assert!(sent_by_a < a_in && sent_by_a >= b_in, "{sent_by_a}");
        let sent_by_b = int(b_to_partner[0], BUDGET_REMAINING_MS);
        assert!(sent_by_b < b_in);
        let resent_by_b = int(b_to_partner[1], BUDGET_REMAINING_MS);
        assert!(resent_by_b < sent_by_b, "the retry carries less");
        assert_eq!(seen[0]["request-budget-ms"], sent_by_b.to_string());
        assert_eq!(seen[1]["request-budget-ms"], resent_by_b.to_string());

        // Client spans: semantic conventions, the retry and the wait it paid.
        let (first, retry) = (b_to_partner[0], b_to_partner[1]);
        assert_eq!(first.name, "GET", "OpenTelemetry's HTTP client span name");
        assert_eq!(text(first, BUDGET_DEPENDENCY), "partner");
        assert_eq!(text(first, HTTP_REQUEST_METHOD), "GET");
        assert_eq!(text(first, SERVER_ADDRESS), "127.0.0.1");
        assert_eq!(int(first, SERVER_PORT), i64::from(partner_addr.port()));
        assert_eq!(int(first, HTTP_RESPONSE_STATUS_CODE), 503);
        assert_eq!(text(first, ERROR_TYPE), "503");
        assert_eq!(text(first, BUDGET_OUTCOME), OUTCOME_OK);
        assert_eq!(text(first, BUDGET_DECISION), "retry after 10ms");
        assert!(attr(first, HTTP_REQUEST_RESEND_COUNT).is_none());
        assert!(attr(first, BUDGET_WAIT_MS).is_none());
        assert_eq!(int(retry, HTTP_REQUEST_RESEND_COUNT), 1);
        assert!(int(retry, BUDGET_WAIT_MS) >= 10);
        assert_eq!(int(retry, HTTP_RESPONSE_STATUS_CODE), 200);
        assert!(attr(retry, ERROR_TYPE).is_none());
        // userinfo never reaches a span; the query's values are redacted.
        assert_eq!(
            text(client_to_a[0], URL_FULL),
            format!("http://{a_addr}/a?q=REDACTED")
        );

        // The ledger is on the server span, as the Server-Timing header says.
        let ledger = parse_server_timing(&text(b_server, BUDGET_LEDGER));
        let names: Vec<_> = ledger.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["budget", "partner", "partner-wait", "partner"]);
        assert_eq!(ledger[1].desc.as_deref(), Some("503"));
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_caller_traceparent_becomes_the_parent_and_a_shed_request_says_shed() {
    let traces = Traces::install();
    bounded(async {
        let app = Router::new()
            .route("/a", get(|| async { "never run" }))
            .layer({
                let mut config = server_config();
                config.floor = ms(100);
                config.layer().unwrap()
            });
        let addr = serve(app).await;
        let res = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap()
            .get(format!("http://{addr}/a"))
            .header("request-budget-ms", "50")
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 504);

        let spans = traces.wait_for(SpanKind::Server, 1).await;
        let server = by_kind(&spans, &SpanKind::Server)[0];
        assert_eq!(
            server.span_context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(server.parent_span_id.to_string(), "00f067aa0ba902b7");
        assert!(server.parent_span_is_remote);
        assert_eq!(text(server, BUDGET_OUTCOME), OUTCOME_SHED);
        assert_eq!(int(server, HTTP_RESPONSE_STATUS_CODE), 504);
        assert_eq!(text(server, ERROR_TYPE), "504");
        assert_eq!(int(server, BUDGET_INGRESS_MS), 50);
        assert_eq!(int(server, BUDGET_FLOOR_MS), 100);
        assert_eq!(
            text(server, BUDGET_LEDGER),
            "budget;dur=50;desc=\"ingress\""
        );
        assert!(matches!(
            server.status,
            opentelemetry::trace::Status::Error { .. }
        ));
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_malformed_header_an_expired_budget_and_a_call_below_its_floor_are_each_named() {
    let traces = Traces::install();
    bounded(async {
        let (partner_addr, _partner) = Partner::start(&[200]).await;
        let mut optional = dependency("recommendations", format!("http://{partner_addr}/partner"));
        optional.floor = Floor::new(ms(1000)).into();
        optional.on_unavailable = OnUnavailable::Skip;
        let optional = optional.build().unwrap();
        let app = Router::new()
            .route(
                "/skip",
                get(|State(recs): State<BudgetClient>| async move {
                    let skipped = recs
                        .get("")
                        .send_optional()
                        .await
                        .unwrap()
                        .skipped()
                        .is_some();
                    if skipped { "degraded" } else { "full" }
                }),
            )
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(ms(5000)).await;
                    "too late"
                }),
            )
            .with_state(optional)
            .layer(server_config().layer().unwrap());
        let addr = serve(app).await;
        let http = reqwest::Client::builder()
            .tls_backend_rustls()
            .build()
            .unwrap();
        let call = |path: &str, budget: &str| {
            http.get(format!("http://{addr}{path}"))
                .header("request-budget-ms", budget)
                .send()
        };

        assert_eq!(
            call("/skip", "500").await.unwrap().text().await.unwrap(),
            "degraded"
        );
        assert_eq!(call("/slow", "50").await.unwrap().status(), 504);
        assert_eq!(call("/skip", "-1").await.unwrap().status(), 400);

        let spans = traces.wait_for(SpanKind::Server, 3).await;
        let servers = by_kind(&spans, &SpanKind::Server);
        let outcome_of = |path: &str| {
            servers
                .iter()
                .filter(|s| text(s, URL_PATH) == path)
                .map(|s| (text(s, BUDGET_OUTCOME), int(s, HTTP_RESPONSE_STATUS_CODE)))
                .collect::<Vec<_>>()
        };
        assert!(outcome_of("/slow").contains(&(OUTCOME_EXPIRED.to_owned(), 504)));
        let skip = outcome_of("/skip");
        assert!(skip.contains(&(OUTCOME_OK.to_owned(), 200)), "{skip:?}");
        assert!(
            skip.contains(&(OUTCOME_MALFORMED.to_owned(), 400)),
            "{skip:?}"
        );

        // The call not made is a client span of its own, under the request's.
        let refused: Vec<_> = spans
            .iter()
            .filter(|s| s.span_kind == SpanKind::Client)
            .collect();
        assert_eq!(refused.len(), 1, "no attempt was sent");
        let refused = refused[0];
        assert_eq!(text(refused, BUDGET_OUTCOME), OUTCOME_BELOW_FLOOR);
        assert_eq!(text(refused, ERROR_TYPE), OUTCOME_BELOW_FLOOR);
        assert_eq!(text(refused, BUDGET_DEPENDENCY), "recommendations");
        assert_eq!(int(refused, BUDGET_FLOOR_MS), 1000);
        assert!(int(refused, BUDGET_REMAINING_MS) < 500);
        let parent = servers
            .iter()
            .find(|s| s.span_context.span_id() == refused.parent_span_id)
            .expect("the refused span's parent is a server span");
        assert_eq!(text(parent, BUDGET_OUTCOME), OUTCOME_OK);
        assert!(text(parent, BUDGET_LEDGER).contains("recommendations;desc=\"skipped: "));
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn without_a_subscriber_no_traceparent_is_sent() {
    bounded(async {
        let (partner_addr, partner) = Partner::start(&[200]).await;
        let client = dependency("partner", format!("http://{partner_addr}/partner"))
            .build()
            .unwrap();
        let res = client
            .get("")
            .budget(Budget::new(ms(1000)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let seen = partner.seen.lock().unwrap().clone();
        assert!(!seen[0].contains_key("traceparent"));
        assert!(seen[0].contains_key("request-budget-ms"));
    })
    .await;
}

#[test]
fn the_attribute_names_are_the_semantic_conventions() {
    use opentelemetry_semantic_conventions::attribute as sc;
    assert_eq!(HTTP_REQUEST_METHOD, sc::HTTP_REQUEST_METHOD);
    assert_eq!(HTTP_RESPONSE_STATUS_CODE, sc::HTTP_RESPONSE_STATUS_CODE);
    assert_eq!(HTTP_ROUTE, sc::HTTP_ROUTE);
    assert_eq!(HTTP_REQUEST_RESEND_COUNT, sc::HTTP_REQUEST_RESEND_COUNT);
    assert_eq!(URL_PATH, sc::URL_PATH);
    assert_eq!(URL_FULL, sc::URL_FULL);
    assert_eq!(SERVER_ADDRESS, sc::SERVER_ADDRESS);
    assert_eq!(SERVER_PORT, sc::SERVER_PORT);
    assert_eq!(ERROR_TYPE, sc::ERROR_TYPE);
}

/// The server span's ledger is the response's `Server-Timing`, so it keeps
/// to the same bound: a handler that records 1 000 steps gives a span
/// attribute of at most 4 KiB that says how many it left out.
#[tokio::test(flavor = "current_thread")]
async fn the_span_ledger_keeps_to_the_ledger_bound() {
    let traces = Traces::install();
    bounded(async {
        let app = Router::new()
            .route(
                "/a",
                get(|cx: budget_core::context::RequestContext| async move {
                    for i in 0..1000u64 {
                        cx.ledger().record(budget_core::ledger::Entry::local(
                            format!("step{i}"),
                            ms(1),
                            None,
                        ));
                    }
                    "done"
                }),
            )
            .layer(server_config().layer().unwrap());
        let addr = serve(app).await;
        let res = reqwest::get(format!("http://{addr}/a")).await.unwrap();
        assert_eq!(res.status(), 200);
        let header = res.headers()["server-timing"].to_str().unwrap().to_owned();

        let spans = traces.wait_for(SpanKind::Server, 1).await;
        let server = by_kind(&spans, &SpanKind::Server)[0];
        let ledger = text(server, BUDGET_LEDGER);
        assert_eq!(ledger, header);
        assert!(
            ledger.len() <= budget_core::ledger::DEFAULT_MAX_BYTES,
            "{}",
            ledger.len()
        );
        assert!(ledger.contains("ledger;desc=\"+937 more\""), "{ledger}");
    })
    .await;
}
