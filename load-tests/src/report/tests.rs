//! The recorder and the markdown of its reports.

use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::client::Sample;
use crate::generator::{RateStep, RunTotals, Scheduled};
use crate::outage::OutageReport;
use crate::window::Watch;

/// A `mode` run of `scenario` at 10 req/s for 1 s, 1 s budgets (the
/// scenarios' own tests use it too).
pub(crate) fn one_second_run(scenario: &str, mode: &str) -> RunInfo {
    RunInfo {
        scenario: scenario.into(),
        mode: mode.into(),
        description: "test".into(),
        spec: LoadSpec::new(10.0, Duration::from_secs(1)).unwrap(),
        budgets: BudgetDistribution::Fixed(Duration::from_secs(1)),
        patience: Patience::Budget,
        load_average: None,
    }
}

fn sample(index: u64, outcome: Outcome, latency_ms: u64, timing: Option<&str>) -> Sample {
    let start = Instant::now();
    Sample {
        scheduled: Scheduled {
            index,
            intended: start + Duration::from_millis(index * 100),
            run_start: start,
        },
        outcome,
        latency: Duration::from_millis(latency_ms),
        budget: Duration::from_millis(1000),
        class: None,
        server_timing: timing.map(str::to_owned),
    }
}

#[test]
fn outcomes_add_up_and_goodput_counts_2xx_within_the_budget() {
    let mut rec = Recorder::new();
    let samples = [
        sample(0, Outcome::Ok, 100, None),
        sample(1, Outcome::Degraded, 900, None),
        sample(2, Outcome::Ok, 1500, None), // late: not good
        sample(3, Outcome::Status(504), 990, None),
        sample(4, Outcome::Status(429), 5, None),
        sample(5, Outcome::Status(502), 50, None),
        sample(6, Outcome::ClientTimeout, 35_000, None),
        sample(7, Outcome::Transport, 1, None),
        sample(8, Outcome::NotSent, 0, None),
        sample(12, Outcome::Status(503), 3, None),
    ];
    for s in &samples {
        rec.record(s);
    }
    let spec = LoadSpec::new(10.0, Duration::from_secs(2)).unwrap();
    let info = RunInfo {
        scenario: "t".into(),
        mode: "budget".into(),
        description: "test".into(),
        spec,
        budgets: BudgetDistribution::Fixed(Duration::from_secs(1)),
        patience: Patience::Budget,
        load_average: None,
    };
    let totals = RunTotals {
        scheduled: 10,
        sent: 9,
        not_sent: 1,
        ..RunTotals::default()
    };
    let report = rec.finish(info, totals, Some(&StatsSnapshot::default()));
    assert_eq!(report.outcomes.total(), 10);
    assert_eq!(report.outcomes.other_statuses, BTreeMap::from([(502, 1)]));
    assert_eq!((report.good, report.success_after_budget), (2, 1));
    // Request 2's 200 at 1500 ms of its 1000 ms; the client timeout
    // and the connection error are not answers.
    assert_eq!(report.late_answers, 1);
    assert!(report.classes.is_empty());
    assert_eq!(report.goodput_per_s, 1.0);
    assert_eq!(report.full_goodput_per_s, 0.5);
    // Seconds 0 (requests 0-9 minus the unsent one) and 1 (request 12).
    assert_eq!(report.timeline.len(), 2);
    assert_eq!((report.timeline[0].due, report.timeline[0].good), (9, 2));
    assert_eq!(report.timeline[1].due, 1);
    assert!((report.latency_ms.max - 35_000.0).abs() < 35.0);
    let json = serde_json::to_string(&report).unwrap();
    let back: RunReport = serde_json::from_str(&json).unwrap();
    assert_eq!(back.outcomes, report.outcomes);
    let md = scenario_markdown(&[report]);
    assert!(md.contains("| 504"), "{md}");
    assert!(md.contains("502: 1"), "{md}");
}

#[test]
fn classes_count_success_good_and_late_answers_by_each_request_s_own_budget() {
    let mut rec = Recorder::new();
    let with = |index, outcome, latency_ms, budget_ms, class| Sample {
        budget: Duration::from_millis(budget_ms),
        class: Some(class),
        ..sample(index, outcome, latency_ms, None)
    };
    for s in [
        with(0, Outcome::Ok, 300, 400, "short-budget"), // good
        with(1, Outcome::Ok, 500, 400, "short-budget"), // 2xx, late
        with(2, Outcome::Status(504), 450, 400, "short-budget"), // late
        with(3, Outcome::Ok, 500, 1500, "long-budget"), // good
        with(4, Outcome::NotSent, 0, 1500, "long-budget"),
    ] {
        rec.record(&s);
    }
    let info = RunInfo {
        scenario: "mixed-budgets".into(),
        mode: "naive".into(),
        description: "test".into(),
        spec: LoadSpec::new(10.0, Duration::from_secs(1)).unwrap(),
        budgets: BudgetDistribution::mixed_default(),
        patience: Patience::Budget,
        load_average: None,
    };
    let report = rec.finish(info, RunTotals::default(), None);
    assert_eq!(report.late_answers, 2);
    assert_eq!(report.budget_ms, 2000);
    let long = &report.classes[0];
    assert_eq!(long.class, "long-budget");
    assert_eq!((long.scheduled, long.success, long.good), (2, 1, 1));
    assert_eq!(long.success_share, 0.5);
    let short = &report.classes[1];
    assert_eq!(
        (
            short.scheduled,
            short.success,
            short.good,
            short.late_answers
        ),
        (3, 2, 1, 2)
    );
    let md = scenario_markdown(&[report]);
    assert!(
        md.contains("| short-budget: 2xx (success rate) / good, of requests"),
        "{md}"
    );
    assert!(md.contains("2 (66.7%) / 1 (33.3%) of 3"), "{md}");
    assert!(md.contains("half the callers 200-600 ms"), "{md}");
}

