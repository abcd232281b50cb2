//! What the server layer's tracing span costs per request, through
//! `oneshot` on one Router (no sockets), under each subscriber a service
//! may run with. The subscriber is the process's global one, as in a
//! service (a scoped, thread-local subscriber costs a thread-local lookup
//! on every span operation, and several live subscribers make every
//! callsite ask each of them, which would blur the numbers), so one run
//! measures one case, chosen by `TRACING_COST` (default `off`):
//!
//! - `off`: no subscriber at all (the span is a disabled callsite);
//! - `log_lines_as_init`: what the binaries' `init_from_env`
//!   (`service_kit::telemetry`) installs without an OTLP
//!   endpoint: the fmt layer at `info` without the budget spans
//!   (`budget_core::spans=off`), writing to a sink;
//! - `log_lines_with_spans`: the same fmt layer with the budget spans as
//!   log-line context (`RUST_LOG=info,budget_core::spans=info`);
//! - `otel_simple_discard`: only a `tracing-opentelemetry` layer, its spans
//!   exported one by one to an exporter that drops them;
//! - `otel_batch_as_init`: what `init_from_env` installs with an endpoint:
//!   the log layer of `log_lines_as_init` plus the OpenTelemetry layer
//!   through the batch processor, to the dropping exporter.
//!
//! ```text
//! for case in off log_lines_as_init log_lines_with_spans otel_simple_discard otel_batch_as_init; do
//!   TRACING_COST=$case cargo bench -p budget-core --features server,otel --bench tracing_cost
//! done
//! ```

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::server::ServerConfig;
use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tower::ServiceExt;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry};

/// An exporter that drops every span: what is measured is the span's
/// life in the process, not a collector.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        drop(std::hint::black_box(batch));
        Ok(())
    }
}

type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;

/// A `tracing-opentelemetry` layer at `INFO` exporting through `provider`.
fn otel(provider: &SdkTracerProvider) -> BoxedLayer {
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("bench"))
        .with_filter(LevelFilter::INFO)
        .boxed()
}

/// The fmt layer at `directives`, writing to a sink.
fn log_lines(directives: &str) -> BoxedLayer {
    tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(EnvFilter::new(directives))
        .boxed()
}

/// Installs the case's subscriber as the global one; returns the
/// provider to shut down at the end.
fn install(case: &str) -> Option<SdkTracerProvider> {
    const AS_INIT: &str = "info,budget_core::spans=off";
    let (layers, provider): (Vec<BoxedLayer>, _) = match case {
        "off" => return None,
        "log_lines_as_init" => (vec![log_lines(AS_INIT)], None),
        "log_lines_with_spans" => (vec![log_lines("info,budget_core::spans=info")], None),
        "otel_simple_discard" => {
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(Discard)
                .build();
            (vec![otel(&provider)], Some(provider))
        }
        "otel_batch_as_init" => {
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(Discard)
                .build();
            (vec![log_lines(AS_INIT), otel(&provider)], Some(provider))
        }
        other => panic!("unknown TRACING_COST case {other:?}"),
    };
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layers)).unwrap();
    provider
}

fn request() -> Request<Body> {
    Request::builder()
        .uri("/")
        .header("request-budget-ms", "1500")
        .body(Body::empty())
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let case = std::env::var("TRACING_COST").unwrap_or_else(|_| "off".to_owned());
    let provider = install(&case);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(ServerConfig::default().layer().unwrap());

    let mut group = c.benchmark_group("tracing_cost");
    group.bench_function(&case, |b| {
        b.to_async(&rt).iter(|| {
            let app = app.clone();
            async move {
                let res = app.oneshot(request()).await.unwrap();
                assert_eq!(res.status(), 200);
                res
            }
        })
    });
    group.finish();
    if let Some(provider) = provider {
        let _ = provider.shutdown();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
