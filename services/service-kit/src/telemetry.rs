//! [`init_from_env`]: the global tracing subscriber, the OpenTelemetry
//! exporter and the W3C propagator of a service, in one call.
//!
//! Installing process-global state is the binary's business, not the
//! library's: budget-core only emits its spans (and the trace context on
//! the wire, with its `otel` feature); a binary of the chain installs what
//! turns them into log lines and exported traces, here.

use std::env;

use budget_core::telemetry::semconv::SPAN_TARGET;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkError;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, ParseError};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::{SubscriberInitExt, TryInitError};

/// The standard variable naming the OTLP collector's base URL.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The standard variable naming the OTLP traces URL (used as is).
pub const OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The standard variable naming the service in every span's resource.
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// The standard variable that turns the OpenTelemetry SDK off (`true`).
pub const OTEL_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
/// The log filter variable (`tracing_subscriber::EnvFilter` directives).
pub const RUST_LOG: &str = "RUST_LOG";

/// The instrumentation scope of the exported spans: the library that opens
/// them (budget-core's server layer and client), not the kit that exports
/// them.
const INSTRUMENTATION_SCOPE: &str = "budget-core";

/// What [`init`] installs.
///
/// # Example
///
/// ```
/// use service_kit::telemetry::{Otlp, TelemetryConfig};
///
/// let config = TelemetryConfig::new("checkout").with_otlp(Otlp::Endpoint("http://127.0.0.1:4318/v1/traces".into()));
/// assert_eq!(config.service_name, "checkout");
/// assert!(TelemetryConfig::new("edge").otlp.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TelemetryConfig {
    /// `service.name` of every exported span.
    pub service_name: String,
    /// `service.version` of every exported span (default: service-kit's
    /// version; a binary sets its own with [`with_service_version`](Self::with_service_version)).
    /// Each process also gets a `service.instance.id` of its own.
    pub service_version: String,
    /// Where to export spans over OTLP/HTTP (protobuf); `None`: no
    /// exporter and no OpenTelemetry layer at all (only the log lines).
    pub otlp: Option<Otlp>,
    /// The log lines' filter, `RUST_LOG` syntax; `None`: `info`.
    pub log_filter: Option<String>,
}

/// Where spans go.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Otlp {
    /// Where the standard variables say: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    /// as is, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`; headers
    /// and timeout from `OTEL_EXPORTER_OTLP_*` too.
    FromEnv,
    /// This traces URL, as is (e.g. `http://127.0.0.1:4318/v1/traces`).
    Endpoint(String),
}

impl TelemetryConfig {
    /// Log lines at `info`, no exporter.
    ///
    /// ```
    /// let c = service_kit::telemetry::TelemetryConfig::new("edge");
    /// assert_eq!((c.service_name.as_str(), c.otlp, c.log_filter), ("edge", None, None));
    /// ```
    pub fn new(service_name: impl Into<String>) -> Self {
        Self {
            service_name: service_name.into(),
            service_version: env!("CARGO_PKG_VERSION").to_owned(),
            otlp: None,
            log_filter: None,
        }
    }

    /// The same configuration naming `version` as `service.version`.
    ///
    /// ```
    /// let c = service_kit::telemetry::TelemetryConfig::new("edge").with_service_version("1.2.3");
    /// assert_eq!(c.service_version, "1.2.3");
    /// ```
    pub fn with_service_version(mut self, version: impl Into<String>) -> Self {
        self.service_version = version.into();
        self
    }

    /// The same configuration exporting to `otlp`.
    ///
    /// ```
    /// use service_kit::telemetry::{Otlp, TelemetryConfig};
    /// assert_eq!(TelemetryConfig::new("a").with_otlp(Otlp::FromEnv).otlp, Some(Otlp::FromEnv));
    /// ```
    pub fn with_otlp(mut self, otlp: Otlp) -> Self {
        self.otlp = Some(otlp);
        self
    }

    /// The same configuration filtering log lines with `directives`
    /// (`RUST_LOG` syntax).
    ///
    /// ```
    /// use service_kit::telemetry::TelemetryConfig;
    /// let c = TelemetryConfig::new("a").with_log_filter("budget_core=debug,info");
    /// assert_eq!(c.log_filter.as_deref(), Some("budget_core=debug,info"));
    /// ```
    pub fn with_log_filter(mut self, directives: impl Into<String>) -> Self {
        self.log_filter = Some(directives.into());
        self
    }

