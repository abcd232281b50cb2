//! What a statement through [`Database`] costs over the bare driver, on a
//! real server (a throwaway cluster on loopback), one connection, `select 1`.
//!
//! - `bare`: a deadpool-postgres pool of one, one `Object` taken once,
//!   `prepare_cached` + `query` per statement.
//! - `database-conn`: one [`Connection`] taken once, `conn.query` per
//!   statement in a request scope with a fresh 2 s budget: the usual
//!   case, the ladder step unchanged, so no `SET statement_timeout`.
//! - `bare-pool`: the bare driver taking the pooled object per statement.
//! - `database`: `db.query` per statement (the connection taken each time,
//!   as a handler does), fresh 2 s budget: the peer of `bare-pool`.
//! - `database-new-step`: the worst case, on the connection taken once:
//!   budgets of 2 s and 1 s in turn, so the ladder step changes every time
//!   and each statement sends its `SET statement_timeout` first.
//!
//! Every case runs on its own pool of one (a held connection would
//! starve a pool shared with a per-statement case), on a current-thread
//! runtime: the bench and the connection's task on one thread, the server
//! on the other core, without cross-thread wake-ups adding noise. After
//! criterion's groups, a paired measurement prints each ratio with both
//! sides timed in the same window (alternating rounds).
//!
//! `cargo bench -p budget-core --features postgres --bench postgres -- --warm-up-time 2 --measurement-time 10`

#[path = "../tests/support/pg_cluster.rs"]
#[allow(dead_code, missing_docs)]
mod pg_cluster;

use std::time::Duration;

use budget_core::Budget;
use budget_core::context::RequestContext;
use budget_core::postgres::deadpool_postgres::{
    self, Manager, ManagerConfig, Object, Pool, RecyclingMethod,
};
use budget_core::postgres::{Connection, Database, DatabaseConfig, tokio_postgres};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::sync::Mutex;
use tokio::time::Instant;

const SQL: &str = "select 1";
/// The usual request's budget.
const BUDGET: Duration = Duration::from_secs(2);
/// The other budget of the worst case: a different ladder step from 2 s.
const OTHER_BUDGET: Duration = Duration::from_secs(1);

/// A deadpool-postgres pool of one, configured as [`Database`]'s is.
fn bare_pool(url: &str) -> Pool {
    let manager = Manager::from_config(
        url.parse().unwrap(),
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(1)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .unwrap()
}

fn database(url: &str) -> Database {
    let mut config = DatabaseConfig::new("db", url);
    config.pool_size = 1;
    Database::connect(&config).unwrap()
}

/// The cases' fixtures: each its own pool of one.
struct Fixture {
    /// `bare`: the object taken once.
    object: Mutex<Object>,
    /// `bare-pool`.
    pool: Pool,
    /// `database-conn`, `database-new-step`: the connection taken once.
    conn: Mutex<Connection>,
    /// `database`.
    db: Database,
}

#[derive(Clone, Copy, Debug)]
enum Case {
    Bare,
    DatabaseConn,
    BarePool,
    Database,
    DatabaseNewStep,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Bare => "bare",
            Case::DatabaseConn => "database-conn",
            Case::BarePool => "bare-pool",
            Case::Database => "database",
            Case::DatabaseNewStep => "database-new-step",
        }
    }
}

async fn bare_statement(obj: &Object) {
    let stmt = obj.prepare_cached(SQL).await.unwrap();
    let rows = obj.query(&stmt, &[]).await.unwrap();
    assert_eq!(rows.len(), 1);
}

