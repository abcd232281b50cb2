//! What the load-tests test binaries share: one command line run to its
//! end, bounded.

use std::time::Duration;

use clap::Parser;
use load_tests::cli::{Args, Invocation, execute};
use load_tests::report::RunReport;

/// Runs the command line `args` (after the program name, with
/// `--no-progress`) to its end, failing the test if it takes longer than
/// `limit` or does not work.
pub async fn run_bounded(args: &[&str], limit: Duration) -> (Invocation, Vec<RunReport>) {
    let mut full = vec!["load-tests", "--no-progress"];
    full.extend_from_slice(args);
    let invocation = Args::try_parse_from(full).unwrap().invocation().unwrap();
    let reports = tokio::time::timeout(limit, execute(&invocation))
        .await
        .expect("the run stops by itself")
        .expect("the run works");
    (invocation, reports)
}
