//! What the PostgreSQL test binaries share: a throwaway cluster
//! (support/pg_cluster.rs), a `Database` on it, and a request's scope.

#![allow(dead_code)]

#[path = "../support/pg_cluster.rs"]
pub mod pg_cluster;

use std::future::Future;
use std::time::Duration;

use budget_core::Budget;
use budget_core::context::RequestContext;
use budget_core::ledger::Ledger;
use budget_core::postgres::{Database, DatabaseConfig};
use pg_cluster::Cluster;

pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

pub fn start() -> Cluster {
    Cluster::start().expect("a throwaway PostgreSQL cluster (Debian's postgresql package)")
}

pub fn config(cluster: &Cluster, pool_size: usize) -> DatabaseConfig {
    let mut config = DatabaseConfig::new("orders-db", cluster.url());
    config.pool_size = pool_size;
    config
}

pub fn db(cluster: &Cluster, pool_size: usize) -> Database {
    Database::connect(&config(cluster, pool_size)).unwrap()
}

/// `fut` inside a request whose budget is `budget`; its ledger.
pub async fn within<F: Future>(budget: Duration, fut: F) -> (F::Output, Ledger) {
    let cx = RequestContext::new(Budget::new(budget));
    let ledger = cx.ledger().clone();
    (cx.scope(fut).await, ledger)
}
