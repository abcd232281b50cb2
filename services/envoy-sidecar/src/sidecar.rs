//! A running Envoy: started from a bootstrap YAML on loopback, asked
//! through its admin interface, stopped with its owner.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::process::{Child, Command};

use crate::{EnvoyError, admin, log};

/// How long Envoy has to say LIVE on its admin's `/ready`.
pub const READY_LIMIT: Duration = Duration::from_secs(10);

/// Envoy's worker threads unless told otherwise (the machine's two cores).
pub const DEFAULT_CONCURRENCY: usize = 2;

/// How long [`Sidecar::shutdown`] waits for Envoy to exit when asked.
const EXIT_LIMIT: Duration = Duration::from_secs(5);

/// A running Envoy process on loopback.
///
/// Its config, admin address file and log (stdout and stderr) live in a
/// temp dir of its own. Dropping it kills the process: no Envoy outlives
/// its owner.
///
/// ```no_run
/// use envoy_sidecar::{Sidecar, config::{self, Hop}};
///
/// # async fn run() -> Result<(), envoy_sidecar::EnvoyError> {
/// let yaml = config::hop(&Hop::new(["127.0.0.1:9000".parse().unwrap()]));
/// let envoy = Sidecar::start(&yaml).await?;
/// println!("send to http://{}", envoy.listener("hop"));
/// println!("{}", envoy.stats("cluster.upstream.upstream_rq").await);
/// envoy.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Sidecar {
    child: Option<Child>,
    dir: TempDir,
    admin: SocketAddr,
    listeners: HashMap<String, SocketAddr>,
}

