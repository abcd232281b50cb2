//! The command line of `budget-check` ([`Cli`]) and its validation into a
//! [`Plan`]: the URLs read from the arguments and `--file`, each with a
//! budget-aware client.

use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::fan_out::FanOut;
use budget_core::retry::RetryConfig;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use super::expect::ExpectStatus;

/// Each attempt's timeout when `--attempt-timeout` is not given: 2 s, or
/// the whole deadline when that is shorter.
///
/// ```
/// assert_eq!(budget_examples::check::DEFAULT_ATTEMPT_TIMEOUT.as_secs(), 2);
/// ```
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

const AFTER_HELP: &str = "\
Output: one line per URL, in input order (ok or FAIL, the status or the kind of \
failure, the URL, attempts, time), then a summary table.

Exit codes: 0 every URL answered an expected status, 1 any did not, 2 bad arguments.

Example:
  budget-check --deadline 5s --attempt-timeout 1s --retries 2 --concurrency 8 \\
      --file urls.txt https://example.com/healthz";

/// Checks HTTP endpoints under one overall deadline: each URL gets a GET,
/// with a per-attempt timeout and retries paid from the deadline, at most N
/// at a time.
///
/// Every attempt, retry and backoff wait of every URL is paid from the one
/// `--deadline`: a retry is made only when its backoff still fits, no
/// attempt runs past the deadline, and a URL whose check would start after
/// it is reported as failed ("not checked: deadline"). Timeouts, connect
/// failures, resets and 408, 429, 500, 502, 503, 504 are retried; other
/// statuses are not. Redirects are not followed (the 3xx is the answer).
#[derive(Debug, Parser)]
#[command(name = "budget-check", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// URLs to check (http or https), reported in this order, before those
    /// of `--file`.
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,

    /// Reads more URLs from PATH, one per line (`-`: standard input); blank
    /// lines and lines starting with `#` are skipped.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,

    /// The whole run's deadline: every attempt, retry and backoff wait is
    /// paid from it.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub deadline: Duration,

    /// The longest one attempt may take, connect and body included; a
    /// timed-out attempt is retried while the deadline allows
    /// [default: 2s, or the deadline when shorter].
    #[arg(long, value_name = "DURATION", value_parser = positive_duration)]
    pub attempt_timeout: Option<Duration>,

    /// The longest a TCP (and TLS) connect may take (still within the
    /// attempt's timeout).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = positive_duration)]
    pub connect_timeout: Duration,

    /// Extra attempts after a failed one, with exponential backoff and
    /// jitter, paid from the deadline (0: one attempt per URL).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub retries: u32,

    /// At most N checks in flight at once; the next starts when one ends.
    #[arg(long, value_name = "N", default_value = "8", value_parser = parse_concurrency)]
    pub concurrency: FanOut,

    /// The statuses that count as up: codes and classes, comma-separated
    /// (`200,204`, `2xx,3xx`).
    #[arg(long, value_name = "LIST", default_value = "2xx")]
    pub expect_status: ExpectStatus,
}

/// A humantime duration (`300ms`, `2s`, `1m 30s`) of more than zero.
fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = budget_core::config::duration::parse(s).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("must be more than zero".to_owned());
    }
    Ok(d)
}

/// At least 1: the fan-out's own rule, its message without the config
/// wording.
fn parse_concurrency(s: &str) -> Result<FanOut, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    FanOut::new(n).map_err(|e| e.problem().to_owned())
}

/// Where a URL was given, for error messages: `argument 2`,
/// `urls.txt line 7`, `stdin line 3`.
///
/// ```
/// use budget_examples::check::Origin;
/// assert_eq!(Origin::Argument(2).to_string(), "argument 2");
/// assert_eq!(Origin::Line { file: "urls.txt".into(), line: 7 }.to_string(), "urls.txt line 7");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// The Nth URL argument, from 1.
    Argument(usize),
    /// A line of `--file`, from 1.
    Line {
        /// The file as given (`stdin` for `-`).
        file: String,
        /// The line number, from 1.
        line: usize,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Argument(n) => write!(f, "argument {n}"),
            Origin::Line { file, line } => write!(f, "{file} line {line}"),
        }
    }
}

