//! `db-slow`: the healthy chain with checkout's database step on (a
//! throwaway PostgreSQL cluster per run), slowed by **lock contention**: a
//! session of its own holds the hot row locked (`select ... for update` in
//! an open transaction) for [`lock_stretch`] of every [`lock_period`],
//! then releases it, again and again until the sending window ends.
//!
//! # The model behind the lock's rhythm
//!
//! With budget `B` (the plan's, 2 s by default):
//!
//! - **locked 1.5 B** (3 s): a statement blocked at the start of a stretch
//!   outlives its caller only when the stretch is longer than the budget;
//!   1.5 B leaves a window of B/2 in which a statement nobody waits for
//!   any more can hold a connection (the case a slow database is about),
//!   while the arrivals of the stretch's last B still fit their budget
//!   when the lock goes (what waiting in budget is for). The peer's fixed
//!   `statement_timeout` (1 s, B/2) is shorter than the stretch, so it
//!   fires during it.
//! - **unlocked 1 s** after it: the backlog of a stretch (rate x 1.5 B
//!   statements, 384 at 128 req/s, each well under a millisecond on 8
//!   connections) drains in tens of milliseconds, so the gap is healthy
//!   load and the next stretch starts from an empty queue.
//!
//! # What it measures ([`DbSlowReport`])
//!
//! From the server, the same rule for every mode: a connection of its own
//! reads `pg_stat_activity` every [`POLL_EVERY`] and follows each active
//! `update stock` statement (its pid and `query_start`) until it is gone.
//! Its caller's deadline is at the latest `query_start` + the request's
//! whole budget, so the **database work for nobody** is
//! Σ max(0, last seen − (query_start + budget)): a conservative lower
//! bound (the caller's time before the statement, the pool wait included,
//! is not counted). Also the most such statements active at once and
//! those active at the end of each lock stretch (connections stuck), and
//! the pool wait (`orders-db-queue` in the ledger, p50 and p99).

use std::collections::HashMap;
use std::time::Duration;

use budget_core::postgres::tokio_postgres::{self, Client, NoTls};
use checkout::stock::HOT_SKU;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::chain::{ChainMode, ChainSettings};
use crate::report::{RunReport, row, section_cell};
use crate::run::ModeRun;
use crate::scenario::{RunFuture, Scenario, Setup};
use crate::section::{Section, SectionKind};

/// How often the server's activity is read.
pub const POLL_EVERY: Duration = Duration::from_millis(10);

/// The unlocked part of every period.
pub const UNLOCKED: Duration = Duration::from_secs(1);

/// The longest the watch goes on after the sending window, for statements
/// still running.
const DRAIN_WATCH: Duration = Duration::from_secs(10);

/// How long the hot row stays locked: 1.5 times the budget (see the
/// module docs).
///
/// ```
/// use std::time::Duration;
/// use load_tests::scenarios::db_slow::{lock_period, lock_stretch};
/// assert_eq!(lock_stretch(Duration::from_secs(2)), Duration::from_secs(3));
/// assert_eq!(lock_period(Duration::from_secs(2)), Duration::from_secs(4));
/// ```
pub fn lock_stretch(budget: Duration) -> Duration {
    budget.mul_f64(1.5)
}

/// One lock stretch and the unlocked second after it.
pub fn lock_period(budget: Duration) -> Duration {
    lock_stretch(budget) + UNLOCKED
}

/// What `db-slow` measured on the database server in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DbSlowReport {
    /// The budget the deadline rule uses, ms (the plan's largest).
    pub budget_ms: u64,
    /// How long each lock stretch held the hot row, ms.
    pub lock_ms: u64,
    /// A stretch and the gap after it, ms.
    pub period_ms: u64,
    /// Lock stretches held.
    pub stretches: u64,
    /// Reads of `pg_stat_activity`.
    pub polls: u64,
    /// Distinct `update stock` statements seen active.
    pub statements_seen: u64,
    /// Of them, those still active past `query_start` + budget.
    pub statements_past_deadline: u64,
    /// Database work for nobody, seconds: Σ max(0, last seen −
    /// (query_start + budget)).
    pub work_for_nobody_s: f64,
    /// The most `update stock` statements active at once.
    pub max_active: u64,
    /// The most active at the end of a lock stretch (connections stuck).
    pub active_at_release_max: u64,
    /// Their mean over the stretches.
    pub active_at_release_mean: f64,
    /// The wait for a pooled connection (`orders-db-queue`), p50, ms.
    pub pool_wait_p50_ms: Option<f64>,
    /// Its p99, ms.
    pub pool_wait_p99_ms: Option<f64>,
}

impl Section for DbSlowReport {
    const KEY: &'static str = "db_slow";
}

/// The `db-slow` scenario.
#[derive(Clone, Copy, Debug)]
pub struct DbSlow;

