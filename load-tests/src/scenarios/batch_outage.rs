//! `batch-outage`: producers push [`ITEM_RATE`] items a second (or
//! `--rate`) into a batch uploader that flushes to a slow partner's
//! `/ingest`; after [`BEFORE`] the endpoint fails for [`OUTAGE`](crate::batch_outage::OUTAGE)
//! (or `--duration`; `PUT /admin/ingest` `fail_for`), the first half
//! answering `503`, the second applying and losing the answer
//! ([`halves`]), then recovers; the
//! pushes go on for [`AFTER`], then the scenario waits for the backlog
//! (at most [`DRAIN_LIMIT`]) and shuts the uploader down (its final flush
//! within [`SHUTDOWN_DEADLINE`]). [`BatchReport`] is what it measures
//! ([`crate::batch_outage`] defines each measure).
//!
//! Modes: `budget`, `budget_core`'s `Uploader` with every default (a
//! queue bounded in items and bytes, a key per batch kept on every send,
//! full-jitter backoff capped at 60 s) over a client of the ingest
//! endpoint with a breaker of every default (a `DependencyConfig` has none
//! unless given one); `naive`,
//! [`NaiveUploader`]: an unbounded queue, a retry every second, no
//! breaker, a new key per send. The chain of the run is not used: the
//! uploader is the app's, the partner is its server.
//!
//! Goals ([`goals`]): budget mode's queue within its bound, no item lost,
//! none applied twice, and at most the breaker's probes (plus the
//! failures that open it) reaching the dead endpoint.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use budget_core::batch::{Uploader, UploaderConfig};
use budget_core::breaker::BreakerConfig;
use budget_core::client::DependencyConfig;
use slow_partner::PartnerConfig;
use tokio::time::Instant;

use crate::batch_outage::{
    AFTER, BEFORE, BatchReport, DRAIN_LIMIT, ITEM_BYTES, ITEM_RATE, IngestAdmin, IngestFailure,
    Peak, SAMPLE_EVERY, SHUTDOWN_DEADLINE, halves, item,
};
use crate::chain::{ChainMode, ChainSettings};
use crate::naive_uploader::{NAIVE_INTERVAL, NaiveUploader};
use crate::report::{RunReport, row, section_cell};
use crate::run::{ModeRun, RunError};
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};
use crate::target::loopback_client;

impl Section for BatchReport {
    const KEY: &'static str = "batch_outage";
}

/// The `batch-outage` scenario.
#[derive(Clone, Copy, Debug)]
pub struct BatchOutage;

impl Scenario for BatchOutage {
    fn name(&self) -> &'static str {
        "batch-outage"
    }

    fn about(&self) -> &'static str {
        "Producers push 200 items/s (or --rate) into a batch uploader; the partner's /ingest \
         fails for 20 s (or --duration: 503 the first half, applied with the answer lost the \
         second), then recovers: queue memory, items lost, applied twice, requests to the \
         dead endpoint"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup {
            rate: Some(ITEM_RATE),
            ..Setup::new(
                self.name(),
                format!(
                    "producers push steadily into a batch uploader flushing to the partner's \
                     /ingest; after {} s /ingest fails for the run's duration (503 the first \
                     half; the second, batches applied and their answers lost), then \
                     recovers; pushes go on {} s more",
                    BEFORE.as_secs(),
                    AFTER.as_secs()
                ),
                settings,
            )
        }
    }

    /// `budget` and `naive` of those asked.
    fn modes(&self, asked: &[ChainMode]) -> Vec<ChainMode> {
        let ours = [ChainMode::Budget, ChainMode::Naive];
        asked.iter().copied().filter(|m| ours.contains(m)).collect()
    }

    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let (rate, outage) = (run.plan.spec.rate(), run.plan.spec.duration());
            let batch = batch(run.mode, rate, outage).await?;
            let mut report = run.report_of(started.elapsed());
            report.set_section(batch);
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let cell = |f: fn(&BatchReport) -> String| move |r: &RunReport| section_cell(r, f);
        let bound = |v: Option<u64>| v.map_or("unbounded".into(), |v| v.to_string());
        vec![
            row(runs, "uploader", &cell(|b| b.policy.clone())),
            row(
                runs,
                "pushes accepted / refused (queue full)",
                &cell(|b| format!("{} / {}", b.accepted, b.rejected)),
            ),
            row(
                runs,
                "**peak queue**: items (bound) / bytes (bound)",
                &|r| {
                    section_cell(r, |b: &BatchReport| {
                        format!(
                            "**{}** ({}) / {} ({})",
                            b.peak_items,
                            bound(b.bound_items),
                            b.peak_bytes,
                            bound(b.bound_bytes)
                        )
                    })
                },
            ),
            row(
                runs,
                "**items lost** (accepted, not applied) / unsent at shutdown",
                &cell(|b| format!("**{}** / {}", b.lost_items, b.unsent_at_shutdown)),
            ),
            row(
                runs,
                "**applied twice** (items) / duplicates ignored by key (batches)",
                &cell(|b| format!("**{}** / {}", b.applied_twice, b.duplicates)),
            ),
            row(
                runs,
                "**requests to the dead endpoint** (bound: breaker threshold + probes) / all",
                &|r| {
                    section_cell(r, |b: &BatchReport| {
                        format!(
                            "**{}** ({}) / {}",
                            b.requests_while_failing,
                            b.dead_bound.map_or("no breaker".into(), |n| n.to_string()),
                            b.requests
                        )
                    })
                },
            ),
            row(
                runs,
                "seconds from the recovery until the backlog is applied",
                &cell(|b| {
                    b.drain_s
                        .map_or("not within the watch".into(), |s| format!("{s:.1}"))
                }),
            ),
            row(
                runs,
                "items / batches applied",
                &cell(|b| format!("{} / {}", b.applied_items, b.applied_batches)),
            ),
        ]
    }

    fn after_table(&self, runs: &[RunReport]) -> String {
        goals(runs)
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<BatchReport>()];
        SECTIONS
    }

    fn request_load(&self) -> bool {
        false
    }

    fn without_envoy(&self) -> Option<&'static str> {
        Some("its uploaders send batches to the partner themselves, with no checkout to put Envoy beside")
    }
}