#[test]
fn a_ramp_is_reported_per_step_and_per_second_with_the_services_series() {
    let step = |rate, factor| RateStep {
        rate,
        duration: Duration::from_secs(1),
        factor: Some(factor),
    };
    let spec = LoadSpec::ramp(vec![step(5.0, 0.5), step(10.0, 1.0)]).unwrap();
    let mut rec = Recorder::for_spec(&spec);
    // `sample(i, ..)` is due at i * 100 ms: 0-9 in step 1, 10-14 in 2.
    for i in 0..15 {
        let latency = if i < 10 { 50 } else { 1500 }; // step 2: late
        rec.record(&sample(i, Outcome::Ok, latency, None));
    }
    let info = RunInfo {
        scenario: "ramp".into(),
        mode: "budget".into(),
        description: "test".into(),
        spec,
        budgets: BudgetDistribution::Fixed(Duration::from_secs(1)),
        patience: Patience::Budget,
        load_average: None,
    };
    let mut report = rec.finish(info, RunTotals::default(), None);
    assert_eq!(report.services, ServiceSeries::default());
    let naive = report.clone();
    let gauges = |floor_s: f64, limit: Option<f64>| Gauges {
        floor_seconds: [
            ("pricing".to_owned(), floor_s),
            ("checkout".to_owned(), 1.9),
        ]
        .into(),
        concurrency_limit: limit
            .map(|l| ("pricing".to_owned(), l))
            .into_iter()
            .collect(),
    };
    // Second 0's scrape failed; the run's end gave a third sample,
    // beyond its two seconds.
    let samples = [None, Some(gauges(0.3, Some(12.0))), Some(gauges(0.9, None))];
    report.set_services(ServiceSeries::from_samples(&samples, report.timeline.len()));
    let ramp = report.ramp.as_ref().expect("a ramp report");
    assert_eq!(ramp.series.services, report.services);
    let floors = report.services.learned_floor_ms.as_ref().unwrap();
    assert_eq!(floors["pricing"], [None, Some(300.0)]);
    assert_eq!(floors["checkout"], [None, Some(1900.0)]);
    let limits = report.services.adaptive_limit.as_ref().unwrap();
    assert_eq!(limits["pricing"], [None, Some(12.0)]);
    assert!(report.services.has_values() && !naive.services.has_values());
    assert_eq!(ramp.steps.len(), 2);
    assert_eq!((ramp.steps[0].due, ramp.steps[0].good), (10, 10));
    assert_eq!((ramp.steps[1].due, ramp.steps[1].good), (5, 0));
    assert_eq!(ramp.steps[0].goodput_per_s, 10.0);
    assert_eq!((ramp.steps[1].from_s, ramp.steps[1].to_s), (1.0, 2.0));
    assert!((ramp.steps[1].p99_ms.unwrap() - 1500.0).abs() < 20.0);
    assert_eq!(ramp.series.second, [0, 1]);
    assert_eq!(ramp.series.offered_per_s, [10, 5]);
    assert_eq!(ramp.series.goodput_per_s, [10, 0]);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["ramp"]["series"]["services"]["learned_floor_ms"]["pricing"],
        serde_json::json!([null, 300.0])
    );
    assert_eq!(json["services"]["adaptive_limit"]["pricing"][1], 12.0);
    let back: RunReport = serde_json::from_value(json).unwrap();
    assert_eq!(back.services, report.services);
    let json = serde_json::to_value(&naive).unwrap();
    assert!(json["ramp"]["series"]["services"]["learned_floor_ms"].is_null());
    let md = scenario_markdown(&[report, naive]);
    assert!(md.contains("Per step of the ramp"), "{md}");
    assert!(
        md.contains("budget mode: pricing floor ms (mean)")
            && md.contains("budget mode: pricing adaptive limit (mean)"),
        "{md}"
    );
    assert!(!md.contains("naive mode: pricing floor"), "{md}");
    // Step 1 (0-1 s) has no sample, step 2 (1-2 s) second 1's.
    assert!(md.contains("| 1: 0-1 s, 0.5x, 5 req/s"), "{md}");
    assert!(md.contains("| 2: 1-2 s, 1x, 10 req/s"), "{md}");
    assert!(md.contains("10.0 / 50"), "{md}");
    let step2 = md.lines().find(|l| l.starts_with("| 2: 1-2 s")).unwrap();
    assert!(
        step2.contains("| 300 ") && step2.contains("| 12.0 "),
        "{step2}"
    );
    let step1 = md.lines().find(|l| l.starts_with("| 1: 0-1 s")).unwrap();
    assert_eq!(step1.matches("| - ").count(), 2, "{step1}");
}

