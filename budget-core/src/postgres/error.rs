//! [`QueryError`]: a statement that was not run, was stopped, or that the
//! server refused.

use crate::config::ConfigError;
use crate::outbound::error::CallError;
use crate::problem::{Problem, ProblemKind};

/// Why a statement gave no rows.
///
/// ```
/// use budget_core::postgres::QueryError;
/// let lost = QueryError::Lost;
/// assert_eq!(lost.problem().status, 502);
/// assert!(lost.code().is_none());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// Not run (below its floor, the circuit open, no connection in the
    /// budget), stopped (its budget ran out: the server stopped it too), or
    /// its connection failed: the same error, and the same `504`/`503`
    /// problem, as an HTTP dependency's ([`CallError`]).
    #[error(transparent)]
    Call(#[from] CallError),
    /// The server ran the statement and refused it: a syntax error, a
    /// constraint, a serialization failure. Not the database's health:
    /// the breaker does not count it.
    #[error("statement `{label}` failed: {source}")]
    Sql {
        /// The statement's label.
        label: String,
        /// The driver's error, with the server's SQLSTATE.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement label that is not a token, or one too many.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// This connection went with a statement that was stopped (its cancel
    /// and cleanup own it now): take another from the database.
    #[error("the connection went with a stopped statement; take another")]
    Lost,
}

impl QueryError {
    /// The server's SQLSTATE, when the server refused the statement.
    ///
    /// ```
    /// assert!(budget_core::postgres::QueryError::Lost.code().is_none());
    /// ```
    pub fn code(&self) -> Option<&tokio_postgres::error::SqlState> {
        match self {
            QueryError::Sql { source, .. } => source.code(),
            _ => None,
        }
    }

    /// The problem to answer with: the call's (`504` out of budget, `503`
    /// circuit open or no connection, ...), `502 dependency-failed` for a
    /// statement the server refused, a bad label or a lost connection.
    ///
    /// ```
    /// use budget_core::config::ConfigError;
    /// use budget_core::postgres::QueryError;
    /// let bad = QueryError::from(ConfigError::new("statements", "too many"));
    /// assert_eq!(bad.problem().status, 502);
    /// ```
    pub fn problem(&self) -> Problem {
        match self {
            QueryError::Call(e) => e.problem(),
            QueryError::Sql { label, source } => {
                let code = source.code().map_or("", |c| c.code());
                Problem::new(
                    ProblemKind::DependencyFailed,
                    format!("statement `{label}` failed ({code})"),
                )
                .with_dependency(label.clone())
            }
            QueryError::Config(_) | QueryError::Lost => {
                Problem::new(ProblemKind::DependencyFailed, self.to_string())
            }
        }
    }
}

#[cfg(feature = "server")]
impl axum::response::IntoResponse for QueryError {
    fn into_response(self) -> axum::response::Response {
        self.problem().into_response()
    }
}
