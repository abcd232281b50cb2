//! A throwaway PostgreSQL cluster on 127.0.0.1 for tests, demos and load
//! tests: `initdb` into a fresh temp dir, `pg_ctl start` on a free port with
//! trust authentication on loopback, and on drop `pg_ctl stop -m immediate`
//! and the dir removed.
//!
//! The standard library only, so that any crate can include this file with
//! `#[path]`: budget-core's integration tests do, and service-kit publishes
//! it as `service_kit::pg_cluster` for binaries that start a cluster at run
//! time.
//!
//! The server binaries (`initdb`, `pg_ctl`, `postgres`) come from the
//! highest version under `/usr/lib/postgresql/*/bin`, else from `PATH`;
//! where there are none and we are root with `apt-get`, Debian's
//! `postgresql` package is installed first. PostgreSQL refuses to run as
//! root, so as root the dir is handed to the `postgres` user and the server
//! commands run through `runuser -u postgres --`.
//!
//! ```no_run
//! use service_kit::pg_cluster::Cluster;
//!
//! let cluster = Cluster::start()?;
//! assert_eq!(cluster.psql("select 41 + 1")?, "42");
//! println!("connect to {}", cluster.url());
//! # Ok::<(), service_kit::pg_cluster::ClusterError>(())
//! ```

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

/// The Debian package that brings the server binaries.
const DEBIAN_PACKAGE: &str = "postgresql";
/// How long the server may take to accept its first connection.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a start is tried on a fresh port when the port was taken.
const START_ATTEMPTS: u32 = 3;
/// How much of a failed command's stderr an error keeps (its end).
const STDERR_TAIL: usize = 2000;

/// Why a cluster could not be started or a statement not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClusterError {
    /// The PostgreSQL binaries are not on this machine and could not be
    /// installed.
    NotInstalled {
        /// What was looked for and what to install.
        message: String,
    },
    /// A command failed, or could not be run at all.
    Command {
        /// The command, as a short description.
        what: String,
        /// Its exit code; `None` if it was not run or ended by a signal.
        status: Option<i32>,
        /// The end of what it wrote to stderr (and, for a failed start, of
        /// the server log), or why it could not be run.
        stderr: String,
    },
    /// Something did not happen in time.
    Timeout {
        /// What was waited for, with the last error seen.
        what: String,
        /// How long was waited.
        after: Duration,
    },
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInstalled { message } => write!(f, "postgresql is not installed: {message}"),
            Self::Command {
                what,
                status,
                stderr,
            } => {
                let status = status.map_or_else(|| "no exit code".to_owned(), |c| c.to_string());
                write!(f, "{what} failed ({status}): {stderr}")
            }
            Self::Timeout { what, after } => write!(f, "timed out after {after:?}: {what}"),
        }
    }
}

impl std::error::Error for ClusterError {}

/// A running throwaway PostgreSQL server on 127.0.0.1, user `postgres`,
/// database `postgres`, trust authentication; stopped and deleted on drop.
///
/// ```no_run
/// use service_kit::pg_cluster::Cluster;
///
/// let cluster = Cluster::start()?;
/// cluster.psql("create table t (id int)")?;
/// assert_eq!(cluster.psql("select count(*) from t")?, "0");
/// # Ok::<(), service_kit::pg_cluster::ClusterError>(())
/// ```
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    port: u16,
    bins: Binaries,
    as_postgres: bool,
}

impl Cluster {
    /// Initializes a cluster in a fresh temp dir, starts it on a free port
    /// and waits until it answers `select 1` (at most 30 s).
    ///
    /// # Errors
    ///
    /// [`ClusterError::NotInstalled`] without the binaries,
    /// [`ClusterError::Command`] when `initdb` or `pg_ctl` fails,
    /// [`ClusterError::Timeout`] when the server does not answer in time.
    pub fn start() -> Result<Cluster, ClusterError> {
        let bins = Binaries::find_or_install()?;
        let as_postgres = running_as_root();
        let dir = make_temp_dir(as_postgres)?;
        // From here on, drop stops whatever started and removes the dir.
        let mut cluster = Cluster {
            dir,
            port: 0,
            bins,
            as_postgres,
        };
        cluster.init()?;
        cluster.launch()?;
        cluster.wait_ready()?;
        Ok(cluster)
    }

