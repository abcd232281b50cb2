//! `postgres::Database` against a real PostgreSQL: a throwaway cluster per
//! test (tests/support/pg_cluster.rs), the evidence read from the server's
//! `pg_stat_activity`, never from the client alone (docs/postgres.md). A
//! statement's span is tested in `postgres_span.rs`, a binary of its own.

mod postgres_common;

use std::time::Duration;

use tokio::time::Instant;

use budget_core::client::CallErrorKind;
use budget_core::floor::{Floor, FloorConfig};
use budget_core::ledger::Entry;
use budget_core::postgres::{Database, DatabaseConfig, QueryError};
use postgres_common::pg_cluster::Cluster;
use postgres_common::{config, db, ms, start, within};

/// The tests that measure time, or load the server for long, one at a
/// time: their figures are the server's, not the test runner's contention.
static TIMED: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A plain connection of the test's own, to look at the server.
async fn observer(cluster: &Cluster) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(&cluster.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// Statements with `marker` in their text running on the server now.
async fn running(observer: &tokio_postgres::Client, marker: &str) -> i64 {
    observer
        .query_one(
            "select count(*) from pg_stat_activity where state = 'active' \
             and query like '%' || $1 || '%' and pid <> pg_backend_pid()",
            &[&marker],
        )
        .await
        .unwrap()
        .get(0)
}

/// How long after `since` the server stopped running `marker`'s statement
/// (polled every 2 ms, for at most 2 s).
async fn gone_after(observer: &tokio_postgres::Client, marker: &str, since: Instant) -> Duration {
    let limit = Instant::now() + Duration::from_secs(2);
    while running(observer, marker).await > 0 && Instant::now() < limit {
        tokio::time::sleep(ms(2)).await;
    }
    since.elapsed()
}

fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 99).div_ceil(100) - 1]
}

/// Goal 1: a statement past its budget is gone from the server within
/// 50 ms (p99 of 100), and its caller gets the 504 of a dependency out of
/// time, the ledger naming the statement.
#[tokio::test]
async fn a_statement_past_its_budget_is_gone_from_the_server_within_50ms() {
    let _one_at_a_time = TIMED.lock().await;
    let cluster = start();
    let db = db(&cluster, 2);
    let observer = observer(&cluster).await;
    let mut after = Vec::new();
    for _ in 0..100 {
        let budget = ms(60);
        let started = Instant::now();
        let sql = "select pg_sleep(5) /* past-budget */";
        let (result, ledger) = within(budget, db.query("sleepy", sql, &[])).await;
        let err = result.unwrap_err();
        let QueryError::Call(call) = &err else {
            panic!("{err:?}")
        };
        assert!(call.is_timeout(), "{call:?}");
        assert_eq!(err.problem().status, 504);
        let entries = ledger.entries();
        assert!(
            entries
                .iter()
                .any(|e| matches!(e, Entry::Attempt { dependency, outcome, .. }
                if dependency == "orders-db.sleepy" && outcome == "timeout")),
            "{entries:?}"
        );
        after.push(gone_after(&observer, "past-budget", started + budget).await);
    }
    let p99 = p99(after);
    eprintln!("gone from the server after the deadline: p99 {p99:?} (100 statements)");
    assert!(p99 <= ms(50), "p99 {p99:?} after the deadline");
}

/// Goal 1, the other half: a request dropped (its client gone) takes its
/// statement with it, on the server, within 50 ms (p99 of 50).
#[tokio::test]
async fn a_dropped_request_takes_its_statement_off_the_server_within_50ms() {
    let _one_at_a_time = TIMED.lock().await;
    let cluster = start();
    let db = db(&cluster, 2);
    let observer = observer(&cluster).await;
    let mut after = Vec::new();
    for _ in 0..50 {
        let db = db.clone();
        let task = tokio::spawn(async move {
            let sql = "select pg_sleep(5) /* dropped-request */";
            within(ms(5000), db.query("sleepy", sql, &[])).await
        });
        // Running on the server before the request goes.
        let limit = Instant::now() + Duration::from_secs(2);
        while running(&observer, "dropped-request").await == 0 && Instant::now() < limit {
            tokio::time::sleep(ms(2)).await;
        }
        let dropped = Instant::now();
        task.abort();
        after.push(gone_after(&observer, "dropped-request", dropped).await);
    }
    let p99 = p99(after);
    eprintln!("gone from the server after the drop: p99 {p99:?} (50 requests)");
    assert!(p99 <= ms(50), "p99 {p99:?} after the drop");
}

