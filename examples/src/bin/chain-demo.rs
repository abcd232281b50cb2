//! The main demo: the whole chain in one process.
//!
//! `client -> edge -> checkout -> slow-partner (inventory, pricing,
//! recommendations)`, all on ephemeral loopback ports, run through a fixed
//! set of scenarios. For each it prints the status, the time it took and the
//! budget table reconstructed from the `Server-Timing` header edge answers
//! with (both hops: edge's own steps, then checkout's, prefixed
//! `checkout.`). It finishes by itself in a few seconds.
//!
//! When PostgreSQL is installed (`initdb` under `/usr/lib/postgresql/*/bin`
//! or on `PATH`), a throwaway cluster is started and checkout reserves
//! stock in it on every request, so the tables also show `orders-db-queue`
//! and `orders-db.reserve-stock`; otherwise one line says the database
//! step is off, and the demo runs without it.
//!
//! `cargo run -p budget-examples`

use std::net::SocketAddr;
use std::time::Duration;

use budget_examples::table::budget_table;
use checkout::CheckoutConfig;
use edge::EdgeConfig;
use service_kit::BudgetMode;
use service_kit::pg_cluster::Cluster;
use slow_partner::{FaultMode, PartnerConfig, PartnerHandle};
use tokio::time::Instant;

/// One scenario: how the partner behaves for each dependency, the budget
/// the client sends (none: edge's default, 2 s) and the mode of the chain.
struct Scenario {
    title: &'static str,
    shows: &'static str,
    inventory: &'static str,
    pricing: &'static str,
    recommendations: &'static str,
    /// Inventory on the blackholed partner instead of the healthy one.
    blackholed_inventory: bool,
    /// Inventory over gRPC (the partner's `Partner/Call`), not HTTP.
    grpc_inventory: bool,
    budget_ms: Option<u64>,
    mode: BudgetMode,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        title: "healthy",
        shows: "all three dependencies answer; the budget header shrinks hop by hop",
        inventory: "?delay=40ms",
        pricing: "?delay=60ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: false,
        budget_ms: None,
        mode: BudgetMode::On,
    },
    Scenario {
        title: "inventory over gRPC",
        shows: "a gRPC hop: the budget crosses it as grpc-timeout, its attempt is in the same ledger",
        inventory: "?delay=40ms",
        pricing: "?delay=60ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: true,
        budget_ms: None,
        mode: BudgetMode::On,
    },
    Scenario {
        title: "inventory over gRPC, slower than the budget",
        shows: "the gRPC call is cut at the budget: the same honest 504 as over HTTP",
        inventory: "?delay=3s",
        pricing: "?delay=60ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: true,
        budget_ms: Some(800),
        mode: BudgetMode::On,
    },
    Scenario {
        title: "pricing fails once, then succeeds",
        shows: "the retry and its backoff are paid from the same budget",
        inventory: "?delay=40ms",
        pricing: "?script=503@50ms,200@60ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: false,
        budget_ms: None,
        mode: BudgetMode::On,
    },
    Scenario {
        title: "partner slow: recommendations skipped",
        shows: "too little left for the optional call's 1 s floor: not made, answer degraded",
        inventory: "?delay=450ms",
        pricing: "?delay=400ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: false,
        budget_ms: Some(1500),
        mode: BudgetMode::On,
    },
    Scenario {
        title: "partner blackholed",
        shows: "connects time out at the connect cap and the retry stops at the budget: a fast 504",
        inventory: "",
        pricing: "?delay=60ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: true,
        grpc_inventory: false,
        budget_ms: Some(1000),
        mode: BudgetMode::On,
    },
    Scenario {
        title: "partner rate-limits, Retry-After longer than the budget",
        shows: "no sleep that cannot fit: the 429 and its Retry-After reach the client at once",
        inventory: "?delay=40ms",
        pricing: "?status=429&retry_after=30",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: false,
        budget_ms: Some(2000),
        mode: BudgetMode::On,
    },
    Scenario {
        title: "slow partner (2.5 s)",
        shows: "the caller said 1 s: it gets an honest 504 after 1 s",
        inventory: "?delay=40ms",
        pricing: "?delay=2500ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: false,
        budget_ms: Some(1000),
        mode: BudgetMode::On,
    },
    Scenario {
        title: "the same slow partner, --budget-mode off",
        shows: "generous fixed timeouts: the caller waits for the slow partner, whatever it wanted",
        inventory: "?delay=40ms",
        pricing: "?delay=2500ms",
        recommendations: "?delay=80ms",
        blackholed_inventory: false,
        grpc_inventory: false,
        budget_ms: Some(1000),
        mode: BudgetMode::Off,
    },
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let loopback: SocketAddr = "127.0.0.1:0".parse()?;
    let partner = slow_partner::spawn(PartnerConfig::new(loopback)).await?;
    let blackhole =
        slow_partner::spawn(PartnerConfig::new(loopback).with_mode(FaultMode::Blackhole)).await?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let database = start_database().await;
    let database_url = database.as_ref().map(Cluster::url);

    println!("budget: one time budget for the whole call chain");
    println!("client -> edge -> checkout -> slow-partner (inventory, pricing, recommendations)");
    println!("edge default budget 2 s; recommendations optional with a 1 s floor\n");

    let started = Instant::now();
    let mut late = 0;
    for (n, scenario) in SCENARIOS.iter().enumerate() {
        let url = start_chain(scenario, &partner, &blackhole, database_url.as_deref()).await?;
        partner.reset_stats();
        let mut req = client
            .get(&url)
            .header("x-request-id", format!("demo-{}", n + 1));
        if let Some(ms) = scenario.budget_ms {
            req = req.header("request-budget-ms", ms.to_string());
        }
        let t0 = Instant::now();
        let res = req.send().await?;
        late += print_answer(n, scenario, res, t0.elapsed(), &partner).await;
    }
    println!(
        "{} scenarios in {:.1} s; partner work nobody waited for (late, where a budget was sent): {late}",
        SCENARIOS.len(),
        started.elapsed().as_secs_f64(),
    );
    if let Some(cluster) = database {
        tokio::task::spawn_blocking(move || drop(cluster)).await?;
    }
    Ok(())
}