    /// The TCP port the server listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` (no password: trust
    /// authentication).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The cluster's data directory, for diagnostics (its server log is
    /// `log` beside it).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Runs `sql` with `psql -X -A -t -v ON_ERROR_STOP=1` as `postgres` and
    /// returns its output, trimmed: `"42"` for `select 41 + 1`, one line
    /// per row, columns separated by `|`.
    ///
    /// # Errors
    ///
    /// [`ClusterError::Command`] when psql fails, with its stderr (the
    /// server's error message).
    pub fn psql(&self, sql: &str) -> Result<String, ClusterError> {
        let port = self.port.to_string();
        let mut cmd = Command::new(&self.bins.psql);
        cmd.args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args(["-p", &port, "-U", "postgres", "-d", "postgres", "-c", sql])
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null());
        let output = run("psql", &mut cmd)?;
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    fn init(&self) -> Result<(), ClusterError> {
        let mut cmd = self.server_command("initdb");
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C"])
            .arg("--no-sync");
        run("initdb", &mut cmd).map(drop)
    }

    /// `pg_ctl start` on a free port, on a fresh one when the port was
    /// taken between choosing and binding it.
    fn launch(&mut self) -> Result<(), ClusterError> {
        let mut attempt = 1;
        loop {
            self.port = free_port()?;
            // A fresh log, so that only this attempt's failure is read.
            let _ = fs::remove_file(self.log_path());
            match self.pg_ctl_start() {
                Err(_) if attempt < START_ATTEMPTS && self.log_says_port_taken() => attempt += 1,
                result => return result,
            }
        }
    }

