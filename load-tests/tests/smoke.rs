//! The smoke tests: short scenarios in every mode through the real chain
//! (slow partner, checkout or the peer checkout, edge on 127.0.0.1), at
//! most 50 req/s for a second or two. Full load
//! runs are not part of the test suite; BENCHMARKS.md has their commands.

mod support;

use std::time::Duration;

use clap::Parser;
use load_tests::cli::{Args, Invocation, execute};
use load_tests::hang::HangReport;
use load_tests::middle::MiddleStats;
use load_tests::outage::OutageReport;
use load_tests::output::{markdown, write_json};
use load_tests::plot::write_svg;
use load_tests::replicas::ReplicasReport;
use load_tests::spike::SpikeReport;

/// One smoke run at a time: each starts its own chains and load, and the
/// machine is shared.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_healthy_in_all_five_modes_gives_tables_counts_that_add_up_and_json() {
    let _one = ONE_AT_A_TIME.lock().await;
    let args = Args::try_parse_from([
        "load-tests",
        "--scenario",
        "healthy",
        "--rate",
        "20",
        "--duration",
        "2s",
        "--no-progress",
    ])
    .unwrap();
    let invocation = args.invocation().unwrap();
    let Invocation::Scenarios { plan, .. } = &invocation else {
        panic!("a scenario run");
    };
    assert!(!plan.progress);
    // Bounded: the run must end by itself well within this.
    let reports = tokio::time::timeout(Duration::from_secs(120), execute(&invocation))
        .await
        .expect("the run stops by itself")
        .expect("the run works");

    assert_eq!(reports.len(), 5);
    assert_eq!(
        reports.iter().map(|r| r.mode.as_str()).collect::<Vec<_>>(),
        ["budget", "naive", "peer", "queue", "envoy"]
    );
    for r in &reports {
        assert_eq!(r.scenario, "healthy");
        assert_eq!(r.scheduled, 40, "{} mode", r.mode);
        assert_eq!(r.sent, 40, "{} mode", r.mode);
        assert_eq!(
            r.outcomes.total(),
            r.scheduled,
            "{} mode: {:?}",
            r.mode,
            r.outcomes
        );
        // A healthy chain at 20 req/s answers everything, in time.
        assert!(
            r.good >= 38,
            "{} mode: {} good of 40: {:?}",
            r.mode,
            r.good,
            r.outcomes
        );
        assert_eq!(r.timeline.iter().map(|s| s.due).sum::<u64>(), 40);
        let partner = r.partner.as_ref().expect("partner stats");
        // Three dependency calls per good request, at least.
        assert!(
            partner.requests >= 3 * r.good,
            "{} mode: {partner:?}",
            r.mode
        );
        assert!(
            partner.late <= partner.requests / 10,
            "{} mode: {partner:?}",
            r.mode
        );
        for step in [
            "checkout",
            "checkout.inventory",
            "checkout.pricing",
            "checkout.recommendations",
        ] {
            let row = r
                .steps
                .iter()
                .find(|s| s.name == step)
                .unwrap_or_else(|| panic!("{} mode: no row {step}", r.mode));
            assert!(row.requests >= 38 && row.p99_ms.is_some(), "{row:?}");
        }
    }
    // Only budget mode has ingress budgets: the client's 2 s at edge.
    let budget_row = reports[0]
        .steps
        .iter()
        .find(|s| s.name == "budget")
        .unwrap();
    assert!(budget_row.p50_ms.unwrap() <= 2000.0 && budget_row.p50_ms.unwrap() > 1900.0);
    assert!(reports[1].steps.iter().all(|s| s.name != "budget"));
    // Budget mode forwards the budget to the partner; naive mode does not.
    let (on, off) = (
        reports[0].partner.as_ref().unwrap(),
        reports[1].partner.as_ref().unwrap(),
    );
    assert_eq!(on.with_budget, on.requests);
    assert_eq!(off.with_budget, 0);
    // The peer forwards no budget either, though edge (budget mode) gave
    // it one.
    assert_eq!(reports[2].partner.as_ref().unwrap().with_budget, 0);
    assert!(reports[2].steps.iter().any(|s| s.name == "budget"));
    // Nor does the queue (the peer without shedding).
    assert_eq!(reports[3].partner.as_ref().unwrap().with_budget, 0);
    assert!(reports[3].steps.iter().any(|s| s.name == "budget"));

    let md = markdown(&invocation, "load-tests --scenario healthy", &reports);
    assert!(md.contains("### healthy"), "{md}");
    assert!(
        md.contains(" budget mode |") && md.contains(" naive mode |"),
        "{md}"
    );
    assert!(md.contains("Budget table, budget mode"), "{md}");
    assert!(md.contains("Budget table, naive mode"), "{md}");
    assert!(md.contains(" peer mode |"), "{md}");
    assert!(md.contains(" queue mode |"), "{md}");
    assert!(md.contains("| checkout.pricing"), "{md}");

    let dir = std::env::temp_dir().join(format!("load-tests-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("runs.json");
    write_json(
        &json_path,
        &invocation,
        "load-tests --scenario healthy",
        &reports,
    )
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 5);
    assert_eq!(runs[2]["mode"], "peer");
    assert_eq!(runs[3]["mode"], "queue");
    assert_eq!(runs[4]["mode"], "envoy");
    assert_eq!(
        runs[0]["outcomes"]["ok"].as_u64().unwrap()
            + runs[0]["outcomes"]["degraded"].as_u64().unwrap()
            + runs[0]["outcomes"]["gateway_timeout"].as_u64().unwrap()
            + runs[0]["outcomes"]["other"].as_u64().unwrap()
            + runs[0]["outcomes"]["too_many_requests"].as_u64().unwrap()
            + runs[0]["outcomes"]["unavailable"].as_u64().unwrap()
            + runs[0]["outcomes"]["client_timeout"].as_u64().unwrap()
            + runs[0]["outcomes"]["transport"].as_u64().unwrap()
            + runs[0]["outcomes"]["not_sent"].as_u64().unwrap(),
        40
    );
    // Checkout keeps its default limit; the partner's workers are the capacity.
    assert!(json["settings"]["concurrency"].is_null());
    assert_eq!(json["settings"]["partner_workers"], 8);
    assert!(md.contains("checkout's default (adaptive)"), "{md}");

    let svg_path = dir.join("runs.svg");
    write_svg(&svg_path, &reports).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `args` (after the program name) to the end, bounded.
async fn run_scenarios(args: &[&str]) -> (Invocation, Vec<load_tests::report::RunReport>) {
    let _one = ONE_AT_A_TIME.lock().await;
    support::run_bounded(args, Duration::from_secs(120)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_mixed_budgets_and_criticality_report_their_classes_in_every_mode() {
    let (invocation, reports) = run_scenarios(&[
        "--scenario",
        "mixed-budgets,criticality",
        "--rate",
        "20",
        "--duration",
        "1s",
        "--slowdown",
        "2",
    ])
    .await;
    assert_eq!(reports.len(), 10);
    for r in &reports {
        let what = format!("{} / {}: {:?}", r.scenario, r.mode, r.classes);
        assert_eq!(r.scheduled, 20, "{what}");
        assert_eq!(r.outcomes.total(), 20, "{what}");
        assert_eq!(
            r.classes.iter().map(|c| c.scheduled).sum::<u64>(),
            20,
            "{what}"
        );
        assert!(r.late_answers <= r.sent, "{what}");
        for c in &r.classes {
            assert!(c.good <= c.success && c.success <= c.scheduled, "{what}");
        }
        let names: Vec<&str> = r.classes.iter().map(|c| c.class.as_str()).collect();
        match r.scenario.as_str() {
            "mixed-budgets" => {
                assert_eq!(names, ["long-budget", "short-budget"], "{what}");
                assert_eq!(r.budget_ms, 2000);
            }
            "criticality" => {
                assert_eq!(names, ["critical", "rest"], "{what}");
                // 30 % of 20, exactly.
                assert_eq!(r.classes[0].scheduled, 6, "{what}");
                assert_eq!(r.rate_per_s, 20.0, "--rate overrides 2x capacity");
            }
            other => panic!("{other}"),
        }
    }
    let md = markdown(
        &invocation,
        "load-tests --scenario mixed-budgets,criticality",
        &reports,
    );
    assert!(md.contains("### mixed-budgets"), "{md}");
    assert!(
        md.contains("| critical: 2xx (success rate) / good, of requests"),
        "{md}"
    );
    assert!(
        md.contains("answers after the request's own budget (client side)"),
        "{md}"
    );
    assert!(md.contains(" peer mode |"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_ramp_reports_each_step_and_second_in_every_mode_and_plots_them() {
    // --rate stands for the capacity: steps of 5 to 40 req/s, 0.5 s each.
    let (invocation, reports) =
        run_scenarios(&["--scenario", "ramp", "--rate", "10", "--duration", "3s"]).await;
    assert_eq!(reports.len(), 5);
    for r in &reports {
        let ramp = r.ramp.as_ref().expect("a ramp report");
        let due: Vec<u64> = ramp.steps.iter().map(|s| s.due).collect();
        assert_eq!(due, [3, 5, 10, 20, 5, 3], "{} mode", r.mode);
        assert_eq!(r.scheduled, 46);
        assert_eq!(ramp.series.second.len(), 3, "{} mode", r.mode);
        assert_eq!(ramp.series.offered_per_s.iter().sum::<u64>(), 46);
        assert_eq!(ramp.series.goodput_per_s.iter().sum::<u64>(), r.good);
        // Healthy and far below capacity: nearly all good, every step.
        assert!(r.good >= 44, "{} mode: {:?}", r.mode, r.outcomes);
        assert_eq!(ramp.series.services, r.services, "{} mode", r.mode);
        if r.mode == "budget" {
            // Checkout's /metrics, read each second: a floor per
            // dependency it called, and edge's of checkout.
            let floors = r.services.learned_floor_ms.as_ref().expect("sampled");
            for dep in ["inventory", "pricing", "recommendations", "checkout"] {
                let series = floors
                    .get(dep)
                    .unwrap_or_else(|| panic!("no {dep} floor: {floors:?}"));
                assert_eq!(series.len(), 3, "{dep}: {series:?}");
                assert!(
                    series
                        .iter()
                        .flatten()
                        .all(|ms| ms.is_finite() && *ms > 0.0),
                    "{dep}: {series:?}"
                );
            }
            // Recommendations keeps checkout's fixed 1 s floor.
            assert!(
                floors["recommendations"]
                    .iter()
                    .flatten()
                    .all(|ms| *ms == 1000.0),
                "{floors:?}"
            );
            assert!(
                floors["pricing"].iter().flatten().count() >= 2,
                "{floors:?}"
            );
            assert!(r.services.adaptive_limit.is_some());
        } else {
            // Not sampled: the registry would show what budget mode left.
            assert_eq!(r.services, Default::default(), "{} mode", r.mode);
        }
    }
    let md = markdown(&invocation, "load-tests --scenario ramp", &reports);
    assert!(md.contains("Per step of the ramp"), "{md}");
    assert!(md.contains("budget mode: pricing floor ms (mean)"), "{md}");
    assert!(!md.contains("naive mode: pricing floor"), "{md}");
    let dir = std::env::temp_dir().join(format!("load-tests-ramp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg_path = dir.join("ramp.svg");
    write_svg(&svg_path, &reports).unwrap();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(
        svg.contains("offered load"),
        "the ramp panel has the offered load"
    );
    assert!(
        svg.contains("floor in force per dependency")
            && svg.contains("adaptive concurrency limit per dependency"),
        "the ramp has the services' charts"
    );
    assert!(
        svg.contains("budget mode: pricing"),
        "a line per dependency"
    );
    let json_path = dir.join("ramp.json");
    write_json(
        &json_path,
        &invocation,
        "load-tests --scenario ramp",
        &reports,
    )
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(
        json["runs"][2]["ramp"]["steps"].as_array().unwrap().len(),
        6
    );
    let floors = &json["runs"][0]["ramp"]["series"]["services"]["learned_floor_ms"];
    assert_eq!(floors["pricing"].as_array().unwrap().len(), 3, "{floors}");
    assert!(json["runs"][1]["services"]["learned_floor_ms"].is_null());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_deep_runs_four_hops_and_middle_counts_its_own_work_in_every_mode() {
    let (invocation, reports) = run_scenarios(&[
        "--scenario",
        "deep",
        "--rate",
        "10",
        "--duration",
        "1s",
        "--slowdown",
        "2",
    ])
    .await;
    assert_eq!(reports.len(), 5);
    for r in &reports {
        let what = format!(
            "{} mode: {:?} {:?}",
            r.mode,
            r.section::<MiddleStats>(),
            r.outcomes
        );
        let middle = *r.section::<MiddleStats>().expect("middle's counters");
        let partner = r.partner.as_ref().unwrap();
        assert_eq!(r.scheduled, 10, "{what}");
        assert!(r.good >= 9, "{what}");
        // Every partner call went through middle, one each.
        assert_eq!(middle.requests, partner.requests, "{what}");
        assert!(middle.requests >= 3 * r.good, "{what}");
        assert_eq!(middle.late, 0, "{what}");
        if r.mode == "budget" {
            assert_eq!(middle.with_budget, middle.requests, "{what}");
            assert_eq!(partner.with_budget, partner.requests, "{what}");
        } else {
            assert_eq!((middle.with_budget, partner.with_budget), (0, 0), "{what}");
        }
    }
    let md = markdown(&invocation, "load-tests --scenario deep", &reports);
    assert!(md.contains("| middle: requests / with a budget"), "{md}");
    assert!(md.contains("not measured (no budget arrives)"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_outage_counts_pricing_attempts_during_the_outage_and_the_recovery() {
    // 8 s: /pricing answers 503 from 2 s to 6 s.
    let (invocation, reports) =
        run_scenarios(&["--scenario", "outage", "--rate", "20", "--duration", "8s"]).await;
    assert_eq!(reports.len(), 5);
    for r in &reports {
        let o = r.section::<OutageReport>().expect("an outage report");
        let what = format!("{} mode: {o:?} {:?}", r.mode, r.outcomes);
        assert_eq!((o.from_s, o.to_s), (2.0, 6.0), "{what}");
        assert_eq!(o.requests, 80, "{what}");
        // Behind Envoy, naive checkout's 3 attempts are each up to 3 of
        // Envoy's tries (its retries stack on checkout's).
        let most = if r.mode == "envoy" { 9 } else { 3 };
        assert!(o.max_pricing_attempts <= most, "{what}");
        // Nothing good while every pricing call fails, all good before.
        assert_eq!(r.timeline[3].good, 0, "{what}");
        assert!(r.timeline[0].good >= 19, "{what}");
        assert!(o.pre_outage_goodput_per_s >= 19.0, "{what}");
        // Healthy again after it: back within the run.
        assert!(o.recovered_after_s.is_some(), "{what}");
        if r.mode == "budget" {
            // The retry budget and checkout's default breaker: fewer
            // attempts than requests (the goal: at most 1.2).
            assert!(o.pricing_attempts_per_request <= 1.2, "{what}");
        } else {
            // Three attempts of every request, as configured.
            assert!(o.pricing_calls >= o.requests, "{what}");
            assert!(o.pricing_attempts_per_request >= 2.9, "{what}");
        }
    }
    let md = markdown(&invocation, "load-tests --scenario outage", &reports);
    assert!(md.contains("attempts per client request"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_tail_runs_hedged_beside_budget_mode_within_the_hedge_budget() {
    let (invocation, reports) = run_scenarios(&[
        "--scenario",
        "tail",
        "--rate",
        "40",
        "--duration",
        "3s",
        "--modes",
        "on",
    ])
    .await;
    let modes: Vec<_> = reports.iter().map(|r| r.mode.as_str()).collect();
    assert_eq!(modes, ["budget", "hedged"]);
    let calls = |r: &load_tests::report::RunReport| r.partner.as_ref().unwrap().requests;
    let (plain, hedged) = (&reports[0], &reports[1]);
    for r in &reports {
        assert_eq!(r.sent, 120, "{} mode", r.mode);
        assert!(r.good >= 115, "{} mode: {:?}", r.mode, r.outcomes);
    }
    // No hedge without the opt-in: no `-hedge` step, and no more partner
    // calls than one per dependency per request (fewer when a call was
    // refused, say while the adaptive limit's first calls are held at 3 on
    // a loaded machine).
    assert!(
        !plain.steps.iter().any(|s| s.name.ends_with("-hedge")),
        "no hedge without the opt-in: {:?}",
        plain.steps
    );
    assert!(
        calls(plain) <= 3 * plain.sent && calls(plain) >= 3 * plain.sent - 15,
        "one call per dependency per request, a few refused at most: {}",
        calls(plain)
    );
    // 5 % of ~360 calls are in the tail: some are hedged, and hedges stay
    // within 10 % of the calls.
    assert!(calls(hedged) > 3 * hedged.sent, "{}", calls(hedged));
    assert!(
        calls(hedged) as f64 <= 3.0 * hedged.sent as f64 * 1.1,
        "{}",
        calls(hedged)
    );
    assert!(
        hedged.steps.iter().any(|s| s.name.ends_with("-hedge")),
        "{:?}",
        hedged.steps
    );
    let md = markdown(&invocation, "load-tests --scenario tail", &reports);
    assert!(md.contains("| partner calls per request sent"), "{md}");
    assert!(md.contains("hedged mode"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_replicas_spread_calls_over_three_partners_per_phase_in_budget_and_p2c_mode() {
    // --rate stands for the three's capacity: 60 % of 50, 30 req/s; 5.8 s
    // split as 29 s is: 1, 1, 0.4, 1, 0.4 and 2 s; back at 4.2 s.
    let (invocation, reports) = run_scenarios(&[
        "--scenario",
        "replicas",
        "--rate",
        "50",
        "--duration",
        "5800ms",
        "--modes",
        "on,p2c",
    ])
    .await;
    let modes: Vec<_> = reports.iter().map(|r| r.mode.as_str()).collect();
    assert_eq!(modes, ["budget", "hedged", "p2c"]);
    for r in &reports {
        let what = format!("{} mode: {:?}", r.mode, r.outcomes);
        assert_eq!(r.outcomes.total(), r.scheduled, "{what}");
        let ramp = r.ramp.as_ref().expect("per phase");
        assert_eq!(ramp.steps.len(), 6, "{what}");
        assert!(ramp.steps.iter().all(|s| s.rate_per_s == 30.0), "{what}");
        let rep = r.section::<ReplicasReport>().expect("a replicas report");
        assert!(
            rep.fault_errors.is_empty(),
            "{what}: {:?}",
            rep.fault_errors
        );
        let phases: Vec<&str> = rep.phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(
            phases,
            [
                "healthy",
                "slow",
                "after-slow",
                "blackhole",
                "after-blackhole",
                "restart"
            ]
        );
        assert!((rep.back_at_s - 4.2).abs() < 1e-6, "{rep:?}");
        // All healthy: every replica did work.
        assert!(
            rep.phases[0].calls.iter().all(|&c| c > 0),
            "{what}: {rep:?}"
        );
        // The partners' calls are the three's sum.
        let calls: u64 = rep.calls_per_second.iter().flatten().sum();
        let partner = r.partner.as_ref().expect("the partners' stats").requests;
        assert!(calls > 0 && calls <= partner, "{calls} of {partner}");
        assert_eq!(rep.goals.len(), 5, "{rep:?}");
    }
    let md = markdown(&invocation, "load-tests --scenario replicas", &reports);
    assert!(md.contains("Replicas (each partner's own count"), "{md}");
    assert!(md.contains("p2c mode: r1 / r2 / r3 %"), "{md}");
    assert!(md.contains("| goal: one blackholed replica"), "{md}");
    let json = serde_json::to_value(&reports).unwrap();
    assert_eq!(json[2]["replicas"]["phases"][5]["phase"], "restart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_spike_reports_each_phase_second_and_the_p99_back_time_in_every_mode() {
    // --rate stands for the capacity: 5, 30, 5 req/s for 1, 0.5, 1.5 s.
    let (invocation, reports) =
        run_scenarios(&["--scenario", "spike", "--rate", "10", "--duration", "3s"]).await;
    let modes: Vec<_> = reports.iter().map(|r| r.mode.as_str()).collect();
    assert_eq!(modes, ["budget", "naive", "peer", "queue", "envoy"]);
    for r in &reports {
        let what = format!("{} mode: {:?}", r.mode, r.outcomes);
        assert_eq!(r.scheduled, 28, "{what}");
        assert_eq!(r.outcomes.total(), 28, "{what}");
        let ramp = r.ramp.as_ref().expect("per phase");
        let due: Vec<u64> = ramp.steps.iter().map(|s| s.due).collect();
        assert_eq!(due, [5, 15, 8], "{what}");
        let factors: Vec<_> = ramp.steps.iter().map(|s| s.factor).collect();
        assert_eq!(factors, [Some(0.5), Some(3.0), Some(0.5)], "{what}");
        for s in &ramp.steps {
            assert!(s.good + s.refused <= s.due, "{what}: {s:?}");
        }
        assert_eq!(ramp.series.second.len(), 3, "{what}");
        let spike = r.section::<SpikeReport>().expect("a spike report");
        assert_eq!((spike.spike_from_s, spike.spike_to_s), (1.0, 1.5), "{what}");
        // The calm phase was sent and answered: it has a p99, and the
        // threshold is at least 10 ms above it.
        let calm = spike.calm_p99_ms.expect("a calm p99");
        assert!(spike.back_threshold_ms.unwrap() >= calm + 10.0, "{spike:?}");
        if let Some(after) = spike.p99_back_after_s {
            assert!((0.0..=1.5).contains(&after), "{spike:?}");
        }
    }
    let md = markdown(&invocation, "load-tests --scenario spike", &reports);
    assert!(md.contains("Per phase of the spike"), "{md}");
    assert!(md.contains("Per second (by intended send time)"), "{md}");
    assert!(md.contains("queue mode: goodput / p99 ms"), "{md}");
    assert!(md.contains("| spike (1 to 1.5 s): calm p99"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_bursts_send_every_request_at_once_and_account_for_each_in_every_mode() {
    let (invocation, reports) = run_scenarios(&[
        "--scenario",
        "burst-fits,burst-part-unlimited",
        "--requests",
        "40",
    ])
    .await;
    assert_eq!(reports.len(), 10);
    for r in &reports {
        let what = format!("{} / {}: {:?}", r.scenario, r.mode, r.window);
        let w = r.window.as_ref().expect("the burst's window");
        // Every request due at once, and each in exactly one outcome.
        assert_eq!((r.scheduled, r.sent), (40, 40), "{what}");
        assert_eq!(r.outcomes.total(), 40, "{what}");
        assert_eq!(r.timeline.len(), 1, "all due in the first second: {what}");
        assert_eq!(w.requests, 40, "{what}");
        assert_eq!(w.success + w.failures + w.not_sent, 40, "{what}");
        assert!(w.good <= w.success, "{what}");
        let budget = if r.scenario == "burst-fits" {
            10_000
        } else {
            1_000
        };
        assert_eq!(r.budget_ms, budget, "{what}");
        // The wait for the last answer is bounded: budget plus 5 s.
        assert!(r.latency_ms.max <= budget as f64 + 5_500.0, "{what}");
        assert!(r.partner.is_some(), "{what}");
        if r.mode == "naive" && r.scenario == "burst-fits" {
            // 40 requests, 160 req/s of capacity, 10 s: all served.
            assert_eq!(w.good, 40, "{what}");
        }
    }
    assert!(reports[0].description.contains("8 workers per path"));
    assert!(reports[5].description.contains("no worker limit"));
    let dir = std::env::temp_dir().join(format!("load-tests-burst-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("burst.json");
    write_json(
        &json_path,
        &invocation,
        "load-tests --scenario burst-fits",
        &reports,
    )
    .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for run in json["runs"].as_array().unwrap() {
        assert_eq!(run["window"]["requests"], 40, "{run}");
        assert_eq!(run["arrivals"], "burst", "{run}");
        assert!(run["hang"].is_null() && run["spike"].is_null(), "{run}");
    }
    let md = markdown(&invocation, "load-tests --scenario burst-fits", &reports);
    assert!(md.contains("### burst-fits:"), "{md}");
    assert!(md.contains("### burst-part-unlimited:"), "{md}");
    assert!(
        md.contains("| the burst: failures' latency p50 / p99, ms"),
        "{md}"
    );
    assert!(md.contains("| the burst: slowest 2xx, ms"), "{md}");
    assert!(md.contains(" queue mode |"), "{md}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_hang_holds_inventory_and_reports_failures_held_calls_and_recovery() {
    // 6 s at 10 req/s: /inventory hangs from 1.5 s to 4.5 s; failures are
    // counted from 3.5 s. The client gives up after 4 s (naive's 30 s
    // timeouts are not what this checks; the queue is the new mode).
    let (invocation, reports) = run_scenarios(&[
        "--scenario",
        "hang",
        "--rate",
        "10",
        "--duration",
        "6s",
        "--modes",
        "on,queue",
        "--client-timeout",
        "4s",
    ])
    .await;
    let modes: Vec<_> = reports.iter().map(|r| r.mode.as_str()).collect();
    assert_eq!(modes, ["budget", "queue"]);
    for r in &reports {
        let h = r.section::<HangReport>().expect("a hang report");
        let w = r.window.as_ref().expect("the hang's window");
        let what = format!("{} mode: {h:?} {w:?} {:?}", r.mode, r.outcomes);
        assert_eq!(r.outcomes.total(), 60, "{what}");
        assert_eq!(
            (h.path.as_str(), h.from_s, h.to_s),
            ("/inventory", 1.5, 4.5),
            "{what}"
        );
        assert_eq!(
            (w.from_s, w.to_s, w.mark_s),
            (3.5, 4.5, Some(4.5)),
            "{what}"
        );
        assert_eq!(w.requests, 10, "{what}");
        // Each accounted for once. (A 2xx is possible: a call that waited
        // for a permit past the hang's end, as the queue's do.)
        assert_eq!(w.success + w.failures + w.not_sent, 10, "{what}");
        assert!(w.good <= w.success, "{what}");
        assert_eq!(w.failures > 0, w.failure_p50_ms.is_some(), "{what}");
        // Calls reached the hung path before anything could notice.
        assert!(h.held_max.is_some_and(|n| n >= 1), "{what}");
        // The run is too short for the settled part (from 5.6 s).
        assert_eq!(
            (h.settled_from_s, h.settled_held_max),
            (5.6, None),
            "{what}"
        );
        // Healthy before the hang.
        assert!(h.pre_hang_goodput_per_s >= 9.0, "{what}");
        if let Some(first) = h.first_success_after_s {
            assert!(first >= 0.0, "{what}");
        }
        // Every budget was 1.9 to 2.1 s.
        assert_eq!(r.budget_ms, 2100, "{what}");
    }
    let md = markdown(&invocation, "load-tests --scenario hang", &reports);
    assert!(md.contains("most calls held at once on it"), "{md}");
    assert!(md.contains("until the first 2xx"), "{md}");
    assert!(md.contains("1900-2100 ms, uniform per request"), "{md}");
}
