//! Headless Chromium for the tests that need a real browser (the HTML
//! report's figures, `EventSource` through edge): [`ensure`] finds it, or
//! installs Debian's `chromium` package (as root, with apt-get), or says
//! why it cannot. A test that needs it fails with that reason; it is never
//! skipped.
//!
//! ```no_run
//! # #[tokio::main] async fn main() {
//! if let Err(why) = test_support::chromium::ensure().await {
//!     panic!("{why}");
//! }
//! # }
//! ```

use std::process::Stdio;

use tokio::process::Command;

/// Whether `program args` runs and succeeds.
async fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// `chromium` runs, or is installed from Debian (as root, with apt-get),
/// or the reason it cannot be.
pub async fn ensure() -> Result<(), String> {
    if succeeds("chromium", &["--version"]).await {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .await
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if !root || !succeeds("apt-get", &["--version"]).await {
        return Err(
            "headless Chromium is needed: `chromium` (Debian's `chromium` package) is not \
                    installed, and it cannot be installed here (that needs apt-get, as root)"
                .to_owned(),
        );
    }
    let install = || {
        let mut c = Command::new("apt-get");
        c.args(["install", "-y", "-q", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null());
        c
    };
    let mut said = String::new();
    for update_first in [false, true] {
        if update_first {
            let _ = Command::new("apt-get")
                .args(["update", "-q"])
                .stdout(Stdio::null())
                .status()
                .await;
        }
        match install().output().await {
            Ok(out) if out.status.success() => break,
            Ok(out) => said = String::from_utf8_lossy(&out.stderr).into_owned(),
            Err(e) => said = e.to_string(),
        }
    }
    if succeeds("chromium", &["--version"]).await {
        Ok(())
    } else {
        Err(format!(
            "headless Chromium is needed: `chromium` is not installed, and \
             `apt-get install -y chromium` did not install it: {}",
            said.trim()
        ))
    }
}