/// Prints scenario `n`'s answer: its status and time, degradations,
/// problem, the budgets the partner received and the budget table.
/// Returns the partner's late work.
async fn print_answer(
    n: usize,
    scenario: &Scenario,
    res: reqwest::Response,
    elapsed: Duration,
    partner: &PartnerHandle,
) -> u64 {
    let status = res.status();
    let retry_after = header(&res, "retry-after");
    let timing = header(&res, "server-timing");
    let body: serde_json::Value = res.json().await.unwrap_or(serde_json::Value::Null);

    println!(
        "== {}. {} ({} mode)",
        n + 1,
        scenario.title,
        mode_name(scenario.mode)
    );
    println!("   {}", scenario.shows);
    let sent = scenario
        .budget_ms
        .map_or("no budget header".to_owned(), |ms| {
            format!("request-budget-ms: {ms}")
        });
    println!(
        "   GET /checkout ({sent}) -> {status} in {} ms",
        elapsed.as_millis()
    );
    if let Some(ra) = retry_after {
        println!("   Retry-After: {ra}");
    }
    if let Some(degraded) = body.get("degraded").and_then(|d| d.as_array())
        && !degraded.is_empty()
    {
        for d in degraded {
            println!(
                "   degraded: {} ({})",
                d["dependency"].as_str().unwrap_or("?"),
                d["reason"].as_str().unwrap_or("?")
            );
        }
    }
    if let Some(title) = body.get("title").and_then(|t| t.as_str()) {
        println!(
            "   problem: {title}: {}",
            body["detail"].as_str().unwrap_or("")
        );
    }
    let budgets = partner_budgets(partner);
    if !budgets.is_empty() {
        println!("   budgets the partner received: {budgets}");
    }
    let scenario_late = partner.stats().late;
    if scenario_late > 0 {
        println!("   partner work that finished after its budget ran out (late): {scenario_late}");
    }
    match timing {
        Some(t) => println!("{}\n", indent(&budget_table(&t))),
        None => println!("   (no Server-Timing)\n"),
    }
    scenario_late
}

