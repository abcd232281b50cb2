//! The soak: steady load through one chain for a long time while the
//! partner's faults switch every phase, checking after each phase that
//! nothing the fault started outlives it.
//!
//! One slow partner, one checkout and one edge are started in this process
//! on `127.0.0.1` and live through the whole soak (a leak accumulates; a
//! fresh chain per phase would hide it). Checkout's and edge's clients get
//! a short pool idle timeout ([`SoakPlan::pool_idle_timeout`]), so that an
//! idle keep-alive connection is closed soon after its last call and "no
//! connection open" is a check, not a wait of 90 s.
//!
//! 1. **Warm-up**: [`SoakPlan::warmup`] of healthy load, then the drain
//!    below; what the process holds then is the **baseline** (the tasks of
//!    the listeners and pools, no connection).
//! 2. **Each phase**: the partner switches to the phase's [`FaultMode`]
//!    (`normal`, `hang`, `reset`, `blackhole`, `refuse`), the open-loop
//!    generator sends [`SoakPlan::rate`] requests per second for
//!    [`SoakPlan::phase`] and waits for every answer ([`run_load`]), while
//!    a sampler records the peak of tasks, connections and memory. Then
//!    the partner goes back to `normal` (the fault ends) and the
//!    **drain** polls every 100 ms, up to [`SoakPlan::drain_deadline`],
//!    until the partner has no call in flight, the process has **no TCP
//!    connection open** and **no more tasks alive than at the baseline**.
//!    A phase that does not get there within the deadline has *not
//!    returned*, and the soak fails.
//!
//! Every phase is bounded (the generator stops at the phase's end and
//! waits for its answers at most the client's patience) and so is every
//! drain: the soak stops by itself.
//!
//! ```no_run
//! use load_tests::soak::{SoakPlan, run_soak};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let report = run_soak(&SoakPlan::default()).await?;
//! assert!(report.all_returned);
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use service_kit::BudgetMode;
use slow_partner::{FaultMode, PartnerHandle};
use tokio::time::Instant;

use crate::chain::{Chain, ChainSettings, Partners};
use crate::client::Patience;
use crate::generator::LoadSpec;
use crate::report::RunReport;
use crate::resources::{ProbeError, Resources};
use crate::run::{LoadPlan, PartnerStats, RunError, RunLabel, run_load};
use crate::scenario::Scenario as _;
use crate::scenarios::healthy::Healthy;
use crate::target::LoopbackUrl;

/// The faults of the default soak: each of the partner's modes, twice, in
/// ten phases (ten minutes with one-minute phases).
pub const DEFAULT_FAULTS: [FaultMode; 10] = [
    FaultMode::Normal,
    FaultMode::Hang,
    FaultMode::Reset,
    FaultMode::Blackhole,
    FaultMode::Refuse,
    FaultMode::Normal,
    FaultMode::Hang,
    FaultMode::Reset,
    FaultMode::Blackhole,
    FaultMode::Refuse,
];

/// How long the client waits for an answer (edge answers by the budget in
/// budget mode; 35 s covers the 30 s fixed timeouts of budget mode off).
pub const SOAK_PATIENCE: Duration = Duration::from_secs(35);

/// What a soak runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SoakPlan {
    /// The partner's mode in each phase, in order.
    pub faults: Vec<FaultMode>,
    /// How long each phase sends.
    #[serde(with = "crate::report::millis")]
    pub phase: Duration,
    /// Requests per second, in every phase.
    pub rate: f64,
    /// The budget each request is given.
    #[serde(with = "crate::report::millis")]
    pub budget: Duration,
    /// Healthy load before the baseline is read.
    #[serde(with = "crate::report::millis")]
    pub warmup: Duration,
    /// Checkout's and edge's pool idle timeout.
    #[serde(with = "crate::report::millis")]
    pub pool_idle_timeout: Duration,
    /// The longest a drain waits for the process to get back to the
    /// baseline.
    #[serde(with = "crate::report::millis")]
    pub drain_deadline: Duration,
    /// Budget mode of checkout and edge (`on`, `off`).
    pub budget_mode: BudgetMode,
    /// Show a progress bar per phase.
    #[serde(skip)]
    pub progress: bool,
}

impl Default for SoakPlan {
    /// Ten one-minute phases ([`DEFAULT_FAULTS`]) at 50 requests/s with a
    /// 2 s budget, a 5 s warm-up, a 2 s pool idle timeout and a 30 s drain
    /// deadline, budget mode on.
    fn default() -> Self {
        Self {
            faults: DEFAULT_FAULTS.to_vec(),
            phase: Duration::from_secs(60),
            rate: 50.0,
            budget: Duration::from_secs(2),
            warmup: Duration::from_secs(5),
            pool_idle_timeout: Duration::from_secs(2),
            drain_deadline: Duration::from_secs(30),
            budget_mode: BudgetMode::On,
            progress: false,
        }
    }
}

