//! The budget reaches the database: [`Database`], a PostgreSQL pool whose
//! statements are calls of the outbound engine like any HTTP or gRPC call
//! (docs/postgres.md).
//!
//! - **The wait for a connection** is paid from the budget: it ends when
//!   what is left reaches the statement's floor (`503`, "no connection"),
//!   and shows in the ledger as `NAME-queue;dur=..`.
//! - **A statement below its floor is not sent**: the floor is fixed, or
//!   learned per statement label (`NAME.label` in the ledger).
//! - **The server's limit is set from what is left**: `statement_timeout`
//!   is the attempt's budget (already less the request's per-hop reserve),
//!   rounded up a step (docs/postgres.md, "The server's limit"), never wider than the
//!   connection's own; in the caller's transaction it is local to it and
//!   never wider than the transaction's own.
//! - **A statement whose caller stopped is stopped on the server**: past
//!   its deadline, or dropped with its request, it is cancelled with the
//!   protocol's cancel request, confirmed before its connection is used
//!   again, so a cancel never reaches a later statement (docs/postgres.md,
//!   "Cancels").
//! - **`57014`** (stopped by its limit or a cancel) is the `504` of a
//!   dependency that ran out of time; connection failures feed the
//!   database's breaker; a statement the server refused (syntax, a
//!   constraint) is [`QueryError::Sql`], not the database's health.
//!
//! # Example
//!
//! ```no_run
//! # #[cfg(feature = "server")] mod example {
//! use axum::{Router, extract::State, routing::post};
//! use budget_core::postgres::{Database, DatabaseConfig, QueryError};
//! use budget_core::server::ServerConfig;
//!
//! async fn reserve(State(db): State<Database>) -> Result<String, QueryError> {
//!     // The request's budget, less the reserve, is what this may take.
//!     let held = db
//!         .execute("reserve-stock", "update stock set held = held + 1 where sku = $1", &[&42i64])
//!         .await?;
//!     Ok(format!("{held} reserved"))
//! }
//!
//! fn app() -> Result<Router, Box<dyn std::error::Error>> {
//!     let db = Database::connect(&DatabaseConfig::new(
//!         "orders-db",
//!         "postgres://app@127.0.0.1:5432/orders",
//!     ))?;
//!     let layer = ServerConfig::default().layer()?;
//!     Ok(Router::new().route("/reserve", post(reserve)).with_state(db).layer(layer))
//! }
//! # }
//! ```

mod cancel;
mod config;
mod connection;
mod error;
mod limit;
mod span;
mod transport;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use deadpool_postgres::{Object, ObjectId, Pool};
use tokio_postgres::Row;

use crate::breaker::CircuitBreaker;
use crate::config::ConfigError;
use crate::context;
use crate::floor::{Floor, FloorConfig};
use crate::outbound::resolve::{CallDefaults, Own};
use crate::outbound::{Deadline, Dependency, Plan, TimeoutMode};
use crate::retry::RetryConfig;
use cancel::{Stopper, Target};
use transport::ConnState;

pub use config::{DEFAULT_CANCEL_TIMEOUT, DEFAULT_POOL_SIZE, DatabaseConfig};
pub use connection::{Connection, Transaction};
pub use error::QueryError;
pub use transport::Params;
/// The driver and pool this module runs on, at the versions it was built
/// with: their types (`Row`, `ToSql`, `Pool`) are the ones its API takes.
pub use {deadpool_postgres, tokio_postgres};

mod checkout;

/// The most statement labels one database tracks: each is a dependency
/// with its own floor, metrics and ledger name, so labels are the
/// program's constants, not values from a request.
pub const MAX_LABELS: usize = 256;

/// A PostgreSQL database whose statements spend the request's budget: see
/// the [module docs](self). Cheap to clone.
///
/// ```no_run
/// use budget_core::postgres::{Database, DatabaseConfig};
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let db = Database::connect(&DatabaseConfig::new("orders-db", "postgres://app@127.0.0.1/orders"))?;
/// let rows = db.query("ping", "select 1::int4", &[]).await?;
/// assert_eq!(rows[0].get::<_, i32>(0), 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

struct Shared {
    name: Arc<str>,
    pool: Pool,
    defaults: CallDefaults,
    breaker: Option<Arc<CircuitBreaker>>,
    floor: FloorConfig,
    floors: std::collections::BTreeMap<String, FloorConfig>,
    statements: RwLock<HashMap<String, Arc<Dependency>>>,
    stopper: Arc<Stopper>,
    fixed: Option<Duration>,
    /// What is known of each pooled connection's `statement_timeout`
    /// while it is in the pool.
    states: Mutex<HashMap<ObjectId, ConnState>>,
    pool_size: usize,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("name", &self.shared.name)
            .field("pool", &self.shared.pool.status())
            .finish_non_exhaustive()
    }
}

