//! [`Plan::run`]: every URL checked under one deadline through the
//! fan-out, and each client's answer or error read as an [`Outcome`].

use std::error::Error as StdError;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use budget_core::Budget;
use budget_core::client::{BudgetResponse, CallError, CallErrorKind};
use budget_core::fan_out::FanOutError;
use budget_core::ledger::{Entry, Ledger};
use service_kit::X_REQUEST_ID;
use tokio::time::Instant;

use super::cli::Plan;
use super::expect::ExpectStatus;
use super::report::{Checked, Failure, Outcome, Report};

/// How long after the run's deadline the fan-out's own deadline falls.
///
/// The checks do not need it: each spends the run's budget through its
/// client, which ends every attempt and backoff at the deadline, so each
/// check ends by then with its own outcome and attempt count. The fan-out
/// would abort the checks still in flight at its deadline (results lost,
/// attempts unknown), so its deadline is a backstop just after the run's,
/// for a check that overruns by a scheduling hiccup.
const BACKSTOP: Duration = Duration::from_millis(100);

impl Plan {
    /// Checks every URL, at most `--concurrency` at a time, all paid from
    /// one budget of `--deadline`; returns when every check has ended (by
    /// the deadline).
    ///
    /// A URL whose turn comes after the deadline is not sent: the client
    /// refuses it with nothing left, and it is reported down,
    /// `not checked: deadline`.
    pub async fn run(self) -> Report {
        let budget = Budget::new(self.deadline);
        let backstop =
            Budget::starting_at(budget.started(), self.deadline.saturating_add(BACKSTOP));
        let run_id: u32 = rand::random();
        let total = self.checks.len();
        let urls: Vec<String> = self.checks.iter().map(|(e, _)| shown(&e.url)).collect();
        // Each check writes its result here, so that a check the backstop
        // aborts does not take the others' results with it.
        let slots: Arc<Mutex<Vec<Option<Checked>>>> =
            Arc::new(Mutex::new((0..total).map(|_| None).collect()));
        // When each check started, and its ledger: what an aborted check
        // is reported with.
        let mut started: Vec<(Instant, Ledger)> = Vec::with_capacity(total);
        let expect = Arc::new(self.expect);

        let checks = self
            .checks
            .into_iter()
            .zip(urls.iter().cloned())
            .enumerate();
        let ran = self
            .fan_out
            .run(backstop, checks, |(i, ((_, client), url))| {
                let ledger = Ledger::new();
                started.push((Instant::now(), ledger.clone()));
                let call = client
                    .get("")
                    .header(X_REQUEST_ID, format!("budget-check-{run_id:08x}-{}", i + 1))
                    .budget(budget)
                    .ledger(ledger)
                    .send();
                let (slots, expect) = (Arc::clone(&slots), Arc::clone(&expect));
                async move {
                    let start = Instant::now();
                    let result = call.await;
                    let checked = read(url, result, start.elapsed(), &expect);
                    if let Some(slot) = lock(&slots).get_mut(i) {
                        *slot = Some(checked);
                    }
                }
            })
            .await;
        let took = budget.elapsed();

        let panicked = match ran {
            Err(FanOutError::Panicked { index, message }) => Some((index, message)),
            _ => None,
        };
        let slots = std::mem::take(&mut *lock(&slots));
        let results = slots
            .into_iter()
            .zip(urls)
            .enumerate()
            .map(|(i, (slot, url))| {
                slot.unwrap_or_else(|| {
                    let panic = match &panicked {
                        Some((index, message)) if *index == i => Some(message.as_str()),
                        _ => None,
                    };
                    unfinished(url, started.get(i), panic)
                })
            })
            .collect();
        Report {
            results,
            took,
            deadline: self.deadline,
        }
    }
}

/// The result of a check that gave none: it panicked, the backstop
/// aborted it, or it never started.
fn unfinished(url: String, started: Option<&(Instant, Ledger)>, panic: Option<&str>) -> Checked {
    let (failure, note) = match (panic, started) {
        (Some(message), _) => (
            Failure::Other("panic".to_owned()),
            format!("check panicked: {message}"),
        ),
        (None, Some(_)) => (Failure::Deadline, "cut off at the deadline".to_owned()),
        (None, None) => (Failure::Deadline, NOT_CHECKED.to_owned()),
    };
    let (took, attempts) = started.map_or((Duration::ZERO, 0), |(at, ledger)| {
        (at.elapsed(), attempts_in(ledger))
    });
    Checked {
        url,
        outcome: Outcome::Down(failure),
        attempts,
        took,
        note: Some(note),
    }
}

