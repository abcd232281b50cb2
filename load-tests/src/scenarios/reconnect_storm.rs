//! `reconnect-storm`: [`STORM_CLIENTS`] SSE clients (or `--requests`)
//! follow a slow partner's `/events` ([`EVENT_RATE`] events a second
//! each), directly, then (a second run, a partner of its own) through
//! edge's `/events` (edge's defaults; its opening of the partner's stream
//! is a call of its `events` client, breaker included); once every one
//! follows, the partner is **restarted**:
//! the process stops (every stream cut at once, without a final event),
//! its port stays closed for [`RESTART_DOWN`] (connects refused), and a new
//! process starts on the same port. What the restarted partner sees of
//! the clients coming back, and whether they lost events, is
//! [`StormReport`] ([`crate::storm`] defines each measure).
//!
//! Modes (the followers are [`crate::storm::followers`]'s): `budget`
//! (`budget_core`'s `EventSource`, every default), `naive` (a fixed 1 s,
//! then doubling, no jitter), `peer` (`reqwest-eventsource` 0.6 with its
//! default policy; why that crate: the followers' docs). The chain of
//! the run is not used: the clients are the app's, the partner is the
//! server they follow.
//!
//! Goals ([`goals`]): budget mode's peak at most a fifth of naive mode's;
//! 99 % of budget mode's clients back within its backoff cap; no event
//! lost.
//!
//! The clients, edge and the partner share this process: each stream is
//! two sockets (four through edge), so the run checks the open-files limit first
//! ([`descriptors_needed`]) and refuses with a clear error below it
//! (`ulimit -n`; the default 1 000 clients need 4 256).
//!
//! Through edge, a client cut off reconnects to edge, which opens the
//! partner's stream again: while the partner is down edge answers `502`,
//! `504` or, once its breaker opened, `503`, and a follower that does not
//! retry a refused status gives up (`reqwest-eventsource` does not: its
//! row says so).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use slow_partner::{PartnerConfig, PartnerHandle};
use tokio::time::Instant;

use crate::chain::{ChainError, ChainMode, ChainSettings};
use crate::generator::{MAX_REQUESTS, SpecError};
use crate::report::{RunReport, row, section_cell};
use crate::run::{LoadPlan, ModeRun, RunError};
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};
use crate::storm::followers::spawn_followers;
use crate::storm::{
    BACK_SHARE, ClientLog, EVENT_RATE, PEAK_FACTOR, RESTART_DOWN, STORM_CLIENTS, StormReport,
    StormRuns, StormTarget, WATCH_LIMIT, WINDOW, client_counts, descriptors_needed,
    open_files_limit, peak_in_window,
};
use crate::target::loopback_client;

impl Section for StormRuns {
    const KEY: &'static str = "reconnect_storm";
}

/// The longest the scenario waits for every client to follow before the
/// cut.
const FOLLOW_LIMIT: Duration = Duration::from_secs(30);

/// How long the streams run after the last client is back, so that an
/// event skipped on resume shows.
const AFTER_BACK: Duration = Duration::from_secs(1);

/// The `reconnect-storm` scenario.
#[derive(Clone, Copy, Debug)]
pub struct ReconnectStorm;

