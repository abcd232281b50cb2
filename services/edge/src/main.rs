//! The `edge` binary: flags (each also an environment variable) and an
//! optional TOML file make an [`EdgeConfig`]; edge serves until SIGTERM or
//! Ctrl-C, then lets requests in flight finish.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use edge::{EdgeConfig, Error};
use service_kit::{BudgetFlags, ServiceFlags, overlay};

/// The public entry of the budget chain: gives each request a budget (the
/// caller's, clamped, or the default) and forwards GET/POST /checkout to
/// checkout with what is left, in one attempt; GET /events opens the
/// partner's event stream in that budget and streams it on.
///
/// Flags override the config file; every flag is also an environment
/// variable. The file also takes [checkout] and [events] client tables (connect_cap,
/// pool_idle_timeout, floor, breaker, concurrency, max_body, fixed_timeout), [http]
/// (header_timeout, idle_timeout, max_connections) and [ledger] (max_entries,
/// max_bytes). Routes: GET/POST /checkout, GET /events, GET /healthz, GET /metrics
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

    /// The partner's event stream, which GET /events opens (the caller's
    /// query string appended) [default: http://127.0.0.1:9000/events]
    #[arg(long, env = "EVENTS_URL", value_name = "URL")]
    events_url: Option<String>,

    /// End a stream through /events (cleanly: its client reconnects) after
    /// this long without a byte from the partner [default: 60s]
    #[arg(long, env = "EVENTS_IDLE_TIMEOUT", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    events_idle_timeout: Option<Duration>,

    /// End a stream through /events (cleanly: its client reconnects and
    /// resumes with Last-Event-ID) after this long [default: 30m]
    #[arg(long, env = "EVENTS_MAX_DURATION", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    events_max_duration: Option<Duration>,

    /// An origin (scheme://host[:port]) whose pages may read /events from a
    /// browser (CORS); repeat the flag, or separate origins with commas
    /// [default: none]
    #[arg(
        long,
        env = "CORS_ORIGIN",
        value_name = "ORIGIN",
        value_delimiter = ','
    )]
    cors_origin: Vec<String>,

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
            overlay(&mut c.events_url, self.events_url.clone());
            overlay(&mut c.events_idle_timeout, self.events_idle_timeout);
            overlay(&mut c.events_max_duration, self.events_max_duration);
            if !self.cors_origin.is_empty() {
                c.cors_origins.clone_from(&self.cors_origin);
            }
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
            "--events-url",
            "http://127.0.0.1:9182/events",
            "--events-idle-timeout",
            "15s",
            "--events-max-duration",
            "5m",
            "--cors-origin",
            "http://127.0.0.1:3000",
            "--cors-origin",
            "https://app.example",
        ];
        let cli = Cli::try_parse_from(own.into_iter().chain(SHARED_FLAGS)).unwrap();
        let c = cli.config().unwrap();
        service_kit::assert_shared_flags_set(c.settings());
        assert_eq!(c.checkout_url, "http://127.0.0.1:9181");
        assert_eq!(c.events_url, "http://127.0.0.1:9182/events");
        assert_eq!(c.events_idle_timeout, Duration::from_secs(15));
        assert_eq!(c.events_max_duration, Duration::from_secs(300));
        assert_eq!(
            c.cors_origins,
            ["http://127.0.0.1:3000", "https://app.example"]
        );
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
            &["edge", "--events-idle-timeout", "often"],
        ]);
    }

    #[test]
    fn the_help_states_the_defaults_of_the_event_stream_flags() {
        let cmd = Cli::command();
        let stated = |id: &str| {
            let help = cmd
                .get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help())
                .map(ToString::to_string)
                .unwrap_or_default();
            let (_, default) = help.rsplit_once("[default: ").expect("a stated default");
            default.trim_end_matches(']').to_owned()
        };
        let defaults = EdgeConfig::default();
        assert_eq!(stated("events_url"), defaults.events_url);
        let duration = |id| budget_core::config::duration::parse(&stated(id)).unwrap();
        assert_eq!(
            duration("events_idle_timeout"),
            defaults.events_idle_timeout
        );
        assert_eq!(
            duration("events_max_duration"),
            defaults.events_max_duration
        );
        assert_eq!(stated("cors_origin"), "none");
        assert!(defaults.cors_origins.is_empty());
    }

    #[test]
    fn the_cli_is_consistent_and_every_flag_has_its_upper_snake_case_environment_variable() {
        service_kit::assert_cli_conventions(Cli::command());
    }
}