/// Goal 2: cancels raced against completions on one pooled connection,
/// 10 000 times: no cancel reaches a later statement, and no connection
/// comes back from the pool broken (in a transaction, or failing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_never_reaches_a_later_statement() {
    let _one_at_a_time = TIMED.lock().await;
    let cluster = start();
    let db = db(&cluster, 1);
    let (mut stopped, mut answered) = (0u32, 0u32);
    for i in 0..10_000i64 {
        // A statement of about its budget: some finish, some are stopped,
        // some between the two (the race).
        let sleep = format!("{:.4}", f64::from(u32::try_from(i % 7).unwrap()) * 0.0005);
        let sql = "select pg_sleep($1::float8)";
        let sleep: f64 = sleep.parse().unwrap();
        let in_transaction = i % 5 == 0;
        let target = within(ms(2), async {
            if in_transaction {
                let mut conn = db.connection().await?;
                let mut tx = conn.begin().await?;
                tx.execute("mark", "set local application_name = 'in-tx'", &[])
                    .await?;
                tx.query("target", sql, &[&sleep]).await?;
                tx.commit().await
            } else {
                db.query("target", sql, &[&sleep]).await.map(drop)
            }
        })
        .await
        .0;
        match target {
            Ok(()) => answered += 1,
            Err(_) => stopped += 1,
        }
        // The next statement, with time to spare: never cancelled, and on
        // a connection in no transaction.
        let (next, _) = within(
            ms(2000),
            db.query(
                "next",
                "select $1::int8, current_setting('application_name') <> 'in-tx'",
                &[&i],
            ),
        )
        .await;
        let rows =
            next.unwrap_or_else(|e| panic!("iteration {i}: the next statement failed: {e:?}"));
        assert_eq!(rows[0].get::<_, i64>(0), i);
        assert!(
            rows[0].get::<_, bool>(1),
            "iteration {i}: the connection came back in a transaction"
        );
    }
    eprintln!(
        "10 000 races: {stopped} targets stopped, {answered} answered, no later statement cancelled"
    );
    // The race ran both ways.
    assert!(
        stopped > 1000 && answered > 1000,
        "stopped {stopped}, answered {answered}"
    );
}

/// Goal 3: the wait for a connection is paid from the budget and in the
/// ledger (`orders-db-queue`), and ends at the floor with a 503.
#[tokio::test]
async fn the_pool_wait_is_in_the_ledger_and_ends_at_the_floor() {
    let cluster = start();
    let mut config = config(&cluster, 1);
    config.floor = FloorConfig::Fixed(Floor::new(ms(100)));
    let db = Database::connect(&config).unwrap();
    let held = db.connection().await.unwrap();
    let release = tokio::spawn(async move {
        tokio::time::sleep(ms(150)).await;
        drop(held);
    });
    let (rows, ledger) = within(ms(1000), db.query("one", "select 1::int4", &[])).await;
    assert_eq!(rows.unwrap()[0].get::<_, i32>(0), 1);
    release.await.unwrap();
    let waited = ledger.entries().into_iter().find_map(|e| match e {
        Entry::Local { name, duration, .. } if name == "orders-db-queue" => Some(duration),
        _ => None,
    });
    assert!(
        waited.is_some_and(|w| w >= ms(100)),
        "{:?}",
        ledger.entries()
    );

    // Held for longer than the budget allows: refused when what is left
    // reaches the floor (300 - 100), not at the deadline.
    let _held = db.connection().await.unwrap();
    let started = Instant::now();
    let (result, ledger) = within(ms(300), db.query("one", "select 1::int4", &[])).await;
    let took = started.elapsed();
    let err = result.unwrap_err();
    let QueryError::Call(call) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(call.kind(), CallErrorKind::NoPermit);
    // Out of budget waiting, as the engine's permit wait: a 504.
    assert_eq!(err.problem().status, 504);
    assert!(took >= ms(190) && took < ms(290), "{took:?}");
    assert!(
        ledger
            .entries()
            .iter()
            .any(|e| matches!(e, Entry::Skip { dependency, .. } if dependency == "orders-db"))
    );
}