/// `iters` statements of `case`, timed.
async fn run(fx: &Fixture, case: Case, iters: u64) -> Duration {
    match case {
        Case::Bare => {
            let obj = fx.object.lock().await;
            let start = Instant::now();
            for _ in 0..iters {
                bare_statement(&obj).await;
            }
            start.elapsed()
        }
        Case::BarePool => {
            let start = Instant::now();
            for _ in 0..iters {
                bare_statement(&fx.pool.get().await.unwrap()).await;
            }
            start.elapsed()
        }
        Case::DatabaseConn | Case::DatabaseNewStep => {
            let mut conn = fx.conn.lock().await;
            let start = Instant::now();
            for i in 0..iters {
                let budget = match case {
                    Case::DatabaseNewStep if i % 2 == 1 => OTHER_BUDGET,
                    _ => BUDGET,
                };
                let rows = RequestContext::new(Budget::new(budget))
                    .scope(conn.query("one", SQL, &[]))
                    .await
                    .unwrap();
                assert_eq!(rows.len(), 1);
            }
            start.elapsed()
        }
        Case::Database => {
            let start = Instant::now();
            for _ in 0..iters {
                let rows = RequestContext::new(Budget::new(BUDGET))
                    .scope(fx.db.query("one", SQL, &[]))
                    .await
                    .unwrap();
                assert_eq!(rows.len(), 1);
            }
            start.elapsed()
        }
    }
}

fn bench(c: &mut Criterion) {
    let cluster = pg_cluster::Cluster::start().expect("a throwaway PostgreSQL cluster");
    let url = cluster.url();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fx = rt.block_on(async {
        let object_pool = bare_pool(&url);
        let object = object_pool.get().await.unwrap();
        let conn = RequestContext::new(Budget::new(BUDGET))
            .scope(database(&url).connection())
            .await
            .unwrap();
        Fixture {
            object: Mutex::new(object),
            pool: bare_pool(&url),
            conn: Mutex::new(conn),
            db: database(&url),
        }
    });
    // Every connection made, every statement prepared, before any timing.
    rt.block_on(async {
        for case in CASES {
            run(&fx, case, 1000).await;
        }
    });

    let mut group = c.benchmark_group("postgres/select_1");
    for case in CASES {
        group.bench_function(case.name(), |b| {
            b.to_async(&rt).iter_custom(|iters| run(&fx, case, iters))
        });
    }
    group.finish();

    // Criterion times each case in its own window; on a shared VM the
    // machine drifts between windows by more than the difference sought.
    // The paired ratio times both sides in the same window instead.
    if std::env::args().any(|a| a == "--bench") {
        for (ours, peer) in [
            (Case::DatabaseConn, Case::Bare),
            (Case::Database, Case::BarePool),
            (Case::DatabaseNewStep, Case::Bare),
        ] {
            let ratios = rt.block_on(paired(&fx, ours, peer));
            let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
            println!(
                "postgres/paired {} / {}: time per statement = {:.3} \
                 (median of {ROUNDS} rounds of {PER_ROUND}; quartiles {:.3} to {:.3})",
                ours.name(),
                peer.name(),
                q(0.5),
                q(0.25),
                q(0.75)
            );
        }
    }
    drop(fx);
    drop(cluster);
}

const CASES: [Case; 5] = [
    Case::Bare,
    Case::DatabaseConn,
    Case::BarePool,
    Case::Database,
    Case::DatabaseNewStep,
];

/// Rounds in the paired measurement.
const ROUNDS: usize = 41;
/// Statements of each side per round.
const PER_ROUND: u64 = 2000;

/// The time ratio `ours / peer` per round, the order alternating between
/// rounds. Sorted.
async fn paired(fx: &Fixture, ours: Case, peer: Case) -> Vec<f64> {
    let mut ratios = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let (a, b) = if round % 2 == 0 {
            let a = run(fx, ours, PER_ROUND).await;
            (a, run(fx, peer, PER_ROUND).await)
        } else {
            let b = run(fx, peer, PER_ROUND).await;
            (run(fx, ours, PER_ROUND).await, b)
        };
        ratios.push(a.as_secs_f64() / b.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    ratios
}

criterion_group!(benches, bench);
criterion_main!(benches);
