//! The `slow-partner` binary: flags (each also an environment variable) and
//! an optional TOML file make a [`PartnerConfig`]; the partner runs until
//! SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use service_kit::overlay;
use slow_partner::{BudgetMode, FaultMode, PartnerConfig, PartnerError};

/// A chaos HTTP server that plays a partner who ignores time budgets.
///
/// Any path but the reserved ones answers as its query string asks: `delay`,
/// `jitter`, `status`, `retry_after`, `script` (e.g. `503@250ms,200@400ms`,
/// per `x-request-id` and path), `drip`, `body_bytes`, `tail` (e.g.
/// `0.05@1s`: 5 % of the requests wait 1 s instead of `delay`). Reserved: `GET
/// /healthz`, `GET /stats`, `POST /stats/reset`, `GET /metrics`
/// (Prometheus), `GET`/`PUT /admin/mode`,
/// `GET /admin/paths`, `GET`/`PUT`/`DELETE /admin/paths/{path}` (e.g. `PUT
/// /admin/paths/pricing` with `{"status": 503}`: every request to /pricing
/// answers 503 at once until `DELETE`).
///
/// Flags override the config file; every flag is also an environment
/// variable. Logs follow `RUST_LOG` (default `info`).
#[derive(Debug, Parser)]
#[command(name = "slow-partner", version)]
struct Cli {
    /// Address of the main port [default: 127.0.0.1:9000]
    #[arg(long, env = "LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Separate address serving only /admin/mode, /admin/paths, /stats and
    /// /healthz, reachable whatever the main port's mode
    #[arg(long, env = "ADMIN_LISTEN", value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,

    /// Fault mode of the main port at start (switch later with PUT
    /// /admin/mode?mode=...) [default: normal]
    #[arg(long, env = "MODE", value_enum)]
    mode: Option<FaultMode>,

    /// TOML config file with the same fields as the flags (listen,
    /// admin_listen, mode, budget_mode, max_tracked_ids, shutdown_grace,
    /// workers, a [path_workers] table: "/pricing" = 8, and an [http] table:
    /// header_timeout, idle_timeout, max_connections); durations in
    /// humantime form ("500ms")
    #[arg(long, env = "CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// Accepted for symmetry with the other binaries and ignored: the partner
    /// reads and echoes budgets but never enforces them, on or off
    #[arg(long, env = "BUDGET_MODE", value_enum)]
    budget_mode: Option<BudgetMode>,

    /// How many x-request-ids /stats remembers (first in, first out)
    /// [default: 10000]
    #[arg(long, env = "MAX_TRACKED_IDS", value_name = "N")]
    max_tracked_ids: Option<usize>,

    /// How long requests in flight may finish on a mode switch or shutdown
    /// [default: 5s]
    #[arg(long, env = "SHUTDOWN_GRACE", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    shutdown_grace: Option<Duration>,

    /// At most N requests per path do their work at once; the others wait
    /// in the path's FIFO queue before their delay starts [default:
    /// unlimited]
    #[arg(long, env = "WORKERS", value_name = "N")]
    workers: Option<usize>,

    /// PATH=N: N workers for PATH instead of --workers (repeatable, or
    /// comma-separated: /pricing=8,/inventory=2); added to the config
    /// file's [path_workers]
    #[arg(long, env = "PATH_WORKERS", value_name = "PATH=N", value_parser = parse_path_workers, value_delimiter = ',')]
    path_workers: Vec<(String, usize)>,

    /// A request head must be complete this long after its first byte (a
    /// new connection's: after the accept), else the connection is closed
    /// [default: 10s]
    #[arg(long, env = "HEADER_TIMEOUT", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    header_timeout: Option<Duration>,

    /// A kept-alive HTTP/1 connection idle this long is closed [default:
    /// 75s]
    #[arg(long, env = "IDLE_TIMEOUT", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    idle_timeout: Option<Duration>,

    /// HTTP connections open at once per listener; one more gets a 503 and
    /// is closed [default: 10000]
    #[arg(long, env = "MAX_CONNECTIONS", value_name = "N")]
    max_connections: Option<usize>,
}

/// `/pricing=8`: a path and its worker count (the path is checked with the
/// rest of the config).
fn parse_path_workers(value: &str) -> Result<(String, usize), String> {
    let (path, workers) = value
        .rsplit_once('=')
        .ok_or_else(|| format!("`{value}` is not PATH=N, like /pricing=8"))?;
    let workers = workers
        .parse()
        .map_err(|_| format!("`{workers}` in `{value}` is not a number of workers"))?;
    Ok((path.to_owned(), workers))
}

