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