/// The most of tasks, connections and memory seen while a phase ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Peak {
    /// Tasks alive.
    pub tasks: usize,
    /// TCP connections open.
    pub connections: usize,
    /// Resident memory, KiB.
    pub rss_kib: u64,
}

impl Peak {
    fn add(&mut self, r: &Resources) {
        self.tasks = self.tasks.max(r.tasks);
        self.connections = self.connections.max(r.connections);
        self.rss_kib = self.rss_kib.max(r.rss_kib);
    }
}

/// What the drain after a phase (or the warm-up) found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drain {
    /// The last reading.
    pub after: Resources,
    /// Partner calls received and not yet ended (answered or abandoned).
    pub partner_in_flight: u64,
    /// How long after the fault ended the process was back to the
    /// baseline; `None`: not within the drain deadline.
    pub returned_in_ms: Option<u64>,
}

/// One phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// 1-based.
    pub index: usize,
    /// The partner's mode while it ran.
    pub fault: FaultMode,
    /// The load and its answers.
    pub run: RunReport,
    /// The most seen while it ran.
    pub peak: Peak,
    /// What was left after it.
    pub drain: Drain,
}

impl PhaseReport {
    /// Whether everything the phase started ended.
    pub fn returned(&self) -> bool {
        self.drain.returned_in_ms.is_some()
    }
}

/// A whole soak.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    /// What ran.
    pub plan: SoakPlan,
    /// After the warm-up: what the process holds at rest.
    pub baseline: Drain,
    /// Each phase, in order.
    pub phases: Vec<PhaseReport>,
    /// Resident memory at the baseline, KiB.
    pub rss_start_kib: u64,
    /// Resident memory after the last phase's drain, KiB.
    pub rss_end_kib: u64,
    /// Resident memory after the drain of the middle phase (phase
    /// `n / 2`), KiB: with the end, the trend over the second half, once
    /// the allocator has seen every fault's high-water mark.
    pub rss_mid_kib: u64,
    /// The most resident memory seen, KiB.
    pub rss_max_kib: u64,
    /// Whether every phase returned to the baseline.
    pub all_returned: bool,
    /// Wall time of the whole soak, seconds.
    pub wall_s: f64,
}

/// Why a soak could not run (a phase that does not return is not an
/// error: it is in the report).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SoakError {
    /// The chain, the partner or a load run failed.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The process could not be measured.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// The partner's mode could not be switched.
    #[error("the slow partner could not switch to {mode} mode")]
    Mode {
        /// The mode.
        mode: FaultMode,
        /// Why.
        #[source]
        source: slow_partner::PartnerError,
    },
    /// The plan's rate or phase length is out of range.
    #[error("{0}")]
    Spec(#[from] crate::generator::SpecError),
}