    /// Reads the standard variables: `OTEL_SERVICE_NAME` (else
    /// `default_service_name`), `RUST_LOG`, and exports
    /// ([`Otlp::FromEnv`]) only when `OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and not empty, and
    /// `OTEL_SDK_DISABLED` is not `true`. Empty variables count as unset.
    ///
    /// ```
    /// let c = service_kit::telemetry::TelemetryConfig::from_env("edge");
    /// # let _ = c;
    /// ```
    pub fn from_env(default_service_name: &str) -> Self {
        let var = |name: &str| env::var(name).ok().filter(|v| !v.trim().is_empty());
        let disabled =
            var(OTEL_SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let endpoint =
            var(OTEL_EXPORTER_OTLP_ENDPOINT).or_else(|| var(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT));
        Self {
            service_name: var(OTEL_SERVICE_NAME).unwrap_or_else(|| default_service_name.to_owned()),
            service_version: env!("CARGO_PKG_VERSION").to_owned(),
            otlp: (endpoint.is_some() && !disabled).then_some(Otlp::FromEnv),
            log_filter: var(RUST_LOG),
        }
    }
}

/// Why [`init`] or [`TelemetryGuard::shutdown`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The log filter (`RUST_LOG`) does not parse.
    #[error("invalid log filter")]
    LogFilter(#[source] ParseError),
    /// The OTLP exporter could not be built (a bad endpoint URL).
    #[error("cannot build the OTLP span exporter")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// A global tracing subscriber was already installed.
    #[error("a global tracing subscriber is already installed")]
    SubscriberInstalled(#[source] TryInitError),
    /// Flushing the spans still queued failed.
    #[error("flushing the span exporter failed")]
    Shutdown(#[source] OTelSdkError),
}

/// Keeps the exporter running; [`shutdown`](Self::shutdown) (or dropping
/// it) flushes the spans still queued. Hold it in `main` until the server
/// has stopped.
///
/// # Example
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let telemetry = service_kit::telemetry::init_from_env("checkout")?;
/// // ... serve until a shutdown signal ...
/// telemetry.shutdown()?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard shuts the exporter down"]
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// True when spans are exported (an OTLP endpoint was configured).
    ///
    /// ```no_run
    /// let guard = service_kit::telemetry::init_from_env("edge").unwrap();
    /// println!("exporting spans: {}", guard.is_exporting());
    /// ```
    pub fn is_exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes the queued spans and stops the exporter. Blocks until the
    /// exporter has sent them (or given up).
    ///
    /// ```no_run
    /// service_kit::telemetry::init_from_env("edge").unwrap().shutdown().unwrap();
    /// ```
    pub fn shutdown(mut self) -> Result<(), TelemetryError> {
        match self.provider.take() {
            Some(provider) => provider.shutdown().map_err(TelemetryError::Shutdown),
            None => Ok(()),
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = provider.shutdown();
        }
    }
}

/// [`init`] with [`TelemetryConfig::from_env`]: what a service binary
/// calls first thing in `main`.
///
/// Without `OTEL_EXPORTER_OTLP_ENDPOINT`: log lines only (`RUST_LOG`,
/// default `info`), no exporter, no OpenTelemetry layer. The budget spans
/// are not part of the log lines (unless `RUST_LOG` names their target,
/// [`SPAN_TARGET`]), so with no exporter they stay disabled and cost what
/// they cost without any subscriber. With
/// it: spans at `INFO` and above also go, in batches, over OTLP/HTTP
/// (protobuf) to the collector, named by `OTEL_SERVICE_NAME` or
/// `default_service_name`.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let _telemetry = service_kit::telemetry::init_from_env("checkout")?;
/// tracing::info!("started");
/// # Ok(()) }
/// ```
pub fn init_from_env(default_service_name: &str) -> Result<TelemetryGuard, TelemetryError> {
    init(TelemetryConfig::from_env(default_service_name))
}

/// Installs the global tracing subscriber (log lines filtered by
/// `config.log_filter`, without the budget spans unless it names
/// [`SPAN_TARGET`]; with `config.otlp`, an OpenTelemetry layer at `INFO`
/// exporting in batches), the global W3C
/// trace-context propagator and, when exporting, the global tracer
/// provider.
///
/// Errors when a global subscriber is already installed (a second call),
/// when the filter does not parse, or when the exporter cannot be built.
///
/// ```no_run
/// use service_kit::telemetry::{init, Otlp, TelemetryConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = TelemetryConfig::new("checkout")
///     .with_otlp(Otlp::Endpoint("http://127.0.0.1:4318/v1/traces".into()));
/// let guard = init(config)?;
/// # Ok(()) }
/// ```
pub fn init(config: TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    let filter = log_filter(config.log_filter.as_deref())?;
    let provider = match &config.otlp {
        Some(otlp) => Some(tracer_provider(
            &config.service_name,
            &config.service_version,
            otlp,
        )?),
        None => None,
    };
    let otel = provider
        .as_ref()
        .map(|provider| otel_layer(provider.tracer(INSTRUMENTATION_SCOPE)));
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_filter(filter))
        .with(otel)
        .try_init()
        .map_err(TelemetryError::SubscriberInstalled)?;
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    if let Some(provider) = &provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
    }
    Ok(TelemetryGuard { provider })
}

