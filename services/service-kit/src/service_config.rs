use std::path::Path;

use budget_core::config::ConfigError;
use serde::de::DeserializeOwned;

use crate::{ServiceSettings, StartError, load_toml, parse_toml};

/// The config of an HTTP service of the chain: the fields every service has
/// ([`ServiceSettings`]) and its own, read from TOML and validated.
///
/// Implemented by [`service_config!`](crate::service_config), which also
/// writes the fields; the service gives an inherent `validate`.
///
/// ```
/// use service_kit::ServiceConfig;
/// # use std::time::Duration;
/// # service_kit::service_config! {
/// #     /// A demo.
/// #     pub struct DemoConfig { ..service_kit::ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10)) }
/// # }
/// # impl DemoConfig {
/// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { self.settings().request_layer().map(drop) }
/// # }
/// let config = <DemoConfig as ServiceConfig>::from_toml("floor = \"20ms\"").unwrap();
/// assert_eq!(config.settings().floor, Duration::from_millis(20));
/// ```
pub trait ServiceConfig: Default + DeserializeOwned {
    /// The fields every service has.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use service_kit::{ServiceConfig, ServiceSettings};
    /// # service_kit::service_config! {
    /// #     /// A demo.
    /// #     pub struct DemoConfig { ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10)) }
    /// # }
    /// # impl DemoConfig {
    /// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { self.settings().request_layer().map(drop) }
    /// # }
    /// assert_eq!(DemoConfig::default().settings().listen.port(), 8080);
    /// ```
    fn settings(&self) -> ServiceSettings;

    /// Sets the fields every service has.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use service_kit::{ServiceConfig, ServiceSettings};
    /// # service_kit::service_config! {
    /// #     /// A demo.
    /// #     pub struct DemoConfig { ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10)) }
    /// # }
    /// # impl DemoConfig {
    /// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { self.settings().request_layer().map(drop) }
    /// # }
    /// let mut config = DemoConfig::default();
    /// let mut settings = config.settings();
    /// settings.floor = Duration::from_millis(20);
    /// config.set_settings(settings);
    /// assert_eq!(config.floor, Duration::from_millis(20));
    /// ```
    fn set_settings(&mut self, settings: ServiceSettings);

    /// Checks every value; errors name the field.
    ///
    /// # Errors
    ///
    /// The first bad value, naming its field.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use service_kit::{ServiceConfig, ServiceSettings};
    /// # service_kit::service_config! {
    /// #     /// A demo.
    /// #     pub struct DemoConfig { ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10)) }
    /// # }
    /// # impl DemoConfig {
    /// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { self.settings().request_layer().map(drop) }
    /// # }
    /// let config = DemoConfig { max_budget: Duration::ZERO, ..DemoConfig::default() };
    /// assert_eq!(ServiceConfig::validate(&config).unwrap_err().field(), "max_budget");
    /// ```
    fn validate(&self) -> Result<(), ConfigError>;

