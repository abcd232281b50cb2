//! The `edge` binary: flags (each also an environment variable) and an
//! optional TOML file make an [`EdgeConfig`]; edge serves until SIGTERM or
//! Ctrl-C, then lets requests in flight finish.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use edge::{EdgeConfig, Error};
use service_kit::{BudgetMode, error_chain};

/// The public entry of the budget chain: gives each request a budget (the
/// caller's, clamped, or the default) and forwards GET/POST /checkout to
/// checkout with what is left, in one attempt.
///
/// Flags override the config file; every flag is also an environment
/// variable. The file also takes a [checkout] client table (connect_cap,
/// floor, breaker, concurrency, max_body, fixed_timeout). Logs follow
/// `RUST_LOG` (default `info`).
#[derive(Debug, Parser)]
#[command(name = "edge", version)]
struct Cli {
    /// Address to listen on [default: 127.0.0.1:8080]
    #[arg(long, env = "LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// TOML config file with the same fields as the flags (snake_case) and
    /// a [checkout] table; durations in humantime form ("500ms")
    #[arg(long, env = "CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// `on`: budgets; `off`: a fixed 30 s timeout, nothing forwarded
    /// [default: on]
    #[arg(long, env = "BUDGET_MODE", value_enum)]
    budget_mode: Option<BudgetMode>,

    /// Checkout's base URL; edge calls its /checkout
    /// [default: http://127.0.0.1:8081]
    #[arg(long, env = "CHECKOUT_URL", value_name = "URL")]
    checkout_url: Option<String>,

    /// Budget of a request that carries no budget header [default: 2s]
    #[arg(long, env = "DEFAULT_BUDGET", value_name = "DURATION", value_parser = humantime::parse_duration)]
    default_budget: Option<Duration>,

    /// Largest budget any request gets, whatever the caller says [default: 10s]
    #[arg(long, env = "MAX_BUDGET", value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_budget: Option<Duration>,

    /// Below this budget on arrival a request is shed with 504 [default: 10ms]
    #[arg(long, env = "FLOOR", value_name = "DURATION", value_parser = humantime::parse_duration)]
    floor: Option<Duration>,

    /// Held back on the call to checkout for edge's own reply [default: 10ms]
    #[arg(long, env = "RESERVE", value_name = "DURATION", value_parser = humantime::parse_duration)]
    reserve: Option<Duration>,
}

impl Cli {
    /// The config file (or the defaults) with every given flag on top,
    /// validated.
    fn config(&self) -> Result<EdgeConfig, Error> {
        let mut config = match &self.config {
            Some(path) => service_kit::load_toml(path)?,
            None => EdgeConfig::default(),
        };
        let c = &mut config;
        set(&mut c.listen, self.listen);
        set(&mut c.budget_mode, self.budget_mode);
        set(&mut c.checkout_url, self.checkout_url.clone());
        set(&mut c.default_budget, self.default_budget);
        set(&mut c.max_budget, self.max_budget);
        set(&mut c.floor, self.floor);
        set(&mut c.reserve, self.reserve);
        config.validate()?;
        Ok(config)
    }
}

/// A flag, when given, wins over the file.
fn set<T>(field: &mut T, flag: Option<T>) {
    if let Some(value) = flag {
        *field = value;
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
    let server = match edge::spawn(&config, service_kit::shutdown_signal()).await {
        Ok((_, server)) => server,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            return if err.is_config() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            };
        }
    };
    match server.await {
        Ok(Ok(())) => {
            tracing::info!("edge stopped");
            ExitCode::SUCCESS
        }
        Ok(Err(err)) => {
            eprintln!("error: {}", error_chain(&err));
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("error: the server task failed: {err}");
            ExitCode::FAILURE
        }
    }
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
    fn every_flag_sets_its_field() {
        let cli = Cli::try_parse_from([
            "edge",
            "--listen",
            "127.0.0.1:9180",
            "--budget-mode",
            "off",
            "--checkout-url",
            "http://127.0.0.1:9181",
            "--default-budget",
            "1s",
            "--max-budget",
            "3s",
            "--floor",
            "20ms",
            "--reserve",
            "2ms",
        ])
        .unwrap();
        let c = cli.config().unwrap();
        assert_eq!(c.listen.port(), 9180);
        assert_eq!(c.budget_mode, BudgetMode::Off);
        assert_eq!(c.checkout_url, "http://127.0.0.1:9181");
        assert_eq!(c.default_budget, Duration::from_secs(1));
        assert_eq!(c.max_budget, Duration::from_secs(3));
        assert_eq!(c.floor, Duration::from_millis(20));
        assert_eq!(c.reserve, Duration::from_millis(2));
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = std::env::temp_dir().join(format!("edge-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("edge.toml");
        std::fs::write(
            &file,
            "default_budget = \"3s\"\nlisten = \"127.0.0.1:9183\"\n[checkout]\nconcurrency = 5\n",
        )
        .unwrap();
        let cli = Cli::try_parse_from([
            "edge",
            "--config",
            file.to_str().unwrap(),
            "--default-budget",
            "500ms",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.default_budget, Duration::from_millis(500));
        assert_eq!(config.listen.port(), 9183);
        assert_eq!(config.checkout.concurrency, Some(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_file_is_a_precise_error() {
        let dir = std::env::temp_dir().join(format!("edge-cli-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("edge.toml");
        std::fs::write(&file, "max_budget = 10\n").unwrap();
        let cli = Cli::try_parse_from(["edge", "--config", file.to_str().unwrap()]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(err.is_config());
        let text = error_chain(&err);
        assert!(text.contains("edge.toml"), "{text}");
        assert!(text.contains("max_budget"), "{text}");

        std::fs::write(&file, "default_budget = \"1m\"\n").unwrap();
        let err = cli.config().unwrap_err();
        assert!(
            error_chain(&err).starts_with("invalid config: `default_budget`"),
            "{err}"
        );

        let missing = Cli::try_parse_from(["edge", "--config", "/no/such/edge.toml"])
            .unwrap()
            .config()
            .unwrap_err();
        assert!(error_chain(&missing).starts_with("cannot read config file /no/such/edge.toml"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_value_names_its_field() {
        let cli = Cli::try_parse_from(["edge", "--checkout-url", "checkout"]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(error_chain(&err).contains("`checkout_url`"), "{err}");
    }

    #[test]
    fn a_malformed_flag_is_a_usage_error_not_a_panic() {
        for args in [
            &["edge", "--budget-mode", "maybe"][..],
            &["edge", "--listen", "nowhere"],
            &["edge", "--max-budget", "soon"],
            &["edge", "--reserve", "5 parsecs"],
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
}
