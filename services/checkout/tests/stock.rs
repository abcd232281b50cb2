//! Checkout's database step against a real PostgreSQL server (a throwaway
//! cluster, `service_kit::pg_cluster`): the reservation is in the ledger in
//! both modes, and in budget mode a statement blocked on a row lock is
//! answered `504` at the request's deadline and stopped on the server.

mod common;

use std::time::Duration;

use budget_core::postgres::tokio_postgres::{self, NoTls};
use common::*;
use service_kit::BudgetMode;
use service_kit::pg_cluster::Cluster;
use slow_partner::FaultMode;
use tokio::time::Instant;

/// A cluster, started off the runtime's threads (it takes about a second).
async fn cluster() -> Cluster {
    tokio::task::spawn_blocking(Cluster::start)
        .await
        .unwrap()
        .expect("a throwaway PostgreSQL cluster starts")
}

/// A session of its own on `cluster`, its connection driven in the
/// background.
async fn session(cluster: &Cluster) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&cluster.url(), NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Statements reserving stock that the server is running now.
async fn active_reservations(observer: &tokio_postgres::Client) -> i64 {
    observer
        .query_one(
            "select count(*) from pg_stat_activity \
             where state = 'active' and query like 'update stock%'",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_the_reservation_is_one_statement_in_the_ledger_in_either_mode() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let cluster = cluster().await;
        for mode in [BudgetMode::On, BudgetMode::Off] {
            let mut config = config(&partner, "", "", "");
            config.budget_mode = mode;
            config.database_url = Some(cluster.url());
            let url = start(&config).await;
            let res = client().get(format!("{url}?sku=7")).send().await.unwrap();
            assert_eq!(res.status(), 200, "{mode:?}");
            let timing = server_timing(&res);
            let names = names(&timing);
            assert!(
                names.contains(&"orders-db.reserve-stock"),
                "{mode:?}: {names:?}"
            );
            assert!(names.contains(&"orders-db-queue"), "{names:?}");
        }
        // Created once, seeded, and reserved twice.
        assert_eq!(cluster.psql("select count(*) from stock").unwrap(), "100");
        assert_eq!(
            cluster
                .psql("select held from stock where sku = 7")
                .unwrap(),
            "2"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_a_statement_blocked_on_a_lock_is_a_504_at_the_deadline_and_stopped_on_the_server() {
    bounded(async {
        let partner = partner(FaultMode::Normal).await;
        let cluster = cluster().await;
        let mut config = config(&partner, "", "", "");
        config.database_url = Some(cluster.url());
        let url = start(&config).await;
        // Warm: the pool has a connection, the label its floor.
        let warm = client().get(&url).send().await.unwrap();
        assert_eq!(warm.status(), 200);

        let locker = session(&cluster).await;
        locker
            .batch_execute("begin; select * from stock where sku = 1 for update")
            .await
            .unwrap();
        let started = Instant::now();
        let res = client()
            .get(&url)
            .header("request-budget-ms", "300")
            .send()
            .await
            .unwrap();
        let took = started.elapsed();
        assert_eq!(res.status(), 504);
        assert!(took < Duration::from_millis(400), "{took:?}");
        let timing = server_timing(&res);
        let reserve = timing
            .iter()
            .find(|m| m.name == "orders-db.reserve-stock")
            .expect("the statement is in the ledger");
        assert_eq!(reserve.desc.as_deref(), Some("timeout"), "{timing:?}");

        tokio::time::sleep(Duration::from_millis(50)).await;
        let observer = session(&cluster).await;
        assert_eq!(
            active_reservations(&observer).await,
            0,
            "the cancel reached the server"
        );
        locker.batch_execute("rollback").await.unwrap();
        partner.shutdown().await;
    })
    .await;
}
