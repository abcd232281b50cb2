use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ValueEnum};

use crate::{BudgetMode, ServiceConfig, ServiceSettings, StartError, load_toml, overlay};

/// The flags of every HTTP service of the chain that say where it listens,
/// what it reads and how long connections may take: `--listen`,
/// `--config`, `--budget-mode`, `--header-timeout`, `--idle-timeout`,
/// `--max-connections`, each also an environment variable.
///
/// A binary's `Cli` flattens these first, then its own flags, then
/// [`BudgetFlags`], and shows each shared flag's default from its config
/// with [`show_defaults`]; [`config`](Self::config) makes the config.
///
/// ```
/// use clap::Parser;
/// use service_kit::{BudgetFlags, ServiceFlags};
///
/// /// The demo service.
/// #[derive(Debug, Parser)]
/// struct Cli {
///     #[command(flatten)]
///     service: ServiceFlags,
///     #[command(flatten)]
///     budget: BudgetFlags,
/// }
///
/// let cli = Cli::try_parse_from(["demo", "--listen", "127.0.0.1:9180", "--floor", "20ms"]).unwrap();
/// assert_eq!(cli.service.listen.unwrap().port(), 9180);
/// ```
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ServiceFlags {
    /// Address to listen on
    #[arg(long, env = "LISTEN", value_name = "ADDR")]
    pub listen: Option<SocketAddr>,

    /// TOML config file with the same fields as the flags (snake_case) and
    /// the tables named above; durations in humantime form ("500ms")
    #[arg(long, env = "CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// `on`: budgets; `off`: fixed 30 s timeouts, nothing forwarded (the
    /// baseline)
    #[arg(long, env = "BUDGET_MODE", value_enum)]
    pub budget_mode: Option<BudgetMode>,

    /// A request head must be complete this long after its first byte (a
    /// new connection's: after the accept), else the connection is closed
    #[arg(long, env = "HEADER_TIMEOUT", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    pub header_timeout: Option<Duration>,

    /// A kept-alive HTTP/1 connection idle this long is closed
    #[arg(long, env = "IDLE_TIMEOUT", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    pub idle_timeout: Option<Duration>,

    /// Connections open at once; one more gets a 503 and is closed
    #[arg(long, env = "MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,
}

/// The flags of every HTTP service of the chain that set its budget layer:
/// `--default-budget`, `--max-budget`, `--floor`, `--reserve` (humantime
/// durations) and `--max-in-flight`, each also an environment variable. See [`ServiceFlags`].
///
/// ```
/// use clap::Parser;
/// use service_kit::BudgetFlags;
///
/// /// The demo service.
/// #[derive(Debug, Parser)]
/// struct Cli {
///     #[command(flatten)]
///     budget: BudgetFlags,
/// }
///
/// let cli = Cli::try_parse_from(["demo", "--max-budget", "3s"]).unwrap();
/// assert_eq!(cli.budget.max_budget, Some(std::time::Duration::from_secs(3)));
/// ```
#[derive(Clone, Debug, Default, clap::Args)]
pub struct BudgetFlags {
    /// Budget of a request that carries no budget header
    #[arg(long, env = "DEFAULT_BUDGET", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    pub default_budget: Option<Duration>,

    /// Largest budget any request gets, whatever the caller says
    #[arg(long, env = "MAX_BUDGET", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    pub max_budget: Option<Duration>,

    /// Below this budget on arrival a request is shed with 504
    #[arg(long, env = "FLOOR", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    pub floor: Option<Duration>,

    /// Held back on every outbound call for the service's own reply
    #[arg(long, env = "RESERVE", value_name = "DURATION", value_parser = budget_core::config::duration::parse)]
    pub reserve: Option<Duration>,

    /// Past this many requests at once, answer 503 with Retry-After
    /// instead of queueing: a number, or `auto` (an adaptive limit)
    #[arg(long, env = "MAX_IN_FLIGHT", value_name = "N|auto")]
    pub max_in_flight: Option<budget_core::admission::limit::LimitConfig>,
}

