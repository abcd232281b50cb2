//! The `checkout` binary: flags (each also an environment variable) and an
//! optional TOML file make a [`CheckoutConfig`]; checkout serves until
//! SIGTERM or Ctrl-C, then lets requests in flight finish.

use std::process::ExitCode;
use std::time::Duration;

use budget_core::floor::FloorConfig;
use checkout::{CheckoutConfig, Error};
use clap::Parser;
use service_kit::{BudgetFlags, ServiceFlags, overlay};

/// The middle hop of the budget chain: GET/POST /checkout calls inventory,
/// pricing (retried) and recommendations (optional, skipped below its
/// floor) within the request's one time budget.
///
/// Flags override the config file; every flag is also an environment
/// variable. The file also takes per-dependency client tables
/// ([inventory], [pricing], [recommendations]: connect_cap,
/// pool_idle_timeout, floor, retry, retry_budget, breaker, concurrency,
/// queue, hedge, grpc_timeout, max_body, fixed_timeout, endpoints,
/// resolve_interval, default_budget, forward, on_unavailable, max_stale,
/// stale_cache). With --budget-mode off, retries are fixed and
/// recommendations is always called. The file also takes [http]
/// (header_timeout, idle_timeout, max_connections) and [ledger] (max_entries,
/// max_bytes). Routes: GET/POST /checkout, GET /healthz, GET /metrics
/// (Prometheus). Logs follow `RUST_LOG` (default `info`); traces are
/// exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, named by
/// `OTEL_SERVICE_NAME` (default checkout), off with `OTEL_SDK_DISABLED=true`.
#[derive(Debug, Parser)]
#[command(name = "checkout", version)]
#[command(mut_args(service_kit::show_defaults::<CheckoutConfig>()))]
struct Cli {
    #[command(flatten)]
    service: ServiceFlags,

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
    #[arg(long, env = "RECOMMENDATIONS_FLOOR", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    recommendations_floor: Option<Duration>,

    /// Inventory's floor: `auto` (learned from its latency) or a duration
    /// [default: auto]
    #[arg(long, env = "INVENTORY_FLOOR", value_name = "auto|DURATION")]
    inventory_floor: Option<FloorConfig>,

    /// Pricing's floor: `auto` (learned from its latency) or a duration
    /// [default: auto]
    #[arg(long, env = "PRICING_FLOOR", value_name = "auto|DURATION")]
    pricing_floor: Option<FloorConfig>,

    /// The orders database (PostgreSQL URL): each checkout reserves a unit
    /// of stock in it; absent: no database step [default: none]
    #[arg(long, env = "DATABASE_URL", value_name = "URL")]
    database_url: Option<String>,

    #[command(flatten)]
    budget: BudgetFlags,
}

impl Cli {
    /// The config file (or the defaults) with every given flag on top,
    /// validated.
    fn config(&self) -> Result<CheckoutConfig, Error> {
        self.service.config(&self.budget, |c: &mut CheckoutConfig| {
            overlay(&mut c.inventory_url, self.inventory_url.clone());
            overlay(&mut c.pricing_url, self.pricing_url.clone());
            overlay(&mut c.recommendations_url, self.recommendations_url.clone());
            overlay(&mut c.recommendations_floor, self.recommendations_floor);
            overlay(&mut c.inventory.floor, self.inventory_floor.map(Some));
            overlay(&mut c.pricing.floor, self.pricing_floor.map(Some));
            overlay(&mut c.database_url, self.database_url.clone().map(Some));
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let start = async { checkout::spawn(&cli.config()?, service_kit::shutdown_signal()).await };
    service_kit::run_server("checkout", start, || tracing::info!("checkout stopped")).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use service_kit::{SHARED_FLAGS, ServiceConfig, TestConfigFile, error_chain};

    #[test]
    fn every_flag_sets_its_field() {
        let own = [
            "checkout",
            "--inventory-url",
            "http://127.0.0.1:9/i",
            "--pricing-url",
            "http://127.0.0.1:9/p?status=503",
            "--recommendations-url",
            "http://127.0.0.1:9/r",
            "--recommendations-floor",
            "300ms",
            "--inventory-floor",
            "auto",
            "--pricing-floor",
            "250ms",
            "--database-url",
            "postgres://app@127.0.0.1:5432/orders",
        ];
        let cli = Cli::try_parse_from(own.into_iter().chain(SHARED_FLAGS)).unwrap();
        let c = cli.config().unwrap();
        service_kit::assert_shared_flags_set(c.settings());
        assert_eq!(c.inventory_url, "http://127.0.0.1:9/i");
        assert_eq!(c.pricing_url, "http://127.0.0.1:9/p?status=503");
        assert_eq!(c.recommendations_url, "http://127.0.0.1:9/r");
        assert_eq!(c.recommendations_floor, Duration::from_millis(300));
        assert_eq!(
            c.database_url.as_deref(),
            Some("postgres://app@127.0.0.1:5432/orders")
        );
        assert_eq!(c.inventory.floor, Some(FloorConfig::AUTO));
        assert_eq!(
            c.pricing.floor,
            Some(FloorConfig::fixed(Duration::from_millis(250)))
        );
        let bad = Cli::try_parse_from(["checkout", "--pricing-floor", "soon"]).unwrap_err();
        assert!(bad.to_string().contains("`auto` or a duration"), "{bad}");
    }

    #[test]
    fn flags_override_the_config_file() {
        let file = TestConfigFile::new(
            "checkout.toml",
            "recommendations_floor = \"2s\"\nlisten = \"127.0.0.1:9182\"\n[pricing.retry]\nmax_attempts = 5\n",
        );
        let cli = Cli::try_parse_from([
            "checkout",
            "--config",
            file.path_str(),
            "--recommendations-floor",
            "500ms",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.recommendations_floor, Duration::from_millis(500));
        assert_eq!(config.listen.port(), 9182);
        assert_eq!(config.pricing.retry.unwrap().max_attempts, 5);
    }

    #[test]
    fn a_bad_file_is_a_precise_error() {
        let file = TestConfigFile::new("checkout.toml", "[pricing]\nconnect_cap = \"fast\"\n");
        let cli = Cli::try_parse_from(["checkout", "--config", file.path_str()]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(err.is_config());
        let text = error_chain(&err);
        assert!(text.contains("checkout.toml"), "{text}");
        assert!(text.contains("connect_cap"), "{text}");

        file.write("[pricing.retry]\nmax_attempts = 0\n");
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
        service_kit::assert_usage_errors::<Cli>(&[
            &["checkout", "--budget-mode", "maybe"],
            &["checkout", "--listen", "nowhere"],
            &["checkout", "--recommendations-floor", "soon"],
            &["checkout", "--default-budget", "2 fortnights ago"],
        ]);
    }

    #[test]
    fn the_cli_is_consistent_and_every_flag_has_its_upper_snake_case_environment_variable() {
        service_kit::assert_cli_conventions(Cli::command());
    }
}