impl Scenario for DbSlow {
    fn name(&self) -> &'static str {
        "db-slow"
    }

    fn about(&self) -> &'static str {
        "Checkout reserves stock in PostgreSQL; the hot row is locked 1.5 budgets of every \
         1.5 budgets + 1 s"
    }

    fn setup(&self, settings: &ChainSettings) -> Setup {
        Setup {
            database: true,
            ..Setup::new(
                self.name(),
                "healthy partner; checkout reserves stock in PostgreSQL, whose hot row \
                 another session locks for 1.5 budgets of every 1.5 budgets + 1 s",
                settings,
            )
        }
    }

    fn run<'a>(&'a self, run: ModeRun<'a>) -> RunFuture<'a> {
        Box::pin(async move {
            let budget = run.plan.budgets.max();
            let window = run.plan.spec.duration();
            let url = run.database.map(str::to_owned);
            let (report, watched) = run
                .load_beside(|start| watch(url, budget, window, start))
                .await;
            let mut report = report?;
            if let Some(mut section) = watched {
                let queue = report
                    .steps
                    .iter()
                    .find(|s| s.name == "checkout.orders-db-queue");
                section.pool_wait_p50_ms = queue.and_then(|s| s.p50_ms);
                section.pool_wait_p99_ms = queue.and_then(|s| s.p99_ms);
                report.set_section(section);
            }
            Ok(report)
        })
    }

    fn rows(&self, runs: &[RunReport]) -> Vec<Vec<String>> {
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
        vec![
            row(
                runs,
                "database work for nobody, s (statements active past query_start + budget, \
                 read from pg_stat_activity every 10 ms; a lower bound)",
                &|r| {
                    section_cell(r, |d: &DbSlowReport| {
                        format!(
                            "{:.2} ({} of {} statements)",
                            d.work_for_nobody_s, d.statements_past_deadline, d.statements_seen
                        )
                    })
                },
            ),
            row(
                runs,
                "update statements active: most at once / at the end of a lock stretch (max, mean)",
                &|r| {
                    section_cell(r, |d: &DbSlowReport| {
                        format!(
                            "{} / {}, {:.1}",
                            d.max_active, d.active_at_release_max, d.active_at_release_mean
                        )
                    })
                },
            ),
            row(runs, "pool wait orders-db-queue p50 / p99, ms", &|r| {
                section_cell(r, |d: &DbSlowReport| {
                    format!("{} / {}", ms(d.pool_wait_p50_ms), ms(d.pool_wait_p99_ms))
                })
            }),
        ]
    }

    fn after_table(&self, runs: &[RunReport]) -> String {
        goals(runs)
    }

    fn sections(&self) -> &'static [SectionKind] {
        const SECTIONS: &[SectionKind] = &[SectionKind::of::<DbSlowReport>()];
        SECTIONS
    }

    fn without_envoy(&self) -> Option<&'static str> {
        Some(
            "its fault is checkout's PostgreSQL step, which Envoy's HTTP sidecar does not carry: \
             an envoy run would be the naive one with healthy HTTP calls proxied",
        )
    }
}

/// Whether the goals hold: budget goodput at least the better of naive's
/// and peer's, budget's work for nobody at most 1 % of naive's.
fn goals(runs: &[RunReport]) -> String {
    let of = |mode: ChainMode| runs.iter().find(|r| r.mode == mode.as_str());
    let (Some(budget), Some(naive)) = (of(ChainMode::Budget), of(ChainMode::Naive)) else {
        return String::new();
    };
    let best_other = [Some(naive), of(ChainMode::Peer)]
        .into_iter()
        .flatten()
        .map(|r| r.goodput_per_s)
        .fold(0.0, f64::max);
    let waste = |r: &RunReport| r.section::<DbSlowReport>().map(|d| d.work_for_nobody_s);
    let met = |ok: bool| if ok { "met" } else { "not met" };
    let goodput = met(budget.goodput_per_s >= best_other);
    let mut out = format!(
        "Goal, goodput: budget {:.1} req/s >= the better of naive and peer {best_other:.1} \
         req/s: {goodput}.\n",
        budget.goodput_per_s
    );
    if let (Some(b), Some(n)) = (waste(budget), waste(naive)) {
        let _ = std::fmt::Write::write_fmt(
            &mut out,
            format_args!(
                "Goal, database work for nobody: budget {b:.2} s <= 1 % of naive's {n:.2} s \
                 ({:.3} s): {}.\n",
                n * 0.01,
                met(b <= n * 0.01)
            ),
        );
    }
    out
}

/// One statement followed on the server: when it started and when it was
/// last seen active, seconds of the server's clock.
#[derive(Clone, Copy, Debug)]
struct Seen {
    started: f64,
    last: f64,
}

/// What the watch collects.
#[derive(Debug, Default)]
struct Watched {
    statements: HashMap<(i32, i64), Seen>,
    polls: u64,
    max_active: u64,
    at_release: Vec<u64>,
}

