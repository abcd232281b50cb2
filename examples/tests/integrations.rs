//! The minimal example per integration (`axum_reqwest`,
//! `tonic_server_client`, `background_job`), each run as the real binary:
//! it must exit by itself, with status 0, within [`RUN_LIMIT`], and say
//! what it shows.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

/// No run of an example may take longer than this.
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// Runs `bin` to its end; its stdout, or a panic naming what went wrong.
async fn run(bin: &str) -> String {
    let child = Command::new(bin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example starts");
    let out = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{bin} did not exit within {RUN_LIMIT:?}"))
        .expect("the example's output");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{bin}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    stdout
}

/// The answer is a 200 that went through the dependency, and the ledger
/// has the ingress budget and the call.
#[tokio::test]
async fn axum_reqwest_answers_within_the_budget_and_prints_the_ledger() {
    let out = run(env!("CARGO_BIN_EXE_axum_reqwest")).await;
    assert!(
        out.contains("GET /checkout (request-budget-ms: 1000) -> 200 OK"),
        "{out}"
    );
    assert!(out.contains("price 42 (pricing was given "), "{out}");
    assert!(out.contains("budget;dur=1000;desc=\"ingress\""), "{out}");
    assert!(out.contains("pricing;dur="), "{out}");
}

/// The 1 s call is answered through both hops; the 100 ms call is refused
/// below inventory's floor without calling it.
#[tokio::test]
async fn tonic_server_client_answers_and_refuses_below_the_floor() {
    let out = run(env!("CARGO_BIN_EXE_tonic_server_client")).await;
    assert!(
        out.contains("call with a 1 s timeout -> OK: checkout had "),
        "{out}"
    );
    assert!(out.contains("inventory had "), "{out}");
    assert!(
        out.contains("call with a 100 ms timeout -> DeadlineExceeded"),
        "{out}"
    );
    assert!(out.contains("< floor 200ms"), "{out}");
}

/// Each call outside a request spends the budget it was given, and one
/// without any is not made.
#[tokio::test]
async fn background_job_spends_its_own_budget() {
    let out = run(env!("CARGO_BIN_EXE_background_job")).await;
    assert!(
        out.contains("with .budget(800 ms): 200 OK report built"),
        "{out}"
    );
    assert!(
        out.contains("with default_budget 300 ms: 200 OK report built"),
        "{out}"
    );
    assert!(
        out.contains("/slow with default_budget 300 ms: gave up after"),
        "{out}"
    );
    assert!(out.contains("without a budget: not made"), "{out}");
}
