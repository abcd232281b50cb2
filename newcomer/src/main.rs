//! The newcomer test: budget-core/README.md's example, as someone who has
//! just read the README would run it, against a `pricing` dependency this
//! program starts on loopback. The example is the README's own text
//! (`build.rs` takes it from there), so a README change that breaks it
//! fails here.
//!
//! Two checks, and the exit code says whether both held:
//!
//! 1. pricing answers at once: `GET /checkout` is `200` with its price;
//! 2. pricing takes 3 s and the caller says it waits 1 s
//!    (`request-budget-ms: 1000`): the answer is a `504` problem+json in
//!    about 1 s, not a 200 after 3 s.

use std::process::ExitCode;

// ---- budget-core/README.md's example, as it stands there ----------------

/// The first ```` ```rust ```` block of budget-core/README.md, taken from
/// the README by `build.rs` when this crate is built: its handler
/// `checkout`, its `app` (the router behind the budget layer) and its
/// `main`, which is compiled but not run (it binds fixed ports; the checks
/// below serve `app` on ports of their own).
#[allow(dead_code)]
mod readme {
    include!(concat!(env!("OUT_DIR"), "/readme_example.rs"));

    /// The checks: a child of the example's module, so that they reach its
    /// private `app` as the README wrote it.
    pub(crate) mod checks;
}

#[tokio::main]
async fn main() -> ExitCode {
    match readme::checks::checks().await {
        Ok(failed) if failed.is_empty() => {
            println!("newcomer: the README's example holds");
            ExitCode::SUCCESS
        }
        Ok(failed) => {
            for f in failed {
                eprintln!("newcomer: FAILED: {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("newcomer: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