/// Goal 3: a statement below its floor is not sent.
#[tokio::test]
async fn a_statement_below_its_floor_is_not_sent() {
    let cluster = start();
    let mut config = config(&cluster, 1);
    config
        .statements
        .insert("report".into(), FloorConfig::Fixed(Floor::new(ms(500))));
    let db = Database::connect(&config).unwrap();
    let observer = observer(&cluster).await;
    let (result, ledger) = within(
        ms(200),
        db.query("report", "select 1::int4 /* below-floor */", &[]),
    )
    .await;
    let err = result.unwrap_err();
    let QueryError::Call(call) = &err else {
        panic!("{err:?}")
    };
    assert!(call.is_below_floor(), "{call:?}");
    let calls: i64 = observer
        .query_one("select count(*) from pg_stat_activity where query like '%below-floor%' and pid <> pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(calls, 0);
    assert!(
        ledger
            .entries()
            .iter()
            .any(|e| matches!(e, Entry::Skip { dependency, reason }
        if dependency == "orders-db.report" && reason.contains("< floor 500ms"))),
        "{:?}",
        ledger.entries()
    );
    // Other statements keep the database's floor (none).
    let (rows, _) = within(ms(200), db.query("cheap", "select 1::int4", &[])).await;
    assert!(rows.is_ok());
}

/// Goal 3: the server's limit is what is left less the reserve, a step
/// up; with no budget to spend, the connection's own setting comes back.
#[tokio::test]
async fn the_servers_limit_is_set_from_what_is_left() {
    let cluster = start();
    let db = db(&cluster, 1);
    let show = "select current_setting('statement_timeout')";
    let (rows, _) = within(ms(1000), db.query("show", show, &[])).await;
    let limit: String = rows.unwrap()[0].get(0);
    let limit: u64 = limit
        .trim_end_matches("ms")
        .parse()
        .unwrap_or_else(|_| panic!("{limit}"));
    assert!((990..=1125).contains(&limit), "{limit}");
    let rows = db.query("show", show, &[]).await.unwrap();
    assert_eq!(
        rows[0].get::<_, String>(0),
        "0",
        "no budget: the connection's own"
    );
}

/// Bad input: a user's own limit is never widened, in their transaction
/// (`SET LOCAL`) or on the connection (`options=-c statement_timeout`), and
/// the server stopping a statement by it is the same 504.
#[tokio::test]
async fn a_users_own_limit_is_never_widened() {
    let cluster = start();
    let db = db(&cluster, 1);
    let (result, _) = within(ms(2000), async {
        let mut conn = db.connection().await?;
        let mut tx = conn.begin().await?;
        tx.execute("limit", "set local statement_timeout = 50", &[])
            .await?;
        let shown: String = tx
            .query("show", "select current_setting('statement_timeout')", &[])
            .await?[0]
            .get(0);
        let slept = tx.query("sleepy", "select pg_sleep(0.3)", &[]).await;
        Ok::<_, QueryError>((shown, slept))
    })
    .await;
    let (shown, slept) = result.unwrap();
    assert_eq!(shown, "50ms");
    let err = slept.unwrap_err();
    assert_eq!(err.problem().status, 504, "{err:?}");

    let mut config = config(&cluster, 1);
    config.url = format!("{}?options=-c%20statement_timeout%3D100", cluster.url());
    let capped = Database::connect(&config).unwrap();
    let (rows, _) = within(
        ms(2000),
        capped.query("show", "select current_setting('statement_timeout')", &[]),
    )
    .await;
    assert_eq!(rows.unwrap()[0].get::<_, String>(0), "100ms");
}

/// Bad input: a statement that fails to parse, a label that is not a
/// token, a pool of no connections: typed errors, nothing panics.
#[tokio::test]
async fn bad_statements_labels_and_pools_are_typed_errors() {
    let cluster = start();
    let db = db(&cluster, 1);
    let (result, _) = within(ms(1000), db.query("typo", "selec 1", &[])).await;
    let err = result.unwrap_err();
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::SYNTAX_ERROR),
        "{err:?}"
    );
    assert_eq!(err.problem().status, 502);
    // The connection is fine after it.
    let (rows, _) = within(ms(1000), db.query("one", "select 1::int4", &[])).await;
    assert!(rows.is_ok());
    let (result, _) = within(ms(1000), db.query("not a token", "select 1", &[])).await;
    assert!(matches!(result, Err(QueryError::Config(_))), "{result:?}");
    let mut config = config(&cluster, 0);
    assert_eq!(Database::connect(&config).unwrap_err().field(), "pool_size");
    config.pool_size = 1;
    config.url = "not a url at all ===".into();
    assert_eq!(Database::connect(&config).unwrap_err().field(), "url");
}

