//! Python's grpcio for the tests that call from outside: found on the
//! system, or installed from PyPI into the target directory once. Shared
//! by budget-core's gRPC tests and the slow partner's (which include this
//! file by path).

/// Where Python finds `grpcio`: nowhere extra when the system has it, else
/// a copy this test installs from PyPI into the target directory once (so
/// that `cargo test` sets up what it needs on a fresh machine).
pub fn grpcio_path() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-grpcio");
    let has = |path: &std::path::Path| {
        std::process::Command::new("python3")
            .args(["-c", "import grpc"])
            .env("PYTHONPATH", path)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has(&dir) {
        return dir;
    }
    let out = std::process::Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--target"])
        .arg(&dir)
        .arg("grpcio")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success() && has(&dir),
        "grpcio could not be installed from PyPI (python3 -m pip install grpcio): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// Runs `script` with python3 (and grpcio, [`grpcio_path`]); its standard
/// output, after checking that it succeeded.
pub async fn python(script: &str) -> String {
    let out = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", grpcio_path())
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
