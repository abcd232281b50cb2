//! The core demo: one request's budget spent across three dependencies,
//! with a retry paid from the budget and a call skipped below its floor.
//!
//! The dependencies are simulated (their latencies and answers are fixed
//! below, the time is really spent); the decisions are the real ones of
//! `budget-core`. The chain demo with real services over loopback replaces
//! this once the services exist.

use std::time::Duration;

use budget_core::header::{self, Decoded};
use budget_core::ledger::{Entry, Ledger};
use budget_core::retry::{Decision, DecisionInput, Jitter, Outcome, RetryConfig, sleep_within};
use budget_core::{Budget, floor::Floor};
use budget_examples::table::budget_table;
use http::{HeaderMap, StatusCode};

/// A simulated dependency: its floor and, per attempt, (latency, status).
struct Dependency {
    name: &'static str,
    floor: Duration,
    script: &'static [(u64, u16)],
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // 1. The request arrives saying its caller waits 1200 ms.
    let mut headers = HeaderMap::new();
    headers.insert(header::REQUEST_BUDGET_MS, "1200".parse().expect("digits"));
    let Decoded::Valid { budget, .. } = header::decode(&headers) else {
        unreachable!("the header above is valid")
    };
    let budget = Budget::new(budget);
    let ledger = Ledger::new();
    ledger.record(Entry::ingress(budget.original()));
    let reserve = Duration::from_millis(20);
    let mut retry = RetryConfig::default();
    retry.backoff.jitter = Jitter::None;
    let policy = retry.build().expect("the default retry config is valid");

    let deps = [
        Dependency {
            name: "inventory",
            floor: Duration::from_millis(50),
            script: &[(300, 200)],
        },
        Dependency {
            name: "pricing",
            floor: Duration::from_millis(100),
            script: &[(250, 503), (200, 200)],
        },
        Dependency {
            name: "recommendations",
            floor: Duration::from_millis(1000),
            script: &[(100, 200)],
        },
    ];
    for dep in &deps {
        call(dep, &budget, reserve, &policy, &ledger).await;
    }

    println!(
        "A request with `request-budget-ms: 1200`, three dependencies (simulated latencies):\n"
    );
    println!("Server-Timing: {}\n", ledger.server_timing());
    println!("{}", budget_table(&ledger.server_timing()));
    println!(
        "\nspent {} ms of {} ms; left {} ms",
        budget.elapsed().as_millis(),
        budget.original().as_millis(),
        budget.remaining().as_millis()
    );
}

async fn call(
    dep: &Dependency,
    budget: &Budget,
    reserve: Duration,
    policy: &budget_core::retry::RetryPolicy,
    ledger: &Ledger,
) {
    let floor = Floor::new(dep.floor);
    let mut attempts = 0u32;
    let mut previous_wait = None;
    loop {
        let remaining = budget.remaining().saturating_sub(reserve);
        if let Err(below) = floor.check(remaining) {
            ledger.record(Entry::skip(dep.name, format!("skipped: {below}")));
            return;
        }
        let (latency, status) = dep.script[(attempts as usize).min(dep.script.len() - 1)];
        attempts += 1;
        // The outbound header this attempt would carry.
        let sent = header::encode_ms(remaining);
        let latency = Duration::from_millis(latency).min(remaining);
        tokio::time::sleep(latency).await;
        let status = StatusCode::from_u16(status).expect("a valid status");
        ledger.record(Entry::attempt(dep.name, attempts, latency, status.as_str()));
        println!(
            "{:>16} attempt {attempts}: sent request-budget-ms={} -> {status}",
            dep.name,
            sent.to_str().unwrap_or("?")
        );
        let input = DecisionInput {
            outcome: Outcome::status(status),
            attempts,
            may_retry: true,
            remaining: budget.remaining().saturating_sub(reserve),
            floor,
            previous_wait,
        };
        match policy.decide(&input, None, &mut rand::rng()) {
            Decision::Retry { after } => {
                if sleep_within(after, budget).await.is_err() {
                    return;
                }
                ledger.record(Entry::wait(dep.name, after));
                previous_wait = Some(after);
            }
            Decision::Stop(_) => return,
        }
    }
}
