use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

use tokio::task::JoinHandle;
use tracing_subscriber::EnvFilter;

use crate::telemetry::TelemetryGuard;
use crate::{StartError, exit_failure, exit_usage};

/// An error and all its sources, joined by `: `, for one-line messages:
/// budget-core's [`error_chain`](budget_core::error_chain), re-exported.
///
/// ```
/// let err = std::io::Error::other("disk on fire");
/// assert_eq!(service_kit::error_chain(&err), "disk on fire");
/// ```
pub use budget_core::error_chain;

/// Structured logs on stderr, filtered by `RUST_LOG` (default `info`); a
/// malformed `RUST_LOG` is reported, not silently dropped.
///
/// ```no_run
/// service_kit::init_tracing();
/// ```
pub fn init_tracing() {
    let filter = match EnvFilter::try_from_default_env() {
        Ok(filter) => filter,
        Err(err) => {
            if std::env::var_os("RUST_LOG").is_some() {
                eprintln!("warning: ignoring malformed RUST_LOG ({err}); logging at info");
            }
            EnvFilter::new("info")
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Logs, and trace export when the standard `OTEL_EXPORTER_OTLP_ENDPOINT`
/// (and `OTEL_SERVICE_NAME`, default `service`) ask for it: see
/// [`telemetry::init_from_env`](crate::telemetry::init_from_env). Without them, log lines only
/// and no exporter. When that cannot be set up (a malformed `RUST_LOG`, an
/// unusable endpoint) the reason is printed and plain logs
/// ([`init_tracing`]) are used instead: telemetry never stops a service.
/// Hand the guard to [`flush_telemetry`] on the way out.
///
/// ```no_run
/// let telemetry = service_kit::init_telemetry("checkout");
/// // ... run ...
/// service_kit::flush_telemetry(telemetry);
/// ```
pub fn init_telemetry(service: &str) -> Option<TelemetryGuard> {
    match crate::telemetry::init_from_env(service) {
        Ok(guard) => Some(guard),
        Err(err) => {
            eprintln!(
                "warning: telemetry not set up ({}); logging to stderr only",
                error_chain(&err)
            );
            init_tracing();
            None
        }
    }
}

/// Flushes the spans still queued for export (if any) before exit.
///
/// ```no_run
/// service_kit::flush_telemetry(service_kit::init_telemetry("edge"));
/// ```
pub fn flush_telemetry(guard: Option<TelemetryGuard>) {
    if let Some(guard) = guard
        && let Err(err) = guard.shutdown()
    {
        eprintln!("warning: flushing telemetry failed: {}", error_chain(&err));
    }
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
///
/// ```no_run
/// # async fn f() {
/// service_kit::shutdown_signal().await;
/// # }
/// ```
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(%err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(err) => {
                tracing::error!(%err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// The `main` of an HTTP service of the chain, after its flags are parsed:
/// sets up logs and trace export ([`init_telemetry`], named `service`),
/// then runs `start` (make the config,
/// bind, spawn the server), then waits for the server to stop, which it does
/// when `start` passed it [`shutdown_signal`].
///
/// Exit codes: `0` when the server stopped cleanly (after `on_stop`, which
/// says so in the service's own log target); `2` when the config is bad
/// ([`StartError::is_config`]); `1` when the socket cannot be bound or the
/// server fails. Every error is one `error: ...` line on stderr.
///
/// ```no_run
/// use std::process::ExitCode;
///
/// use service_kit::{StartError, run_server};
///
/// #[tokio::main]
/// async fn main() -> ExitCode {
///     let start = async {
///         let bound = service_kit::bind("127.0.0.1:0".parse().unwrap(), axum::Router::new()).await?;
///         Ok::<_, StartError>(bound.serve(service_kit::shutdown_signal()))
///     };
///     run_server("demo", start, || tracing::info!("demo stopped")).await
/// }
/// ```
pub async fn run_server<F>(service: &str, start: F, on_stop: impl FnOnce()) -> ExitCode
where
    F: Future<Output = Result<(SocketAddr, JoinHandle<io::Result<()>>), StartError>>,
{
    let telemetry = init_telemetry(service);
    let code = serve_until_stopped(start, on_stop).await;
    flush_telemetry(telemetry);
    code
}

async fn serve_until_stopped<F>(start: F, on_stop: impl FnOnce()) -> ExitCode
where
    F: Future<Output = Result<(SocketAddr, JoinHandle<io::Result<()>>), StartError>>,
{
    let server = match start.await {
        Ok((_, server)) => server,
        Err(err) if err.is_config() => return exit_usage(&err),
        Err(err) => return exit_failure(&err),
    };
    match server.await {
        Ok(Ok(())) => {
            on_stop();
            ExitCode::SUCCESS
        }
        Ok(Err(err)) => exit_failure(&err),
        Err(err) => {
            eprintln!("error: the server task failed: {err}");
            ExitCode::FAILURE
        }
    }
}