/// One URL to check, as given, and where it was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL, trimmed.
    pub url: String,
    /// Where it came from.
    pub origin: Origin,
}

/// Input the checker cannot run with; nothing was sent.
///
/// ```
/// use budget_examples::check::InputError;
/// assert_eq!(
///     InputError::NoUrls.to_string(),
///     "no URLs to check: give them as arguments or with --file"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Neither the arguments nor the file named a URL.
    #[error("no URLs to check: give them as arguments or with --file")]
    NoUrls,
    /// A URL that cannot be checked (not absolute, not http/https, no host,
    /// a `#fragment`).
    #[error("{origin}: `{url}` {problem}")]
    BadUrl {
        /// Where it was given.
        origin: Origin,
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// `--file` could not be read.
    #[error("cannot read --file {path}: {source}")]
    Read {
        /// The path as given.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--attempt-timeout` longer than `--deadline`: it could never apply.
    #[error(
        "--attempt-timeout {} is longer than --deadline {}: it could never apply",
        humantime::format_duration(*attempt_timeout),
        humantime::format_duration(*deadline)
    )]
    AttemptTimeout {
        /// `--attempt-timeout`.
        attempt_timeout: Duration,
        /// `--deadline`.
        deadline: Duration,
    },
    /// Any other setting the client refused.
    #[error(transparent)]
    Config(budget_core::config::ConfigError),
    /// The HTTP client could not be built (no TLS backend).
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
}

/// Says `err` the way clap says a bad argument (`error: ...`, the usage
/// line, a pointer to `--help`) on stderr, and gives clap's exit code for
/// it, 2.
///
/// ```
/// use budget_examples::check::{InputError, usage_error};
/// assert_eq!(usage_error(&InputError::NoUrls), std::process::ExitCode::from(2));
/// ```
pub fn usage_error(err: &InputError) -> ExitCode {
    let kind = match err {
        InputError::NoUrls => ErrorKind::MissingRequiredArgument,
        InputError::Read { .. } => ErrorKind::Io,
        _ => ErrorKind::ValueValidation,
    };
    let err = Cli::command().error(kind, err);
    let _ = err.print();
    ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2))
}

/// A validated run: the URLs, each with its client, and the run's limits.
/// Made by [`Cli::plan`]; [`run`](Self::run) checks every URL.
#[derive(Debug)]
pub struct Plan {
    pub(super) checks: Vec<(Endpoint, BudgetClient)>,
    pub(super) deadline: Duration,
    pub(super) fan_out: FanOut,
    pub(super) expect: ExpectStatus,
}

impl Plan {
    /// The URLs to check, in input order.
    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        self.checks.iter().map(|(endpoint, _)| endpoint)
    }

    /// The run's deadline.
    pub fn deadline(&self) -> Duration {
        self.deadline
    }
}

