//! The command line's checks and defaults.

use super::*;
use crate::budgets::BudgetDistribution;
use crate::output::chain_line;

fn refusal(args: &[&str]) -> String {
    let mut full = vec!["load-tests"];
    full.extend_from_slice(args);
    Args::try_parse_from(full)
        .expect("parses")
        .invocation()
        .expect_err("refused")
        .to_string()
}

fn accepted(args: &[&str]) -> Invocation {
    let mut full = vec!["load-tests"];
    full.extend_from_slice(args);
    Args::try_parse_from(full)
        .expect("parses")
        .invocation()
        .expect("accepted")
}

#[test]
fn a_target_that_is_not_loopback_is_refused() {
    for url in [
        "http://10.0.0.1:8080/checkout",
        "http://example.com/checkout",
        "http://0.0.0.0:8080/checkout",
        "https://127.0.0.1/checkout",
    ] {
        let err = refusal(&["--target", url]);
        assert!(
            err.starts_with(&format!("--target: refusing {url}")),
            "{err}"
        );
    }
    let err = refusal(&[
        "--target",
        "http://127.0.0.1:1/checkout",
        "--partner-stats",
        "http://192.168.0.2:9000",
    ]);
    assert!(err.starts_with("--partner-stats: refusing"), "{err}");
    assert!(matches!(
        accepted(&["--target", "http://localhost:8080/checkout"]),
        Invocation::Target { .. }
    ));
}

#[test]
fn rate_and_duration_over_the_caps_are_refused() {
    assert_eq!(
        refusal(&["--rate", "5001"]),
        "--rate: rate 5001/s is over the cap of 5000/s"
    );
    assert_eq!(
        refusal(&["--rate", "0"]),
        "--rate: rate 0/s is not a positive number"
    );
    assert_eq!(
        refusal(&["--duration", "11m"]),
        "--duration: duration 11m is over the cap of 10m"
    );
    assert_eq!(
        refusal(&["--duration", "0s"]),
        "--duration: duration must be more than zero"
    );
    assert!(refusal(&["--requests", "1000001"]).starts_with("--requests: "));
    assert!(refusal(&["--client-timeout", "61s"]).starts_with("--client-timeout: "));
    assert!(refusal(&["--client-timeout", "soon"]).starts_with("--client-timeout: "));
    assert!(refusal(&["--budget", "11s"]).starts_with("--budget: "));
    assert!(refusal(&["--concurrency", "0"]).starts_with("--concurrency: "));
    assert!(refusal(&["--partner-workers", "0"]).starts_with("--partner-workers: "));
    assert!(refusal(&["--partner-workers", "1025"]).starts_with("--partner-workers: "));
    assert!(refusal(&["--slowdown", "1000"]).starts_with("--slowdown: "));
    assert!(refusal(&["--max-in-flight", "100000"]).starts_with("--max-in-flight: "));
    assert!(
        refusal(&["--target", "http://127.0.0.1:1/", "--scenario", "slow"])
            .starts_with("--scenario: ")
    );
    // At the caps: accepted.
    assert!(matches!(
        accepted(&["--rate", "5000", "--duration", "10m"]),
        Invocation::Scenarios { .. }
    ));
}