    /// Parses TOML text (named `<inline>` in errors) and validates it.
    ///
    /// # Errors
    ///
    /// [`StartError::ConfigFile`] for TOML that does not parse into the
    /// config, [`StartError::Config`] for a bad value.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use service_kit::{ServiceConfig, ServiceSettings};
    /// # service_kit::service_config! {
    /// #     /// A demo.
    /// #     pub struct DemoConfig { ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10)) }
    /// # }
    /// # impl DemoConfig {
    /// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { self.settings().request_layer().map(drop) }
    /// # }
    /// let err = <DemoConfig as ServiceConfig>::from_toml("floor = \"soon\"").unwrap_err();
    /// assert!(service_kit::error_chain(&err).starts_with("invalid config file <inline>"));
    /// ```
    fn from_toml(text: &str) -> Result<Self, StartError> {
        let config: Self = parse_toml(text, Path::new("<inline>"))?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a TOML config file.
    ///
    /// # Errors
    ///
    /// [`StartError::ConfigFile`] for a file that cannot be read or does not
    /// parse into the config, [`StartError::Config`] for a bad value.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use service_kit::{ServiceConfig, ServiceSettings};
    /// # service_kit::service_config! {
    /// #     /// A demo.
    /// #     pub struct DemoConfig { ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(10)) }
    /// # }
    /// # impl DemoConfig {
    /// #     fn validate(&self) -> Result<(), budget_core::config::ConfigError> { self.settings().request_layer().map(drop) }
    /// # }
    /// let err = <DemoConfig as ServiceConfig>::load("/no/such/demo.toml".as_ref()).unwrap_err();
    /// assert!(matches!(err, service_kit::StartError::ConfigFile(_)));
    /// ```
    fn load(path: &Path) -> Result<Self, StartError> {
        let config: Self = load_toml(path)?;
        config.validate()?;
        Ok(config)
    }
}

/// Declares the config struct of an HTTP service of the chain: the fields
/// every service has, then its own.
///
/// The struct gets, first, the fields of [`ServiceSettings`] (`listen`,
/// `budget_mode`, `default_budget`, `max_budget`, `floor`, `reserve`,
/// `max_in_flight`, the `[http]` and `[ledger]` tables; durations in
/// humantime form in TOML), with the defaults of the
/// `..settings` line; then the fields written, each with its default after
/// `=` (the syntax of Rust's default field values). It derives `Clone`,
/// `Debug`, `PartialEq`, `Serialize` and `Deserialize` (every field has a
/// default, so a file needs only what it changes; an unknown field is an
/// error), and gets `Default`, [`ServiceConfig`], and inherent `from_toml`
/// and `load`. The service writes an inherent
/// `validate(&self) -> Result<(), ConfigError>`.
///
/// Fields are plain fields, so `config.floor = ...` reads as with any
/// struct. The crate using the macro depends on `serde` and `budget-core`
/// (durations read through [`budget_core::config::duration`]).
///
/// ```
/// use std::net::SocketAddr;
/// use std::time::Duration;
/// use budget_core::config::ConfigError;
/// use service_kit::{ServiceConfig, ServiceSettings};
///
/// service_kit::service_config! {
///     /// How the demo service starts.
///     pub struct DemoConfig {
///         /// The dependency's URL.
///         pub upstream_url: String = "http://127.0.0.1:9000".to_owned(),
///         ..ServiceSettings::new("127.0.0.1:8080".parse().unwrap(), Duration::from_millis(5))
///     }
/// }
///
/// impl DemoConfig {
///     /// Checks every value.
///     pub fn validate(&self) -> Result<(), ConfigError> {
///         self.settings().request_layer().map(drop)
///     }
/// }
///
/// let config = DemoConfig::from_toml("reserve = \"7ms\"\nupstream_url = \"http://u\"").unwrap();
/// assert_eq!(config.reserve, Duration::from_millis(7));
/// assert_eq!(config.upstream_url, "http://u");
/// assert_eq!(config.listen.port(), 8080);
/// assert!(DemoConfig::from_toml("max_budget = \"0s\"").is_err());
/// assert!(DemoConfig::from_toml("lisen = \"127.0.0.1:1\"").is_err());
/// ```
#[macro_export]
macro_rules! service_config {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_attr:meta])*
                pub $field:ident : $ty:ty = $default:expr,
            )*
            ..$settings:expr $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Debug, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        $vis struct $name {
            /// The address to listen on (port 0 picks a free one).
            pub listen: ::std::net::SocketAddr,
            /// `on`: the budget machinery; `off`: no budget layer, no budget
            /// forwarded, fixed timeouts and retries (the baseline it is
            /// compared with).
            pub budget_mode: $crate::BudgetMode,
            /// The budget of a request that carries no budget header.
            #[serde(with = "budget_core::config::duration")]
            pub default_budget: ::std::time::Duration,
            /// The largest budget any request gets, whatever its caller says.
            #[serde(with = "budget_core::config::duration")]
            pub max_budget: ::std::time::Duration,
            /// Below this budget on arrival, a request is shed with `504`.
            #[serde(with = "budget_core::config::duration")]
            pub floor: ::std::time::Duration,
            /// What every outbound call holds back for the service's own reply.
            #[serde(with = "budget_core::config::duration")]
            pub reserve: ::std::time::Duration,
            /// Past this many requests at once, `503` with `Retry-After`
            /// (`N`, or `"auto"` for an adaptive limit); absent: no limit.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub max_in_flight: ::std::option::Option<$crate::__private::LimitConfig>,
            /// The HTTP server's limits: `header_timeout`, `idle_timeout`,
            /// `max_connections` (the `[http]` table).
            pub http: $crate::HttpLimits,
            /// Each request's ledger bound: `max_entries`, `max_bytes` (the
            /// `[ledger]` table).
            pub ledger: $crate::__private::LedgerLimits,
            $(
                $(#[$field_attr])*
                pub $field: $ty,
            )*
        }

        $crate::service_config!(@impls $name
            [listen budget_mode default_budget max_budget floor reserve max_in_flight http ledger]
            [$($field = $default),*]
            $settings);
    };
    // The fields of `ServiceSettings` (the first list) are named once,
    // above; every impl goes over the list.
    (@impls $name:ident [$($shared:ident)*] [$($field:ident = $default:expr),*] $settings:expr) => {
        impl ::std::default::Default for $name {
            fn default() -> Self {
                let settings: $crate::ServiceSettings = $settings;
                Self {
                    $($shared: settings.$shared,)*
                    $($field: $default,)*
                }
            }
        }

        impl $crate::ServiceConfig for $name {
            fn settings(&self) -> $crate::ServiceSettings {
                $crate::ServiceSettings {
                    $($shared: self.$shared,)*
                }
            }

            fn set_settings(&mut self, settings: $crate::ServiceSettings) {
                $(self.$shared = settings.$shared;)*
            }

            fn validate(&self) -> ::std::result::Result<(), $crate::__private::ConfigError> {
                // The service's inherent `validate`.
                Self::validate(self)
            }
        }

        impl $name {
            /// Parses TOML text (named `<inline>` in errors) and validates it.
            ///
            /// # Errors
            ///
            /// A config file error naming `<inline>` for TOML that does not
            /// parse into the config, a config error for a bad value.
            pub fn from_toml(text: &str) -> ::std::result::Result<Self, $crate::StartError> {
                <Self as $crate::ServiceConfig>::from_toml(text)
            }

            /// Reads, parses and validates a TOML config file.
            ///
            /// # Errors
            ///
            /// A config file error naming the file when it cannot be read
            /// or does not parse into the config, a config error for a bad
            /// value.
            pub fn load(path: &::std::path::Path) -> ::std::result::Result<Self, $crate::StartError> {
                <Self as $crate::ServiceConfig>::load(path)
            }
        }
    };
}