impl Cli {
    /// Reads the URLs (arguments first, then `--file`) and validates
    /// everything into a [`Plan`]; nothing is sent yet.
    ///
    /// ```
    /// use budget_examples::check::Cli;
    /// use clap::Parser;
    ///
    /// let err = Cli::parse_from(["budget-check", "http://127.0.0.1:1/", "ftp://x"]).plan().unwrap_err();
    /// assert_eq!(err.to_string(), "argument 2: `ftp://x` must be http or https, not \"ftp\"");
    /// let plan = Cli::parse_from(["budget-check", "http://127.0.0.1:1/"]).plan().unwrap();
    /// assert_eq!(plan.endpoints().count(), 1);
    /// ```
    pub fn plan(&self) -> Result<Plan, InputError> {
        let mut endpoints: Vec<Endpoint> = self
            .urls
            .iter()
            .enumerate()
            .map(|(i, url)| Endpoint {
                url: url.trim().to_owned(),
                origin: Origin::Argument(i.saturating_add(1)),
            })
            .collect();
        if let Some(path) = &self.file {
            endpoints.extend(read_list(path)?);
        }
        if endpoints.is_empty() {
            return Err(InputError::NoUrls);
        }

        let attempt_timeout = match self.attempt_timeout {
            Some(given) => given,
            None => DEFAULT_ATTEMPT_TIMEOUT.min(self.deadline),
        };
        let mut retry = RetryConfig::default();
        retry.max_attempts = self.retries.saturating_add(1);
        retry.attempt_timeout = Some(attempt_timeout);
        retry
            .check_within(self.deadline)
            .map_err(|_| InputError::AttemptTimeout {
                attempt_timeout,
                deadline: self.deadline,
            })?;

        // One HTTP client (one pool) for every URL; connect timeouts are
        // client-wide in reqwest.
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("budget-check/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(InputError::HttpClient)?;

        let checks = endpoints
            .into_iter()
            .enumerate()
            .map(|(i, endpoint)| {
                let mut config =
                    DependencyConfig::new(format!("endpoint-{}", i + 1), endpoint.url.clone());
                config.connect_cap = self.connect_timeout;
                config.retry = retry.clone();
                let client = BudgetClient::builder(config)
                    .http_client(http.clone())
                    .build()
                    .map_err(|e| match e.field() {
                        "url" => InputError::BadUrl {
                            origin: endpoint.origin.clone(),
                            url: endpoint.url.clone(),
                            problem: e.problem().to_owned(),
                        },
                        _ => InputError::Config(e),
                    })?;
                Ok((endpoint, client))
            })
            .collect::<Result<Vec<_>, InputError>>()?;

        Ok(Plan {
            checks,
            deadline: self.deadline,
            fan_out: self.concurrency,
            expect: self.expect_status.clone(),
        })
    }
}

/// The URLs of a list file (`-`: standard input): one per line, blank lines
/// and `#` comment lines skipped.
fn read_list(path: &std::path::Path) -> Result<Vec<Endpoint>, InputError> {
    let stdin = path.as_os_str() == "-";
    let name = if stdin {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    };
    let read = if stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map(|_| text)
    } else {
        std::fs::read_to_string(path)
    };
    let text = read.map_err(|source| InputError::Read {
        path: name.clone(),
        source,
    })?;
    Ok(parse_list(&name, &text))
}

/// The URLs of a list's text, each with its line number.
fn parse_list(name: &str, text: &str) -> Vec<Endpoint> {
    text.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let url = line.trim();
            (!url.is_empty() && !url.starts_with('#')).then(|| Endpoint {
                url: url.to_owned(),
                origin: Origin::Line {
                    file: name.to_owned(),
                    line: i.saturating_add(1),
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_skips_blank_and_comment_lines_and_keeps_line_numbers() {
        let text = "# health checks\nhttp://a/1\n\n   \n  # indented comment\n\thttp://b/2  \r\nhttp://c/3#x\n";
        let got: Vec<(String, String)> = parse_list("urls.txt", text)
            .into_iter()
            .map(|e| (e.url, e.origin.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                ("http://a/1".to_owned(), "urls.txt line 2".to_owned()),
                ("http://b/2".to_owned(), "urls.txt line 6".to_owned()),
                ("http://c/3#x".to_owned(), "urls.txt line 7".to_owned()),
            ]
        );
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_default_attempt_timeout_is_capped_by_a_shorter_deadline_but_a_given_one_is_not() {
        let short = Cli::parse_from(["budget-check", "--deadline", "500ms", "http://127.0.0.1:1/"]);
        assert!(short.plan().is_ok());
        let err = Cli::parse_from([
            "budget-check",
            "--deadline",
            "500ms",
            "--attempt-timeout",
            "1s",
            "http://127.0.0.1:1/",
        ])
        .plan()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--attempt-timeout 1s is longer than --deadline 500ms: it could never apply"
        );
    }
}
