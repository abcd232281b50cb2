//! `outage`: healthy; from a quarter into the run `/pricing` answers
//! `503` to every call for half of it (5 s to 15 s of the default 20 s;
//! `PartnerHandle::set_path_status`), then recovers; reports pricing
//! attempts per client request during the outage and the time until
//! goodput is back ([`crate::outage`] defines both).

use std::time::Duration;

use slow_partner::PartnerHandle;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::chain::ChainSettings;
use crate::outage::{
    OUTAGE_PATH, OUTAGE_STATUS, OutageReport, OutageWindow, RECOVERED_SHARE, outage_report,
};
use crate::report::{RunReport, row, section_cell};
use crate::run::ModeRun;
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};

impl Section for OutageReport {
    const KEY: &'static str = "outage";
}

/// The `outage` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Outage;

impl Scenario for Outage {
    fn name(&self) -> &'static str {
        "outage"
    }

    fn about(&self) -> &'static str {
        "The healthy partner; a quarter into the run `/pricing` answers `503` for half of it, \
         then recovers"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup::new(
            self.name(),
            "healthy; from a quarter into the run, /pricing answers 503 for half of it \
             (5 s to 15 s of 20 s), then recovers",
            settings,
        )
    }

    /// The load, with the outage beside it; then what the chain did
    /// during it.
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let window = OutageWindow::of_run(run.plan.spec.duration());
            let prefix = run.id_prefix();
            let (main, plan) = (&run.partners.main, run.plan);
            let (report, ()) = run.load_beside(|start| fault(main, window, start)).await;
            // Whatever happened, the path answers normally again.
            let _ = main.set_path_status(OUTAGE_PATH, None);
            let mut report = report?;
            let offsets: Vec<Duration> = plan.spec.schedule().collect();
            let outage = outage_report(window, &offsets, &prefix, &main.stats(), &report.timeline);
            report.set_section(outage);
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let Some(o) = runs.iter().find_map(|r| r.section::<OutageReport>()) else {
            return Vec::new();
        };
        vec![
            row(
                runs,
                &format!(
                    "outage ({} answers {} from {} to {} s): {} attempts per client request",
                    o.path, o.status, o.from_s, o.to_s, o.path
                ),
                &|r| {
                    section_cell(r, |o: &OutageReport| {
                        format!(
                            "{:.2} ({} calls / {} requests, at most {})",
                            o.pricing_attempts_per_request,
                            o.pricing_calls,
                            o.requests,
                            o.max_pricing_attempts
                        )
                    })
                },
            ),
            row(
                runs,
                &format!(
                    "seconds after the outage until goodput is back to {:.0} % of before",
                    RECOVERED_SHARE * 100.0
                ),
                &|r| {
                    section_cell(r, |o: &OutageReport| {
                        o.recovered_after_s.map_or_else(
                            || "not within the run".to_owned(),
                            |s| format!("{s:.0} (before: {:.1} req/s)", o.pre_outage_goodput_per_s),
                        )
                    })
                },
            ),
        ]
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<OutageReport>()];
        SECTIONS
    }
}

/// The fault: from `window.from` after the run's start (sent on `start`)
/// until `window.to`, `/pricing` answers `503`.
async fn fault(partner: &PartnerHandle, window: OutageWindow, start: oneshot::Receiver<Instant>) {
    let Ok(start) = start.await else {
        return;
    };
    tokio::time::sleep_until(start + window.from).await;
    if let Err(e) = partner.set_path_status(OUTAGE_PATH, Some(OUTAGE_STATUS)) {
        eprintln!("load-tests: the outage did not start: {e}");
        return;
    }
    tokio::time::sleep_until(start + window.to).await;
    let _ = partner.set_path_status(OUTAGE_PATH, None);
}
