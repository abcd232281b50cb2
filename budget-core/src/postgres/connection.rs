//! [`Connection`]: a pooled connection taken under the request's budget,
//! whose statements are calls of the engine; [`Transaction`]: the
//! caller's own transaction on one.

use std::sync::{Arc, Mutex};

use deadpool_postgres::Object;
use tokio_postgres::Row;
use tracing::Instrument;

use super::Database;
use super::error::QueryError;
use super::limit::READ_DEFAULT;
use super::transport::{ConnState, Failure, Op, Output, Params, Scope, Statement};
use crate::clock::SystemClock;
use crate::outbound::error::CallError;
use crate::outbound::{Call, Transport};

/// A connection from a [`Database`]'s pool, taken under the request's
/// budget (the wait is in the ledger as `NAME-queue`). Its statements
/// spend what is left; a statement stopped (its budget ran out, its
/// caller dropped it) takes the connection with it to be cancelled and
/// cleaned, and the connection's later statements are
/// [`QueryError::Lost`]. Dropped, it goes back to the pool.
///
/// ```no_run
/// use budget_core::postgres::{Database, DatabaseConfig, QueryError};
///
/// async fn two(db: &Database) -> Result<i64, QueryError> {
///     let mut conn = db.connection().await?;
///     let a: i64 = conn.query("count", "select count(*) from orders", &[]).await?[0].get(0);
///     let b: i64 = conn.query("count", "select count(*) from stock", &[]).await?[0].get(0);
///     Ok(a + b)
/// }
/// ```
pub struct Connection {
    db: Database,
    conn: Option<Object>,
    state: ConnState,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("database", &self.db.name())
            .field("held", &self.conn.is_some())
            .finish()
    }
}

impl Connection {
    pub(super) fn new(db: Database, conn: Object) -> Self {
        let state = db.take_state(&conn);
        Self {
            db,
            conn: Some(conn),
            state,
        }
    }

    /// The rows of statement `sql` with `params`, labelled `label` in the
    /// ledger (`NAME.label`), the logs and the metrics.
    ///
    /// # Errors
    ///
    /// [`QueryError`]: not run, stopped, or refused by the server.
    ///
    /// ```no_run
    /// # async fn f(conn: &mut budget_core::postgres::Connection) -> Result<(), budget_core::postgres::QueryError> {
    /// let rows = conn.query("find-order", "select id from orders where id = $1", &[&7i64]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query(
        &mut self,
        label: &str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, QueryError> {
        Ok(self
            .run(label, sql, params, Op::Query, Scope::Outside)
            .await?
            .into_rows())
    }

    /// The number of rows statement `sql` changed.
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// ```no_run
    /// # async fn f(conn: &mut budget_core::postgres::Connection) -> Result<(), budget_core::postgres::QueryError> {
    /// let n = conn.execute("reserve", "update stock set held = held + 1 where sku = $1", &[&42i64]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn execute(
        &mut self,
        label: &str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, QueryError> {
        Ok(self
            .run(label, sql, params, Op::Execute, Scope::Outside)
            .await?
            .into_affected())
    }

    /// Begins a transaction (`BEGIN`, labelled `begin`). Its statements
    /// set the server's limit locally (`set_config(.., true)`), never
    /// wider than the transaction's own (a `SET LOCAL statement_timeout`
    /// of the caller's is kept). Dropped without
    /// [`commit`](Transaction::commit), it is rolled back.
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// ```no_run
    /// # async fn f(conn: &mut budget_core::postgres::Connection) -> Result<(), budget_core::postgres::QueryError> {
    /// let mut tx = conn.begin().await?;
    /// tx.execute("reserve", "update stock set held = held + 1 where sku = $1", &[&42i64]).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn begin(&mut self) -> Result<Transaction<'_>, QueryError> {
        self.run("begin", "begin", &[], Op::Execute, Scope::Begin)
            .await?;
        Ok(Transaction {
            conn: self,
            open: true,
        })
    }

    /// Runs one statement through the engine (or as the bare driver runs
    /// it, with no budget to spend), in its span.
    async fn run(
        &mut self,
        label: &str,
        sql: &str,
        params: Params<'_>,
        op: Op,
        scope: Scope,
    ) -> Result<Output, QueryError> {
        let dep = self.db.statement(label)?;
        let conn = self.conn.take().ok_or(QueryError::Lost)?;
        let statement = Statement {
            slot: Mutex::new(Some(conn)),
            state: Mutex::new(self.state),
            stopper: self.db.stopper(),
            fixed: self.db.fixed(),
            scope,
            sql,
            params,
            op,
        };
        let span = super::span::statement(self.db.name(), label, sql);
        let answer = match self.db.plan() {
            Some(plan) => {
                let call = Call {
                    dep: &dep,
                    clock: &SystemClock,
                    plan,
                    transport: &statement,
                };
                call.run()
                    .instrument(span.clone())
                    .await
                    .map(|finished| finished.response)
                    .map_err(QueryError::Call)
            }
            None => bare(&statement, &dep.name).instrument(span.clone()).await,
        };
        let (conn, state) = statement.into_parts();
        (self.conn, self.state) = (conn, state);
        let answer = answer.and_then(|answered| {
            answered.map_err(|source| QueryError::Sql {
                label: label.to_owned(),
                source,
            })
        });
        super::span::ended(&span, &answer);
        answer
    }
}