/// The note of a URL whose check could not start in time.
const NOT_CHECKED: &str = "not checked: deadline";

/// The mutex's value, poisoned or not (a check that panicked while holding
/// it left nothing half-written: a slot is one assignment).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Attempts the ledger saw end.
fn attempts_in(ledger: &Ledger) -> u32 {
    let ended = ledger
        .entries()
        .iter()
        .filter(|e| matches!(e, Entry::Attempt { .. }))
        .count();
    u32::try_from(ended).unwrap_or(u32::MAX)
}

/// Reads one check's answer or error against the expected statuses.
fn read(
    url: String,
    result: Result<BudgetResponse, CallError>,
    took: Duration,
    expect: &ExpectStatus,
) -> Checked {
    let (outcome, attempts, note) = match result {
        Ok(res) if expect.matches(res.status()) => {
            (Outcome::Up(res.status()), res.attempts(), None)
        }
        Ok(res) => {
            let note = match (res.passes_up(), res.retry_after()) {
                (true, Some(wait)) => Some(format!(
                    "Retry-After {} does not fit the deadline",
                    humantime::format_duration(wait)
                )),
                _ => None,
            };
            (
                Outcome::Down(Failure::Status(res.status())),
                res.attempts(),
                note,
            )
        }
        Err(e) => {
            let (failure, note) = failure_of(&e);
            (Outcome::Down(failure), e.attempts(), Some(note))
        }
    };
    Checked {
        url,
        outcome,
        attempts,
        took,
        note,
    }
}

/// The kind of a failed check, and the note its line gets.
fn failure_of(e: &CallError) -> (Failure, String) {
    let last = innermost(e);
    if e.kind() == CallErrorKind::BelowFloor {
        // A zero floor: refused only with nothing left of the deadline.
        return (Failure::Deadline, NOT_CHECKED.to_owned());
    }
    if e.is_budget_exhausted() {
        return (Failure::Deadline, format!("deadline reached: {last}"));
    }
    let failure = match e.kind() {
        CallErrorKind::Timeout | CallErrorKind::ConnectTimeout => Failure::Timeout,
        CallErrorKind::Connect if is_refused(e) => Failure::Refused,
        CallErrorKind::Connect => Failure::Connect,
        CallErrorKind::Reset => Failure::Reset,
        other => Failure::Other(other.as_str().to_owned()),
    };
    (failure, last)
}

/// The last error of `e`'s source chain: the most specific message
/// (`attempt timed out after 300ms`, `Connection refused (os error 111)`).
fn innermost(e: &(dyn StdError + 'static)) -> String {
    let mut last = e;
    while let Some(source) = last.source() {
        last = source;
    }
    last.to_string()
}

/// The connection was refused: an `io::Error` of that kind in the chain.
fn is_refused(e: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// The URL as printed: as given, but a password in it as `***`.
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Cannot fail: the URL has a host, since it has a password.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_without_a_result_says_whether_it_started_and_counts_its_ended_attempts() {
        let never = unfinished("http://a".into(), None, None);
        assert_eq!(never.outcome, Outcome::Down(Failure::Deadline));
        assert_eq!(
            (never.attempts, never.note.as_deref()),
            (0, Some(NOT_CHECKED))
        );

        let ledger = Ledger::new();
        ledger.record(Entry::attempt(
            "endpoint-1",
            1,
            Duration::from_millis(5),
            "503",
        ));
        ledger.record(Entry::wait("endpoint-1", Duration::from_millis(20)));
        let cut = unfinished("http://a".into(), Some(&(Instant::now(), ledger)), None);
        assert_eq!(cut.outcome, Outcome::Down(Failure::Deadline));
        assert_eq!(
            (cut.attempts, cut.note.as_deref()),
            (1, Some("cut off at the deadline"))
        );

        let panicked = unfinished("http://a".into(), None, Some("boom"));
        assert_eq!(
            panicked.outcome,
            Outcome::Down(Failure::Other("panic".into()))
        );
        assert_eq!(panicked.note.as_deref(), Some("check panicked: boom"));
    }

    #[test]
    fn a_password_in_a_url_is_not_printed() {
        assert_eq!(
            shown("http://me:secret@127.0.0.1:9/x"),
            "http://me:***@127.0.0.1:9/x"
        );
        assert_eq!(
            shown("http://127.0.0.1:9/x?y=1"),
            "http://127.0.0.1:9/x?y=1"
        );
    }
}
