//! [`Report`]: what a run found, one line per URL in input order, then the
//! summary table.

use std::collections::BTreeMap;
use std::fmt;
use std::process::ExitCode;
use std::time::Duration;

use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use http::StatusCode;

/// How one URL's check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It answered an expected status.
    Up(StatusCode),
    /// It did not.
    Down(Failure),
}

/// Why a URL counts as down.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// It answered a status not in `--expect-status` (after the retries,
    /// for a retryable one).
    Status(StatusCode),
    /// The last attempt, or its connect, ran out of `--attempt-timeout`
    /// (or `--connect-timeout`).
    Timeout,
    /// The last attempt's connection was refused.
    Refused,
    /// The last attempt could not connect otherwise (DNS, unreachable).
    Connect,
    /// The connection was reset or closed before an answer.
    Reset,
    /// The deadline ran out: before the check could start ("not checked:
    /// deadline"), or while it was under way.
    Deadline,
    /// Anything else (a body that failed or was too large, TLS, ...), by
    /// the client's name for it.
    Other(String),
}

impl Failure {
    /// The summary table's name for it: `timeout`, `refused`, `http 503`, ...
    ///
    /// ```
    /// use budget_examples::check::Failure;
    /// assert_eq!(Failure::Status(http::StatusCode::SERVICE_UNAVAILABLE).kind(), "http 503");
    /// assert_eq!(Failure::Deadline.kind(), "deadline");
    /// ```
    pub fn kind(&self) -> String {
        match self {
            Failure::Status(status) => format!("http {}", status.as_u16()),
            other => other.short().to_owned(),
        }
    }

    /// The line's second column: the status code, or the kind.
    fn short(&self) -> &str {
        match self {
            Failure::Status(status) => status.as_str(),
            Failure::Timeout => "timeout",
            Failure::Refused => "refused",
            Failure::Connect => "connect",
            Failure::Reset => "reset",
            Failure::Deadline => "deadline",
            Failure::Other(kind) => kind,
        }
    }

    /// Where the kind sits in the summary table.
    fn rank(&self) -> u8 {
        match self {
            Failure::Timeout => 0,
            Failure::Refused => 1,
            Failure::Connect => 2,
            Failure::Reset => 3,
            Failure::Status(_) => 4,
            Failure::Deadline => 5,
            Failure::Other(_) => 6,
        }
    }
}

/// One URL's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The URL as given (a password in it shown as `***`).
    pub url: String,
    /// Up or down, and why.
    pub outcome: Outcome,
    /// Attempts made: 0 for a check that was not made.
    pub attempts: u32,
    /// From the check's start to its end, backoff included.
    pub took: Duration,
    /// What the last failure said (`attempt timed out after 300ms`,
    /// `not checked: deadline`), if anything.
    pub note: Option<String>,
}

impl Checked {
    /// True when the URL answered an expected status.
    pub fn is_up(&self) -> bool {
        matches!(self.outcome, Outcome::Up(_))
    }

    fn what(&self) -> &str {
        match &self.outcome {
            Outcome::Up(status) => status.as_str(),
            Outcome::Down(failure) => failure.short(),
        }
    }
}

/// A whole run: every URL's [`Checked`] in input order, and the time the
/// run took of its deadline.
///
/// Its `Display` is what `budget-check` prints: one line per URL, aligned,
///
/// ```text
/// ok    200      http://127.0.0.1:9000/a?delay=300ms      1 attempt    302 ms
/// FAIL  timeout  http://127.0.0.1:9001/hang               2 attempts   641 ms  attempt timed out after 300ms
/// ```
///
/// then a summary table of the outcomes (`ok`, each kind of failure,
/// `failed`) and the time taken of the deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub(super) results: Vec<Checked>,
    pub(super) took: Duration,
    pub(super) deadline: Duration,
}

impl Report {
    /// Every URL's result, in input order.
    pub fn results(&self) -> &[Checked] {
        &self.results
    }

    /// How long the run took.
    pub fn took(&self) -> Duration {
        self.took
    }

    /// The run's deadline.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }

    /// How many URLs were down.
    pub fn failed(&self) -> usize {
        self.results.iter().filter(|c| !c.is_up()).count()
    }