#[test]
fn a_watched_window_reports_its_failures_slowest_2xx_and_the_first_2xx_after_its_mark() {
    // `sample(i, ..)` is due at i * 100 ms; the window is 200-600 ms,
    // the mark 500 ms.
    let watch = Watch {
        what: "w".into(),
        from: Duration::from_millis(200),
        to: Duration::from_millis(600),
        mark: Some(Duration::from_millis(500)),
    };
    let mut rec = Recorder::new().watching(Some(watch));
    for s in [
        sample(1, Outcome::Status(504), 5, None), // before the window
        sample(2, Outcome::Status(503), 10, None),
        sample(3, Outcome::Status(504), 30, None),
        sample(4, Outcome::Ok, 1200, None), // 2xx after its budget
        sample(5, Outcome::ClientTimeout, 900, None),
        sample(6, Outcome::Ok, 40, None), // after the window and the mark
        sample(7, Outcome::Ok, 20, None),
    ] {
        rec.record(&s);
    }
    let report = rec.finish(one_second_run("hang", "budget"), RunTotals::default(), None);
    let w = report.window.as_ref().expect("a window report");
    assert_eq!((w.requests, w.success, w.good, w.failures), (4, 1, 0, 3));
    assert_eq!(w.refused, BTreeMap::from([(503, 1), (504, 1)]));
    assert_eq!(w.client_timeouts, 1);
    assert!((w.failure_p50_ms.unwrap() - 30.0).abs() < 1.0, "{w:?}");
    assert!((w.failure_p99_ms.unwrap() - 900.0).abs() < 1.0, "{w:?}");
    assert!(
        (w.slowest_success_ms.unwrap() - 1200.0).abs() < 1.0,
        "{w:?}"
    );
    // Request 5 (due at the mark) failed; request 6 is due 100 ms after
    // it and answered 40 ms later; request 7 answered 320 ms after it.
    let first = w.first_success_after_mark_s.unwrap();
    assert!((first - 0.14).abs() < 1e-9, "{first}");
    let md = scenario_markdown(std::slice::from_ref(&report));
    assert!(md.contains("| w: refused (by status)"), "{md}");
    assert!(md.contains("2 (503: 1, 504: 1, client timeout: 1)"), "{md}");
    assert!(md.contains("0 / 1 of 4"), "{md}");
    // Without a watch, no window.
    let plain = Recorder::new().finish(one_second_run("t", "budget"), RunTotals::default(), None);
    assert!(plain.window.is_none());
}

#[test]
fn a_scenario_s_section_is_a_top_level_json_key_and_reads_back() {
    let mut report = Recorder::new().finish(
        one_second_run("outage", "budget"),
        RunTotals::default(),
        None,
    );
    assert!(report.section::<OutageReport>().is_none());
    let outage = OutageReport {
        path: "/pricing".into(),
        requests: 3,
        ..OutageReport::default()
    };
    report.set_section(outage.clone());
    assert_eq!(report.section::<OutageReport>(), Some(&outage));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["outage"]["requests"], 3);
    // Every registered section has its key, null where the run has none.
    for key in ["middle", "hang", "spike", "replicas"] {
        assert!(json.get(key).is_some_and(|v| v.is_null()), "{key}");
    }
    let back: RunReport = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
    assert!(back.section::<crate::hang::HangReport>().is_none());
}

#[test]
fn the_partner_report_compares_its_calls_with_the_ledgers() {
    let mut rec = Recorder::new();
    // Answered at 900 ms of a 1000 ms budget: both calls in time.
    rec.record(&sample(
        0,
        Outcome::Ok,
        900,
        Some("checkout;dur=800, checkout.inventory;dur=100, checkout.pricing;dur=600"),
    ));
    // Answered at 3000 ms: checkout started at 200; inventory ended at
    // 300 (in time), pricing at 2900 (not).
    rec.record(&sample(
        1,
        Outcome::Ok,
        3000,
        Some("checkout;dur=2800, checkout.inventory;dur=100, checkout.pricing;dur=2600"),
    ));
    assert_eq!(rec.partner_calls_answered_by_deadline(), 3);
    let stats: StatsSnapshot = serde_json::from_str(
        r#"{"requests":5,"answered":{"200":5},"with_budget":0,"late":0,"abandoned":0,"evicted_ids":0,"ids":{}}"#,
    )
    .unwrap();
    let p = PartnerReport::new(&stats, rec.partner_calls_answered_by_deadline());
    assert_eq!((p.requests, p.late, p.not_answered_by_deadline), (5, 0, 2));
    assert_eq!(p.not_answered_by_deadline_share, 0.4);
}