impl Sidecar {
    /// Starts Envoy with `bootstrap_yaml` and [`DEFAULT_CONCURRENCY`]
    /// workers, and waits (at most [`READY_LIMIT`]) until it is LIVE.
    ///
    /// Listeners and the admin should bind `127.0.0.1:0`; their ports are
    /// read back from Envoy. A config Envoy refuses gives
    /// [`EnvoyError::Exited`] with the log's last lines.
    ///
    /// ```no_run
    /// # async fn run(yaml: &str) -> Result<(), envoy_sidecar::EnvoyError> {
    /// let envoy = envoy_sidecar::Sidecar::start(yaml).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(bootstrap_yaml: &str) -> Result<Sidecar, EnvoyError> {
        Self::start_with(bootstrap_yaml, DEFAULT_CONCURRENCY).await
    }

    /// [`Sidecar::start`] with `concurrency` worker threads.
    ///
    /// ```no_run
    /// # async fn run(yaml: &str) -> Result<(), envoy_sidecar::EnvoyError> {
    /// let envoy = envoy_sidecar::Sidecar::start_with(yaml, 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_with(
        bootstrap_yaml: &str,
        concurrency: usize,
    ) -> Result<Sidecar, EnvoyError> {
        let binary = tokio::task::spawn_blocking(crate::binary)
            .await
            .map_err(|e| EnvoyError::Admin(format!("finding the binary panicked: {e}")))??;
        let dir = tempfile::Builder::new()
            .prefix("envoy-sidecar-")
            .tempdir()
            .map_err(|e| EnvoyError::io("creating its temp dir", e))?;
        let config = dir.path().join("envoy.yaml");
        std::fs::write(&config, bootstrap_yaml)
            .map_err(|e| EnvoyError::io(format!("writing {}", config.display()), e))?;
        let mut child = spawn(&binary, dir.path(), concurrency)?;
        let admin = match tokio::time::timeout(READY_LIMIT, ready(&mut child, dir.path())).await {
            Ok(Ok(admin)) => admin,
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                let _ = child.start_kill();
                return Err(EnvoyError::NotReady {
                    waited: READY_LIMIT,
                    log_tail: log::tail_of(&log_path(dir.path())),
                });
            }
        };
        let listeners = admin::listeners(admin).await?;
        Ok(Sidecar {
            child: Some(child),
            dir,
            admin,
            listeners,
        })
    }

    /// The bound address of the listener named `name`.
    ///
    /// # Panics
    ///
    /// When the config has no listener of that name: a mistake in the
    /// caller's config, not a condition to handle ([`Sidecar::try_listener`]
    /// is the fallible form).
    ///
    /// ```no_run
    /// # fn run(envoy: &envoy_sidecar::Sidecar) {
    /// let url = format!("http://{}/pricing", envoy.listener("pricing"));
    /// # }
    /// ```
    pub fn listener(&self, name: &str) -> SocketAddr {
        match self.try_listener(name) {
            Ok(addr) => addr,
            Err(e) => panic!("{e} (it has {:?})", self.listeners.keys()),
        }
    }

    /// The bound address of the listener named `name`, or
    /// [`EnvoyError::NoListener`].
    ///
    /// ```no_run
    /// # fn run(envoy: &envoy_sidecar::Sidecar) {
    /// assert!(envoy.try_listener("nope").is_err());
    /// # }
    /// ```
    pub fn try_listener(&self, name: &str) -> Result<SocketAddr, EnvoyError> {
        self.listeners
            .get(name)
            .copied()
            .ok_or_else(|| EnvoyError::NoListener(name.to_owned()))
    }

    /// Envoy's process id, until [`Sidecar::shutdown`].
    ///
    /// ```no_run
    /// # fn run(envoy: &envoy_sidecar::Sidecar) {
    /// println!("envoy is process {:?}", envoy.id());
    /// # }
    /// ```
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// The admin interface's address.
    ///
    /// ```no_run
    /// # fn run(envoy: &envoy_sidecar::Sidecar) {
    /// println!("http://{}/stats", envoy.admin());
    /// # }
    /// ```
    pub fn admin(&self) -> SocketAddr {
        self.admin
    }

    /// The admin's `/stats` lines whose names start with `prefix`, as text
    /// (`name: value` a line). When the admin cannot be asked, the text is
    /// the error (`envoy admin: ...`), which no stat line matches: an
    /// assertion on a counter then fails showing why.
    /// [`Sidecar::try_stats`] is the fallible form.
    ///
    /// ```no_run
    /// # async fn run(envoy: &envoy_sidecar::Sidecar) {
    /// let stats = envoy.stats("cluster.pricing.upstream_rq_total").await;
    /// assert!(!stats.contains("upstream_rq_total: 0"), "{stats}");
    /// # }
    /// ```
    pub async fn stats(&self, prefix: &str) -> String {
        self.try_stats(prefix)
            .await
            .unwrap_or_else(|e| e.to_string())
    }

    /// [`Sidecar::stats`], with the admin's failure as an error.
    ///
    /// ```no_run
    /// # async fn run(envoy: &envoy_sidecar::Sidecar) -> Result<(), envoy_sidecar::EnvoyError> {
    /// let stats = envoy.try_stats("http.hop.").await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_stats(&self, prefix: &str) -> Result<String, EnvoyError> {
        admin::stats(self.admin, prefix).await
    }

    /// The value of the counter or gauge named exactly `name`
    /// (`cluster.upstream.upstream_rq_total`), or
    /// [`EnvoyError::Admin`] when Envoy has no such stat.
    ///
    /// ```no_run
    /// # async fn run(envoy: &envoy_sidecar::Sidecar) -> Result<(), envoy_sidecar::EnvoyError> {
    /// let sent = envoy.counter("cluster.upstream.upstream_rq_total").await?;
    /// # Ok(()) }
    /// ```
    pub async fn counter(&self, name: &str) -> Result<u64, EnvoyError> {
        admin::counter(self.admin, name).await
    }

    /// Where Envoy's stdout and stderr go.
    ///
    /// ```no_run
    /// # fn run(envoy: &envoy_sidecar::Sidecar) {
    /// println!("{}", std::fs::read_to_string(envoy.log_path()).unwrap());
    /// # }
    /// ```
    pub fn log_path(&self) -> PathBuf {
        log_path(self.dir.path())
    }

    /// Asks Envoy to exit (admin `/quitquitquit`), waits for it (at most
    /// 5 s), and kills it if it has not.
    ///
    /// ```no_run
    /// # async fn run(envoy: envoy_sidecar::Sidecar) {
    /// envoy.shutdown().await;
    /// # }
    /// ```
    pub async fn shutdown(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = admin::post(self.admin, "/quitquitquit").await;
        if tokio::time::timeout(EXIT_LIMIT, child.wait())
            .await
            .is_err()
        {
            let _ = child.start_kill();
        }
        let _ = child.wait().await;
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("envoy.log")
}

fn admin_path(dir: &Path) -> PathBuf {
    dir.join("admin-address")
}

/// Envoy on `dir/envoy.yaml`, its output in `dir/envoy.log`.
fn spawn(binary: &Path, dir: &Path, concurrency: usize) -> Result<Child, EnvoyError> {
    let log =
        std::fs::File::create(log_path(dir)).map_err(|e| EnvoyError::io("creating its log", e))?;
    let err = log
        .try_clone()
        .map_err(|e| EnvoyError::io("sharing its log", e))?;
    Command::new(binary)
        .arg("--disable-hot-restart")
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--log-level", "warn"])
        .arg("-c")
        .arg(dir.join("envoy.yaml"))
        .arg("--admin-address-path")
        .arg(admin_path(dir))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| EnvoyError::io(format!("running {}", binary.display()), e))
}

/// Waits until Envoy's admin says LIVE; its address. Envoy exiting first
/// is [`EnvoyError::Exited`] with its log's tail.
async fn ready(child: &mut Child, dir: &Path) -> Result<SocketAddr, EnvoyError> {
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| EnvoyError::io("waiting for it", e))?
        {
            return Err(EnvoyError::Exited {
                status: status.to_string(),
                log_tail: log::tail_of(&log_path(dir)),
            });
        }
        let written = std::fs::read_to_string(admin_path(dir)).unwrap_or_default();
        if let Ok(admin) = written.trim().parse::<SocketAddr>()
            && admin::is_live(admin).await
        {
            return Ok(admin);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