impl Database {
    /// A database from `config`: its pool (connections are made when
    /// first needed, so this needs no server), breaker and floors.
    ///
    /// # Errors
    ///
    /// The first invalid field: a name or label that is not a token, a
    /// URL tokio-postgres cannot read or that asks for TLS, an empty pool.
    ///
    /// ```
    /// use budget_core::postgres::{Database, DatabaseConfig};
    /// let err = Database::connect(&DatabaseConfig::new("orders-db", "mysql://x")).unwrap_err();
    /// assert_eq!(err.field(), "url");
    /// ```
    pub fn connect(config: &DatabaseConfig) -> Result<Self, ConfigError> {
        config.check()?;
        let pg: tokio_postgres::Config = config
            .url
            .parse()
            .map_err(|e| ConfigError::new("url", format!("is not a PostgreSQL URL: {e}")))?;
        if pg.get_ssl_mode() == tokio_postgres::config::SslMode::Require {
            return Err(ConfigError::new(
                "url",
                "asks for TLS (sslmode=require), which is not supported",
            ));
        }
        let target = Target::of(&pg)?;
        let manager = deadpool_postgres::Manager::from_config(
            pg,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| ConfigError::new("pool_size", e.to_string()))?;
        Self::from_parts(config, pool, target)
    }

    fn from_parts(
        config: &DatabaseConfig,
        pool: Pool,
        target: Target,
    ) -> Result<Self, ConfigError> {
        let name: Arc<str> = Arc::from(config.name.as_str());
        let breaker = config
            .breaker
            .map(|c| {
                c.build()
                    .map(|policy| Arc::new(CircuitBreaker::new(&*name, policy)))
            })
            .transpose()
            .map_err(|e| e.within("breaker"))?;
        for (label, floor) in &config.statements {
            floor
                .build()
                .map_err(|e| e.within(label).within("statements"))?;
        }
        config.floor.build().map_err(|e| e.within("floor"))?;
        Ok(Self {
            shared: Arc::new(Shared {
                stopper: Arc::new(Stopper {
                    target,
                    timeout: config.cancel_timeout,
                    name: Arc::clone(&name),
                }),
                name,
                pool,
                defaults: CallDefaults {
                    mode: config.mode,
                    fixed_timeout: config.fixed_timeout,
                    default_budget: config.default_budget,
                    forward: false,
                    deadline: Deadline::None,
                },
                breaker,
                floor: config.floor,
                floors: config.statements.clone(),
                statements: RwLock::new(HashMap::new()),
                fixed: (config.mode == TimeoutMode::Fixed).then_some(config.fixed_timeout),
                states: Mutex::new(HashMap::new()),
                pool_size: config.pool_size,
            }),
        })
    }