/// The goals, met or not, for budget mode's run: the queue's peak within
/// its bound, nothing lost, nothing applied twice, requests to the dead
/// endpoint within the breaker's bound.
pub fn goals(runs: &[RunReport]) -> String {
    let Some(b) = runs
        .iter()
        .find(|r| r.mode == ChainMode::Budget.as_str())
        .and_then(|r| r.section::<BatchReport>())
    else {
        return String::new();
    };
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let within = |peak: u64, bound: Option<u64>| bound.is_some_and(|n| peak <= n);
    let dead = b.dead_bound.is_some_and(|n| b.requests_while_failing <= n);
    format!(
        "Goal, memory within the bound: {} items, {} bytes: {}.\n\
         Goal, zero lost: {} items: {}.\n\
         Goal, zero applied twice: {} items: {}.\n\
         Goal, requests to the dead endpoint at most the breaker's: {} <= {}: {}.\n\n",
        b.peak_items,
        b.peak_bytes,
        met(within(b.peak_items, b.bound_items) && within(b.peak_bytes, b.bound_bytes)),
        b.lost_items,
        met(b.lost_items == 0 && b.rejected == 0),
        b.applied_twice,
        met(b.applied_twice == 0),
        b.requests_while_failing,
        b.dead_bound.map_or("-".into(), |n| n.to_string()),
        met(dead)
    )
}

/// The uploader of a mode.
enum Sink {
    Budget(Uploader),
    Naive(NaiveUploader),
}

impl Sink {
    /// The mode's uploader, flushing to the partner at `base`.
    fn start(mode: ChainMode, base: &str) -> Result<Self, RunError> {
        Ok(match mode {
            ChainMode::Naive => Sink::Naive(NaiveUploader::start(
                loopback_client(Duration::from_secs(2))?,
                format!("{base}/ingest"),
            )),
            _ => {
                // A client has no breaker unless given one: the endpoint's,
                // every default (docs/streams.md's uploader does the same).
                let mut ingest = DependencyConfig::new("ingest", base);
                ingest.breaker = Some(BreakerConfig::default());
                Sink::Budget(Uploader::new(ingest.build()?, UploaderConfig::default())?)
            }
        })
    }

    fn policy(&self) -> String {
        match self {
            Sink::Budget(_) => {
                let b = BreakerConfig::default();
                format!(
                    "budget_core Uploader, defaults; the ingest client's breaker, defaults \
                     ({} failures, open {} s)",
                    b.failure_threshold,
                    b.open_for.as_secs()
                )
            }
            Sink::Naive(_) => format!(
                "unbounded queue, retry every {} s, no breaker, a new key per send",
                NAIVE_INTERVAL.as_secs()
            ),
        }
    }

