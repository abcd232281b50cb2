//! The `slow-partner` binary: flags (each also an environment variable) and
//! an optional TOML file make a [`PartnerConfig`]; the partner runs until
//! SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use slow_partner::{BudgetMode, Mode, PartnerConfig, PartnerError, error_chain};

/// A chaos HTTP server that plays a partner who ignores time budgets.
///
/// Any path but the reserved ones answers as its query string asks: `delay`,
/// `jitter`, `status`, `retry_after`, `script` (e.g. `503@250ms,200@400ms`,
/// per `x-request-id` and path), `drip`, `body_bytes`. Reserved: `GET
/// /healthz`, `GET /stats`, `POST /stats/reset`, `GET`/`PUT /admin/mode`.
///
/// Flags override the config file; every flag is also an environment
/// variable. Logs follow `RUST_LOG` (default `info`).
#[derive(Debug, Parser)]
#[command(name = "slow-partner", version)]
struct Cli {
    /// Address of the main port [default: 127.0.0.1:9000]
    #[arg(long, env = "LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// Separate address serving only /admin/mode, /stats and /healthz,
    /// reachable whatever the main port's mode
    #[arg(long, env = "ADMIN_LISTEN", value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,

    /// Fault mode of the main port at start (switch later with PUT
    /// /admin/mode?mode=...) [default: normal]
    #[arg(long, env = "MODE", value_enum)]
    mode: Option<Mode>,

    /// TOML config file with the same fields as the flags (listen,
    /// admin_listen, mode, budget_mode, max_tracked_ids, shutdown_grace);
    /// durations in humantime form ("500ms")
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
    #[arg(long, env = "SHUTDOWN_GRACE", value_name = "DURATION", value_parser = humantime::parse_duration)]
    shutdown_grace: Option<Duration>,
}

impl Cli {
    /// The config file (or the defaults) with every given flag on top.
    fn config(&self) -> Result<PartnerConfig, PartnerError> {
        let mut config = match &self.config {
            Some(path) => PartnerConfig::load(path)?,
            None => PartnerConfig::default(),
        };
        if let Some(listen) = self.listen {
            config.listen = listen;
        }
        if let Some(admin) = self.admin_listen {
            config.admin_listen = Some(admin);
        }
        if let Some(mode) = self.mode {
            config.mode = mode;
        }
        if let Some(budget_mode) = self.budget_mode {
            config.budget_mode = budget_mode;
        }
        if let Some(n) = self.max_tracked_ids {
            config.max_tracked_ids = n;
        }
        if let Some(grace) = self.shutdown_grace {
            config.shutdown_grace = grace;
        }
        config.validate()?;
        Ok(config)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    service_kit::init_tracing();
    let config = match cli.config() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            return ExitCode::from(2);
        }
    };
    if config.budget_mode == BudgetMode::Off {
        tracing::info!("budget-mode off accepted; the partner never enforces budgets either way");
    }
    let partner = match slow_partner::spawn(config).await {
        Ok(partner) => partner,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            return ExitCode::FAILURE;
        }
    };
    service_kit::shutdown_signal().await;
    tracing::info!("shutting down");
    partner.shutdown().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_its_upper_snake_case_environment_variable() {
        for arg in Cli::command().get_arguments() {
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

    #[test]
    fn flags_override_the_config_file() {
        let dir = std::env::temp_dir().join(format!("slow-partner-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("partner.toml");
        std::fs::write(&file, "mode = \"hang\"\nlisten = \"127.0.0.1:9100\"\n").unwrap();
        let cli = Cli::try_parse_from([
            "slow-partner",
            "--config",
            file.to_str().unwrap(),
            "--mode",
            "reset",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.mode, Mode::Reset);
        assert_eq!(config.listen.port(), 9100);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_malformed_flag_is_a_usage_error_not_a_panic() {
        for args in [
            &["slow-partner", "--mode", "sleep"][..],
            &["slow-partner", "--listen", "nowhere"],
            &["slow-partner", "--shutdown-grace", "soon"],
            &["slow-partner", "--budget-mode", "maybe"],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert!(
                matches!(
                    err.kind(),
                    clap::error::ErrorKind::ValueValidation | clap::error::ErrorKind::InvalidValue
                ),
                "{args:?}: {err}"
            );
        }
    }

    #[test]
    fn a_zero_id_limit_is_rejected_with_the_field_named() {
        let cli = Cli::try_parse_from(["slow-partner", "--max-tracked-ids", "0"]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(error_chain(&err).contains("max_tracked_ids"), "{err}");
    }
}
