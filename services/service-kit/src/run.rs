use std::error::Error as StdError;

use tracing_subscriber::EnvFilter;

/// An error and all its sources, joined by `: `, for one-line messages.
///
/// ```
/// let err = std::io::Error::other("disk on fire");
/// assert_eq!(service_kit::error_chain(&err), "disk on fire");
/// ```
pub fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(source) = next {
        out.push_str(": ");
        out.push_str(&source.to_string());
        next = source.source();
    }
    out
}

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
