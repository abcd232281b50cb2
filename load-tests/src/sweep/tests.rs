//! The sweep's command line, plan and report: every flag's refusal names
//! it, the filters keep the cells asked for, the table has a row per run.

use std::time::Duration;

use clap::Parser;

use super::*;
use crate::chain::ChainMode;
use crate::cli::{Args, CliError, Invocation};

fn parse(args: &[&str]) -> Result<Invocation, CliError> {
    let mut full = vec!["load-tests"];
    full.extend_from_slice(args);
    Args::try_parse_from(full).expect("parses").invocation()
}

fn sweep(args: &[&str]) -> SweepPlan {
    let mut full = vec!["--scenario", "burst-sweep"];
    full.extend_from_slice(args);
    match parse(&full).expect("accepted") {
        Invocation::Sweep { sweep, .. } => sweep,
        other => panic!("a sweep expected, got {other:?}"),
    }
}

fn refusal(args: &[&str]) -> String {
    parse(args).expect_err("refused").to_string()
}

#[test]
fn the_full_sweep_is_72_cells_in_every_mode_once() {
    let plan = sweep(&[]);
    assert_eq!(plan.cells.len(), 72);
    assert_eq!(plan.modes, ChainMode::ALL);
    assert_eq!((plan.repeat, plan.noisy_neighbour), (1, false));
    let e = plan.estimate();
    assert_eq!(e.runs, 360);
    // Every run's wait is bounded: the bound is finite and under the cap.
    assert!(e.typical <= e.at_most && e.at_most <= MAX_SWEEP, "{e:?}");
}

#[test]
fn filters_keep_the_cells_asked_for_in_the_grids_order() {
    let plan = sweep(&[
        "--sweep-start",
        "warm",
        "--sweep-size",
        "600",
        "--sweep-budget",
        "2s",
        "--sweep-partner",
        "50ms-8w",
        "--repeat",
        "5",
        "--modes",
        "on,off",
    ]);
    assert_eq!(
        plan.cells,
        [Cell {
            start: Start::Warm,
            size: 600,
            budget: SweepBudget::Fixed(Duration::from_secs(2)),
            partner: PartnerShape::Delay50Workers8,
        }]
    );
    assert_eq!(plan.repeat, 5);
    assert_eq!(plan.modes, [ChainMode::Budget, ChainMode::Naive]);
    let plan = sweep(&["--sweep-budget", "mixed,500ms", "--sweep-start", "cold"]);
    assert_eq!(plan.cells.len(), 2 * 3 * 3);
    assert_eq!(
        plan.cells[0].budget,
        SweepBudget::Fixed(Duration::from_millis(500))
    );
    assert_eq!(
        plan.cells[1].budget,
        SweepBudget::Fixed(Duration::from_millis(500))
    );
    assert_eq!(plan.cells[3].budget, SweepBudget::Mixed);
    assert!(plan.cells.iter().all(|c| c.start == Start::Cold));
    // A size off the grid is a cell of its own.
    assert_eq!(sweep(&["--sweep-size", "300"]).cells[0].size, 300);
    assert!(sweep(&["--noisy-neighbour"]).noisy_neighbour);
}

