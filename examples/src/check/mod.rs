//! The endpoint checker behind the `budget-check` binary: many URLs
//! checked under one overall deadline.
//!
//! Each URL gets a `GET` through its own [`BudgetClient`], every one of them
//! spending the same [`Budget`]: the deadline of the whole run, given to
//! each call with `.budget(..)` (there is no server request whose context
//! would carry one). So the per-attempt timeout, the retries and their
//! backoff are the client's rules (see [`budget_core::client`]): an attempt
//! takes at most `--attempt-timeout` and never runs past the deadline, a
//! retry is made only when its backoff still fits, and a check whose turn
//! comes after the deadline is not made at all ("not checked: deadline").
//! Every attempt of one URL carries the same `x-request-id` (so a partner's
//! per-attempt script sees one call retried) and a `request-budget-ms` of
//! what that attempt is waited for.
//!
//! At most `--concurrency` checks are in flight, through
//! [`FanOut`](budget_core::fan_out::FanOut): a bounded sliding window,
//! a new check started only when one ends, results in input order.
//!
//! The [`Report`] is one line per URL, in input order whatever order the
//! checks ended in, then a summary table; its
//! [`exit_code`](Report::exit_code) is `0` when every URL was up and `1`
//! when any was not. Bad input (no URLs, a URL that is not `http`/`https`,
//! an unreadable `--file`, a zero `--concurrency`) is an [`InputError`]
//! before anything is sent; the binary says it the way clap does, with exit
//! code `2`.
//!
//! # Example
//!
//! ```no_run
//! use budget_examples::check::Cli;
//! use clap::Parser;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), budget_examples::check::InputError> {
//! let cli = Cli::parse_from([
//!     "budget-check",
//!     "--deadline", "3s",
//!     "--attempt-timeout", "500ms",
//!     "--concurrency", "4",
//!     "http://127.0.0.1:9000/a?delay=200ms",
//!     "http://127.0.0.1:9000/b?script=503@0ms,200@0ms",
//! ]);
//! let report = cli.plan()?.run().await;
//! print!("{report}");
//! assert_eq!(report.results().len(), 2);
//! # Ok(()) }
//! ```
//!
//! [`BudgetClient`]: budget_core::client::BudgetClient
//! [`Budget`]: budget_core::Budget

mod cli;
mod expect;
mod report;
mod run;

pub use cli::{Cli, DEFAULT_ATTEMPT_TIMEOUT, Endpoint, InputError, Origin, Plan, usage_error};
pub use expect::{ExpectStatus, ParseExpectError};
pub use report::{Checked, Failure, Outcome, Report};