/// The `tracing-opentelemetry` layer a service exports its traces with:
/// the budget spans only (the server span of each request, the client span
/// of each attempt or refused call; target [`SPAN_TARGET`]), so that one
/// request is one trace: edge server -> edge client -> checkout server ->
/// checkout clients, and no other span (a request-logging layer's, say)
/// starts a trace of its own. Log events at `WARN` and above become events
/// of the span they happen in. No source locations, thread names or
/// busy/idle times on every span.
///
/// For [`init`], and for tests that install their own subscriber with an
/// in-memory exporter.
///
/// ```
/// use opentelemetry::trace::TracerProvider as _;
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
/// let subscriber = tracing_subscriber::registry()
///     .with(service_kit::telemetry::otel_layer(provider.tracer("test")));
/// # drop(subscriber);
/// ```
pub fn otel_layer<S, T>(tracer: T) -> impl Layer<S>
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

/// The log lines' filter: `directives` (default `info`), and the budget
/// spans only when `directives` names [`SPAN_TARGET`]: as the context of
/// every log line they would cost about 2 us per request to format
/// (BENCHMARKS.md, "Tracing cost"), and they go to the traces anyway.
fn log_filter(directives: Option<&str>) -> Result<EnvFilter, TelemetryError> {
    let directives = directives.unwrap_or_default();
    let mut filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .parse(directives)
        .map_err(TelemetryError::LogFilter)?;
    if !directives.contains(SPAN_TARGET) {
        let off = format!("{SPAN_TARGET}=off")
            .parse()
            .map_err(TelemetryError::LogFilter)?;
        filter = filter.add_directive(off);
    }
    Ok(filter)
}

/// A process's `service.instance.id`: its pid and a random suffix, unique
/// among the instances of one service.
fn instance_id() -> String {
    format!("{}-{:08x}", std::process::id(), rand::random::<u32>())
}

/// A batch-exporting tracer provider for `service_name` at
/// `service_version`.
fn tracer_provider(
    service_name: &str,
    service_version: &str,
    otlp: &Otlp,
) -> Result<SdkTracerProvider, TelemetryError> {
    let mut exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary);
    if let Otlp::Endpoint(url) = otlp {
        exporter = exporter.with_endpoint(url.clone());
    }
    let exporter = exporter.build().map_err(TelemetryError::Exporter)?;
    let resource = Resource::builder()
        .with_service_name(service_name.to_owned())
        .with_attributes([
            opentelemetry::KeyValue::new("service.version", service_version.to_owned()),
            opentelemetry::KeyValue::new("service.instance.id", instance_id()),
        ])
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_spans_stay_out_of_the_log_lines_unless_named() {
        let default = log_filter(None).unwrap().to_string();
        assert!(default.contains("budget_core::spans=off"), "{default}");
        let info = log_filter(Some("info")).unwrap().to_string();
        assert!(info.contains("budget_core::spans=off"), "{info}");
        let asked = log_filter(Some("info,budget_core::spans=info"))
            .unwrap()
            .to_string();
        assert!(!asked.contains("=off"), "{asked}");
        assert!(matches!(
            log_filter(Some("budget_core=loud")),
            Err(TelemetryError::LogFilter(_))
        ));
    }

    #[test]
    fn a_config_says_where_spans_go() {
        let c = TelemetryConfig::new("edge")
            .with_otlp(Otlp::Endpoint("http://127.0.0.1:4318/v1/traces".into()))
            .with_log_filter("debug");
        assert_eq!(c.service_name, "edge");
        assert_eq!(c.log_filter.as_deref(), Some("debug"));
        assert!(matches!(c.otlp, Some(Otlp::Endpoint(_))));
    }
}
