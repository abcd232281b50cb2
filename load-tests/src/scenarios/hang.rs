//! `hang`, `hang-slow-rate`: healthy at 20 (or 2) req/s, budgets 1.9 to
//! 2.1 s per request index; `/inventory` hangs from a quarter of the run
//! for half of it (`PartnerHandle::set_path_hang`), then answers again;
//! reports the failures while it hangs (the watched window), the calls
//! held on it and the recovery ([`crate::hang`] defines them).

use slow_partner::PartnerHandle;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::budgets::BudgetDistribution;
use crate::chain::ChainSettings;
use crate::generator::SpecError;
use crate::hang::{HANG_BUDGETS, HANG_PATH, HELD_SAMPLE_EVERY, HangReport, hang_report, settled_from};
use crate::outage::{OutageWindow, RECOVERED_SHARE};
use crate::report::{RunReport, row, section_cell};
use crate::run::{LoadPlan, ModeRun};
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};

impl Section for HangReport {
    const KEY: &'static str = "hang";
}

/// The offered load of the `hang` scenario, requests/s (`--rate`
/// overrides it).
pub const HANG_RATE: f64 = 20.0;

/// The offered load of the `hang-slow-rate` scenario, requests/s.
pub const HANG_SLOW_RATE: f64 = 2.0;

/// One of the hang scenarios.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hang {
    name: &'static str,
    about: &'static str,
    /// Its offered load, requests/s.
    pub rate: f64,
}

/// `hang`.
pub const HANG: Hang = Hang {
    name: "hang",
    about: "The healthy partner at 20 req/s; a quarter into the run `/inventory` stops \
            answering for half of it, then recovers; budgets of 1.9 to 2.1 s",
    rate: HANG_RATE,
};

/// `hang-slow-rate`.
pub const HANG_SLOW: Hang = Hang {
    name: "hang-slow-rate",
    about: "As `hang`, at 2 req/s",
    rate: HANG_SLOW_RATE,
};

impl Scenario for Hang {
    fn name(&self) -> &'static str {
        self.name
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let rate = self.rate;
        let budgets = BudgetDistribution::uniform(HANG_BUDGETS.0, HANG_BUDGETS.1);
        Setup {
            rate: Some(rate),
            budgets: Some(budgets),
            ..Setup::new(
                self.name,
                format!(
                    "healthy, {rate} req/s; from a quarter into the run {HANG_PATH} stops \
                     answering for half of it (5 s to 15 s of 20 s), then recovers; budgets {}",
                    budgets.describe()
                ),
                settings,
            )
        }
    }

    /// The setup's load, watching the hang from [`crate::hang::HANG_SETTLE`]
    /// after it began ([`crate::hang::watch`]).
    fn plan(&self, setup: &Setup, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        let mut plan = setup.plan(base)?;
        plan.watch = Some(crate::hang::watch(OutageWindow::of_run(
            plan.spec.duration(),
        )));
        Ok(plan)
    }

    /// The load, with the hang beside it; then the calls it held and the
    /// recovery.
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let window = OutageWindow::of_run(run.plan.spec.duration());
            let main = &run.partners.main;
            let (report, settled) = run.load_beside(|start| fault(main, window, start)).await;
            // Whatever happened, the path answers again.
            let _ = main.set_path_hang(HANG_PATH, false);
            let mut report = report?;
            let held_max = main.hung(HANG_PATH).map(|p| p.in_flight_max);
            let hang = hang_report(
                window,
                held_max,
                settled,
                report.window.as_ref(),
                &report.timeline,
            );
            report.set_section(hang);
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let Some(h) = runs.iter().find_map(|r| r.section::<HangReport>()) else {
            return Vec::new();
        };
        let count = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        let secs = |v: Option<f64>| v.map_or("not within the run".into(), |v| format!("{v:.1}"));
        vec![
            row(
                runs,
                &format!(
                    "hang ({} held from {} to {} s): most calls held at once on it, whole run / \
                     from {} s (settled)",
                    h.path, h.from_s, h.to_s, h.settled_from_s
                ),
                &|r| {
                    section_cell(r, |h: &HangReport| {
                        format!("{} / {}", count(h.held_max), count(h.settled_held_max))
                    })
                },
            ),
            row(
                runs,
                &format!(
                    "seconds after the hang until the first 2xx answer / until the first second \
                     (by send time) with goodput back to {:.0} % of before",
                    RECOVERED_SHARE * 100.0
                ),
                &|r| {
                    section_cell(r, |h: &HangReport| {
                        format!(
                            "{} / {} (before: {:.1} req/s)",
                            secs(h.first_success_after_s),
                            secs(h.recovered_after_s),
                            h.pre_hang_goodput_per_s
                        )
                    })
                },
            ),
        ]
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<HangReport>()];
        SECTIONS
    }
}

/// The fault: from `window.from` after the run's start (sent on `start`)
/// until `window.to`, [`HANG_PATH`] hangs. Returns the most calls held on
/// it at once from [`settled_from`] until the end, read every
/// [`HELD_SAMPLE_EVERY`] (`None`: that part of the run is empty, or the
/// hang did not start).
async fn fault(
    partner: &PartnerHandle,
    window: OutageWindow,
    start: oneshot::Receiver<Instant>,
) -> Option<u64> {
    let start = start.await.ok()?;
    tokio::time::sleep_until(start + window.from).await;
    if let Err(e) = partner.set_path_hang(HANG_PATH, true) {
        eprintln!("load-tests: the hang did not start: {e}");
        return None;
    }
    let from = start + settled_from(window);
    let end = start + window.to;
    let mut most = None;
    if from < end {
        tokio::time::sleep_until(from).await;
        while tokio::time::Instant::now() < end {
            let held = partner.hung(HANG_PATH).map_or(0, |p| p.in_flight);
            most = Some(most.map_or(held, |m: u64| m.max(held)));
            tokio::time::sleep(HELD_SAMPLE_EVERY).await;
        }
    }
    tokio::time::sleep_until(end).await;
    let _ = partner.set_path_hang(HANG_PATH, false);
    most
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::Patience;
    use crate::generator::LoadSpec;

    #[test]
    fn the_hangs_have_their_own_rates_budgets_and_watched_window() {
        let settings = ChainSettings::default();
        let base = LoadPlan::fixed(
            LoadSpec::new(128.0, Duration::from_secs(20)).unwrap(),
            Duration::from_secs(2),
            Patience::Fixed(Duration::from_secs(35)),
        );
        // Their own rates unless one was asked for, budgets of 1.9 to
        // 2.1 s, the failures' window 2 s after the hang began.
        for (hang, rate) in [(HANG, 20.0), (HANG_SLOW, 2.0)] {
            let plan = hang.plan(&hang.setup(&settings), &base).unwrap();
            assert_eq!(plan.spec.rate(), rate);
            assert_eq!(plan.budgets.max(), Duration::from_millis(2100));
            let watch = plan.watch.unwrap();
            assert_eq!(
                (watch.from, watch.to),
                (Duration::from_secs(7), Duration::from_secs(15))
            );
            assert!(!plan.fresh_connections);
        }
    }
}
