//! The short soak: the real chain (slow partner, checkout, edge on
//! 127.0.0.1) under steady load while the partner goes through every fault
//! mode, a couple of seconds each; after each phase the partner has no
//! call in flight, no TCP connection is open and no task is alive over the
//! baseline. The ten-minute soak is `cargo run --release -p load-tests
//! --bin soak` (BENCHMARKS.md), not part of the test suite.

use std::time::Duration;

use load_tests::soak::{SoakPlan, run_soak};
use service_kit::BudgetMode;
use slow_partner::FaultMode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_every_fault_phase_nothing_is_left_in_flight_or_open() {
    let plan = SoakPlan {
        faults: vec![
            FaultMode::Normal,
            FaultMode::Hang,
            FaultMode::Reset,
            FaultMode::Blackhole,
            FaultMode::Refuse,
            FaultMode::Normal,
        ],
        phase: Duration::from_secs(2),
        rate: 25.0,
        budget: Duration::from_secs(1),
        warmup: Duration::from_secs(1),
        pool_idle_timeout: Duration::from_millis(300),
        drain_deadline: Duration::from_secs(20),
        budget_mode: BudgetMode::On,
        progress: false,
    };
    // Bounded: the soak must end by itself well within this.
    let report = tokio::time::timeout(Duration::from_secs(180), run_soak(&plan))
        .await
        .expect("the soak stops by itself")
        .expect("the soak runs");

    let baseline = &report.baseline;
    assert!(baseline.returned_in_ms.is_some(), "{baseline:?}");
    assert_eq!(baseline.after.connections, 0, "{baseline:?}");
    assert_eq!(report.phases.len(), plan.faults.len());
    for p in &report.phases {
        let o = &p.run.outcomes;
        let what = format!("phase {} ({}): {:?} / {:?}", p.index, p.fault, p.drain, o);
        // Back to the baseline after every phase.
        assert!(p.returned(), "{what}");
        assert_eq!(p.drain.partner_in_flight, 0, "{what}");
        assert_eq!(p.drain.after.connections, 0, "{what}");
        assert!(p.drain.after.tasks <= baseline.after.tasks, "{what}");
        // Every request has an outcome: sent and answered, none lost.
        assert_eq!(p.run.scheduled, 50, "{what}");
        assert_eq!(o.total(), p.run.scheduled, "{what}");
        assert_eq!(o.client_timeout + o.transport + o.not_sent, 0, "{what}");
        // The fault did load the process, so the return is not vacuous.
        assert!(p.peak.connections > 0, "{what}");
        assert!(p.peak.tasks > baseline.after.tasks, "{what}");
        match p.fault {
            FaultMode::Normal => assert!(o.ok + o.degraded >= 45, "{what}"),
            // A failing partner is an honest 5xx, never a success, and in
            // budget mode never later than the budget (generous bound).
            _ => {
                assert_eq!(o.ok + o.degraded, 0, "{what}");
                assert_eq!(o.gateway_timeout + o.unavailable, p.run.sent, "{what}");
                assert!(p.run.latency_ms.max <= 2500.0, "{what}");
            }
        }
    }
    // The hang phase held connections and tasks open until the budget.
    let hang = &report.phases[1];
    assert!(hang.peak.connections >= 10, "{:?}", hang.peak);
    assert!(report.all_returned);
    assert!(report.rss_start_kib > 0 && report.rss_end_kib > 0);
    assert!(report.rss_max_kib >= report.rss_end_kib);

    let md = load_tests::soak_cli::soak_markdown(&report, "soak --phase 2s");
    // Every request of the hang phase failed, at its deadline (504) or,
    // once the breaker saw the partner had stopped answering, at once
    // with an open circuit (503).
    assert!(md.contains("| 2 | hang | 50 | 0 |"), "{md}");
    assert!(md.contains("Every phase returned to the baseline"), "{md}");
}
