use budget_core::client::DependencyConfig;

use crate::overlay;

crate::client_settings! {
    /// The client settings every dependency table of a service has (edge's
    /// `[checkout]`, checkout's `[inventory]`, `[pricing]`,
    /// `[recommendations]`): the fields of
    /// [`DependencyConfig`] that are the service's to choose. An absent
    /// field keeps the service's default for that dependency.
    ///
    /// | field | default |
    /// | --- | --- |
    /// | `connect_cap` | `1s` (the budget caps it further) |
    /// | `pool_idle_timeout` | `60s` (an idle keep-alive connection is not reused after it, and is closed 1-2x it after its last use) |
    /// | `floor` | `"250ms"` (fixed), `"auto"` or a table (learned); the service's default, [`DEFAULT_DEPENDENCY_FLOOR`](crate::DEFAULT_DEPENDENCY_FLOOR) (`auto`), unless it says |
    /// | `breaker` | none |
    /// | `concurrency` | unlimited (`8`, `"auto"` or an adaptive table: [`LimitConfig`](budget_core::admission::limit::LimitConfig)) |
    /// | `hedge` | none: `"auto"` (after the learned p95), `"40ms"` or a table ([`HedgeConfig`](budget_core::client::HedgeConfig)); idempotent calls only |
    /// | `queue` | `{ order = "adaptive", target = "5ms", interval = "100ms", standing_share = 0.25, sustained = "2s" }` ([`QueueConfig`](budget_core::admission::queue::QueueConfig)) |
    /// | `max_body` | 4 MiB |
    /// | `fixed_timeout` | `30s` (`budget_mode = off` only) |
    /// | `endpoints` | none: the URL's host (`["http://10.0.0.1:9000", ...]`: the replicas, each attempt to one of them; the URL's path and query kept) |
    /// | `resolve_interval` | `5s`: an `http` URL's host name is looked up again this often, each address an endpoint; `"0s"`: the name is one endpoint |
    /// | `default_budget` | none: the budget of a call made outside any request (a warm-up, a background job); without it such a call fails (`no-budget`) |
    /// | `forward` | `true`: send the budget and criticality headers; `false` for a dependency outside the chain (the budget still holds) |
    ///
    /// ```
    /// let s: service_kit::ClientSettings = toml::from_str(r#"
    ///     connect_cap = "200ms"
    ///     [breaker]
    ///     failure_threshold = 3
    /// "#).unwrap();
    /// assert_eq!(s.connect_cap, Some(std::time::Duration::from_millis(200)));
    /// assert!(toml::from_str::<service_kit::ClientSettings>("retries = 3").is_err());
    /// ```
    pub struct ClientSettings {}
}

impl ClientSettings {
    /// Puts every field that is set onto `c`.
    ///
    /// ```
    /// use budget_core::client::DependencyConfig;
    /// use service_kit::ClientSettings;
    ///
    /// let mut c = DependencyConfig::new("checkout", "http://127.0.0.1:8081");
    /// let settings = ClientSettings { concurrency: Some(8.into()), ..ClientSettings::default() };
    /// settings.apply(&mut c);
    /// assert_eq!(c.concurrency, Some(8.into()));
    /// assert!(c.breaker.is_none());
    /// ```
    pub fn apply(&self, c: &mut DependencyConfig) {
        overlay(&mut c.connect_cap, self.connect_cap);
        overlay(&mut c.pool_idle_timeout, self.pool_idle_timeout);
        overlay(&mut c.floor, self.floor);
        overlay(&mut c.breaker, self.breaker.map(Some));
        overlay(&mut c.concurrency, self.concurrency.map(Some));
        overlay(&mut c.queue, self.queue);
        overlay(&mut c.hedge, self.hedge.map(Some));
        overlay(&mut c.max_body, self.max_body);
        overlay(&mut c.fixed_timeout, self.fixed_timeout);
        overlay(&mut c.endpoints, self.endpoints.clone());
        overlay(&mut c.resolve_interval, self.resolve_interval);
        overlay(&mut c.default_budget, self.default_budget.map(Some));
        overlay(&mut c.forward, self.forward);
    }
}

