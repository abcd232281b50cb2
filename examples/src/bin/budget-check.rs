//! `budget-check`: checks a list of URLs under one overall deadline, with
//! a per-attempt timeout, retries paid from the deadline and at most N
//! checks in flight; one line per URL in input order, then a summary table.
//! Exit code 0 when every URL is up, 1 when any is not, 2 for bad
//! arguments. The logic is `budget_examples::check`; `--help` has the
//! flags.
//!
//! `cargo run -p budget-examples --bin budget-check -- --deadline 5s https://example.com/`

use std::process::ExitCode;

use budget_examples::check::{Cli, usage_error};
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let plan = match cli.plan() {
        Ok(plan) => plan,
        Err(err) => return usage_error(&err),
    };
    let report = plan.run().await;
    print!("{report}");
    report.exit_code()
}
