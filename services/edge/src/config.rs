//! Edge's configuration: the same fields as the binary's flags, plus a
//! `[checkout]` table for its one client, with humantime durations.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use edge::EdgeConfig;
//!
//! let config = EdgeConfig::from_toml(r#"
//!     listen = "127.0.0.1:8080"
//!     checkout_url = "http://127.0.0.1:8081"
//!     default_budget = "1500ms"
//!
//!     events_url = "http://127.0.0.1:9000/events"
//!     events_idle_timeout = "30s"
//!     cors_origins = ["https://app.example"]
//!
//!     [checkout]
//!     connect_cap = "200ms"
//! "#).unwrap();
//! assert_eq!(config.default_budget, Duration::from_millis(1500));
//! assert!(edge::router(&config).is_ok());
//!
//! let err = EdgeConfig::from_toml("[checkout.retry]\nmax_attempts = 3").unwrap_err();
//! let message = service_kit::error_chain(&err);
//! assert!(message.contains("unknown field `retry`"), "{message}");
//!
//! assert_eq!(EdgeConfig::from_toml("").unwrap(), EdgeConfig::default());
//! assert!(EdgeConfig::from_toml("default_budget = \"20s\"").is_err());
//! let err = EdgeConfig::load("/no/such/edge.toml".as_ref()).unwrap_err();
//! assert!(matches!(err, edge::Error::ConfigFile(_)));
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use budget_core::client::{BudgetClient, DependencyConfig, TimeoutMode};
use budget_core::config::ConfigError;
use budget_core::server::ServerTiming;
use http::HeaderValue;
use service_kit::RequestLayer;

use budget_core::server::{StreamLimitLayer, StreamPolicy};
use service_kit::{DEFAULT_DEPENDENCY_FLOOR, ServiceConfig, ServiceSettings};

/// The default listen address: loopback, port 8080.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// The dependency name of checkout, in edge's ledger, logs and problems
/// (and the prefix of checkout's own `Server-Timing` metrics).
pub const CHECKOUT: &str = "checkout";

/// The dependency name of the partner's event stream, which `GET /events`
/// opens: in edge's ledger, logs and problems, and its config's
/// `events_url` and `[events]` table.
pub const EVENTS: &str = "events";

/// The default [`EdgeConfig::events_idle_timeout`]: 60 s (nginx's
/// `proxy_read_timeout`).
///
/// ```
/// assert_eq!(edge::DEFAULT_EVENTS_IDLE_TIMEOUT.as_secs(), 60);
/// ```
pub const DEFAULT_EVENTS_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default [`EdgeConfig::events_max_duration`]: 30 minutes.
///
/// ```
/// assert_eq!(edge::DEFAULT_EVENTS_MAX_DURATION.as_secs(), 1800);
/// ```
pub const DEFAULT_EVENTS_MAX_DURATION: Duration = Duration::from_secs(30 * 60);

