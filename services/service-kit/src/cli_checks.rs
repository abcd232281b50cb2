use std::fmt::Debug;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clap::{Command, Parser};

use crate::{BudgetMode, ServiceSettings};

/// Asserts the rules every binary's command line follows: the definition
/// is consistent (clap's own [`Command::debug_assert`]), and each flag (but
/// `--help` and `--version`) is also an environment variable, named as the
/// flag in upper snake case (`--max-budget`, `MAX_BUDGET`).
///
/// For the binaries' tests.
///
/// ```
/// use clap::{Arg, Command};
///
/// let cmd = Command::new("demo").arg(Arg::new("max_budget").long("max-budget").env("MAX_BUDGET"));
/// service_kit::assert_cli_conventions(cmd);
/// ```
///
/// ```should_panic
/// use clap::{Arg, Command};
///
/// let cmd = Command::new("demo").arg(Arg::new("max_budget").long("max-budget").env("MAXBUDGET"));
/// service_kit::assert_cli_conventions(cmd);
/// ```
#[track_caller]
pub fn assert_cli_conventions(cmd: Command) {
    cmd.clone().debug_assert();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if matches!(long, "help" | "version") {
            continue;
        }
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        assert_eq!(
            env.as_deref(),
            Some(long.to_uppercase().replace('-', "_").as_str())
        );
    }
}

/// Asserts that each command line of `cases` is a usage error of `P` (a
/// value that does not parse or is not allowed), not a panic.
///
/// For the binaries' tests.
///
/// ```
/// use clap::Parser;
///
/// /// The demo binary.
/// #[derive(Debug, Parser)]
/// struct Cli {
///     /// A duration.
///     #[arg(long, value_parser = budget_core::config::duration::parse)]
///     floor: Option<std::time::Duration>,
///     /// On or off.
///     #[arg(long, value_enum)]
///     budget_mode: Option<service_kit::BudgetMode>,
/// }
///
/// service_kit::assert_usage_errors::<Cli>(&[
///     &["demo", "--floor", "soon"],
///     &["demo", "--budget-mode", "maybe"],
/// ]);
/// ```
#[track_caller]
pub fn assert_usage_errors<P: Parser + Debug>(cases: &[&[&str]]) {
    for args in cases {
        let err = P::try_parse_from(*args).unwrap_err();
        assert!(
            matches!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation | clap::error::ErrorKind::InvalidValue
            ),
            "{args:?}: {err}"
        );
    }
}

/// Every flag of [`ServiceFlags`](crate::ServiceFlags) and
/// [`BudgetFlags`](crate::BudgetFlags) (but `--config`), each with a value
/// that is no service's default; [`assert_shared_flags_set`] checks a
/// config made with them.
///
/// For the binaries' tests.
///
/// ```
/// assert_eq!(service_kit::SHARED_FLAGS[0], "--listen");
/// ```
pub const SHARED_FLAGS: [&str; 20] = [
    "--listen",
    "127.0.0.1:9181",
    "--budget-mode",
    "off",
    "--default-budget",
    "1s",
    "--max-budget",
    "3s",
    "--floor",
    "20ms",
    "--reserve",
    "2ms",
    "--max-in-flight",
    "64",
    "--header-timeout",
    "3s",
    "--idle-timeout",
    "20s",
    "--max-connections",
    "500",
];

