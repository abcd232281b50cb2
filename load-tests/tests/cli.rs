//! The binary refuses, before starting anything, what it must never run.

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_load-tests"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_non_loopback_target_exits_2_with_the_reason() {
    let (code, err) = run(&["--target", "http://203.0.113.7:8080/checkout"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "load-tests: --target: refusing http://203.0.113.7:8080/checkout: host `203.0.113.7` is not a loopback address (127.0.0.0/8, ::1 or localhost)"
    );
}

#[test]
fn a_rate_or_duration_over_the_caps_exits_2() {
    let (code, err) = run(&["--rate", "20000"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "load-tests: --rate: rate 20000/s is over the cap of 5000/s"
    );
    let (code, err) = run(&["--duration", "1h"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "load-tests: --duration: duration 1h is over the cap of 10m"
    );
}

#[test]
fn an_html_file_that_cannot_be_made_exits_2_before_anything_runs() {
    let (code, err) = run(&["--html", "/no/such/dir/report.html"]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "load-tests: --html: cannot write /no/such/dir/report.html: directory /no/such/dir does not exist"
    );
    let dir = env!("CARGO_TARGET_TMPDIR");
    let (code, err) = run(&["--html", dir]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        format!("load-tests: --html: {dir} is a directory")
    );
}

/// A short run that only a write after it can refuse: `/proc` takes no
/// new file, even from root.
#[test]
fn an_html_file_that_cannot_be_written_exits_1_after_the_run_with_the_reason() {
    let (code, err) = run(&[
        "--scenario",
        "healthy",
        "--modes",
        "on",
        "--rate",
        "5",
        "--duration",
        "1s",
        "--html",
        "/proc/load-tests-report.html",
    ]);
    assert_eq!(code, Some(1), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("load-tests: --html: cannot write /proc/load-tests-report.html: "),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// The progress bar (`src/run.rs`): drawn on stderr when it is a terminal
/// (a pseudo-terminal from util-linux's `script`), absent when stderr is a
/// pipe, so logs and tests get only the run's own lines.
#[test]
fn the_progress_bar_shows_on_a_terminal_and_not_in_a_pipe() {
    let args = "--scenario healthy --modes on --rate 10 --duration 2s";
    let (code, piped) = run(&args.split(' ').collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{piped}");
    assert_eq!(
        piped.trim(),
        "load-tests: healthy at 10 req/s for 2s, 1 mode(s)",
        "only the run's line in a pipe"
    );
    let command = format!("'{}' {args}", env!("CARGO_BIN_EXE_load-tests"));
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect(
            "util-linux's `script` runs the binary on a pseudo-terminal (Debian's bsdutils package)",
        );
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(
        screen.contains("healthy / budget mode") && screen.contains("/20 answered"),
        "a progress bar on the terminal: {screen}"
    );
}
