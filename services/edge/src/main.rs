//! The `edge` binary: flags (each also an environment variable) and an
//! optional TOML file make an [`EdgeConfig`]; edge serves until SIGTERM or
//! Ctrl-C, then lets requests in flight finish.

use std::process::ExitCode;

use clap::Parser;
use edge::{EdgeConfig, Error};
use service_kit::{BudgetFlags, ServiceFlags, overlay};

/// The public entry of the budget chain: gives each request a budget (the
/// caller's, clamped, or the default) and forwards GET/POST /checkout to
/// checkout with what is left, in one attempt.
///
/// Flags override the config file; every flag is also an environment
/// variable. The file also takes a [checkout] client table (connect_cap,
/// pool_idle_timeout, floor, breaker, concurrency, max_body, fixed_timeout), [http]
/// (header_timeout, idle_timeout, max_connections) and [ledger] (max_entries,
/// max_bytes). Routes: GET/POST /checkout, GET /healthz, GET /metrics
/// (Prometheus). Logs follow `RUST_LOG` (default `info`); traces are
/// exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, named by
/// `OTEL_SERVICE_NAME` (default edge), off with `OTEL_SDK_DISABLED=true`.
#[derive(Debug, Parser)]
#[command(name = "edge", version)]
#[command(mut_args(service_kit::show_defaults::<EdgeConfig>()))]
struct Cli {
    #[command(flatten)]
    service: ServiceFlags,

    /// Checkout's base URL; edge calls its /checkout
    /// [default: http://127.0.0.1:8081]
    #[arg(long, env = "CHECKOUT_URL", value_name = "URL")]
    checkout_url: Option<String>,

    /// Honour callers' budget headers (true) or give every request the
    /// default budget (false) [default: true]
    #[arg(long, env = "TRUST_INBOUND_BUDGET", value_name = "BOOL")]
    trust_inbound_budget: Option<bool>,

    /// Remove internal headers (Server-Timing) from public responses
    /// [default: false]
    #[arg(long, env = "STRIP_INTERNAL_HEADERS", value_name = "BOOL")]
    strip_internal_headers: Option<bool>,

    /// The floor of the call to checkout: `auto` (learned from its
    /// latency) or a duration [default: auto]
    #[arg(long, env = "CHECKOUT_FLOOR", value_name = "auto|DURATION")]
    checkout_floor: Option<budget_core::floor::FloorConfig>,

    #[command(flatten)]
    budget: BudgetFlags,
}

impl Cli {
    /// The config file (or the defaults) with every given flag on top,
    /// validated.
    fn config(&self) -> Result<EdgeConfig, Error> {
        self.service.config(&self.budget, |c: &mut EdgeConfig| {
            overlay(&mut c.checkout_url, self.checkout_url.clone());
            overlay(&mut c.trust_inbound_budget, self.trust_inbound_budget);
            overlay(&mut c.strip_internal_headers, self.strip_internal_headers);
            overlay(&mut c.checkout.floor, self.checkout_floor.map(Some));
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let start = async { edge::spawn(&cli.config()?, service_kit::shutdown_signal()).await };
    service_kit::run_server("edge", start, || tracing::info!("edge stopped")).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use clap::CommandFactory;
    use service_kit::{SHARED_FLAGS, ServiceConfig, TestConfigFile, error_chain};

    #[test]
    fn every_flag_sets_its_field() {
        let own = [
            "edge",
            "--checkout-url",
            "http://127.0.0.1:9181",
            "--checkout-floor",
            "40ms",
        ];
        let cli = Cli::try_parse_from(own.into_iter().chain(SHARED_FLAGS)).unwrap();
        let c = cli.config().unwrap();
        service_kit::assert_shared_flags_set(c.settings());
        assert_eq!(c.checkout_url, "http://127.0.0.1:9181");
        assert_eq!(
            c.checkout.floor,
            Some(budget_core::floor::FloorConfig::fixed(
                std::time::Duration::from_millis(40)
            ))
        );
    }

    #[test]
    fn flags_override_the_config_file() {
        let file = TestConfigFile::new(
            "edge.toml",
            "default_budget = \"3s\"\nlisten = \"127.0.0.1:9183\"\n[checkout]\nconcurrency = 5\n",
        );
        let cli = Cli::try_parse_from([
            "edge",
            "--config",
            file.path_str(),
            "--default-budget",
            "500ms",
        ])
        .unwrap();
        let config = cli.config().unwrap();
        assert_eq!(config.default_budget, Duration::from_millis(500));
        assert_eq!(config.listen.port(), 9183);
        assert_eq!(config.checkout.concurrency, Some(5.into()));
    }

    #[test]
    fn a_bad_file_is_a_precise_error() {
        let file = TestConfigFile::new("edge.toml", "max_budget = 10\n");
        let cli = Cli::try_parse_from(["edge", "--config", file.path_str()]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(err.is_config());
        let text = error_chain(&err);
        assert!(text.contains("edge.toml"), "{text}");
        assert!(text.contains("max_budget"), "{text}");

        file.write("default_budget = \"1m\"\n");
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
    }

    #[test]
    fn a_bad_value_names_its_field() {
        let cli = Cli::try_parse_from(["edge", "--checkout-url", "checkout"]).unwrap();
        let err = cli.config().unwrap_err();
        assert!(error_chain(&err).contains("`checkout_url`"), "{err}");
    }

    #[test]
    fn a_malformed_flag_is_a_usage_error_not_a_panic() {
        service_kit::assert_usage_errors::<Cli>(&[
            &["edge", "--budget-mode", "maybe"],
            &["edge", "--listen", "nowhere"],
            &["edge", "--max-budget", "soon"],
            &["edge", "--reserve", "5 parsecs"],
        ]);
    }

    #[test]
    fn the_cli_is_consistent_and_every_flag_has_its_upper_snake_case_environment_variable() {
        service_kit::assert_cli_conventions(Cli::command());
    }
}