    fn pg_ctl_start(&self) -> Result<(), ClusterError> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        let mut cmd = self.server_command("pg_ctl");
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", "30", "-o", &options, "start"]);
        run("pg_ctl start", &mut cmd)
            .map(drop)
            .map_err(|err| match err {
                ClusterError::Command {
                    what,
                    status,
                    stderr,
                } => ClusterError::Command {
                    what,
                    status,
                    stderr: format!("{stderr}\nserver log: {}", self.log_tail()),
                },
                other => other,
            })
    }

    /// Waits until `select 1` succeeds, at most [`READY_TIMEOUT`].
    // Real processes on the real clock, outside any tokio runtime: the
    // paused-clock rule behind the ban does not apply here.
    #[allow(clippy::disallowed_methods)]
    fn wait_ready(&self) -> Result<(), ClusterError> {
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        loop {
            let err = match self.psql("select 1") {
                Ok(_) => return Ok(()),
                Err(err) => err,
            };
            if std::time::Instant::now() >= deadline {
                return Err(ClusterError::Timeout {
                    what: format!("the server on port {} to answer ({err})", self.port),
                    after: READY_TIMEOUT,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("log")
    }

    fn log_tail(&self) -> String {
        fs::read(self.log_path()).map_or_else(|e| format!("({e})"), |log| tail(&log))
    }

    fn log_says_port_taken(&self) -> bool {
        let log = self.log_tail();
        log.contains("Address already in use") || log.contains("could not bind")
    }

    /// A command for a server binary, as `postgres` when we are root.
    fn server_command(&self, name: &str) -> Command {
        let program = self.bins.dir.join(name);
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new(runuser());
            cmd.args(["-u", "postgres", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        };
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.data_dir().join("postmaster.pid").exists() {
            let mut cmd = self.server_command("pg_ctl");
            cmd.arg("-D")
                .arg(self.data_dir())
                .args(["-m", "immediate", "-w", "-t", "30", "stop"]);
            // Nothing to do about a failure in drop; the dir goes anyway.
            let _ = cmd.output();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Where the server binaries and psql are.
#[derive(Debug, Clone)]
struct Binaries {
    /// Holds `initdb`, `pg_ctl` and `postgres`.
    dir: PathBuf,
    psql: PathBuf,
}

impl Binaries {
    fn find_or_install() -> Result<Binaries, ClusterError> {
        if let Some(bins) = Binaries::find() {
            return Ok(bins);
        }
        if running_as_root() && find_on_path("apt-get").is_some() {
            apt_install()?;
            if let Some(bins) = Binaries::find() {
                return Ok(bins);
            }
        }
        Err(ClusterError::NotInstalled {
            message: format!(
                "no initdb, pg_ctl and postgres under /usr/lib/postgresql/*/bin or on PATH, \
                 or no psql; install Debian's `{DEBIAN_PACKAGE}` package \
                 (apt-get install {DEBIAN_PACKAGE})"
            ),
        })
    }

    /// The highest versioned Debian dir with all three server binaries,
    /// else a `PATH` dir with them; psql from that dir, else from `PATH`.
    fn find() -> Option<Binaries> {
        let path_dirs = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default();
        let dir = versioned_bin_dirs()
            .into_iter()
            .chain(path_dirs)
            .find(|dir| {
                ["initdb", "pg_ctl", "postgres"]
                    .iter()
                    .all(|b| dir.join(b).is_file())
            })?;
        let psql = Some(dir.join("psql"))
            .filter(|p| p.is_file())
            .or_else(|| find_on_path("psql"))?;
        Some(Binaries { dir, psql })
    }
}

/// `/usr/lib/postgresql/<version>/bin`, highest version first.
fn versioned_bin_dirs() -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir("/usr/lib/postgresql") else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name();
            let version = name
                .to_str()?
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn runuser() -> PathBuf {
    find_on_path("runuser").unwrap_or_else(|| PathBuf::from("/usr/sbin/runuser"))
}

/// `apt-get install -y postgresql`, after `apt-get update` if the first try
/// fails. One install at a time in this process; apt's lock is waited for.
fn apt_install() -> Result<(), ClusterError> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let install = || {
        let mut cmd = Command::new("apt-get");
        cmd.args(["-o", "DPkg::Lock::Timeout=300", "install", "-y", "-q"])
            .arg(DEBIAN_PACKAGE)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null());
        run("apt-get install postgresql", &mut cmd).map(drop)
    };
    if install().is_ok() {
        return Ok(());
    }
    let mut update = Command::new("apt-get");
    update.args(["update", "-q"]).stdin(Stdio::null());
    run("apt-get update", &mut update)?;
    install()
}

/// Whether the effective user is root: the `Uid:` line of
/// `/proc/self/status`, else `id -u`.
fn running_as_root() -> bool {
    if let Ok(status) = fs::read_to_string("/proc/self/status")
        && let Some(line) = status.lines().find(|l| l.starts_with("Uid:"))
    {
        // Uid: real effective saved filesystem
        return line.split_whitespace().nth(2) == Some("0");
    }
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A new dir `pg-cluster-PID-N-NANOS` under the temp dir, mode 0700, owned
/// by `postgres` when the server will run as `postgres`.
fn make_temp_dir(for_postgres: bool) -> Result<PathBuf, ClusterError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("pg-cluster-{}-{n}-{}", std::process::id(), nanos());
    let dir = std::env::temp_dir().join(name);
    fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| ClusterError::Command {
            what: format!("creating {}", dir.display()),
            status: None,
            stderr: e.to_string(),
        })?;
    if for_postgres {
        let mut chown = Command::new("chown");
        chown
            .args([OsStr::new("-R"), OsStr::new("postgres:postgres")])
            .arg(&dir)
            .stdin(Stdio::null());
        if let Err(err) = run("chown postgres", &mut chown) {
            let _ = fs::remove_dir_all(&dir);
            return Err(err);
        }
    }
    Ok(dir)
}

/// Nanoseconds of the wall clock, to keep dir names of different runs
/// apart.
// A name, not a time rule: the injected-clock rule does not apply.
#[allow(clippy::disallowed_methods)]
fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> Result<u16, ClusterError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| ClusterError::Command {
            what: "binding 127.0.0.1:0 for a free port".to_owned(),
            status: None,
            stderr: e.to_string(),
        })
}

/// Runs `cmd`; a failure (or no way to run it) is a [`ClusterError::Command`].
fn run(what: &str, cmd: &mut Command) -> Result<Output, ClusterError> {
    let output = cmd.output().map_err(|e| ClusterError::Command {
        what: what.to_owned(),
        status: None,
        stderr: format!("could not run {:?}: {e}", cmd.get_program()),
    })?;
    if output.status.success() {
        return Ok(output);
    }
    Err(ClusterError::Command {
        what: what.to_owned(),
        status: output.status.code(),
        stderr: tail(&output.stderr),
    })
}

/// The last [`STDERR_TAIL`] bytes of `bytes` (on a char boundary), trimmed.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let mut start = text.len().saturating_sub(STDERR_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}