/// Declares a dependency table of a service: the fields of
/// [`ClientSettings`], then its own.
///
/// The struct gets the fields of [`ClientSettings`] (durations in humantime
/// form in TOML), then the fields written (each an `Option`, absent from
/// the TOML it writes when `None`). It derives `Clone`, `Debug`, `Default`,
/// `PartialEq`, `Serialize` and `Deserialize` (every field is optional; an
/// unknown field is an error), and gets `shared()`, its [`ClientSettings`]
/// part, to [`apply`](ClientSettings::apply). Fields are plain fields
/// (`settings.connect_cap = ...`). The crate using the macro depends on
/// `serde` and `budget-core` (durations read through
/// [`budget_core::config::duration`]).
///
/// ```
/// use budget_core::retry::RetryConfig;
///
/// service_kit::client_settings! {
///     /// One dependency's client settings.
///     pub struct DemoSettings {
///         /// Attempts, backoff.
///         pub retry: Option<RetryConfig>,
///     }
/// }
///
/// let s: DemoSettings = toml::from_str("concurrency = 4\n[retry]\nmax_attempts = 2").unwrap();
/// assert_eq!(s.shared().concurrency, Some(4.into()));
/// assert_eq!(s.retry.unwrap().max_attempts, 2);
/// ```
#[macro_export]
macro_rules! client_settings {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$field_attr:meta])*
                pub $field:ident : $ty:ty,
            )*
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Debug, Default, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        $vis struct $name {
            /// The longest a connect may take.
            #[serde(with = "budget_core::config::duration", skip_serializing_if = "Option::is_none")]
            pub connect_cap: ::std::option::Option<::std::time::Duration>,
            /// How long an idle pooled connection is kept.
            #[serde(with = "budget_core::config::duration", skip_serializing_if = "Option::is_none")]
            pub pool_idle_timeout: ::std::option::Option<::std::time::Duration>,
            /// Below this budget (net of the reserve), the call is not made:
            /// `"250ms"`, `"auto"` or a learned floor's table.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub floor: ::std::option::Option<$crate::__private::FloorConfig>,
            /// A circuit breaker.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub breaker: ::std::option::Option<$crate::__private::BreakerConfig>,
            /// In-flight calls at most: `8`, `"auto"` or an adaptive table.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub concurrency: ::std::option::Option<$crate::__private::LimitConfig>,
            /// How calls wait for a permit: `order`, `target`, `interval`.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub queue: ::std::option::Option<$crate::__private::QueueConfig>,
            /// Hedged requests: `"auto"`, a delay or a table.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub hedge: ::std::option::Option<$crate::__private::HedgeConfig>,
            /// The largest response body buffered, in bytes.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub max_body: ::std::option::Option<u64>,
            /// Each attempt's timeout with `budget_mode = off`.
            #[serde(with = "budget_core::config::duration", skip_serializing_if = "Option::is_none")]
            pub fixed_timeout: ::std::option::Option<::std::time::Duration>,
            /// The replicas, `scheme://host:port` each; the URL's path and
            /// query are kept.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub endpoints: ::std::option::Option<::std::vec::Vec<::std::string::String>>,
            /// How often the URL's host name is looked up again (`"0s"`:
            /// never, the name is one endpoint).
            #[serde(with = "budget_core::config::duration", skip_serializing_if = "Option::is_none")]
            pub resolve_interval: ::std::option::Option<::std::time::Duration>,
            /// The budget of a call made outside any request.
            #[serde(with = "budget_core::config::duration", skip_serializing_if = "Option::is_none")]
            pub default_budget: ::std::option::Option<::std::time::Duration>,
            /// Send the budget and criticality headers.
            #[serde(skip_serializing_if = "Option::is_none")]
            pub forward: ::std::option::Option<bool>,
            $(
                $(#[$field_attr])*
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The settings every dependency table has, to
            /// [`apply`]($crate::ClientSettings::apply).
            pub fn shared(&self) -> $crate::ClientSettings {
                $crate::ClientSettings {
                    connect_cap: self.connect_cap,
                    pool_idle_timeout: self.pool_idle_timeout,
                    floor: self.floor,
                    breaker: self.breaker,
                    concurrency: self.concurrency,
                    queue: self.queue,
                    hedge: self.hedge,
                    max_body: self.max_body,
                    fixed_timeout: self.fixed_timeout,
                    endpoints: self.endpoints.clone(),
                    resolve_interval: self.resolve_interval,
                    default_budget: self.default_budget,
                    forward: self.forward,
                }
            }
        }
    };
}
