//! An axum handler whose SQL spends the request's budget
//! (`budget_core::postgres`, docs/postgres.md).
//!
//! The program starts a throwaway PostgreSQL (Debian's `postgresql`
//! package), serves `POST /reserve` behind the budget layer, and sends it
//! two requests: one the database answers in time, and one whose row
//! another session holds locked, which comes back as a fast `504` while the
//! statement is cancelled on the server (`pg_stat_activity` says so). Both
//! answers' `Server-Timing` show where the time went. It exits by itself.
//!
//! ```sh
//! cargo run -p budget-examples --bin axum_postgres
//! ```

use std::error::Error;
use std::time::Duration;

use axum::{Router, extract::State, routing::post};
use budget_core::postgres::{Database, DatabaseConfig, QueryError, tokio_postgres};
use budget_core::server::ServerConfig;
use service_kit::pg_cluster::Cluster;
use tokio::time::Instant;

/// The handler: one statement, labelled `reserve-stock`.
async fn reserve(State(db): State<Database>) -> Result<String, QueryError> {
    let n = db
        .execute(
            "reserve-stock",
            "update stock set held = held + 1 where sku = $1",
            &[&1i64],
        )
        .await?;
    Ok(format!("{n} reserved\n"))
}

/// A plain session of the program's own, beside the service's pool.
async fn session(url: &str) -> Result<tokio_postgres::Client, Box<dyn Error>> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    Ok(client)
}

/// Sends `POST /reserve` with a budget of `budget_ms` and prints the answer.
async fn call(http: &reqwest::Client, base: &str, budget_ms: u64) -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    let res = http
        .post(format!("{base}/reserve"))
        .header("request-budget-ms", budget_ms.to_string())
        .send()
        .await?;
    let took = started.elapsed();
    let status = res.status();
    let timing = res
        .headers()
        .get("server-timing")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    println!(
        "budget {budget_ms} ms -> {status} in {} ms",
        took.as_millis()
    );
    println!("  Server-Timing: {timing}");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let cluster = Cluster::start()?;
    let url = cluster.url();
    let setup = session(&url).await?;
    setup
        .batch_execute("create table stock (sku int8 primary key, held int8 not null default 0); insert into stock values (1, 0)")
        .await?;
    let db = Database::connect(&DatabaseConfig::new("orders-db", url.clone()))?;
    let app = Router::new()
        .route("/reserve", post(reserve))
        .with_state(db)
        .layer(ServerConfig::default().layer()?);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();

    println!("1. the database answers in time:");
    call(&http, &base, 500).await?;

    println!("2. another session holds the row locked:");
    let mut locker = session(&url).await?;
    let lock = locker.transaction().await?;
    lock.execute("select * from stock where sku = 1 for update", &[])
        .await?;
    call(&http, &base, 300).await?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let still: i64 = setup
        .query_one(
            "select count(*) from pg_stat_activity where state = 'active' and query like 'update stock%'",
            &[],
        )
        .await?
        .get(0);
    println!("  50 ms later, `update stock` statements still running on the server: {still}");
    lock.commit().await?;
    Ok(())
}