    /// Pushes item `seq`: whether it was accepted.
    fn push(&self, seq: u64) -> bool {
        match self {
            Sink::Budget(u) => u.push(&item(seq)).is_ok_and(|p| p.is_queued()),
            Sink::Naive(u) => {
                u.push(item(seq));
                true
            }
        }
    }

    /// Items and bytes held.
    fn held(&self) -> (usize, usize) {
        match self {
            Sink::Budget(u) => {
                let s = u.stats();
                (s.queued_items, s.queued_bytes)
            }
            Sink::Naive(u) => {
                let n = u.queued();
                (n, n.saturating_mul(ITEM_BYTES))
            }
        }
    }

    /// The bound, items and bytes.
    fn bound(&self) -> (Option<u64>, Option<u64>) {
        match self {
            Sink::Budget(_) => {
                let c = UploaderConfig::default();
                (
                    Some(c.queue_max_items as u64),
                    Some(c.queue_max_bytes as u64),
                )
            }
            Sink::Naive(_) => (None, None),
        }
    }

    /// Stops it (its final flush within [`SHUTDOWN_DEADLINE`]): the items
    /// it did not send, and the breaker's bound on requests to a dead
    /// endpoint (the failures that open it plus the probes made).
    async fn shutdown(&self) -> (u64, Option<u64>) {
        match self {
            Sink::Budget(u) => match u.shutdown(SHUTDOWN_DEADLINE).await {
                Ok(report) => {
                    let threshold = u64::from(BreakerConfig::DEFAULT.failure_threshold);
                    (
                        report.unsent_items() as u64,
                        Some(threshold + report.stats.probes),
                    )
                }
                Err(_) => (0, None),
            },
            Sink::Naive(u) => (u.shutdown(SHUTDOWN_DEADLINE).await as u64, None),
        }
    }
}

/// Pushes accepted and refused so far.
#[derive(Debug, Default)]
struct Pushes {
    accepted: AtomicU64,
    rejected: AtomicU64,
}

/// Pushes an item every `1 / rate` s into `sink` until `end`.
async fn produce(sink: Arc<Sink>, rate: f64, end: Instant, pushes: Arc<Pushes>) {
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let mut seq = 0;
    loop {
        tick.tick().await;
        if Instant::now() >= end {
            return;
        }
        let counter = if sink.push(seq) {
            &pushes.accepted
        } else {
            &pushes.rejected
        };
        counter.fetch_add(1, Ordering::Relaxed);
        seq += 1;
    }
}

/// The queue's peak, and when the backlog was applied.
struct Watch<'a> {
    sink: &'a Sink,
    admin: &'a IngestAdmin,
    peak: Peak,
    drained_at: Option<Instant>,
}

impl Watch<'_> {
    /// Samples until `end`, or until `all` items are applied; notes when
    /// `backlog` items were (both read from the partner).
    async fn until(
        &mut self,
        end: Instant,
        backlog: Option<u64>,
        all: Option<u64>,
    ) -> Result<(), RunError> {
        loop {
            let (items, bytes) = self.sink.held();
            self.peak.sample(items, bytes);
            if backlog.is_some() || all.is_some() {
                let applied = self.admin.stats().await?.distinct_items();
                if self.drained_at.is_none() && backlog.is_some_and(|b| applied >= b) {
                    self.drained_at = Some(Instant::now());
                }
                if all.is_some_and(|a| applied >= a) {
                    return Ok(());
                }
            }
            if Instant::now() >= end {
                return Ok(());
            }
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
    }
}

