//! A statement as the engine's [`Transport`]: each attempt sets the
//! server's limit from what it was given, runs the statement armed (a
//! dropped attempt cancels it on the server), and says what came back.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::Object;
use http::{HeaderMap, StatusCode};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::cancel::{Armed, Stopper};
use super::limit::{SET_LOCAL, server_limit};
use crate::clock::WallClock;
use crate::outbound::{AttemptError, AttemptSpec, Head, HeaderRules, Transport};
use crate::retry::{Outcome, TransportKind};

/// A statement's parameters, as tokio-postgres takes them.
pub type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// What a statement is run for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    /// Its rows.
    Query,
    /// The rows it changed.
    Execute,
}

/// What a statement gave.
#[derive(Debug)]
pub(crate) enum Output {
    Rows(Vec<Row>),
    Affected(u64),
}

impl Output {
    /// Its rows (none for a statement run for its count).
    pub(crate) fn into_rows(self) -> Vec<Row> {
        match self {
            Output::Rows(rows) => rows,
            Output::Affected(_) => Vec::new(),
        }
    }

    /// The rows it changed (for rows asked for, how many came).
    pub(crate) fn into_affected(self) -> u64 {
        match self {
            Output::Affected(n) => n,
            Output::Rows(rows) => u64::try_from(rows.len()).unwrap_or(u64::MAX),
        }
    }
}

/// Where a statement runs, for its server limit and its cleanup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// On its own (autocommit): the limit is the session's.
    Outside,
    /// The `BEGIN` of the caller's transaction: stopped, it may have
    /// opened it, so its cleanup rolls back.
    Begin,
    /// In the caller's transaction: the limit is local to it.
    Inside,
}

/// What the engine knows of a connection's `statement_timeout` between
/// its statements.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConnState {
    /// The connection's own default (`0`: none), once read.
    pub(crate) default_ms: Option<u64>,
    /// What the session has now, when known.
    pub(crate) current_ms: Option<u64>,
}

/// No answer to the statement.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The server stopped it (`57014`: its limit, or a cancel).
    Stopped(tokio_postgres::Error),
    /// The connection failed under it.
    Lost(tokio_postgres::Error),
    /// The connection went with an earlier stopped statement.
    NoConnection,
}

/// One statement on one connection.
pub(crate) struct Statement<'a> {
    pub(crate) slot: Mutex<Option<Object>>,
    pub(crate) state: Mutex<ConnState>,
    pub(crate) stopper: &'a Arc<Stopper>,
    /// The server's limit in fixed mode (`None` in budget mode, where each
    /// attempt's budget gives it).
    pub(crate) fixed: Option<Duration>,
    pub(crate) scope: Scope,
    pub(crate) sql: &'a str,
    pub(crate) params: Params<'a>,
    pub(crate) op: Op,
}

