//! The `checkout` binary: flags (each also an environment variable) and an
//! optional TOML file make a [`CheckoutConfig`]; checkout serves until
//! SIGTERM or Ctrl-C, then lets requests in flight finish.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use checkout::{CheckoutConfig, Error};
use clap::Parser;
use service_kit::{BudgetMode, error_chain};

/// The middle hop of the budget chain: GET/POST /checkout calls inventory,
/// pricing (retried) and recommendations (optional, skipped below its
/// floor) within the request's one time budget.
///
/// Flags override the config file; every flag is also an environment
/// variable. The file also takes per-dependency client tables
/// ([inventory], [pricing], [recommendations]: connect_cap, floor, retry,
/// retry_budget, breaker, concurrency, grpc_timeout, max_body,
/// fixed_timeout). Logs follow `RUST_LOG` (default `info`).
#[derive(Debug, Parser)]
#[command(name = "checkout", version)]
struct Cli {
    /// Address to listen on [default: 127.0.0.1:8081]
    #[arg(long, env = "LISTEN", value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// TOML config file with the same fields as the flags (snake_case) and
    /// per-dependency tables; durations in humantime form ("500ms")
    #[arg(long, env = "CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    /// `on`: budgets; `off`: fixed 30 s timeouts, fixed retries, nothing
    /// forwarded, recommendations always called [default: on]
    #[arg(long, env = "BUDGET_MODE", value_enum)]
    budget_mode: Option<BudgetMode>,

    /// Inventory's URL (required dependency); its query string is kept on
    /// every call [default: http://127.0.0.1:9000/inventory]
    #[arg(long, env = "INVENTORY_URL", value_name = "URL")]
    inventory_url: Option<String>,

    /// Pricing's URL (required, retried) [default: http://127.0.0.1:9000/pricing]
    #[arg(long, env = "PRICING_URL", value_name = "URL")]
    pricing_url: Option<String>,

    /// Recommendations' URL (optional) [default: http://127.0.0.1:9000/recommendations]
    #[arg(long, env = "RECOMMENDATIONS_URL", value_name = "URL")]
    recommendations_url: Option<String>,

    /// Below this budget recommendations is skipped and the answer marked
    /// degraded [default: 1s]
    #[arg(long, env = "RECOMMENDATIONS_FLOOR", value_name = "DURATION", value_parser = humantime::parse_duration)]
    recommendations_floor: Option<Duration>,

    /// Budget of a request that carries no budget header [default: 2s]
    #[arg(long, env = "DEFAULT_BUDGET", value_name = "DURATION", value_parser = humantime::parse_duration)]
    default_budget: Option<Duration>,

    /// Largest budget any request gets [default: 10s]
    #[arg(long, env = "MAX_BUDGET", value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_budget: Option<Duration>,

    /// Below this budget on arrival a request is shed with 504 [default: 10ms]
    #[arg(long, env = "FLOOR", value_name = "DURATION", value_parser = humantime::parse_duration)]
    floor: Option<Duration>,

    /// Held back on every outbound call for checkout's own reply [default: 5ms]
    #[arg(long, env = "RESERVE", value_name = "DURATION", value_parser = humantime::parse_duration)]
    reserve: Option<Duration>,
}

impl Cli {
    /// The config file (or the defaults) with every given flag on top,
    /// validated.
    fn config(&self) -> Result<CheckoutConfig, Error> {
        let mut config = match &self.config {
            Some(path) => service_kit::load_toml(path)?,
            None => CheckoutConfig::default(),
        };
        let c = &mut config;
        set(&mut c.listen, self.listen);
        set(&mut c.budget_mode, self.budget_mode);
        set(&mut c.inventory_url, self.inventory_url.clone());
        set(&mut c.pricing_url, self.pricing_url.clone());
        set(&mut c.recommendations_url, self.recommendations_url.clone());
        set(&mut c.recommendations_floor, self.recommendations_floor);
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
    let server = match checkout::spawn(&config, service_kit::shutdown_signal()).await {
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
            tracing::info!("checkout stopped");
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
            "checkout",
            "--listen",
            "127.0.0.1:9181",
            "--budget-mode",
            "off",
            "--inventory-url",
            "http://127.0.0.1:9/i",
            "--pricing-url",
            "http://127.0.0.1:9/p?status=503",
            "--recommendations-url",
            "http://127.0.0.1:9/r",
            "--recommendations-floor",
            "300ms",
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
        assert_eq!(c.listen.port(), 9181);
        assert_eq!(c.budget_mode, BudgetMode::Off);
        assert_eq!(c.inventory_url, "http://127.0.0.1:9/i");
        assert_eq!(c.pricing_url, "http://127.0.0.1:9/p?status=503");
        assert_eq!(c.recommendations_url, "http://127.0.0.1:9/r");
        assert_eq!(c.recommendations_floor, Duration::from_millis(300));
        assert_eq!(c.default_budget, Duration::from_secs(1));
        assert_eq!(c.max_budget, Duration::from_secs(3));
        assert_eq!(c.floor, Duration::from_millis(20));
        assert_eq!(c.reserve, Duration::from_millis(2));
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = std::env::temp_dir().join(format!("checkout-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("checkout.toml");
        std::fs::write(
            &file,
            "recommendations_floor = \"2s\"\nlisten = \"127.0.0.1:9182\"\n[pricing.retry]\nmax_attempts = 5\n",
        )
        .unwrap();
        let cli = Cli::try_parse_from([
            "checkout",
            "--config",
            file.to_str().unwrap(),
            "--recommendations-floor",
            "500ms",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.recommendations_floor, Duration::from_millis(500));
        assert_eq!(config.listen.port(), 9182);
        assert_eq!(config.pricing.retry.unwrap().max_attempts, 5);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_file_is_a_precise_error() {
        let dir = std::env::temp_dir().join(format!("checkout-cli-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("checkout.toml");
        std::fs::write(&file, "[pricing]\nconnect_cap = \"fast\"\n").unwrap();
        let cli = Cli::try_parse_from(["checkout", "--config", file.to_str().unwrap()]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(err.is_config());
        let text = error_chain(&err);
        assert!(text.contains("checkout.toml"), "{text}");
        assert!(text.contains("connect_cap"), "{text}");

        std::fs::write(&file, "[pricing.retry]\nmax_attempts = 0\n").unwrap();
        let err = cli.config().unwrap_err();
        assert_eq!(
            error_chain(&err),
            "invalid config: `pricing.retry.max_attempts` must be at least 1"
        );

        let missing = Cli::try_parse_from(["checkout", "--config", "/no/such/checkout.toml"])
            .unwrap()
            .config()
            .unwrap_err();
        assert!(
            error_chain(&missing).starts_with("cannot read config file /no/such/checkout.toml")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_bad_value_names_its_field() {
        let cli = Cli::try_parse_from(["checkout", "--pricing-url", "pricing:80"]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(error_chain(&err).contains("`pricing_url`"), "{err}");
        let cli = Cli::try_parse_from(["checkout", "--floor", "1m"]).unwrap();
        assert!(error_chain(&cli.config().unwrap_err()).contains("`floor`"));
    }

    #[test]
    fn a_malformed_flag_is_a_usage_error_not_a_panic() {
        for args in [
            &["checkout", "--budget-mode", "maybe"][..],
            &["checkout", "--listen", "nowhere"],
            &["checkout", "--recommendations-floor", "soon"],
            &["checkout", "--default-budget", "2 fortnights ago"],
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
