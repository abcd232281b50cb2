//! The flush task: one batch in flight at a time, sent when full or when
//! the interval has passed, resent under the same key after a jittered,
//! capped wait, and while the breaker is open, only when it admits its
//! probe.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::config::Settings;
use super::report::ShutdownReport;
use super::schedule::{after_failure, after_open};
use super::sink::{Attempt, Sink};
use super::state::Shared;
use crate::Budget;
use crate::breaker::BreakerState;

/// The shutdown signal: `Some(deadline)` once `shutdown` was called.
pub(crate) type Stop = watch::Receiver<Option<Instant>>;

/// The flush task's own state.
pub(crate) struct Flusher {
    pub(crate) shared: Arc<Shared>,
    pub(crate) sink: Arc<dyn Sink>,
    pub(crate) settings: Settings,
    /// The uploader's id, the first part of every batch key.
    pub(crate) id: String,
    seq: u64,
    /// Failed sends in a row of the current batch.
    failures: u32,
    /// No send before this (a backoff or an open breaker's wait).
    not_before: Option<Instant>,
    last_flush: Instant,
}

impl Flusher {
    pub(crate) fn new(
        shared: Arc<Shared>,
        sink: Arc<dyn Sink>,
        settings: Settings,
        id: String,
    ) -> Self {
        Self {
            shared,
            sink,
            settings,
            id,
            seq: 0,
            failures: 0,
            not_before: None,
            last_flush: Instant::now(),
        }
    }

    /// Flushes until shut down (or every handle is dropped), then makes
    /// the final flush and reports.
    pub(crate) async fn run(mut self, mut stop: Stop) -> ShutdownReport {
        let deadline = loop {
            if let Some(deadline) = self.wait(&mut stop).await {
                break deadline;
            }
            // A send under way when the shutdown comes may finish within
            // the deadline; one cut short there is resent in the final
            // flush under the same key (or reported in doubt).
            let budget = self.settings.flush_budget;
            let flush = self.flush_one(None);
            tokio::pin!(flush);
            tokio::select! {
                () = &mut flush => {}
                stopped = stop.changed() => {
                    let deadline = deadline(stopped.is_ok(), &stop, budget);
                    let _cut = tokio::time::timeout_at(deadline, flush).await;
                    break deadline;
                }
            }
        };
        self.finish(deadline).await
    }

    /// Waits until a send is due (`None`) or the uploader is shut down
    /// (`Some(deadline)`).
    async fn wait(&mut self, stop: &mut Stop) -> Option<Instant> {
        loop {
            let due = self.due();
            if due.is_some_and(|at| at <= Instant::now()) {
                return None;
            }
            tokio::select! {
                stopped = stop.changed() => {
                    return Some(deadline(stopped.is_ok(), stop, self.settings.flush_budget));
                }
                () = sleep_until_some(due) => return None,
                () = self.shared.wake.notified() => {}
            }
        }
    }

    /// When the next send is due: `None` while nothing is queued.
    fn due(&self) -> Option<Instant> {
        let (current, ready, pending) = self
            .shared
            .read(|q| (q.has_current(), q.batch_ready(), q.has_pending()));
        if current {
            return Some(self.not_before.unwrap_or_else(Instant::now));
        }
        if ready {
            return Some(Instant::now());
        }
        pending.then(|| later(self.last_flush, self.settings.flush_interval))
    }

    /// Sends the current batch (or forms the next) once, within the flush
    /// budget and the shutdown's deadline, and settles the answer.
    async fn flush_one(&mut self, deadline: Option<Instant>) {
        let (id, seq) = (&self.id, &mut self.seq);
        let formed = self.shared.update(|q| {
            let batch = q.current_or_next(|| {
                *seq += 1;
                format!("{id}-{seq}")
            })?;
            let first = batch.sends == 0;
            let out = (batch.key.clone(), batch.body(), first);
            q.count_send(true);
            Some(out)
        });
        let Some((key, body, first)) = formed else {
            return;
        };
        let was_open = self
            .sink
            .breaker_state()
            .is_some_and(|s| s != BreakerState::Closed);
        let now = Instant::now();
        let budget = deadline.map_or(self.settings.flush_budget, |d| {
            self.settings
                .flush_budget
                .min(d.saturating_duration_since(now))
        });
        let attempt = self.sink.send(&key, body, Budget::new(budget)).await;
        self.last_flush = Instant::now();
        self.settle(attempt, first, was_open);
    }

    /// Applies one send's outcome to the queue and the schedule.
    fn settle(&mut self, attempt: Attempt, first: bool, was_open: bool) {
        let now = Instant::now();
        let made = !matches!(attempt, Attempt::CircuitOpen { .. });
        self.not_before = match &attempt {
            Attempt::Acked | Attempt::Refused { .. } => None,
            Attempt::Failed { retry_after } => {
                self.failures = self.failures.saturating_add(1);
                let wait = after_failure(
                    &self.settings.backoff,
                    self.failures,
                    *retry_after,
                    &mut rand::rng(),
                );
                Some(later(now, wait))
            }
            Attempt::CircuitOpen { retry_after } => {
                Some(later(now, after_open(&self.settings.backoff, *retry_after)))
            }
        };
        if matches!(attempt, Attempt::Acked | Attempt::Refused { .. }) {
            self.failures = 0;
        }
        self.shared.update(|q| {
            if !made {
                q.count_send(false);
            }
            q.stats.retries += u64::from(made && !first);
            q.stats.probes += u64::from(made && was_open);
            q.stats.circuit_open_waits += u64::from(!made);
            match attempt {
                Attempt::Acked => q.ack(),
                Attempt::Refused { status, reason } => {
                    tracing::warn!(status = ?status, %reason, "batch set aside");
                    q.set_aside(status, reason);
                }
                Attempt::Failed { .. } | Attempt::CircuitOpen { .. } => {}
            }
        });
    }

    /// The final flush: what is queued, sent until the deadline, the
    /// waits of the schedule kept (a wait past the deadline ends it).
    async fn finish(mut self, deadline: Instant) -> ShutdownReport {
        self.shared.update(|q| q.close());
        loop {
            if let Some(at) = self.not_before {
                if at >= deadline {
                    break;
                }
                sleep_until(at).await;
            }
            let work = self.shared.read(|q| q.has_current() || q.has_pending());
            if !work || Instant::now() >= deadline {
                break;
            }
            self.flush_one(Some(deadline)).await;
        }
        self.shared.update(|q| q.drain())
    }
}

/// The shutdown's deadline; with every handle dropped (no shutdown
/// called), one flush budget from now.
fn deadline(signalled: bool, stop: &Stop, flush_budget: Duration) -> Instant {
    let given = if signalled { *stop.borrow() } else { None };
    given.unwrap_or_else(|| later(Instant::now(), flush_budget))
}

/// Sleeps until `at`, or for ever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Far enough to be "never" and still an `Instant`.
const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// `at + by`, saturating at "never" (a configured duration of centuries
/// must not overflow the clock).
pub(crate) fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}