impl Scenario for ReconnectStorm {
    fn name(&self) -> &'static str {
        "reconnect-storm"
    }

    fn about(&self) -> &'static str {
        "1 000 SSE clients (or --requests) follow the partner's /events; the partner restarts; \
         peak reconnects per 100 ms, time until 99 % are back, events lost"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup::new(
            self.name(),
            format!(
                "SSE clients follow the partner's /events ({EVENT_RATE} events/s each), \
                 directly; the partner restarts (process stopped, port closed {} s, a new \
                 process on the same port)",
                RESTART_DOWN.as_secs()
            ),
            settings,
        )
    }

    /// The number of clients: `--requests` when given, else
    /// [`STORM_CLIENTS`].
    fn plan(&self, setup: &Setup, base: &LoadPlan) -> Result<LoadPlan, SpecError> {
        let mut plan = setup.plan(base)?;
        if base.spec.max_requests() >= MAX_REQUESTS {
            plan.spec = plan.spec.with_max_requests(STORM_CLIENTS)?;
        }
        Ok(plan)
    }

    /// `budget`, `naive` and `peer` of those asked.
    fn modes(&self, asked: &[ChainMode]) -> Vec<ChainMode> {
        let ours = [ChainMode::Budget, ChainMode::Naive, ChainMode::Peer];
        asked.iter().copied().filter(|m| ours.contains(m)).collect()
    }

    /// Directly, then through edge, each with a partner of its own.
    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let mut runs = StormRuns::default();
            for target in StormTarget::ALL {
                let clients = run.plan.spec.max_requests();
                runs.targets.push(storm(run.mode, clients, target).await?);
            }
            let mut report = run.report_of(started.elapsed());
            report.set_section(runs);
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let policy = row(runs, "reconnect policy", &|r| {
            section_cell(r, |s: &StormRuns| {
                s.targets.first().map_or("-".into(), |t| t.policy.clone())
            })
        });
        std::iter::once(policy)
            .chain(StormTarget::ALL.into_iter().flat_map(|t| target_rows(runs, t)))
            .collect()
    }

    fn after_table(&self, runs: &[RunReport]) -> String {
        goals(runs)
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<StormRuns>()];
        SECTIONS
    }

    fn request_load(&self) -> bool {
        false
    }

    fn without_envoy(&self) -> Option<&'static str> {
        Some("its clients follow the partner's event stream (directly or through edge): no checkout calls for a sidecar to carry")
    }
}

/// The rows of `target`, each named after it.
fn target_rows(runs: &[RunReport], target: StormTarget) -> Vec<Vec<String>> {
    type Cell = fn(&StormReport) -> String;
    let lines: [(&str, Cell); 5] = [
        ("clients following before the cut / back after it", |s| {
            format!("{} / {} of {}", s.following, s.back, s.clients)
        }),
        ("**peak stream openings per 100 ms** at the restarted partner", |s| {
            format!("**{}** (of {} openings)", s.peak_per_window, s.opens_after)
        }),
        ("seconds from the cut until 99 % / all are back", |s| {
            let secs = |v: Option<f64>| v.map_or("not back".into(), |s| format!("{s:.2}"));
            format!("{} / {}", secs(s.back_99_s), secs(s.back_all_s))
        }),
        ("**events lost** (ids skipped) / repeated, of events received", |s| {
            format!("**{}** / {} of {}", s.events_lost, s.events_repeated, s.events)
        }),
        ("clients whose follower gave up", |s| match &s.first_give_up {
            Some(why) => format!("{} (first: {why})", s.gave_up),
            None => s.gave_up.to_string(),
        }),
    ];
    let present = runs
        .iter()
        .any(|r| r.section::<StormRuns>().is_some_and(|s| s.of(target).is_some()));
    if !present {
        return Vec::new();
    }
    lines
        .iter()
        .map(|(name, cell)| {
            row(runs, &format!("{}: {name}", target.describe()), &|r| {
                section_cell(r, |s: &StormRuns| s.of(target).map_or("-".into(), cell))
            })
        })
        .collect()
}

/// The goals, met or not, from the runs' reports, for each target:
/// budget mode's peak at most naive mode's over [`PEAK_FACTOR`], 99 %
/// back within budget mode's cap, no event lost in budget mode.
pub fn goals(runs: &[RunReport]) -> String {
    StormTarget::ALL
        .into_iter()
        .map(|t| target_goals(runs, t))
        .collect()
}

/// [`goals`] for `target`.
fn target_goals(runs: &[RunReport], target: StormTarget) -> String {
    let of = |mode: ChainMode| {
        runs.iter()
            .find(|r| r.mode == mode.as_str())
            .and_then(|r| r.section::<StormRuns>())
            .and_then(|s| s.of(target))
    };
    let Some(budget) = of(ChainMode::Budget) else {
        return String::new();
    };
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let name = target.describe();
    let mut out = String::new();
    if let Some(naive) = of(ChainMode::Naive) {
        out.push_str(&format!(
            "Goal {name}, peak reconnects: budget {} <= naive {} / {PEAK_FACTOR} = {}: {}.\n",
            budget.peak_per_window,
            naive.peak_per_window,
            naive.peak_per_window / PEAK_FACTOR,
            met(budget.peak_per_window * PEAK_FACTOR <= naive.peak_per_window)
        ));
    }
    let back = match (budget.back_99_s, budget.cap_s) {
        (Some(b), Some(cap)) => format!("{b:.2} s <= the cap {cap:.0} s: {}", met(b <= cap)),
        (None, _) => "not within the watch: not met".into(),
        (Some(b), None) => format!("{b:.2} s, no cap to hold it to: not met"),
    };
    out.push_str(&format!(
        "Goal {name}, {:.0} % back within the backoff cap: {back}.\n",
        BACK_SHARE * 100.0
    ));
    out.push_str(&format!(
        "Goal {name}, zero events lost: budget {}: {}.\n\n",
        budget.events_lost,
        met(budget.events_lost == 0 && budget.following == budget.clients)
    ));
    out
}