/// Runs `plan`: warm-up and baseline, then every phase and its drain.
///
/// # Errors
///
/// When the chain cannot start, the process cannot be measured, the
/// partner cannot switch modes, or a load run fails.
pub async fn run_soak(plan: &SoakPlan) -> Result<SoakReport, SoakError> {
    let started = Instant::now();
    // Unlimited workers: the soak's 50 req/s is far below the chain's
    // capacity, and what it measures is what each fault leaves behind.
    let partners = Partners::start_main(
        slow_partner::PartnerConfig::new(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
            .with_shutdown_grace(Duration::from_secs(1)),
    )
    .await
    .map_err(RunError::from)?;
    let settings = ChainSettings {
        pool_idle_timeout: Some(plan.pool_idle_timeout),
        ..ChainSettings::default()
    };
    let scenario = Healthy.setup(&settings);
    let chain = match Chain::start(&scenario, &settings, plan.budget_mode.into(), &partners).await {
        Ok(chain) => chain,
        Err(e) => {
            partners.shutdown().await;
            return Err(RunError::from(e).into());
        }
    };
    let result = soak_chain(plan, &chain, &partners.main).await;
    chain.stop().await;
    partners.shutdown().await;
    let (baseline, phases) = result?;
    let rss_start_kib = baseline.after.rss_kib;
    let rss_end_kib = phases
        .last()
        .map_or(rss_start_kib, |p| p.drain.after.rss_kib);
    let rss_mid_kib = match phases.len() / 2 {
        0 => rss_start_kib,
        half => phases[half - 1].drain.after.rss_kib,
    };
    let rss_max_kib = phases
        .iter()
        .map(|p| p.peak.rss_kib.max(p.drain.after.rss_kib))
        .fold(rss_start_kib, u64::max);
    Ok(SoakReport {
        plan: plan.clone(),
        all_returned: baseline.returned_in_ms.is_some() && phases.iter().all(|p| p.returned()),
        baseline,
        phases,
        rss_start_kib,
        rss_end_kib,
        rss_mid_kib,
        rss_max_kib,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

async fn soak_chain(
    plan: &SoakPlan,
    chain: &Chain,
    partner: &PartnerHandle,
) -> Result<(Drain, Vec<PhaseReport>), SoakError> {
    let runtime = tokio::runtime::Handle::current();
    let target = LoopbackUrl::parse(&chain.url).map_err(RunError::from)?;
    let load = |duration: Duration| -> Result<LoadPlan, SoakError> {
        Ok(LoadPlan {
            progress: plan.progress,
            ..LoadPlan::fixed(
                LoadSpec::new(plan.rate, duration)?,
                plan.budget,
                Patience::Fixed(SOAK_PATIENCE),
            )
        })
    };
    let label = |mode: String, description: String| RunLabel {
        scenario: "soak".into(),
        mode,
        description,
        id_group: 1,
    };

    let warmup = load(plan.warmup)?;
    run_load(
        &warmup,
        target.clone(),
        label("warm-up".into(), "healthy load before the baseline".into()),
        PartnerStats::InProcess(partner),
    )
    .await?;
    let baseline = drain(&runtime, partner, None, plan.drain_deadline).await?;
    let baseline_tasks = baseline.after.tasks;

    let mut phases = Vec::with_capacity(plan.faults.len());
    for (i, &fault) in plan.faults.iter().enumerate() {
        switch(partner, fault).await?;
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = tokio::spawn(sample_until(runtime.clone(), Arc::clone(&stop)));
        let run = run_load(
            &load(plan.phase)?,
            target.clone(),
            label(
                fault.as_str().to_owned(),
                format!("phase {}: the partner in {fault} mode", i + 1),
            ),
            PartnerStats::InProcess(partner),
        )
        .await;
        stop.store(true, Ordering::Release);
        let peak = sampler.await.unwrap_or_default();
        switch(partner, FaultMode::Normal).await?;
        let run = run?;
        let drain = drain(&runtime, partner, Some(baseline_tasks), plan.drain_deadline).await?;
        phases.push(PhaseReport {
            index: i + 1,
            fault,
            run,
            peak,
            drain,
        });
    }
    Ok((baseline, phases))
}

async fn switch(partner: &PartnerHandle, mode: FaultMode) -> Result<(), SoakError> {
    partner
        .set_mode(mode)
        .await
        .map(|_| ())
        .map_err(|source| SoakError::Mode { mode, source })
}

/// The peak of four readings a second until `stop`.
async fn sample_until(runtime: tokio::runtime::Handle, stop: Arc<AtomicBool>) -> Peak {
    let mut peak = Peak::default();
    while !stop.load(Ordering::Acquire) {
        if let Ok(r) = Resources::sample(&runtime) {
            peak.add(&r);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    peak
}

/// Polls until the partner has nothing in flight, no connection is open,
/// and the tasks are at most `baseline_tasks`, or, with no baseline yet,
/// steady over five readings; at most `deadline`.
async fn drain(
    runtime: &tokio::runtime::Handle,
    partner: &PartnerHandle,
    baseline_tasks: Option<usize>,
    deadline: Duration,
) -> Result<Drain, SoakError> {
    let started = Instant::now();
    let mut recent: Vec<usize> = Vec::new();
    loop {
        let after = Resources::sample(runtime)?;
        let stats = partner.stats();
        let ended = stats.answered.values().sum::<u64>() + stats.abandoned;
        let partner_in_flight = stats.requests.saturating_sub(ended);
        recent.push(after.tasks);
        let tasks_back = match baseline_tasks {
            Some(b) => after.tasks <= b,
            None => {
                recent.len() >= 5 && recent[recent.len() - 5..].iter().all(|&t| t == after.tasks)
            }
        };
        let elapsed = started.elapsed();
        if partner_in_flight == 0 && after.connections == 0 && tasks_back {
            return Ok(Drain {
                after,
                partner_in_flight,
                returned_in_ms: Some(elapsed.as_millis() as u64),
            });
        }
        if elapsed >= deadline {
            return Ok(Drain {
                after,
                partner_in_flight,
                returned_in_ms: None,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drain_does_not_return_while_a_connection_is_held_and_does_once_it_closes() {
        let _alone = crate::resources::PROCESS_WIDE.lock().await;
        let runtime = tokio::runtime::Handle::current();
        let partner = slow_partner::spawn(slow_partner::PartnerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
        ))
        .await
        .unwrap();
        let baseline = drain(&runtime, &partner, None, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(baseline.returned_in_ms.is_some(), "{baseline:?}");
        assert_eq!(baseline.after.connections, 0);

        let held = tokio::net::TcpStream::connect(partner.addr())
            .await
            .unwrap();
        let leaked = drain(
            &runtime,
            &partner,
            Some(baseline.after.tasks),
            Duration::from_millis(500),
        )
        .await
        .unwrap();
        assert_eq!(leaked.returned_in_ms, None, "{leaked:?}");
        assert_eq!(leaked.after.connections, 2, "both ends are in this process");
        assert!(
            leaked.after.tasks > baseline.after.tasks,
            "the partner's connection task"
        );

        drop(held);
        let back = drain(
            &runtime,
            &partner,
            Some(baseline.after.tasks),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert!(back.returned_in_ms.is_some(), "{back:?}");
        partner.shutdown().await;
    }
}