    /// `0` when every URL was up, `1` when any was down.
    pub fn exit_code(&self) -> ExitCode {
        if self.failed() == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// The summary table.
    fn table(&self) -> Table {
        let mut kinds: BTreeMap<(u8, u16, String), usize> = BTreeMap::new();
        for checked in &self.results {
            if let Outcome::Down(failure) = &checked.outcome {
                let code = match failure {
                    Failure::Status(status) => status.as_u16(),
                    _ => 0,
                };
                *kinds
                    .entry((failure.rank(), code, failure.kind()))
                    .or_default() += 1;
            }
        }
        let failed = self.failed();
        let mut table = Table::new();
        table.load_style(UTF8_FULL_CONDENSED);
        table.set_header(vec!["outcome", "URLs"]);
        table.add_row(vec![
            "ok".to_owned(),
            (self.results.len() - failed).to_string(),
        ]);
        for ((_, _, kind), count) in kinds {
            table.add_row(vec![kind, count.to_string()]);
        }
        table.add_row(vec!["failed".to_owned(), failed.to_string()]);
        table.add_row(vec![
            "time".to_owned(),
            format!(
                "{} ms of {} ms deadline",
                self.took.as_millis(),
                self.deadline.as_millis()
            ),
        ]);
        table
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = |w: fn(&Checked) -> usize| self.results.iter().map(w).max().unwrap_or(0);
        let what_w = width(|c| c.what().len());
        let url_w = width(|c| c.url.len());
        let attempts_w = width(|c| attempts(c.attempts).len());
        let ms_w = width(|c| c.took.as_millis().to_string().len());
        for c in &self.results {
            let result = if c.is_up() { "ok" } else { "FAIL" };
            write!(
                f,
                "{result:<4}  {:<what_w$}  {:<url_w$}  {:<attempts_w$}  {:>ms_w$} ms",
                c.what(),
                c.url,
                attempts(c.attempts),
                c.took.as_millis(),
            )?;
            match &c.note {
                Some(note) => writeln!(f, "  {note}")?,
                None => writeln!(f)?,
            }
        }
        writeln!(f)?;
        writeln!(f, "{}", self.table())
    }
}

fn attempts(n: u32) -> String {
    match n {
        1 => "1 attempt".to_owned(),
        n => format!("{n} attempts"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(url: &str, outcome: Outcome, attempts: u32, ms: u64) -> Checked {
        Checked {
            url: url.to_owned(),
            outcome,
            attempts,
            took: Duration::from_millis(ms),
            note: None,
        }
    }

    #[test]
    fn lines_keep_input_order_and_the_table_counts_each_kind() {
        let report = Report {
            results: vec![
                checked("http://a/slow", Outcome::Up(StatusCode::OK), 2, 412),
                checked(
                    "http://b",
                    Outcome::Down(Failure::Status(StatusCode::SERVICE_UNAVAILABLE)),
                    3,
                    90,
                ),
                checked("http://c", Outcome::Down(Failure::Deadline), 0, 0),
                checked("http://d", Outcome::Down(Failure::Timeout), 1, 300),
                checked("http://e", Outcome::Down(Failure::Deadline), 0, 0),
            ],
            took: Duration::from_millis(1234),
            deadline: Duration::from_secs(2),
        };
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "ok    200       http://a/slow  2 attempts  412 ms"
        );
        assert_eq!(
            lines[1],
            "FAIL  503       http://b       3 attempts   90 ms"
        );
        assert_eq!(
            lines[2],
            "FAIL  deadline  http://c       0 attempts    0 ms"
        );
        assert_eq!(
            lines[3],
            "FAIL  timeout   http://d       1 attempt   300 ms"
        );
        let table: Vec<String> = lines[6..]
            .iter()
            .filter(|l| l.starts_with('│'))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(
            table,
            [
                "│ outcome ┆ URLs │",
                "│ ok ┆ 1 │",
                "│ timeout ┆ 1 │",
                "│ http 503 ┆ 1 │",
                "│ deadline ┆ 2 │",
                "│ failed ┆ 4 │",
                "│ time ┆ 1234 ms of 2000 ms deadline │",
            ]
        );
        assert_eq!(report.exit_code(), ExitCode::FAILURE);
    }
}
