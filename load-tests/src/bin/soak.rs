//! `soak`: see `soak --help` and the `load_tests::soak` docs.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    load_tests::soak_cli::main_with(load_tests::soak_cli::SoakArgs::parse(), &command)
}