service_kit::service_config! {
    /// How edge starts. Every field has a default, so a TOML file needs only
    /// what it changes; unknown fields are an error.
    ///
    /// | field | flag | default |
    /// | --- | --- | --- |
    /// | `listen` | `--listen` | `127.0.0.1:8080` |
    /// | `budget_mode`, `default_budget`, `max_budget`, `floor`, `max_in_flight` | `--budget-mode`, `--default-budget`, `--max-budget`, `--floor`, `--max-in-flight` | every service's ([`ServiceSettings`'s defaults](ServiceSettings#defaults)); below `floor` a request is shed with `504` and checkout is not called |
    /// | `reserve` | `--reserve` | `10ms` (held back on the call to checkout for edge's reply) |
    /// | `checkout_url` | `--checkout-url` | `http://127.0.0.1:8081` |
    /// | `trust_inbound_budget` | `--trust-inbound-budget` | `true` (`false`: every request gets `default_budget` and the default criticality; the budget layer's `trust_inbound`) |
    /// | `strip_internal_headers` | `--strip-internal-headers` | `false` (`true`: no `Server-Timing` to the public; the budget layer's `server_timing = "never"`) |
    /// | `events_url` | `--events-url` | `http://127.0.0.1:9000/events` (the partner's event stream, which `GET /events` opens) |
    /// | `events_idle_timeout` | `--events-idle-timeout` | `60s`: a stream through `/events` with no byte from the partner for this long is ended (a clean end) |
    /// | `events_max_duration` | `--events-max-duration` | `30m`: a stream through `/events` is ended (a clean end) after this long; a browser's `EventSource` reconnects and resumes |
    /// | `cors_origins` | `--cors-origin` (repeated, or comma-separated in `CORS_ORIGIN`) | none: the origins (`scheme://host[:port]`) whose pages may read `/events` (CORS) |
    /// | `[checkout]`, `[events]` | (file only) | see [`CheckoutClientSettings`] (the same fields for the event stream's client; it too makes one attempt) |
    ///
    /// The first three rows are every service's fields ([`ServiceSettings`]). With
    /// `budget_mode = off` there is no budget layer, no budget is forwarded
    /// and the call to checkout has a fixed 30 s timeout.
    pub struct EdgeConfig {
        /// Checkout's base URL; edge calls its `/checkout` (appended to the
        /// URL's path, the URL's query string kept).
        pub checkout_url: String = "http://127.0.0.1:8081".to_owned(),
        /// The client of checkout.
        pub checkout: CheckoutClientSettings = CheckoutClientSettings::default(),
        /// Honour the budget and criticality headers callers send (`true`),
        /// or ignore them and give every request `default_budget` and the
        /// default criticality (`false`: callers from outside cannot make
        /// edge wait longer, give up sooner, or jump the queue, as edge
        /// decides). `max_budget` caps a trusted budget lower.
        pub trust_inbound_budget: bool = true,
        /// Remove internal headers (`Server-Timing`, which shows the hops
        /// behind edge and their timings) from the responses edge returns.
        pub strip_internal_headers: bool = false,
        /// The partner's event stream URL; `GET /events` opens it, the
        /// caller's query string appended to the URL's own.
        pub events_url: String = "http://127.0.0.1:9000/events".to_owned(),
        /// The client of the event stream: the same fields as `[checkout]`.
        pub events: CheckoutClientSettings = CheckoutClientSettings::default(),
        /// A stream through `/events` that gets no byte from the partner
        /// for this long is ended, cleanly (its client reconnects).
        #[serde(with = "budget_core::config::duration")]
        pub events_idle_timeout: Duration = DEFAULT_EVENTS_IDLE_TIMEOUT,
        /// A stream through `/events` is ended, cleanly, after this long
        /// (its client reconnects and resumes with `Last-Event-ID`).
        #[serde(with = "budget_core::config::duration")]
        pub events_max_duration: Duration = DEFAULT_EVENTS_MAX_DURATION,
        /// The origins (`scheme://host[:port]`) whose pages may read
        /// `/events` from a browser (CORS); empty: no cross-origin page may.
        pub cors_origins: Vec<String> = Vec::new(),
        ..ServiceSettings::new(DEFAULT_LISTEN, Duration::from_millis(10))
    }
}

/// Edge's client of checkout, as the `[checkout]` TOML table: the fields of
/// [`DependencyConfig`](budget_core::client::DependencyConfig) that make
/// sense for it. There is no `retry`: edge makes one attempt, so that
/// retries happen once, next to the failing dependency, and are not
/// multiplied hop by hop.
///
/// | field | default |
/// | --- | --- |
/// | `connect_cap` | `1s` (the budget caps it further) |
/// | `pool_idle_timeout` | `60s` (an idle keep-alive connection is not reused after it, and is closed 1-2x it after its last use) |
/// | `floor` | `10ms` (below it, checkout is not called) |
/// | `breaker` | none |
/// | `concurrency` | unlimited |
/// | `hedge` | none (a `POST /checkout` is hedged only with an `idempotency-key`) |
/// | `max_body` | 4 MiB |
/// | `fixed_timeout` | `30s` (`budget_mode = off` only) |
///
/// ```
/// let s: edge::CheckoutClientSettings = toml::from_str("concurrency = 64").unwrap();
/// assert_eq!(s.concurrency, Some(64.into()));
/// ```
pub use service_kit::ClientSettings as CheckoutClientSettings;

/// A validated [`EdgeConfig`].
#[derive(Debug)]
pub(crate) struct Built {
    pub(crate) layer: RequestLayer,
    pub(crate) checkout: BudgetClient,
    pub(crate) events: BudgetClient,
    pub(crate) stream_policy: StreamLimitLayer,
    pub(crate) cors_origins: Vec<HeaderValue>,
}