/// Bad input: a server that refuses connections is a fast connect error
/// the breaker hears; one that accepts and never answers ends with the
/// budget (a connect timeout), not later.
#[tokio::test]
async fn a_server_that_refuses_or_never_answers_ends_within_the_budget() {
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut refused = DatabaseConfig::new(
        "orders-db",
        format!("postgres://postgres@127.0.0.1:{port}/postgres"),
    );
    let mut breaker = budget_core::breaker::BreakerConfig::default();
    breaker.failure_threshold = 3;
    refused.breaker = Some(breaker);
    let db = Database::connect(&refused).unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        let (result, _) = within(ms(1000), db.query("one", "select 1", &[])).await;
        let QueryError::Call(call) = result.unwrap_err() else {
            panic!()
        };
        assert!(call.is_connect(), "{call:?}");
        assert!(started.elapsed() < ms(200));
    }
    let (result, ledger) = within(ms(1000), db.query("one", "select 1", &[])).await;
    let QueryError::Call(call) = result.unwrap_err() else {
        panic!()
    };
    assert!(call.is_circuit_open(), "{call:?}: {:?}", ledger.entries());

    // Accepts (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let db = Database::connect(&DatabaseConfig::new(
        "orders-db",
        format!("postgres://postgres@127.0.0.1:{port}/postgres"),
    ))
    .unwrap();
    let started = Instant::now();
    let (result, ledger) = within(ms(300), db.query("one", "select 1", &[])).await;
    let took = started.elapsed();
    let QueryError::Call(call) = result.unwrap_err() else {
        panic!()
    };
    assert!(call.is_timeout(), "{call:?}");
    assert!(took < ms(400), "{took:?}");
    // The connect's time is shown once: as the connect that timed out,
    // not also as a wait for the pool.
    let entries = ledger.entries();
    assert!(
        entries
            .iter()
            .any(|e| matches!(e, Entry::Attempt { dependency, outcome, .. }
            if dependency == "orders-db" && outcome == "connect-timeout")),
        "{entries:?}"
    );
    assert!(
        !entries
            .iter()
            .any(|e| matches!(e, Entry::Local { name, .. } if name == "orders-db-queue")),
        "{entries:?}"
    );
    drop(silent);
}

/// Goal 3: a statement's attempts are a database's metric
/// (`db_client_operation_duration_seconds`, OpenTelemetry's
/// `db.client.operation.duration`), labelled by system, database and
/// label, and outcome; not an HTTP client's.
#[cfg(feature = "metrics")]
#[test]
fn a_statements_attempts_are_a_database_metric() {
    use metrics_exporter_prometheus::PrometheusBuilder;

    let cluster = start();
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let rendered = metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let db = db(&cluster, 1);
            let (rows, _) = within(ms(1000), db.query("one", "select 1::int4", &[])).await;
            assert!(rows.is_ok());
            let (refused, _) = within(ms(1000), db.query("typo", "selec 1", &[])).await;
            assert!(refused.is_err());
        });
        handle.render()
    });
    let line = |label: &str, outcome: &str| {
        rendered.lines().find(|l| {
            l.starts_with("db_client_operation_duration_seconds_count")
                && l.contains(&format!("dependency=\"orders-db.{label}\""))
                && l.contains(&format!("outcome=\"{outcome}\""))
                && l.contains("db_system_name=\"postgresql\"")
        })
    };
    assert!(
        line("one", "200").is_some_and(|l| l.ends_with(" 1")),
        "{rendered}"
    );
    assert!(line("typo", "400").is_some(), "{rendered}");
    assert!(
        !rendered.contains("http_client_request_duration_seconds_count{dependency=\"orders-db"),
        "{rendered}"
    );
}
