//! A warm chain and a burst, through the real chain in this process
//! (slow partner, checkout, edge on 127.0.0.1): the warm-up (20 req/s for
//! 3 s) is reported apart from the burst, and a warm chain hit by a burst
//! its budgets cover answers all of it in budget in naive mode (a check of
//! the harness). Budget mode does not yet answer all of it here (283, 235
//! and 256 of 300 in the test build, BENCHMARKS.md, "Burst sweep"): that
//! assertion waits for the admission that meets it.

mod support;

use std::time::Duration;

use load_tests::output::markdown;
use load_tests::report::RunReport;
use load_tests::warm::WarmUpReport;

/// One run at a time: each starts its own chains and load.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs the command line `args`, bounded.
async fn run(args: &[&str]) -> (load_tests::cli::Invocation, Vec<RunReport>) {
    support::run_bounded(args, Duration::from_secs(120)).await
}

/// The sweep's cell warm / 300 at once / 10 s / 50 ms with 8 workers per
/// path (a capacity of 160 req/s: the burst drains in about 2 s, well
/// within its budgets), in `mode`: every request answered in budget.
async fn a_warm_chain_answers_a_burst_its_budgets_cover(mode: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let (_, reports) = run(&[
        "--scenario",
        "burst-sweep",
        "--sweep-start",
        "warm",
        "--sweep-size",
        "300",
        "--sweep-budget",
        "10s",
        "--sweep-partner",
        "50ms-8w",
        "--modes",
        mode,
    ])
    .await;
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    let warm = r.section::<WarmUpReport>().expect("the warm-up's report");
    assert_eq!(warm.requests, 60, "20 req/s for 3 s");
    assert_eq!(warm.good, 60, "the warm-up is served: {warm:?}");
    let w = r.window.as_ref().expect("the burst's window");
    assert_eq!(w.requests, 300, "only the burst is counted: {w:?}");
    assert_eq!(r.scheduled, 300, "the warm-up is not in the run's counts");
    assert_eq!(
        w.good, 300,
        "{mode} mode: every request of a burst its budgets cover, in budget: {w:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_chain_in_naive_mode_answers_a_burst_its_budgets_cover() {
    a_warm_chain_answers_a_burst_its_budgets_cover("off").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_bursts_report_the_warm_up_apart_and_cold_is_the_default() {
    let _one = ONE_AT_A_TIME.lock().await;
    let args = [
        "--scenario",
        "burst-part",
        "--requests",
        "40",
        "--modes",
        "on",
    ];
    let (_, cold) = run(&args).await;
    assert!(
        cold[0].section::<WarmUpReport>().is_none(),
        "cold by default"
    );
    let mut warm_args = args.to_vec();
    warm_args.push("--warm");
    let (invocation, warm) = run(&warm_args).await;
    let r = &warm[0];
    let w = r.window.as_ref().unwrap();
    assert_eq!((w.requests, r.scheduled), (40, 40), "the burst alone");
    // Warm-up budgets: the burst's 1 s (shorter than 2 s).
    let warm_up = r.section::<WarmUpReport>().unwrap();
    assert_eq!(warm_up.requests, 60);
    assert_eq!(
        warm_up.good + warm_up.refused + warm_up.other_failures,
        60,
        "{warm_up:?}"
    );
    let md = markdown(
        &invocation,
        "load-tests --scenario burst-part --warm",
        &warm,
    );
    assert!(
        md.contains("warm-up before the burst (20 req/s for 3 s, not counted above)"),
        "{md}"
    );
    assert!(md.contains("refused, time in checkout's permit queue p50 / p99, ms"));
}
