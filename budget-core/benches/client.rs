//! The client wrapper's cost in a 2-hop chain on loopback, side by side
//! with raw reqwest.
//!
//! bench (reqwest) -> front (axum + BudgetLayer) -> backend (axum)
//!
//! Two fronts differ only in how their handler calls the backend: a raw
//! `reqwest::Client` (`get(url).send().await?.bytes().await?`), or a
//! [`BudgetClient`] (`get("").send().await?`: budget read from the
//! context, floor check, header stamped, body buffered, attempt and ledger
//! recorded). Throughput is measured with 64 requests in flight per
//! iteration, and with one at a time. After criterion's groups, a paired
//! measurement prints the throughput ratio with both variants timed in the
//! same window (alternating rounds), which is robust to a drifting machine.
//!
//! `cargo bench -p budget-core --features client,server --bench client -- --warm-up-time 1 --measurement-time 5`

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::server::ServerConfig;
use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::future::join_all;
use tokio::time::Instant;

const IN_FLIGHT: usize = 64;

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn backend() -> &'static str {
    "{\"price\":42}"
}

async fn via_reqwest(
    State((http, url)): State<(reqwest::Client, String)>,
) -> Result<Bytes, StatusCode> {
    let res = http
        .get(&url)
        .send()
        .await
        .map_err(|_| StatusCode::BAD_GATEWAY)?;
    res.bytes().await.map_err(|_| StatusCode::BAD_GATEWAY)
}

async fn via_budget_client(
    State(client): State<BudgetClient>,
) -> Result<Bytes, budget_core::client::CallError> {
    Ok(client.get("").send().await?.error_for_status()?.bytes())
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (raw_url, budget_url) = rt.block_on(async {
        let backend = serve(Router::new().route("/", get(backend))).await;
        let backend_url = format!("http://{backend}/");
        let layer = ServerConfig::default().layer().unwrap();
        let raw = Router::new()
            .route("/", get(via_reqwest))
            .with_state((reqwest::Client::new(), backend_url.clone()))
            .layer(layer.clone());
        let client = DependencyConfig::new("backend", backend_url)
            .build()
            .unwrap();
        let budget = Router::new()
            .route("/", get(via_budget_client))
            .with_state(client)
            .layer(layer);
        (
            format!("http://{}/", serve(raw).await),
            format!("http://{}/", serve(budget).await),
        )
    });
    let driver = reqwest::Client::new();
    let call = |url: &str| {
        let req = driver.get(url).header("request-budget-ms", "2000");
        async move {
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200);
            res.bytes().await.unwrap()
        }
    };

    // Both chains reach a steady state (connection pools filled, allocator
    // warm) before either is measured, so the order does not matter.
    rt.block_on(async {
        for _ in 0..100 {
            for url in [&raw_url, &budget_url] {
                join_all((0..IN_FLIGHT).map(|_| call(url))).await;
            }
        }
    });

    for (group_name, in_flight) in [
        ("client/chain_64_in_flight", IN_FLIGHT),
        ("client/chain_one_at_a_time", 1),
    ] {
        let mut group = c.benchmark_group(group_name);
        group.throughput(Throughput::Elements(in_flight as u64));
        for (name, url) in [("raw_reqwest", &raw_url), ("budget_client", &budget_url)] {
            group.bench_function(name, |b| {
                b.to_async(&rt)
                    .iter(|| join_all((0..in_flight).map(|_| call(url))))
            });
        }
        group.finish();
    }

    // Criterion times the two variants in different windows; on a shared
    // VM that drifts by tens of percent over a minute, their ratio is
    // noise. The paired ratio times both in the same window instead.
    if std::env::args().any(|a| a == "--bench") {
        for (label, in_flight, batches) in
            [("64 in flight", IN_FLIGHT, 20), ("one at a time", 1, 200)]
        {
            let ratios = rt.block_on(paired(&call, &raw_url, &budget_url, in_flight, batches));
            let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
            println!(
                "client/paired {label}: budget_client / raw_reqwest throughput = {:.3} \
                 (median of {ROUNDS} rounds; quartiles {:.3} to {:.3})",
                q(0.5),
                q(0.25),
                q(0.75)
            );
        }
    }
}

/// Rounds in the paired measurement.
const ROUNDS: usize = 41;

/// The throughput ratio budget/raw, per round: `batches` batches of each
/// variant back to back, the order alternating between rounds. Sorted.
async fn paired<F, Fut>(
    call: &F,
    raw: &str,
    budget: &str,
    in_flight: usize,
    batches: usize,
) -> Vec<f64>
where
    F: Fn(&str) -> Fut,
    Fut: std::future::Future<Output = Bytes>,
{
    let mut ratios = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let mut spent = [Duration::ZERO; 2];
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let url = [raw, budget][which];
            let start = Instant::now();
            for _ in 0..batches {
                join_all((0..in_flight).map(|_| call(url))).await;
            }
            spent[which] = start.elapsed();
        }
        // Same work in each: throughput ratio = inverse time ratio.
        ratios.push(spent[0].as_secs_f64() / spent[1].as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    ratios
}

criterion_group!(benches, bench);
criterion_main!(benches);