/// One run: the partner (and edge in front of it, for
/// [`StormTarget::Edge`]), `clients` followers of `mode`, the restart, the
/// watch, the report.
async fn storm(
    mode: ChainMode,
    clients: u64,
    target: StormTarget,
) -> Result<StormReport, RunError> {
    let needed = descriptors_needed(clients);
    if let Some(limit) = open_files_limit()
        && limit < needed
    {
        return Err(RunError::OpenFiles { needed, limit });
    }
    let partner = slow_partner::spawn(partner_config(SocketAddr::from(([127, 0, 0, 1], 0)))).await?;
    let addr = partner.addr();
    let path = format!("/events?rate={EVENT_RATE}");
    let logs: Vec<ClientLog> = (0..clients).map(|_| ClientLog::default()).collect();
    let front = match target {
        StormTarget::Direct => None,
        StormTarget::Edge => Some(Front::start(&partner).await?),
    };
    let base = front.as_ref().map_or_else(|| partner.url(""), |f| f.url.clone());
    let (mut tasks, policy) = spawn_followers(mode, &base, &path, &logs)?;
    wait_until(FOLLOW_LIMIT, || logs.iter().all(ClientLog::is_started)).await;
    let cut = Instant::now();
    partner.shutdown().await;
    tokio::time::sleep_until(cut + RESTART_DOWN).await;
    logs.iter().for_each(ClientLog::mark);
    let partner = slow_partner::spawn(partner_config(addr)).await?;
    wait_until(WATCH_LIMIT, || logs.iter().all(ClientLog::is_settled)).await;
    tokio::time::sleep(AFTER_BACK).await;
    let opens = read_opens(&partner).await;
    tasks.abort_all();
    if let Some(front) = front {
        front.stop().await;
    }
    partner.shutdown().await;
    let opens = opens?;
    let counts = client_counts(&logs, cut);
    Ok(StormReport {
        target,
        policy: policy.text,
        cap_s: policy.cap.map(|c| c.as_secs_f64()),
        cut: "restart".into(),
        down_ms: RESTART_DOWN.as_millis() as u64,
        opens_after: opens.len() as u64,
        peak_per_window: peak_in_window(&opens, WINDOW.as_millis() as u64),
        clients: counts.clients,
        following: counts.following,
        back: counts.back,
        back_99_s: counts.back_99_s,
        back_all_s: counts.back_all_s,
        events: counts.events,
        events_lost: counts.events_lost,
        events_repeated: counts.events_repeated,
        gave_up: counts.gave_up,
        first_give_up: counts.first_give_up,
    })
}

/// The partner of a run, on `addr`: no grace on shutdown, so that a stop
/// cuts every stream at once.
fn partner_config(addr: SocketAddr) -> PartnerConfig {
    PartnerConfig::new(addr).with_shutdown_grace(Duration::ZERO)
}