/// A statement with no budget to spend (outside any request, no default):
/// as the bare driver runs it, with the connection's own limit; a failure
/// read as the engine reads it.
async fn bare(
    statement: &Statement<'_>,
    name: &Arc<str>,
) -> Result<Result<Output, tokio_postgres::Error>, QueryError> {
    match statement.run(None).await {
        Ok(answered) => Ok(answered),
        Err(Failure::NoConnection) => Err(QueryError::Lost),
        Err(failure) => {
            let failed = statement.classify_error(failure);
            Err(CallError::from_transport(Arc::clone(name), failed.kind)
                .with_boxed_source(Some(failed.source))
                .into())
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(conn) = &self.conn {
            self.db.keep_state(conn, self.state);
        }
    }
}

/// A transaction on a [`Connection`]: see [`Connection::begin`].
#[derive(Debug)]
pub struct Transaction<'c> {
    conn: &'c mut Connection,
    open: bool,
}

impl Transaction<'_> {
    /// As [`Connection::query`], in the transaction.
    ///
    /// # Errors
    ///
    /// As [`Connection::query`]; after a stopped statement the transaction
    /// is gone (rolled back by the cleanup).
    ///
    /// ```no_run
    /// # async fn f(tx: &mut budget_core::postgres::Transaction<'_>) -> Result<(), budget_core::postgres::QueryError> {
    /// let rows = tx.query("held", "select held from stock where sku = $1 for update", &[&42i64]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query(
        &mut self,
        label: &str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, QueryError> {
        Ok(self
            .conn
            .run(label, sql, params, Op::Query, Scope::Inside)
            .await?
            .into_rows())
    }

    /// As [`Connection::execute`], in the transaction.
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// ```no_run
    /// # async fn f(tx: &mut budget_core::postgres::Transaction<'_>) -> Result<(), budget_core::postgres::QueryError> {
    /// tx.execute("reserve", "update stock set held = held + 1 where sku = $1", &[&42i64]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn execute(
        &mut self,
        label: &str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, QueryError> {
        Ok(self
            .conn
            .run(label, sql, params, Op::Execute, Scope::Inside)
            .await?
            .into_affected())
    }

    /// Commits (`COMMIT`, labelled `commit`). A commit stopped by the
    /// budget may or may not have taken effect, as with any driver.
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// ```no_run
    /// # async fn f(tx: budget_core::postgres::Transaction<'_>) -> Result<(), budget_core::postgres::QueryError> {
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn commit(mut self) -> Result<(), QueryError> {
        // Still open until the statement ran: refused (no budget left)
        // or failed, the transaction is rolled back when dropped.
        self.conn
            .run("commit", "commit", &[], Op::Execute, Scope::Inside)
            .await?;
        self.open = false;
        Ok(())
    }

    /// Rolls back (`ROLLBACK`, labelled `rollback`).
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// ```no_run
    /// # async fn f(tx: budget_core::postgres::Transaction<'_>) -> Result<(), budget_core::postgres::QueryError> {
    /// tx.rollback().await?;
    /// # Ok(()) }
    /// ```
    pub async fn rollback(mut self) -> Result<(), QueryError> {
        // Still open until the statement ran: refused (no budget left)
        // or failed, the transaction is rolled back when dropped.
        self.conn
            .run("rollback", "rollback", &[], Op::Execute, Scope::Inside)
            .await?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        // Rolled back before anyone else gets the connection: the cleanup
        // a stopped statement gets, with nothing to cancel.
        if let Some(conn) = self.conn.conn.take() {
            self.conn.db.roll_back(conn);
        }
    }
}

/// The connection's own `statement_timeout` (`0`: none), read once per
/// connection.
pub(super) async fn read_default(conn: &Object) -> Result<u64, tokio_postgres::Error> {
    let row = conn.query_one(READ_DEFAULT, &[]).await?;
    let text: String = row.try_get(0)?;
    // `reset_val` of an integer setting is its integer in milliseconds.
    Ok(text.trim().parse().unwrap_or_else(|_| {
        tracing::warn!(value = %text, "unreadable statement_timeout default: taken as none");
        0
    }))
}