#[test]
fn every_bad_sweep_flag_is_a_typed_error_naming_it() {
    for (args, starts) in [
        (&["--sweep-size", "0"][..], "--sweep-size: 0 is outside"),
        (
            &["--sweep-size", "9000"][..],
            "--sweep-size: 9000 is outside",
        ),
        (&["--sweep-budget", "soon"][..], "--sweep-budget: `soon`"),
        (
            &["--sweep-budget", "0ms"][..],
            "--sweep-budget: 0ms is outside",
        ),
        (
            &["--sweep-budget", "20s"][..],
            "--sweep-budget: 20s is outside",
        ),
        (&["--repeat", "0"][..], "--repeat: 0 is outside"),
        (&["--repeat", "21"][..], "--repeat: 21 is outside"),
        (&["--warm"][..], "--warm: burst-sweep runs cold and warm"),
        (
            &["--html", "x.html"][..],
            "--html: burst-sweep writes one table",
        ),
    ] {
        let mut full = vec!["--scenario", "burst-sweep"];
        full.extend_from_slice(args);
        let err = parse(&full).expect_err("refused");
        assert!(matches!(err, CliError::Flag { .. }), "{err:?}");
        assert!(err.to_string().starts_with(starts), "{args:?}: {err}");
    }
    // Sweep flags without the sweep, the sweep beside another scenario,
    // --warm without a burst.
    for (args, starts) in [
        (
            &["--sweep-size", "600"][..],
            "--sweep-size: only with --scenario burst-sweep",
        ),
        (
            &["--repeat", "5"][..],
            "--repeat: only with --scenario burst-sweep",
        ),
        (&["--noisy-neighbour"][..], "--noisy-neighbour: only with"),
        (
            &["--scenario", "burst-sweep,slow"][..],
            "--scenario: burst-sweep runs on its own",
        ),
        (
            &["--scenario", "slow", "--warm"][..],
            "--warm: only the burst-* scenarios",
        ),
    ] {
        assert!(
            refusal(args).starts_with(starts),
            "{args:?}: {}",
            refusal(args)
        );
    }
    // A value clap does not know is clap's error, not a panic.
    let full = [
        "load-tests",
        "--scenario",
        "burst-sweep",
        "--sweep-partner",
        "slow",
    ];
    assert!(Args::try_parse_from(full).is_err());
}

#[test]
fn warm_is_the_bursts_flag_and_the_default_run_leaves_the_sweep_out() {
    match parse(&["--scenario", "burst-fits,slow", "--warm"]).unwrap() {
        Invocation::Scenarios { plan, .. } => assert!(plan.warm),
        other => panic!("{other:?}"),
    }
    match parse(&[]).unwrap() {
        Invocation::Scenarios {
            scenarios, plan, ..
        } => {
            assert!(!plan.warm, "cold is the default");
            assert!(scenarios.iter().all(|s| s.name() != SWEEP_NAME));
            assert_eq!(scenarios.len(), crate::scenarios::ALL.len() - 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_table_has_a_row_per_cell_and_run_with_the_modes_side_by_side() {
    let f = |mode: &str, good, refused| ModeFigures {
        mode: mode.into(),
        requests: 100,
        good,
        refused,
        refused_queue_p50_ms: Some(0.0),
        refused_queue_p99_ms: Some(3.0),
        ..ModeFigures::default()
    };
    let cell = crate::scenarios::burst_sweep::STEADY_CELL;
    let rows = [(1, 90, 80), (2, 70, 85)].map(|(run, budget, naive)| {
        let modes = vec![f("budget", budget, 100 - budget), f("naive", naive, 0)];
        SweepRow {
            index: 0,
            cell,
            run,
            verdict: verdict(&modes),
            modes,
        }
    });
    let report = SweepReport {
        rows: rows.to_vec(),
        ..SweepReport::default()
    };
    let md = sweep_markdown(&report);
    assert!(md.contains("| start | size | budgets | partner | run | budget | naive | verdict |"));
    assert!(
        md.contains(
            "| warm | 600 | 2s | 50ms-8w | 1 | 90 · 10 ref · q 0/3 | 80 · 0 ref · q 0/3 | pass"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "| 2 | 70 · 30 ref · q 0/3 | 85 · 0 ref · q 0/3 | **FAIL**: below naive (70 < 85 - 3)"
        ),
        "{md}"
    );
    assert!(md.contains("1 of 2 judged rows pass."));
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["rows"][1]["modes"][0]["good"], 70);
    assert_eq!(json["rows"][1]["verdict"]["pass"], false);
    assert_eq!(json["rows"][0]["cell"]["partner"], "50ms-8w");
}
