//! Every scenario, one file each, and the registry: [`ALL`], in the order
//! they run by default. `--scenario`, its help, the markdown, JSON and
//! HTML reports take the scenarios from here.
//!
//! Adding a scenario is one new file here implementing
//! [`Scenario`](crate::scenario::Scenario) and one line in the
//! `registry!` list below (see [`crate::scenario`]'s module docs).
//!
//! Each scenario starts the real services in this process, on
//! `127.0.0.1:0` ([`crate::chain`]): a slow partner (inventory, pricing
//! and recommendations are three paths of it, shaped by their query
//! strings), a second one in `blackhole` mode, and per run a fresh
//! checkout and edge in the run's mode, the modes back to back, same load.

use crate::scenario::ScenarioRef;

/// Declares the scenario modules and [`ALL`]: a line per file, the
/// file's scenarios in brackets.
macro_rules! registry {
    ($($module:ident: [$($scenario:ident),+ $(,)?]),+ $(,)?) => {
        $(pub mod $module;)+

        /// Every scenario, in the order they run.
        pub static ALL: &[ScenarioRef] = &[$($(ScenarioRef(&$module::$scenario)),+),+];
    };
}

registry! {
    healthy: [Healthy],
    slow: [Slow],
    blackhole: [Blackhole],
    rate_limit: [RateLimit],
    pricing_flaky: [PricingFlaky],
    recs_slow: [RecsSlow],
    mixed_budgets: [MixedBudgets],
    criticality: [Criticality],
    ramp: [Ramp],
    deep: [Deep],
    outage: [Outage],
    tail: [Tail],
    spike: [Spike],
    burst: [BURST_FITS, BURST_FITS_UNLIMITED, BURST_PART, BURST_PART_UNLIMITED],
    burst_sweep: [BurstSweep],
    hang: [HANG, HANG_SLOW],
    replicas: [Replicas],
    db_slow: [DbSlow],
    reconnect_storm: [ReconnectStorm],
    batch_outage: [BatchOutage],
}

/// The scenario called `name` ([`Scenario::name`](crate::scenario::Scenario::name)).
///
/// ```
/// assert_eq!(load_tests::scenarios::find("slow").map(|s| s.name()), Some("slow"));
/// assert!(load_tests::scenarios::find("target").is_none());
/// ```
pub fn find(name: &str) -> Option<ScenarioRef> {
    ALL.iter().copied().find(|s| s.name() == name)
}
