//! A noisy neighbour: another process keeping one core busy for as long
//! as the sweep runs (`--noisy-neighbour`).
//!
//! The process is `sh` spinning on its builtins (`kill -0` of this
//! process, so it stops by itself when this process is gone, even killed
//! with no chance to clean up); [`NoisyNeighbour`] kills it when dropped
//! (the sweep's end, an error, a panic) and reaps it. Nothing is left
//! behind.

use std::process::{Child, Command, Stdio};

/// The script: spin while the process `$1` lives.
const SPIN: &str = "while kill -0 \"$1\" 2>/dev/null; do :; done";

/// One spinning process, killed when this is dropped.
#[derive(Debug)]
pub struct NoisyNeighbour {
    child: Child,
}

impl NoisyNeighbour {
    /// Starts it.
    ///
    /// # Errors
    ///
    /// When `sh` cannot be started.
    ///
    /// ```no_run
    /// let noisy = load_tests::sweep::NoisyNeighbour::start().unwrap();
    /// println!("spinning: pid {}", noisy.id());
    /// drop(noisy); // killed and reaped
    /// ```
    pub fn start() -> std::io::Result<Self> {
        let child = Command::new("sh")
            .args(["-c", SPIN, "noisy-neighbour"])
            .arg(std::process::id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self { child })
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for NoisyNeighbour {
    fn drop(&mut self) {
        // Killed by its own id, then reaped, so no zombie is left either.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_neighbour_spins_until_dropped_and_is_reaped() {
        let mut noisy = NoisyNeighbour::start().unwrap();
        let pid = noisy.id();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert!(noisy.is_running(), "it spins while this process lives");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        assert!(stat.contains("(sh)"), "{stat}");
        drop(noisy);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "killed and reaped"
        );
    }
}