#[test]
fn the_defaults_run_every_scenario_in_all_three_modes_at_80_percent_of_capacity() {
    let Invocation::Scenarios {
        scenarios,
        modes,
        plan,
        settings,
    } = accepted(&[])
    else {
        panic!("scenarios expected");
    };
    // Every scenario but the sweep, which runs only when asked for.
    let every: Vec<_> = crate::scenarios::ALL
        .iter()
        .copied()
        .filter(|s| s.name() != crate::sweep::SWEEP_NAME)
        .collect();
    assert_eq!(scenarios, every);
    assert_eq!(modes, ChainMode::ALL);
    assert_eq!(plan.spec.rate(), 128.0);
    assert_eq!(plan.spec.expected_requests(), 2560);
    assert_eq!(
        plan.budgets,
        BudgetDistribution::Fixed(Duration::from_secs(2))
    );
    assert_eq!(plan.criticality, None);
    assert_eq!(plan.patience, Patience::Fixed(Duration::from_secs(35)));
    assert_eq!(settings, ChainSettings::default());
    assert_eq!(
        (settings.inventory_floor, settings.pricing_floor),
        (None, None)
    );
    let Invocation::Scenarios { settings, .. } =
        accepted(&["--inventory-floor", "900ms", "--pricing-floor", "600ms"])
    else {
        panic!("scenarios expected");
    };
    assert_eq!(settings.inventory_floor, Some(Duration::from_millis(900)));
    assert_eq!(settings.pricing_floor, Some(Duration::from_millis(600)));
    assert!(refusal(&["--pricing-floor", "11s"]).starts_with("--pricing-floor: "));
    assert_eq!(settings.checkout_floor, None);
    let Invocation::Scenarios {
        settings: fixed, ..
    } = accepted(&["--checkout-floor", "10ms"])
    else {
        panic!("scenarios expected");
    };
    assert_eq!(fixed.checkout_floor, Some(Duration::from_millis(10)));
    assert!(refusal(&["--checkout-floor", "11s"]).starts_with("--checkout-floor: "));
    assert_eq!((settings.partner_workers, settings.concurrency), (8, None));
    let line = chain_line(&settings);
    assert!(line.contains("checkout's default (adaptive)"), "{line}");
    let Invocation::Scenarios { settings, plan, .. } =
        accepted(&["--concurrency", "8", "--partner-workers", "4"])
    else {
        panic!("scenarios expected");
    };
    assert_eq!(
        (settings.partner_workers, settings.concurrency),
        (4, Some(8))
    );
    // Capacity from the partner's workers: 4 / 50 ms; 80 % of it.
    assert_eq!(plan.spec.rate(), 64.0);
    let line = chain_line(&settings);
    assert!(line.contains("at most 4 calls at once per path"), "{line}");
    assert!(line.contains("limit per dependency: 8 (fixed"), "{line}");
}

#[test]
fn a_scenario_named_twice_runs_once_in_the_modes_given() {
    let Invocation::Scenarios {
        scenarios,
        modes,
        plan,
        ..
    } = accepted(&[
        "--scenario",
        "slow,slow,healthy",
        "--modes",
        "off",
        "--client-timeout",
        "budget",
    ])
    else {
        panic!("scenarios expected");
    };
    let names: Vec<&str> = scenarios.iter().map(|s| s.name()).collect();
    assert_eq!(names, ["slow", "healthy"]);
    assert_eq!(modes, [ChainMode::Naive]);
    assert_eq!(plan.patience, Patience::Budget);
}

#[test]
fn modes_are_a_comma_separated_list_in_the_order_given_and_all_is_the_five() {
    let modes = |args: &[&str]| match accepted(args) {
        Invocation::Scenarios { modes, .. } => modes,
        Invocation::Sweep { .. } | Invocation::Target { .. } => panic!("scenarios expected"),
    };
    assert_eq!(modes(&[]), ChainMode::ALL);
    assert_eq!(ChainMode::ALL.len(), 5);
    assert_eq!(ChainMode::ALL[4], ChainMode::Envoy);
    assert_eq!(
        modes(&["--modes", "envoy,on"]),
        [ChainMode::Envoy, ChainMode::Budget]
    );
    assert_eq!(modes(&["--modes", "all"]), ChainMode::ALL);
    assert_eq!(
        modes(&["--modes", "queue,on,queue"]),
        [ChainMode::Queue, ChainMode::Budget]
    );
    assert_eq!(
        modes(&["--modes", "peer,both"]),
        [ChainMode::Peer, ChainMode::Budget, ChainMode::Naive]
    );
    // A value clap does not know is its error, not a panic.
    let err = Args::try_parse_from(["load-tests", "--modes", "on,shed"]).unwrap_err();
    assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
    assert!(err.to_string().contains("queue"), "{err}");
}