/// Waits until `done` holds (checked every 50 ms), at most `limit`.
async fn wait_until(limit: Duration, done: impl Fn() -> bool) {
    let end = Instant::now() + limit;
    while !done() && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Edge in front of the partner: its `/events` opens the partner's; every
/// other setting edge's default.
#[derive(Debug)]
struct Front {
    url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Front {
    async fn start(partner: &PartnerHandle) -> Result<Self, RunError> {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        // Checkout is not called: only `/events` is followed.
        let mut config = edge::EdgeConfig::new(loopback, partner.url(""));
        config.events_url = partner.url("/events");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr, server) = edge::spawn(&config, async move {
            let _ = stopped.await;
        })
        .await
        .map_err(|e| ChainError::new("edge", e))?;
        Ok(Self {
            url: format!("http://{addr}"),
            stop,
            server,
        })
    }

    /// Stops edge: its streams end; aborted after 2 s.
    async fn stop(self) {
        let _ = self.stop.send(());
        let mut server = self.server;
        if tokio::time::timeout(Duration::from_secs(2), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
    }
}

/// What `GET /admin/streams` says.
#[derive(Debug, Deserialize)]
struct Streams {
    opens_unix_ms: Vec<u64>,
}

/// The stream openings `partner` recorded, unix ms.
async fn read_opens(partner: &PartnerHandle) -> Result<Vec<u64>, RunError> {
    let http = loopback_client(Duration::from_secs(2))?;
    let streams: Streams = http
        .get(partner.url("/admin/streams"))
        .timeout(Duration::from_secs(10))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(streams.opens_unix_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::RunTotals;
    use crate::report::tests::one_second_run;
    use crate::report::{Recorder, scenario_markdown};

    fn run(mode: &str, storm: StormReport) -> RunReport {
        let info = one_second_run("reconnect-storm", mode);
        let mut r = Recorder::new().finish(info, RunTotals::default(), None);
        r.set_section(StormRuns {
            targets: vec![storm],
        });
        r
    }

    fn storm(peak: u64, back_99_s: Option<f64>, lost: u64) -> StormReport {
        StormReport {
            target: StormTarget::Direct,
            policy: "p".into(),
            cap_s: Some(30.0),
            clients: 10,
            following: 10,
            cut: "restart".into(),
            down_ms: 2000,
            opens_after: 10,
            peak_per_window: peak,
            back: 10,
            back_99_s,
            back_all_s: back_99_s,
            events_lost: lost,
            events_repeated: 0,
            events: 100,
            gave_up: 0,
            first_give_up: None,
        }
    }

    #[test]
    fn goals_hold_budget_to_a_fifth_of_naive_s_peak_its_cap_and_no_loss() {
        let runs = [
            run("budget", storm(200, Some(12.0), 0)),
            run("naive", storm(1000, Some(3.0), 0)),
        ];
        let g = goals(&runs);
        assert!(
            g.contains("Goal directly, peak reconnects: budget 200 <= naive 1000 / 5 = 200: met."),
            "{g}"
        );
        assert!(g.contains("12.00 s <= the cap 30 s: met."), "{g}");
        assert!(g.contains("zero events lost: budget 0: met."), "{g}");
        // No run through edge: no goal for it.
        assert!(!g.contains("through edge"), "{g}");
        let runs = [
            run("budget", storm(201, Some(31.0), 2)),
            run("naive", storm(1000, Some(3.0), 0)),
        ];
        let g = goals(&runs);
        assert_eq!(g.matches("not met").count(), 3, "{g}");
    }

    #[test]
    fn its_report_has_its_own_rows_and_none_of_the_request_load() {
        let md = scenario_markdown(&[run("budget", storm(3, Some(1.0), 0))]);
        assert!(md.contains("peak stream openings per 100 ms"), "{md}");
        assert!(!md.contains("goodput") && !md.contains("Budget table"), "{md}");
    }

    #[test]
    fn it_runs_budget_naive_and_peer_and_its_clients_come_from_requests() {
        assert_eq!(
            ReconnectStorm.modes(&ChainMode::ALL),
            [ChainMode::Budget, ChainMode::Naive, ChainMode::Peer]
        );
        let setup = ReconnectStorm.setup(&ChainSettings::default());
        let base = LoadPlan::fixed(
            crate::generator::LoadSpec::new(128.0, Duration::from_secs(20)).unwrap(),
            Duration::from_secs(2),
            crate::client::Patience::Budget,
        );
        let plan = ReconnectStorm.plan(&setup, &base).unwrap();
        assert_eq!(plan.spec.max_requests(), STORM_CLIENTS);
        let asked = LoadPlan {
            spec: base.spec.clone().with_max_requests(50).unwrap(),
            ..base
        };
        assert_eq!(ReconnectStorm.plan(&setup, &asked).unwrap().spec.max_requests(), 50);
    }
}
