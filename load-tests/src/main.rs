//! `load-tests`: see `load-tests --help` and the crate docs.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    load_tests::cli::main_with(load_tests::cli::Args::parse(), &command)
}