impl EdgeConfig {
    /// The defaults, listening on `listen` and forwarding to `checkout_url`.
    ///
    /// ```
    /// let config = edge::EdgeConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:8081");
    /// assert_eq!(config.listen.port(), 0);
    /// ```
    pub fn new(listen: SocketAddr, checkout_url: impl Into<String>) -> Self {
        Self {
            listen,
            checkout_url: checkout_url.into(),
            ..Self::default()
        }
    }

    /// Checks every value; errors name the field (`default_budget`,
    /// `checkout_url`, `checkout.connect_cap`, ...).
    ///
    /// ```
    /// # use edge::EdgeConfig;
    /// let mut config = EdgeConfig::default();
    /// config.checkout_url = "checkout".into();
    /// assert_eq!(config.validate().unwrap_err().field(), "checkout_url");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.build().map(drop)
    }

    pub(crate) fn build(&self) -> Result<Built, ConfigError> {
        // A public edge's two switches are the budget layer's own
        // (`trust_inbound`, `server_timing`: docs/contract.md §4).
        let server_timing = if self.strip_internal_headers {
            ServerTiming::Never
        } else {
            ServerTiming::Always
        };
        let layer = match self.settings().request_layer()? {
            RequestLayer::Budget(layer) => RequestLayer::Budget(
                layer
                    .trust_inbound(self.trust_inbound_budget)
                    .server_timing(server_timing),
            ),
            RequestLayer::Ledger(layer) => RequestLayer::Ledger(layer.server_timing(server_timing)),
        };
        Ok(Built {
            layer,
            checkout: self.client(CHECKOUT, &self.checkout_url, &self.checkout)?,
            events: self.client(EVENTS, &self.events_url, &self.events)?,
            stream_policy: self.stream_policy()?,
            cors_origins: self
                .cors_origins
                .iter()
                .map(|o| cors_origin(o))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The route policy of `/events`: the idle timeout and total duration,
    /// each more than zero, and no final event of edge's own (the
    /// partner's stream passes unchanged; its end is a clean end of body).
    fn stream_policy(&self) -> Result<StreamLimitLayer, ConfigError> {
        let mut policy = StreamPolicy::default();
        policy.idle_timeout = Some(self.events_idle_timeout);
        policy.max_duration = Some(self.events_max_duration);
        policy.end_event = String::new();
        policy.layer().map_err(|e| {
            let field = match e.field() {
                "idle_timeout" => "events_idle_timeout".to_owned(),
                "max_duration" => "events_max_duration".to_owned(),
                other => format!("events.{other}"),
            };
            ConfigError::new(field, e.problem().to_owned())
        })
    }

    /// The client of one dependency: one attempt (retries happen next to
    /// the failing dependency, not again at every hop), a fixed timeout
    /// with `budget_mode = off`.
    fn client(
        &self,
        name: &str,
        url: &str,
        settings: &CheckoutClientSettings,
    ) -> Result<BudgetClient, ConfigError> {
        let mut c = DependencyConfig::new(name, url);
        c.retry.max_attempts = 1;
        c.floor = DEFAULT_DEPENDENCY_FLOOR;
        settings.apply(&mut c);
        if !self.budget_mode.is_on() {
            c.mode = TimeoutMode::Fixed;
        }
        service_kit::dependency_client(&c)
    }
}

/// An origin of `cors_origins`: `scheme://host[:port]`, no path, as a
/// browser sends it in `Origin`.
fn cors_origin(origin: &str) -> Result<HeaderValue, ConfigError> {
    let bad = |why: &str| ConfigError::new("cors_origins", format!("`{origin}` {why}"));
    let (scheme, rest) = origin
        .split_once("://")
        .ok_or_else(|| bad("is not an origin (scheme://host[:port])"))?;
    if !matches!(scheme, "http" | "https") {
        return Err(bad("must be http or https"));
    }
    if rest.is_empty() || rest.contains(['/', '?', '#', '*']) {
        return Err(bad("must be scheme://host[:port], with no path"));
    }
    HeaderValue::from_str(origin).map_err(|_| bad("is not a valid header value"))
}

#[cfg(test)]
mod tests {
    use service_kit::BudgetMode;

    use super::*;

    #[test]
    fn every_field_reads_from_toml() {
        let config = EdgeConfig::from_toml(
            r#"
            listen = "127.0.0.1:9180"
            budget_mode = "off"
            default_budget = "1500ms"
            max_budget = "5s"
            floor = "20ms"
            reserve = "7ms"
            checkout_url = "http://127.0.0.1:9181/api"
            [checkout]
            connect_cap = "250ms"
            floor = "15ms"
            concurrency = 8
            max_body = 1024
            fixed_timeout = "3s"
            [checkout.breaker]
            failure_threshold = 2
            "#,
        )
        .unwrap();
        assert_eq!(config.listen.port(), 9180);
        assert_eq!(config.budget_mode, BudgetMode::Off);
        assert_eq!(config.default_budget, Duration::from_millis(1500));
        assert_eq!(config.max_budget, Duration::from_secs(5));
        assert_eq!(config.floor, Duration::from_millis(20));
        assert_eq!(config.reserve, Duration::from_millis(7));
        assert_eq!(config.checkout_url, "http://127.0.0.1:9181/api");
        let s = &config.checkout;
        assert_eq!(s.connect_cap, Some(Duration::from_millis(250)));
        assert_eq!(
            s.floor,
            Some(budget_core::floor::FloorConfig::fixed(
                Duration::from_millis(15)
            ))
        );
        assert_eq!(s.concurrency, Some(8.into()));
        assert_eq!(s.max_body, Some(1024));
        assert_eq!(s.fixed_timeout, Some(Duration::from_secs(3)));
        assert_eq!(s.breaker.unwrap().failure_threshold, 2);
    }

    #[test]
    fn the_defaults_are_loopback_valid_and_make_one_attempt() {
        let config = EdgeConfig::default();
        assert!(config.listen.ip().is_loopback());
        assert_eq!(config.default_budget, Duration::from_secs(2));
        assert_eq!(config.max_budget, Duration::from_secs(10));
        let built = config.build().unwrap();
        assert!(built.layer.is_budget());
        assert_eq!(built.checkout.mode(), TimeoutMode::Budget);
        let off = EdgeConfig {
            budget_mode: BudgetMode::Off,
            ..EdgeConfig::default()
        }
        .build()
        .unwrap();
        assert!(!off.layer.is_budget());
        assert_eq!(off.checkout.mode(), TimeoutMode::Fixed);
    }

    #[test]
    fn errors_name_the_field_of_this_config() {
        let field = |edit: &dyn Fn(&mut EdgeConfig)| {
            let mut config = EdgeConfig::default();
            edit(&mut config);
            config.validate().unwrap_err().field().to_owned()
        };
        assert_eq!(
            field(&|c| c.default_budget = Duration::from_secs(11)),
            "default_budget"
        );
        assert_eq!(field(&|c| c.reserve = Duration::from_secs(10)), "reserve");
        assert_eq!(
            field(&|c| c.checkout_url = "/checkout".into()),
            "checkout_url"
        );
        assert_eq!(
            field(&|c| c.checkout.concurrency = Some(0.into())),
            "checkout.concurrency"
        );
        assert_eq!(field(&|c| c.events_url = "events".into()), "events_url");
        assert_eq!(
            field(&|c| c.events.concurrency = Some(0.into())),
            "events.concurrency"
        );
        assert_eq!(
            field(&|c| c.events_idle_timeout = Duration::ZERO),
            "events_idle_timeout"
        );
        assert_eq!(
            field(&|c| c.events_max_duration = Duration::ZERO),
            "events_max_duration"
        );
        assert_eq!(
            field(&|c| c.cors_origins = vec!["127.0.0.1:3000".into()]),
            "cors_origins"
        );
        assert_eq!(
            field(&|c| c.cors_origins = vec!["ftp://files.example".into()]),
            "cors_origins"
        );
    }

    #[test]
    fn the_config_round_trips_through_toml() {
        let mut config = EdgeConfig::default();
        config.checkout.connect_cap = Some(Duration::from_millis(300));
        let text = toml::to_string(&config).unwrap();
        assert_eq!(EdgeConfig::from_toml(&text).unwrap(), config);
    }
}