/// One run: the partner, the uploader of `mode`, the pushes at `rate`,
/// the outage, the drain, the shutdown, the report.
async fn batch(mode: ChainMode, rate: f64, outage: Duration) -> Result<BatchReport, RunError> {
    let config = PartnerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)))
        .with_shutdown_grace(Duration::from_secs(1));
    let partner = slow_partner::spawn(config).await?;
    let admin = IngestAdmin::new(&partner.url(""))?;
    let sink = Arc::new(Sink::start(mode, &partner.url(""))?);
    let pushes = Arc::new(Pushes::default());
    let start = Instant::now();
    let (fail_at, recovered) = (start + BEFORE, start + BEFORE + outage);
    let producer = tokio::spawn(produce(
        Arc::clone(&sink),
        rate,
        recovered + AFTER,
        Arc::clone(&pushes),
    ));
    let mut watch = Watch {
        sink: &sink,
        admin: &admin,
        peak: Peak::default(),
        drained_at: None,
    };
    watch.until(fail_at, None, None).await?;
    // One window for the whole outage, its mode switched at the half: no
    // healthy gap between the halves.
    let (first, _) = halves(outage);
    admin.fail_for(outage, IngestFailure::Status).await?;
    watch.until(fail_at + first, None, None).await?;
    let rest = recovered.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        admin.fail_for(rest, IngestFailure::AppliedReset).await?;
    }
    watch.until(recovered, None, None).await?;
    let backlog = pushes.accepted.load(Ordering::Relaxed);
    watch.until(recovered + AFTER, Some(backlog), None).await?;
    let _ = producer.await;
    let accepted = pushes.accepted.load(Ordering::Relaxed);
    let drain_end = Instant::now() + DRAIN_LIMIT;
    watch
        .until(drain_end, Some(backlog), Some(accepted))
        .await?;
    let (peak, drained_at) = (watch.peak, watch.drained_at);
    let (unsent, dead_bound) = sink.shutdown().await;
    let ingest = admin.stats().await?;
    partner.shutdown().await;
    let (bound_items, bound_bytes) = sink.bound();
    Ok(BatchReport {
        policy: sink.policy(),
        items_per_s: rate,
        outage_s: outage.as_secs_f64(),
        accepted,
        rejected: pushes.rejected.load(Ordering::Relaxed),
        bound_items,
        bound_bytes,
        peak_items: peak.items,
        peak_bytes: peak.bytes,
        applied_items: ingest.items_applied,
        applied_batches: ingest.batches_applied,
        lost_items: accepted.saturating_sub(ingest.distinct_items()),
        unsent_at_shutdown: unsent,
        duplicates: ingest.duplicates,
        applied_twice: ingest.items_applied_again,
        requests: ingest.requests,
        requests_while_failing: ingest.requests_while_failing,
        dead_bound,
        drain_s: drained_at.map(|t| t.saturating_duration_since(recovered).as_secs_f64()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Patience;
    use crate::generator::{LoadSpec, RunTotals};
    use crate::report::Recorder;
    use crate::report::tests::one_second_run;

    fn run(mode: &str, batch: BatchReport) -> RunReport {
        let info = one_second_run("batch-outage", mode);
        let mut r = Recorder::new().finish(info, RunTotals::default(), None);
        r.set_section(batch);
        r
    }

    fn batch(peak_items: u64, lost: u64, twice: u64, dead: u64) -> BatchReport {
        BatchReport {
            policy: "p".into(),
            items_per_s: 200.0,
            outage_s: 20.0,
            accepted: 5000,
            rejected: 0,
            bound_items: Some(10_000),
            bound_bytes: Some(8 << 20),
            peak_items,
            peak_bytes: peak_items * 100,
            applied_items: 5000 - lost + twice,
            applied_batches: 30,
            lost_items: lost,
            unsent_at_shutdown: lost,
            duplicates: 0,
            applied_twice: twice,
            requests: 40,
            requests_while_failing: dead,
            dead_bound: Some(9),
            drain_s: Some(4.0),
        }
    }

    #[test]
    fn goals_hold_budget_to_its_bound_no_loss_no_double_and_the_breaker_s_requests() {
        let g = goals(&[run("budget", batch(4_200, 0, 0, 9))]);
        assert_eq!(g.matches(": met.").count(), 4, "{g}");
        let g = goals(&[run("budget", batch(10_001, 1, 1, 10))]);
        assert_eq!(g.matches("not met").count(), 4, "{g}");
        // Naive mode's run alone has no goals.
        assert!(goals(&[run("naive", batch(4_200, 0, 0, 20))]).is_empty());
    }

    #[test]
    fn it_runs_budget_and_naive_at_its_own_rate_unless_one_is_asked() {
        assert_eq!(
            BatchOutage.modes(&ChainMode::ALL),
            [ChainMode::Budget, ChainMode::Naive]
        );
        let setup = BatchOutage.setup(&ChainSettings::default());
        let base = crate::run::LoadPlan::fixed(
            LoadSpec::new(128.0, OUTAGE_DEFAULT).unwrap(),
            Duration::from_secs(2),
            Patience::Budget,
        );
        let plan = BatchOutage.plan(&setup, &base).unwrap();
        assert_eq!(
            (plan.spec.rate(), plan.spec.duration()),
            (ITEM_RATE, OUTAGE_DEFAULT)
        );
    }

    const OUTAGE_DEFAULT: Duration = crate::batch_outage::OUTAGE;
}