    /// The database's name.
    ///
    /// ```
    /// use budget_core::postgres::{Database, DatabaseConfig};
    /// let db = Database::connect(&DatabaseConfig::new("orders-db", "postgres://127.0.0.1/x")).unwrap();
    /// assert_eq!(db.name(), "orders-db");
    /// ```
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The pool, for what this module does not cover (`COPY`, listening).
    /// A connection taken from it directly keeps the last
    /// `statement_timeout` a statement of this module set: `RESET
    /// statement_timeout` before using it for long work.
    ///
    /// ```
    /// use budget_core::postgres::{Database, DatabaseConfig};
    /// let db = Database::connect(&DatabaseConfig::new("orders-db", "postgres://127.0.0.1/x")).unwrap();
    /// assert_eq!(db.pool().status().max_size, budget_core::postgres::DEFAULT_POOL_SIZE);
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.shared.pool
    }

    /// Statement `label`'s floor now (`None` before its first statement).
    ///
    /// ```
    /// use budget_core::postgres::{Database, DatabaseConfig};
    /// let db = Database::connect(&DatabaseConfig::new("orders-db", "postgres://127.0.0.1/x")).unwrap();
    /// assert!(db.current_floor("reserve").is_none());
    /// ```
    pub fn current_floor(&self, label: &str) -> Option<Floor> {
        let statements = self
            .shared
            .statements
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        statements.get(label).map(|dep| dep.floor.current().floor)
    }

    /// The rows of statement `sql`, labelled `label`, on a connection
    /// taken for it: [`Connection::query`] after [`connection`](Self::connection).
    ///
    /// # Errors
    ///
    /// [`QueryError`]: not run, stopped, or refused by the server.
    ///
    /// ```no_run
    /// # async fn f(db: budget_core::postgres::Database) -> Result<(), budget_core::postgres::QueryError> {
    /// let rows = db.query("find-order", "select id from orders where id = $1", &[&7i64]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query(
        &self,
        label: &str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, QueryError> {
        let dep = self.statement(label)?;
        let mut conn = self.checkout(&dep).await?;
        conn.query(label, sql, params).await
    }

    /// The number of rows statement `sql` changed, on a connection taken
    /// for it.
    ///
    /// # Errors
    ///
    /// As [`query`](Self::query).
    ///
    /// ```no_run
    /// # async fn f(db: budget_core::postgres::Database) -> Result<(), budget_core::postgres::QueryError> {
    /// let n = db.execute("reserve", "update stock set held = held + 1 where sku = $1", &[&42i64]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn execute(
        &self,
        label: &str,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, QueryError> {
        let dep = self.statement(label)?;
        let mut conn = self.checkout(&dep).await?;
        conn.execute(label, sql, params).await
    }

    /// A connection for several statements or a transaction, taken under
    /// the request's budget with the database's own floor.
    ///
    /// # Errors
    ///
    /// [`QueryError::Call`]: below the floor, no connection in the budget,
    /// or the server could not be reached.
    ///
    /// ```no_run
    /// # async fn f(db: budget_core::postgres::Database) -> Result<(), budget_core::postgres::QueryError> {
    /// let mut conn = db.connection().await?;
    /// let mut tx = conn.begin().await?;
    /// tx.execute("reserve", "update stock set held = held + 1 where sku = $1", &[&42i64]).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connection(&self) -> Result<Connection, QueryError> {
        let dep = self.statement("connection")?;
        self.checkout(&dep).await
    }

    /// The dependency of statement `label`: made at its first use.
    fn statement(&self, label: &str) -> Result<Arc<Dependency>, QueryError> {
        let shared = &self.shared;
        if let Some(dep) = shared
            .statements
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(label)
        {
            return Ok(Arc::clone(dep));
        }
        config::check_label(label)?;
        let mut statements = shared
            .statements
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(dep) = statements.get(label) {
            return Ok(Arc::clone(dep));
        }
        if statements.len() >= MAX_LABELS {
            return Err(ConfigError::new(
                "statements",
                format!("`{label}` is one statement label more than {MAX_LABELS}"),
            )
            .into());
        }
        let name: Arc<str> = Arc::from(format!("{}.{label}", shared.name));
        let floor = shared.floors.get(label).unwrap_or(&shared.floor).build()?;
        // One attempt: a statement is not sent twice by this module (the
        // caller knows whether it may be).
        let policy = RetryConfig {
            max_attempts: 1,
            ..RetryConfig::default()
        }
        .build()?;
        let mut dep = Dependency::single(Arc::clone(&name), policy);
        dep.floor = floor;
        dep.endpoints =
            crate::outbound::endpoints::Endpoints::single(&name, shared.breaker.clone());
        let dep = Arc::new(dep);
        statements.insert(label.to_owned(), Arc::clone(&dep));
        Ok(dep)
    }

    /// How a statement made now spends time: `None` when it has no budget
    /// to spend (outside any request, no default).
    fn plan(&self) -> Option<Plan> {
        let cx = context::current();
        let resolved = self
            .shared
            .defaults
            .resolve(Own::default(), cx.as_ref())
            .ok()?;
        let mut plan = resolved.plan(query_method(), false);
        // Its attempts' spans and metrics are a database's, not HTTP's.
        plan.rpc_system = Some(crate::telemetry::semconv::DB_SYSTEM_POSTGRESQL);
        Some(plan)
    }

    fn stopper(&self) -> &Arc<Stopper> {
        &self.shared.stopper
    }

    fn fixed(&self) -> Option<Duration> {
        self.shared.fixed
    }

    /// What is known of `conn`'s setting, taken while it is out of the pool.
    fn take_state(&self, conn: &Object) -> ConnState {
        let mut states = self
            .shared
            .states
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        states.remove(&Object::id(conn)).unwrap_or_default()
    }

    /// What is known of `conn`'s setting, kept as it goes back to the pool.
    fn keep_state(&self, conn: &Object, state: ConnState) {
        let mut states = self
            .shared
            .states
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Connections the pool closed while idle leave their entry: a
        // bound keeps them from adding up (a forgotten entry costs its
        // connection one `SET` and one read).
        if states.len() >= self.shared.pool_size.saturating_mul(4) {
            states.clear();
        }
        states.insert(Object::id(conn), state);
    }

    /// Rolls back `conn`'s open transaction and gives it back (or closes it).
    fn roll_back(&self, conn: Object) {
        cancel::hand_back(conn, Arc::clone(&self.shared.stopper), true);
    }
}

/// The method a statement's attempt spans and metrics show.
fn query_method() -> http::Method {
    http::Method::from_bytes(b"QUERY").unwrap_or(http::Method::POST)
}