/// Asserts that `settings` holds the values of [`SHARED_FLAGS`]: every
/// shared flag set its field.
///
/// For the binaries' tests.
///
/// ```
/// use std::time::Duration;
/// use service_kit::{BudgetMode, ServiceSettings};
///
/// let settings = ServiceSettings {
///     budget_mode: BudgetMode::Off,
///     default_budget: Duration::from_secs(1),
///     max_budget: Duration::from_secs(3),
///     floor: Duration::from_millis(20),
///     max_in_flight: Some(64.into()),
///     http: service_kit::HttpLimits {
///         header_timeout: Duration::from_secs(3),
///         idle_timeout: Duration::from_secs(20),
///         max_connections: 500,
///     },
///     ..ServiceSettings::new("127.0.0.1:9181".parse().unwrap(), Duration::from_millis(2))
/// };
/// service_kit::assert_shared_flags_set(settings);
/// ```
#[track_caller]
pub fn assert_shared_flags_set(settings: ServiceSettings) {
    let listen: SocketAddr = SHARED_FLAGS[1].parse().unwrap();
    assert_eq!(settings.listen.port(), listen.port());
    assert_eq!(settings.budget_mode, BudgetMode::Off);
    assert_eq!(settings.default_budget, Duration::from_secs(1));
    assert_eq!(settings.max_budget, Duration::from_secs(3));
    assert_eq!(settings.floor, Duration::from_millis(20));
    assert_eq!(settings.reserve, Duration::from_millis(2));
    assert_eq!(settings.max_in_flight, Some(64.into()));
    assert_eq!(settings.http.header_timeout, Duration::from_secs(3));
    assert_eq!(settings.http.idle_timeout, Duration::from_secs(20));
    assert_eq!(settings.http.max_connections, 500);
}

/// A config file for a test, alone in a directory of its own under the
/// system's temporary directory; the directory goes when this is dropped.
///
/// For the binaries' tests.
///
/// ```
/// let file = service_kit::TestConfigFile::new("demo.toml", "listen = \"127.0.0.1:9182\"\n");
/// assert!(file.path_str().ends_with("demo.toml"));
/// let table: toml::Table = service_kit::load_toml(file.path()).unwrap();
/// assert_eq!(table["listen"].as_str(), Some("127.0.0.1:9182"));
/// file.write("listen = 1\n");
/// ```
#[derive(Debug)]
pub struct TestConfigFile {
    dir: PathBuf,
    file: PathBuf,
}

impl TestConfigFile {
    /// Writes `text` to a file named `name` in a new directory.
    ///
    /// # Panics
    ///
    /// When the directory or the file cannot be written.
    ///
    /// ```
    /// let file = service_kit::TestConfigFile::new("demo.toml", "");
    /// assert!(file.path().exists());
    /// ```
    pub fn new(name: &str, text: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "service-kit-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = Self {
            file: dir.join(name),
            dir,
        };
        file.write(text);
        file
    }

    /// Replaces the file's text.
    ///
    /// # Panics
    ///
    /// When the file cannot be written.
    ///
    /// ```
    /// let file = service_kit::TestConfigFile::new("demo.toml", "a = 1");
    /// file.write("a = 2");
    /// assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "a = 2");
    /// ```
    pub fn write(&self, text: &str) {
        std::fs::write(&self.file, text).unwrap();
    }

    /// The file.
    ///
    /// ```
    /// let file = service_kit::TestConfigFile::new("demo.toml", "");
    /// assert_eq!(file.path().file_name().unwrap(), "demo.toml");
    /// ```
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The file, as a command line argument.
    ///
    /// # Panics
    ///
    /// When the temporary directory's path is not UTF-8.
    ///
    /// ```
    /// let file = service_kit::TestConfigFile::new("demo.toml", "");
    /// let args = ["demo", "--config", file.path_str()];
    /// # let _ = args;
    /// ```
    pub fn path_str(&self) -> &str {
        self.file.to_str().unwrap()
    }
}

impl Drop for TestConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs Prometheus' `promtool check metrics` on `scrape` (a `/metrics`
/// body) and asserts that it passes and says nothing. Returns `false`, with
/// a `skip:` line on stdout, when `promtool` is not installed (Debian's
/// `prometheus` package; `.ci/run` installs it).
///
/// For the binaries' tests.
///
/// ```
/// let text = "# HELP demo_total A demo.\n# TYPE demo_total counter\ndemo_total 1\n";
/// let _ran = service_kit::assert_promtool_clean(text);
/// ```
#[track_caller]
pub fn assert_promtool_clean(scrape: &str) -> bool {
    use std::io::Write as _;
    use std::process::{Command, Stdio};

    let Ok(mut promtool) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        println!(
            "skip: promtool not installed (Debian's `prometheus` package; .ci/run installs it)"
        );
        return false;
    };
    if let Some(mut stdin) = promtool.stdin.take() {
        stdin
            .write_all(scrape.as_bytes())
            .expect("promtool reads its input");
    }
    let out = promtool.wait_with_output().expect("promtool runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    true
}