impl Watched {
    /// Reads the active reservations once; returns how many there are.
    async fn poll(&mut self, observer: &Client) -> Result<u64, tokio_postgres::Error> {
        let rows = observer
            .query(
                "select pid, (extract(epoch from query_start) * 1e6)::int8, \
                 extract(epoch from clock_timestamp())::float8 from pg_stat_activity \
                 where state = 'active' and query like 'update stock%'",
                &[],
            )
            .await?;
        self.polls += 1;
        for row in &rows {
            let (pid, start_us, now): (i32, i64, f64) = (row.get(0), row.get(1), row.get(2));
            let seen = self.statements.entry((pid, start_us)).or_insert(Seen {
                started: start_us as f64 / 1e6,
                last: now,
            });
            seen.last = now;
        }
        let active = rows.len() as u64;
        self.max_active = self.max_active.max(active);
        Ok(active)
    }

    fn report(&self, budget: Duration, stretches: u64) -> DbSlowReport {
        let budget_s = budget.as_secs_f64();
        let over: Vec<f64> = self
            .statements
            .values()
            .map(|s| s.last - (s.started + budget_s))
            .filter(|over| *over > 0.0)
            .collect();
        let n = self.at_release.len().max(1) as f64;
        DbSlowReport {
            budget_ms: budget.as_millis() as u64,
            lock_ms: lock_stretch(budget).as_millis() as u64,
            period_ms: lock_period(budget).as_millis() as u64,
            stretches,
            polls: self.polls,
            statements_seen: self.statements.len() as u64,
            statements_past_deadline: over.len() as u64,
            // Folded from +0.0: an empty sum is 0, not -0.
            work_for_nobody_s: over.iter().fold(0.0, |sum, o| sum + o),
            max_active: self.max_active,
            active_at_release_max: self.at_release.iter().copied().max().unwrap_or(0),
            active_at_release_mean: self.at_release.iter().sum::<u64>() as f64 / n,
            pool_wait_p50_ms: None,
            pool_wait_p99_ms: None,
        }
    }
}

/// A session of its own on `url`, driven in the background.
async fn session(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// From the run's start (sent on `start`) until `window` has passed: the
/// lock stretches, and the server read every [`POLL_EVERY`]; then the
/// reads go on until no reservation is active (at most [`DRAIN_WATCH`]).
/// `None` without a database, or when the server could not be reached.
async fn watch(
    url: Option<String>,
    budget: Duration,
    window: Duration,
    start: oneshot::Receiver<Instant>,
) -> Option<DbSlowReport> {
    let url = url?;
    let (locker, observer) = match tokio::try_join!(session(&url), session(&url)) {
        Ok(both) => both,
        Err(e) => {
            eprintln!("load-tests: db-slow cannot reach its database: {e}");
            return None;
        }
    };
    let start = start.await.ok()?;
    let mut watched = Watched::default();
    let stretches = lock_and_poll(&locker, &observer, &mut watched, budget, start + window).await;
    let _ = locker.batch_execute("rollback").await;
    let drained = Instant::now() + DRAIN_WATCH;
    while Instant::now() < drained {
        match watched.poll(&observer).await {
            Ok(0) | Err(_) => break,
            Ok(_) => tokio::time::sleep(POLL_EVERY).await,
        }
    }
    Some(watched.report(budget, stretches))
}

/// The lock stretches until `end`, polling all along; returns how many
/// stretches were held.
async fn lock_and_poll(
    locker: &Client,
    observer: &Client,
    watched: &mut Watched,
    budget: Duration,
    end: Instant,
) -> u64 {
    let lock = format!("begin; select sku from stock where sku = {HOT_SKU} for update");
    let mut stretches = 0;
    let mut next = Instant::now();
    while next < end {
        if let Err(e) = locker.batch_execute(&lock).await {
            eprintln!("load-tests: db-slow cannot lock the hot row: {e}");
            break;
        }
        stretches += 1;
        let release = (next + lock_stretch(budget)).min(end);
        let mut active = 0;
        while Instant::now() < release {
            active = watched.poll(observer).await.unwrap_or(active);
            tokio::time::sleep(POLL_EVERY).await;
        }
        watched.at_release.push(active);
        let _ = locker.batch_execute("rollback").await;
        next += lock_period(budget);
        let gap_end = next.min(end);
        while Instant::now() < gap_end {
            let _ = watched.poll(observer).await;
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
    stretches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_for_nobody_counts_only_the_time_past_query_start_plus_budget() {
        let mut w = Watched::default();
        w.statements.insert(
            (1, 0),
            Seen {
                started: 10.0,
                last: 13.0,
            },
        );
        w.statements.insert(
            (2, 0),
            Seen {
                started: 10.0,
                last: 11.5,
            },
        );
        w.at_release = vec![8, 4];
        let r = w.report(Duration::from_secs(2), 2);
        assert_eq!((r.statements_seen, r.statements_past_deadline), (2, 1));
        assert!((r.work_for_nobody_s - 1.0).abs() < 1e-9);
        assert_eq!((r.active_at_release_max, r.active_at_release_mean), (8, 6.0));
        assert_eq!((r.lock_ms, r.period_ms), (3000, 4000));
    }

    #[test]
    fn the_scenario_asks_for_a_database() {
        assert!(DbSlow.setup(&ChainSettings::default()).database);
    }
}