impl ServiceFlags {
    /// The config file (or the defaults) with every given flag on top:
    /// these, `budget`'s, then the service's own (`own`), validated.
    ///
    /// # Errors
    ///
    /// [`StartError::ConfigFile`] for a file that cannot be read or parsed,
    /// [`StartError::Config`] for a bad value, naming its field.
    ///
    /// ```
    /// use std::time::Duration;
    /// use service_kit::{BudgetFlags, ServiceFlags, ServiceSettings};
    /// # service_kit::service_config! {
    /// #     /// A demo.
    /// #     pub struct DemoConfig {
    /// #         /// Its dependency.
    /// #         pub upstream_url: String = "http://127.0.0.1:9000".to_owned(),
    /// #         ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10))
    /// #     }
    /// # }
    /// # impl DemoConfig {
    /// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> {
    /// #         service_kit::ServiceConfig::settings(self).request_layer().map(drop)
    /// #     }
    /// # }
    ///
    /// let service = ServiceFlags { listen: Some("127.0.0.1:9180".parse().unwrap()), ..Default::default() };
    /// let budget = BudgetFlags { floor: Some(Duration::from_millis(20)), ..Default::default() };
    /// let config = service
    ///     .config(&budget, |c: &mut DemoConfig| c.upstream_url = "http://u".into())
    ///     .unwrap();
    /// assert_eq!((config.listen.port(), config.floor), (9180, Duration::from_millis(20)));
    /// assert_eq!(config.upstream_url, "http://u");
    ///
    /// let budget = BudgetFlags { floor: Some(Duration::from_secs(60)), ..Default::default() };
    /// assert!(service.config(&budget, |_: &mut DemoConfig| {}).unwrap_err().is_config());
    /// ```
    pub fn config<C: ServiceConfig>(
        &self,
        budget: &BudgetFlags,
        own: impl FnOnce(&mut C),
    ) -> Result<C, StartError> {
        let mut config = match &self.config {
            Some(path) => load_toml(path)?,
            None => C::default(),
        };
        let mut s = config.settings();
        overlay(&mut s.listen, self.listen);
        overlay(&mut s.budget_mode, self.budget_mode);
        overlay(&mut s.http.header_timeout, self.header_timeout);
        overlay(&mut s.http.idle_timeout, self.idle_timeout);
        overlay(&mut s.http.max_connections, self.max_connections);
        overlay(&mut s.default_budget, budget.default_budget);
        overlay(&mut s.max_budget, budget.max_budget);
        overlay(&mut s.floor, budget.floor);
        overlay(&mut s.reserve, budget.reserve);
        overlay(&mut s.max_in_flight, budget.max_in_flight.map(Some));
        config.set_settings(s);
        own(&mut config);
        config.validate()?;
        Ok(config)
    }
}

/// For `#[command(mut_args(...))]`: adds `[default: ...]`, taken from
/// `C`'s defaults, to the help of the flags of [`ServiceFlags`] and
/// [`BudgetFlags`] that have one, so that the help says each service's own
/// defaults and cannot drift from them.
///
/// ```
/// use clap::{CommandFactory, Parser};
/// use service_kit::{BudgetFlags, ServiceFlags, ServiceSettings};
/// # use std::time::Duration;
/// # service_kit::service_config! {
/// #     /// A demo.
/// #     pub struct DemoConfig { ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(5)) }
/// # }
/// # impl DemoConfig {
/// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { Ok(()) }
/// # }
///
/// /// The demo service.
/// #[derive(Debug, Parser)]
/// #[command(mut_args(service_kit::show_defaults::<DemoConfig>()))]
/// struct Cli {
///     #[command(flatten)]
///     service: ServiceFlags,
///     #[command(flatten)]
///     budget: BudgetFlags,
/// }
///
/// let cmd = Cli::command();
/// let help = |id: &str| cmd.get_arguments().find(|a| a.get_id() == id).unwrap().get_help().unwrap().to_string();
/// assert_eq!(help("listen"), "Address to listen on [default: 127.0.0.1:8080]");
/// assert_eq!(help("reserve"), "Held back on every outbound call for the service's own reply [default: 5ms]");
/// ```
pub fn show_defaults<C: ServiceConfig>() -> impl FnMut(Arg) -> Arg {
    let defaults = C::default().settings();
    move |arg| match default_of(&defaults, arg.get_id().as_str()) {
        Some(default) => {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            arg.help(format!("{help} [default: {default}]"))
        }
        None => arg,
    }
}

/// The default of the shared flag `id`, as the help shows it.
fn default_of(defaults: &ServiceSettings, id: &str) -> Option<String> {
    let duration = |d: Duration| humantime::format_duration(d).to_string();
    Some(match id {
        "listen" => defaults.listen.to_string(),
        "budget_mode" => defaults
            .budget_mode
            .to_possible_value()?
            .get_name()
            .to_owned(),
        "default_budget" => duration(defaults.default_budget),
        "max_budget" => duration(defaults.max_budget),
        "floor" => duration(defaults.floor),
        "reserve" => duration(defaults.reserve),
        "header_timeout" => duration(defaults.http.header_timeout),
        "idle_timeout" => duration(defaults.http.idle_timeout),
        "max_connections" => defaults.http.max_connections.to_string(),
        "max_in_flight" => defaults
            .max_in_flight
            .map_or_else(|| "no limit".to_owned(), |n| n.to_string()),
        _ => return None,
    })
}