impl Cli {
    /// The config file (or the defaults) with every given flag on top.
    fn config(&self) -> Result<PartnerConfig, PartnerError> {
        let mut config = match &self.config {
            Some(path) => PartnerConfig::load(path)?,
            None => PartnerConfig::default(),
        };
        overlay(&mut config.listen, self.listen);
        overlay(&mut config.admin_listen, self.admin_listen.map(Some));
        overlay(&mut config.mode, self.mode);
        overlay(&mut config.budget_mode, self.budget_mode);
        overlay(&mut config.max_tracked_ids, self.max_tracked_ids);
        overlay(&mut config.shutdown_grace, self.shutdown_grace);
        overlay(&mut config.workers, self.workers.map(Some));
        overlay(&mut config.http.header_timeout, self.header_timeout);
        overlay(&mut config.http.idle_timeout, self.idle_timeout);
        overlay(&mut config.http.max_connections, self.max_connections);
        config
            .path_workers
            .extend(self.path_workers.iter().cloned());
        config.validate()?;
        Ok(config)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let telemetry = service_kit::init_telemetry("slow-partner");
    let config = match cli.config() {
        Ok(config) => config,
        Err(err) => return service_kit::exit_usage(&err),
    };
    if config.budget_mode == BudgetMode::Off {
        tracing::info!("budget-mode off accepted; the partner never enforces budgets either way");
    }
    let partner = match slow_partner::spawn(config).await {
        Ok(partner) => partner,
        Err(err) => return service_kit::exit_failure(&err),
    };
    service_kit::shutdown_signal().await;
    tracing::info!("shutting down");
    partner.shutdown().await;
    service_kit::flush_telemetry(telemetry);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use service_kit::TestConfigFile;
    use slow_partner::error_chain;

    #[test]
    fn flags_override_the_config_file() {
        let file = TestConfigFile::new(
            "partner.toml",
            "mode = \"hang\"\nlisten = \"127.0.0.1:9100\"\n",
        );
        let cli = Cli::try_parse_from([
            "slow-partner",
            "--config",
            file.path_str(),
            "--mode",
            "reset",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.mode, FaultMode::Reset);
        assert_eq!(config.listen.port(), 9100);
    }

    #[test]
    fn a_malformed_flag_is_a_usage_error_not_a_panic() {
        service_kit::assert_usage_errors::<Cli>(&[
            &["slow-partner", "--mode", "sleep"],
            &["slow-partner", "--listen", "nowhere"],
            &["slow-partner", "--shutdown-grace", "soon"],
            &["slow-partner", "--budget-mode", "maybe"],
            &["slow-partner", "--workers", "many"],
            &["slow-partner", "--workers=-1"],
            &["slow-partner", "--path-workers", "/pricing"],
            &["slow-partner", "--path-workers", "/pricing=x"],
        ]);
    }

    #[test]
    fn workers_come_from_the_flags_on_top_of_the_file() {
        let file = TestConfigFile::new(
            "partner.toml",
            "workers = 2\n[path_workers]\n\"/pricing\" = 8\n\"/inventory\" = 3\n",
        );
        let cli = Cli::try_parse_from([
            "slow-partner",
            "--config",
            file.path_str(),
            "--workers",
            "5",
            "--path-workers",
            "/pricing=1",
            "--path-workers",
            "/a=b=4,/c=6",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.workers, Some(5));
        assert_eq!(
            config.path_workers.into_iter().collect::<Vec<_>>(),
            [
                ("/a=b".to_owned(), 4),
                ("/c".to_owned(), 6),
                ("/inventory".to_owned(), 3),
                ("/pricing".to_owned(), 1),
            ]
        );
        let cli = Cli::try_parse_from(["slow-partner"]).unwrap();
        let config = cli.config().unwrap();
        assert_eq!((config.workers, config.path_workers.len()), (None, 0));
    }

    #[test]
    fn zero_workers_or_a_path_without_a_slash_is_rejected_with_the_field_named() {
        for (args, field) in [
            (&["slow-partner", "--workers", "0"][..], "`workers`"),
            (
                &["slow-partner", "--path-workers", "/p=0"],
                "`path_workers`",
            ),
            (
                &["slow-partner", "--path-workers", "pricing=2"],
                "`path_workers`",
            ),
        ] {
            let cli = Cli::try_parse_from(args).unwrap();
            let err = cli.config().unwrap_err();
            assert!(error_chain(&err).contains(field), "{args:?}: {err}");
        }
    }

    #[test]
    fn a_zero_id_limit_is_rejected_with_the_field_named() {
        let cli = Cli::try_parse_from(["slow-partner", "--max-tracked-ids", "0"]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(error_chain(&err).contains("max_tracked_ids"), "{err}");
    }

    #[test]
    fn the_cli_is_consistent_and_every_flag_has_its_upper_snake_case_environment_variable() {
        service_kit::assert_cli_conventions(Cli::command());
    }
}
