//! `deep`: as `slow`, with a fourth hop: checkout's three URLs point at
//! [`Middle`](crate::middle::Middle) (`/inventory?...` and so on), which
//! calls the partner's same path with the same query: budget-aware in
//! budget mode, fixed timeouts in naive mode, plain tower in peer mode.
//! Middle counts its own work ([`MiddleStats`], the report's `middle`).

use crate::chain::ChainSettings;
use crate::middle::MiddleStats;
use crate::report::{RunReport, pct, row, section_cell};
use crate::run::ModeRun;
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};

impl Section for MiddleStats {
    const KEY: &'static str = "middle";
}

/// The `deep` scenario.
#[derive(Clone, Copy, Debug)]
pub struct Deep;

impl Scenario for Deep {
    fn name(&self) -> &'static str {
        "deep"
    }

    fn about(&self) -> &'static str {
        "Four hops, edge -> checkout -> middle -> partner, under the slow partner"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        let f = settings.slowdown;
        Setup {
            middle: true,
            ..Setup::new(
                self.name(),
                format!(
                    "four hops (edge, checkout, middle, partner); partner {f}x slower on every path"
                ),
                settings,
            )
            .slower(f)
        }
    }

    /// The load, then middle's counters.
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let chain = run.chain;
            let mut report = run.load().await?;
            if let Some(m) = &chain.middle {
                report.set_section(m.stats());
            }
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        if !runs.iter().any(|r| r.section::<MiddleStats>().is_some()) {
            return Vec::new();
        }
        vec![
            row(runs, "middle: requests / with a budget", &|r| {
                section_cell(r, |s: &MiddleStats| {
                    format!("{} / {}", s.requests, s.with_budget)
                })
            }),
            row(
                runs,
                "middle: answers ready after the budget they arrived with",
                &|r| {
                    section_cell(r, |s: &MiddleStats| {
                        if s.with_budget == 0 {
                            "not measured (no budget arrives)".into()
                        } else {
                            pct(s.late, s.with_budget)
                        }
                    })
                },
            ),
            row(runs, "middle: work dropped before its answer (cut)", &|r| {
                section_cell(r, |s: &MiddleStats| s.cut.to_string())
            }),
        ]
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<MiddleStats>()];
        SECTIONS
    }
}