impl Statement<'_> {
    /// The connection back, and what is known of its setting.
    pub(crate) fn into_parts(self) -> (Option<Object>, ConnState) {
        let slot = self
            .slot
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        (slot, state)
    }

    /// Runs the statement with the server's limit set from `left` (`None`:
    /// the connection's own default), outside the engine as well (a
    /// statement with no budget to spend).
    pub(crate) async fn run(
        &self,
        left: Option<Duration>,
    ) -> Result<Result<Output, tokio_postgres::Error>, Failure> {
        let conn = lock(&self.slot).take().ok_or(Failure::NoConnection)?;
        let mut state = *lock(&self.state);
        let in_transaction = self.scope != Scope::Outside;
        let armed = Armed::new(conn, Arc::clone(self.stopper), in_transaction);
        let result = match armed.conn() {
            Some(conn) => self.limited(conn, &mut state, left).await,
            None => return Err(Failure::NoConnection),
        };
        let conn = armed.disarm();
        match result {
            // Stopped by a limit of the server's (the caller's own, or a
            // role's default): its timer may have left a stop pending for
            // the next statement, so the connection is cleaned first.
            Err(e) if e.code() == Some(&SqlState::QUERY_CANCELED) => {
                if let Some(conn) = conn {
                    super::cancel::hand_back(conn, Arc::clone(self.stopper), in_transaction);
                }
                Err(Failure::Stopped(e))
            }
            // No answer from the server: the connection is not trusted again.
            Err(e) if e.as_db_error().is_none() => {
                drop(conn.map(Object::take));
                Err(Failure::Lost(e))
            }
            answered => {
                *lock(&self.slot) = conn;
                *lock(&self.state) = state;
                Ok(answered)
            }
        }
    }

    /// Sets the server's limit when it must change, then runs the
    /// statement.
    async fn limited(
        &self,
        conn: &Object,
        state: &mut ConnState,
        left: Option<Duration>,
    ) -> Result<Output, tokio_postgres::Error> {
        let default_ms = match state.default_ms {
            Some(ms) => ms,
            None => {
                let ms = super::connection::read_default(conn).await?;
                state.default_ms = Some(ms);
                ms
            }
        };
        let limit = left.map(|left| server_limit(left, default_ms));
        if self.scope == Scope::Inside {
            // Local to the transaction, and never wider than its own.
            if let Some(limit) = limit {
                let set = conn.prepare_cached(SET_LOCAL).await?;
                let ms = i64::try_from(limit).unwrap_or(i64::MAX);
                conn.query_one(&set, &[&ms]).await?;
            }
        } else {
            let want = limit.unwrap_or(default_ms);
            if state.current_ms != Some(want) {
                state.current_ms = None;
                conn.batch_execute(&format!("set statement_timeout = {want}"))
                    .await?;
                state.current_ms = Some(want);
            }
        }
        let prepared = conn.prepare_cached(self.sql).await?;
        match self.op {
            Op::Query => conn.query(&prepared, self.params).await.map(Output::Rows),
            Op::Execute => conn
                .execute(&prepared, self.params)
                .await
                .map(Output::Affected),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Transport for Statement<'_> {
    type Answer = Result<Output, tokio_postgres::Error>;
    type Error = Failure;

    /// A statement carries no headers.
    fn stamp(&self, _: &mut HeaderMap, _: &HeaderRules, _: Option<Duration>) {}

    async fn send(&self, spec: AttemptSpec, _: &HeaderRules) -> Result<Self::Answer, Failure> {
        self.run(spec.budget.or(self.fixed)).await
    }

    fn classify(&self, answer: &Self::Answer, _: &dyn WallClock) -> Outcome {
        Outcome::status(match answer {
            Ok(_) => StatusCode::OK,
            Err(e) => status_of(e.code()),
        })
    }

    /// A statement's answer has no HTTP head.
    fn head<'a>(&self, _: &'a Self::Answer) -> Option<Head<'a>> {
        None
    }

    fn classify_error(&self, failure: Failure) -> AttemptError {
        match failure {
            // The server's limit or the caller's cancel: out of time.
            Failure::Stopped(e) => AttemptError::new(TransportKind::Timeout, e),
            Failure::Lost(e) => AttemptError::new(TransportKind::Reset, e),
            Failure::NoConnection => AttemptError::neutral(
                TransportKind::Other,
                "the connection went with a stopped statement",
            ),
        }
    }
}

/// How the engine reads a statement the server refused: the server's own
/// trouble (out of connections or memory, shutting down, a system error, a
/// connection failure) is a `503` its breaker counts; anything else (the
/// statement's syntax, a constraint, a conflict) is the statement's, a
/// `400` it does not.
fn status_of(code: Option<&SqlState>) -> StatusCode {
    let class = code.map_or("", |c| c.code().get(..2).unwrap_or(""));
    let server = matches!(class, "08" | "53" | "58" | "XX")
        || code.is_some_and(|c| c.code().starts_with("57P"));
    if server {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::BAD_REQUEST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_trouble_is_a_503_the_statements_a_400() {
        for code in [
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CONNECTION_FAILURE,
        ] {
            assert_eq!(
                status_of(Some(&code)),
                StatusCode::SERVICE_UNAVAILABLE,
                "{code:?}"
            );
        }
        for code in [
            SqlState::SYNTAX_ERROR,
            SqlState::UNIQUE_VIOLATION,
            SqlState::T_R_SERIALIZATION_FAILURE,
        ] {
            assert_eq!(status_of(Some(&code)), StatusCode::BAD_REQUEST, "{code:?}");
        }
    }
}