/// A throwaway PostgreSQL cluster for checkout's database step, when
/// PostgreSQL is installed; otherwise one line saying why the step is off
/// (the demo does not install anything).
async fn start_database() -> Option<Cluster> {
    if !postgres_installed() {
        println!(
            "database step off: PostgreSQL is not installed (no initdb under \
             /usr/lib/postgresql/*/bin or on PATH)\n"
        );
        return None;
    }
    match tokio::task::spawn_blocking(Cluster::start).await {
        Ok(Ok(cluster)) => {
            println!(
                "database step on: checkout reserves stock in a throwaway PostgreSQL cluster\n"
            );
            Some(cluster)
        }
        Ok(Err(e)) => {
            println!("database step off: the PostgreSQL cluster did not start: {e}\n");
            None
        }
        Err(e) => {
            println!("database step off: the PostgreSQL cluster did not start: {e}\n");
            None
        }
    }
}

/// Whether `initdb` is installed where the cluster harness looks for it.
fn postgres_installed() -> bool {
    let versioned = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .any(|dir| dir.path().join("bin/initdb").is_file());
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("initdb").is_file()));
    versioned || on_path
}

/// Starts checkout (dependencies shaped by the scenario, its database step
/// on `database_url` when given) and edge in front of it; returns edge's
/// `/checkout` URL.
async fn start_chain(
    s: &Scenario,
    partner: &PartnerHandle,
    blackhole: &PartnerHandle,
    database_url: Option<&str>,
) -> Result<String, Box<dyn std::error::Error>> {
    let loopback: SocketAddr = "127.0.0.1:0".parse()?;
    let mut checkout = CheckoutConfig::new(loopback);
    checkout.budget_mode = s.mode;
    let inventory_partner = if s.blackholed_inventory {
        blackhole
    } else {
        partner
    };
    checkout.inventory_url = if s.grpc_inventory {
        format!(
            "grpc://{}/inventory{}",
            inventory_partner.addr(),
            s.inventory
        )
    } else {
        inventory_partner.url(&format!("/inventory{}", s.inventory))
    };
    checkout.inventory.connect_cap = Some(Duration::from_millis(300));
    checkout.pricing_url = partner.url(&format!("/pricing{}", s.pricing));
    checkout.recommendations_url = partner.url(&format!("/recommendations{}", s.recommendations));
    checkout.database_url = database_url.map(str::to_owned);
    let (checkout_addr, _) = checkout::spawn(&checkout, std::future::pending()).await?;
    let mut edge = EdgeConfig::new(loopback, format!("http://{checkout_addr}"));
    edge.budget_mode = s.mode;
    let (edge_addr, _) = edge::spawn(&edge, std::future::pending()).await?;
    Ok(format!("http://{edge_addr}/checkout"))
}

fn header(res: &reqwest::Response, name: &str) -> Option<String> {
    let values: Vec<&str> = res
        .headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// What each call to the partner arrived with, e.g. `/inventory 1985 ms`.
fn partner_budgets(partner: &PartnerHandle) -> String {
    let stats = partner.stats();
    let mut parts = Vec::new();
    for id in stats.ids.values() {
        for call in &id.calls {
            parts.push(match call.budget_ms {
                Some(ms) => format!("{} {ms} ms", call.path),
                None => format!("{} none", call.path),
            });
        }
    }
    parts.join(", ")
}

fn mode_name(mode: BudgetMode) -> &'static str {
    match mode {
        BudgetMode::On => "budget",
        BudgetMode::Off => "naive",
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("   {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