#[test]
fn the_replicas_scenario_and_the_p2c_mode_parse_and_replicas_adds_p2c_after_peer() {
    let Invocation::Scenarios {
        scenarios,
        modes,
        plan,
        settings,
    } = accepted(&["--scenario", "replicas", "--modes", "p2c"])
    else {
        panic!("scenarios expected");
    };
    let replicas = crate::scenarios::find("replicas").unwrap();
    assert_eq!(scenarios, [replicas]);
    let replicas = replicas.get();
    assert_eq!(modes, [ChainMode::P2c]);
    assert_eq!(replicas.modes(&modes), [ChainMode::P2c]);
    // 60 % of three replicas' capacity, in six phases over 29 s.
    let own = replicas.plan(&replicas.setup(&settings), &plan).unwrap();
    assert!(own.spec.steps().iter().all(|s| s.rate == 288.0));
    assert_eq!(own.spec.duration(), Duration::from_secs(29));
    let Invocation::Scenarios { modes, .. } =
        accepted(&["--scenario", "replicas", "--modes", "on,peer,p2c"])
    else {
        panic!("scenarios expected");
    };
    assert_eq!(
        replicas.modes(&modes),
        [
            ChainMode::Budget,
            ChainMode::Hedged,
            ChainMode::Peer,
            ChainMode::P2c
        ]
    );
    let Invocation::Scenarios { modes, .. } = accepted(&["--scenario", "replicas"]) else {
        panic!("scenarios expected");
    };
    assert_eq!(
        replicas.modes(&modes),
        [
            ChainMode::Budget,
            ChainMode::Hedged,
            ChainMode::Naive,
            ChainMode::Peer,
            ChainMode::P2c,
            ChainMode::Queue,
            ChainMode::Envoy
        ]
    );
    // Every other scenario keeps its modes: p2c only where asked.
    assert_eq!(
        crate::scenarios::find("healthy")
            .unwrap()
            .get()
            .modes(&modes),
        ChainMode::ALL
    );
}

#[test]
fn an_output_file_that_cannot_be_made_is_refused_before_the_run() {
    let dir = std::env::temp_dir();
    let dir_text = dir.to_str().expect("a UTF-8 temp dir");
    for name in ["html", "json", "svg"] {
        assert_eq!(
            refusal(&[&format!("--{name}"), dir_text]),
            format!("--{name}: {dir_text} is a directory")
        );
    }
    assert_eq!(
        refusal(&["--html", "/no/such/dir/report.html"]),
        "--html: cannot write /no/such/dir/report.html: directory /no/such/dir does not exist"
    );
    // A bare file name is in the current directory.
    assert!(matches!(
        accepted(&["--html", "report.html"]),
        Invocation::Scenarios { .. }
    ));
}

#[test]
fn via_envoy_names_the_topology_and_is_refused_where_the_chain_has_no_place_for_it() {
    let Invocation::Scenarios { settings, .. } = accepted(&["--via-envoy", "--scenario", "slow"])
    else {
        panic!("scenarios expected");
    };
    assert!(settings.via_envoy);
    let line = chain_line(&settings);
    assert!(
        line.contains("Topology: via Envoy: edge -> Envoy -> checkout -> Envoy -> partner"),
        "{line}"
    );
    let Invocation::Scenarios { settings, .. } = accepted(&[]) else {
        panic!("scenarios expected");
    };
    assert!(!settings.via_envoy && !chain_line(&settings).contains("Envoy"));
    let err = refusal(&["--via-envoy", "--target", "http://127.0.0.1:1/checkout"]);
    assert!(err.starts_with("--via-envoy: "), "{err}");
    for scenario in ["db-slow", "reconnect-storm", "batch-outage"] {
        let err = refusal(&["--via-envoy", "--scenario", scenario]);
        assert!(
            err.starts_with(&format!("--via-envoy: not with {scenario}: ")),
            "{err}"
        );
    }
}

#[test]
fn the_envoy_mode_runs_in_every_scenario_of_the_chain_and_is_skipped_with_a_reason_elsewhere() {
    let Invocation::Scenarios {
        scenarios, modes, ..
    } = accepted(&["--modes", "envoy"])
    else {
        panic!("scenarios expected");
    };
    for scenario in scenarios {
        let (runs, notes) = modes_of(scenario.get(), &modes);
        match scenario.get().without_envoy() {
            None => assert_eq!(
                (runs, notes.len()),
                (vec![ChainMode::Envoy], 0),
                "{scenario:?}"
            ),
            Some(why) => {
                assert!(runs.is_empty(), "{scenario:?}");
                assert_eq!(
                    notes,
                    [format!("{} skips the envoy mode: {why}", scenario.name())]
                );
            }
        }
    }
}
