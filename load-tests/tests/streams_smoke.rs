//! The smoke tests of the stream and batch scenarios: `reconnect-storm`
//! with 50 clients and `batch-outage` with a 3 s outage (1.5 s of `503`,
//! then 1.5 s of batches applied and their answers lost), through the
//! command line, every mode, asserting the shape of their goals. Full runs
//! are not part of the test suite; BENCHMARKS.md has their commands.

mod support;

use std::time::Duration;

use load_tests::batch_outage::BatchReport;
use load_tests::output::markdown;
use load_tests::report::RunReport;
use load_tests::storm::{StormReport, StormRuns, StormTarget};

/// One smoke run at a time: each starts its own partner and clients.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn run(args: &[&str]) -> (String, Vec<RunReport>) {
    let _one = ONE_AT_A_TIME.lock().await;
    let (invocation, reports) = support::run_bounded(args, Duration::from_secs(240)).await;
    (markdown(&invocation, "smoke", &reports), reports)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_reconnect_storm_brings_every_client_back_without_a_gap_and_budget_spreads_them() {
    let (md, reports) = run(&["--scenario", "reconnect-storm", "--requests", "50"]).await;
    // Of the default modes, the scenario runs budget, naive and peer.
    assert_eq!(
        reports.iter().map(|r| r.mode.as_str()).collect::<Vec<_>>(),
        ["budget", "naive", "peer"]
    );
    let storm = |mode: &str, target: StormTarget| -> StormReport {
        let r = reports.iter().find(|r| r.mode == mode).unwrap();
        let runs = r.section::<StormRuns>().expect("a storm section");
        runs.of(target).expect("both targets").clone()
    };
    for (mode, target) in [
        ("budget", StormTarget::Direct),
        ("naive", StormTarget::Direct),
        ("peer", StormTarget::Direct),
        ("budget", StormTarget::Edge),
        ("naive", StormTarget::Edge),
    ] {
        let s = storm(mode, target);
        assert_eq!(
            (s.clients, s.following, s.back),
            (50, 50, 50),
            "{mode}: {s:?}"
        );
        assert_eq!(
            s.events_lost, 0,
            "{mode}: resumed with Last-Event-ID: {s:?}"
        );
        assert_eq!(s.gave_up, 0, "{mode}: {s:?}");
        assert!(
            s.opens_after >= 50,
            "{mode}: the new process saw them: {s:?}"
        );
        assert!(
            s.back_99_s.is_some_and(|b| b >= 1.9),
            "{mode}: nobody is back while the port is closed (2 s): {s:?}"
        );
    }
    // Through edge, a refused reopening is a status: the peer stops there.
    let peer = storm("peer", StormTarget::Edge);
    assert_eq!(peer.back + peer.gave_up, 50, "{peer:?}");
    let (budget, naive) = (
        storm("budget", StormTarget::Direct),
        storm("naive", StormTarget::Direct),
    );
    // The naive loop comes back in one instant, the budget's spread.
    assert!(naive.peak_per_window >= 30, "{naive:?}");
    assert!(
        budget.peak_per_window < naive.peak_per_window,
        "{budget:?} vs {naive:?}"
    );
    assert!(md.contains("peak stream openings per 100 ms"), "{md}");
    assert!(
        md.contains("Goal directly, zero events lost: budget 0: met."),
        "{md}"
    );
    assert!(md.contains("through edge: clients following"), "{md}");
    // No request load: none of its rows, no budget table.
    assert!(!md.contains("goodput"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_batch_outage_loses_nothing_budget_applies_nothing_twice_and_stays_bounded() {
    let (md, reports) = run(&[
        "--scenario",
        "batch-outage",
        "--rate",
        "50",
        "--duration",
        "3s",
    ])
    .await;
    assert_eq!(
        reports.iter().map(|r| r.mode.as_str()).collect::<Vec<_>>(),
        ["budget", "naive"]
    );
    let batch = |mode: &str| -> BatchReport {
        let r = reports.iter().find(|r| r.mode == mode).unwrap();
        r.section::<BatchReport>().expect("a batch section").clone()
    };
    for mode in ["budget", "naive"] {
        let b = batch(mode);
        // 3 s before, 3 s of outage, 5 s after, at 50 items/s.
        assert!((500..=600).contains(&b.accepted), "{mode}: {b:?}");
        assert_eq!(b.lost_items, 0, "{mode}: {b:?}");
        assert_eq!(
            b.applied_items - b.applied_twice,
            b.accepted,
            "{mode}: every item accepted applied at least once: {b:?}"
        );
        assert!(
            b.requests_while_failing >= 1,
            "{mode}: it met the outage: {b:?}"
        );
        // 3 s of pushes piled up while the endpoint failed.
        assert!(b.peak_items >= 100, "{mode}: {b:?}");
        assert!(b.drain_s.is_some(), "{mode}: {b:?}");
    }
    let (budget, naive) = (batch("budget"), batch("naive"));
    // A batch whose answer was lost is sent again: under the same key by
    // budget mode (a duplicate, ignored), under a new one by naive mode
    // (its flush ticks every second, so one meets the 1.5 s of lost
    // answers, and the next sends the same items again).
    assert_eq!(
        (budget.applied_twice, budget.applied_items),
        (0, budget.accepted),
        "{budget:?}"
    );
    assert!(naive.applied_twice > 0, "{naive:?}");
    assert_eq!(budget.rejected, 0, "{budget:?}");
    assert!(budget.bound_items.is_some_and(|n| budget.peak_items <= n));
    assert!(
        budget
            .dead_bound
            .is_some_and(|n| budget.requests_while_failing <= n),
        "{budget:?}"
    );
    assert_eq!(naive.bound_items, None);
    assert!(md.contains("Goal, zero lost: 0 items: met."), "{md}");
    assert!(
        md.contains("Goal, zero applied twice: 0 items: met."),
        "{md}"
    );
}
