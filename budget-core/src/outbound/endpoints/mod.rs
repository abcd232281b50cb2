//! A dependency's replicas: the endpoints a call may go to, where they
//! come from (the URL itself, an `endpoints` list, or the URL's host name
//! re-resolved), and what is known of each (its breaker, its load).
//!
//! The choice among them is the call engine's `choose` step; this module
//! holds the set and its state. See docs/architecture.md, "Replicas".
//!
//! - **One endpoint** (the usual case: the URL's host is an address, or an
//!   `https` URL, or `resolve_interval = "0s"`): the URL as it is, its
//!   breaker keyed by `scheme://host:port`; nothing is balanced or
//!   counted per endpoint, and a call costs what it did.
//! - **A list** (`endpoints = ["http://10.0.0.1:9000", ...]`): each entry's
//!   scheme, host and port replace the URL's; path and query stay.
//! - **A name** (`http://partner:9000/...`): every address it resolves to
//!   is an endpoint (the URL's host becomes the address, `Host` stays the
//!   name), re-resolved every `resolve_interval` (default 5 s) by a task
//!   spawned from a call; an address that appears starts cold, one that
//!   disappears is no longer chosen (calls in flight to it finish); a
//!   lookup that fails keeps the last good set and is counted. `https`
//!   names are not expanded (the certificate names the host, not the
//!   address): reqwest resolves them, one endpoint.

mod load;
mod resolve;

#[cfg(any(feature = "client", test))]
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use http::HeaderValue;
use tokio::time::Instant;
use url::Url;

use crate::admission::limit::{AdaptiveLimit, AdaptiveLimitConfig};
use crate::breaker::{BreakerPolicy, BreakerRegistry, CircuitBreaker, endpoint_key};
use crate::config::ConfigError;

pub(crate) use load::PeakEwma;
pub(crate) use resolve::ResolveError;

/// The most endpoints of one dependency that get a metric label of their
/// own; the rest share [`OTHER_LABEL`]: a name that resolves to hundreds
/// of addresses does not make hundreds of series.
pub(crate) const MAX_LABELLED: usize = 16;

/// The metric label of the endpoints past [`MAX_LABELLED`].
pub(crate) const OTHER_LABEL: &str = "other";

/// The default `resolve_interval`: how often an `http` URL's host name is
/// looked up again.
///
/// ```
/// use budget_core::client::{DEFAULT_RESOLVE_INTERVAL, DependencyConfig};
/// assert_eq!(DEFAULT_RESOLVE_INTERVAL, std::time::Duration::from_secs(5));
/// assert_eq!(DependencyConfig::new("a", "http://partner:9000").resolve_interval, DEFAULT_RESOLVE_INTERVAL);
/// ```
pub const DEFAULT_RESOLVE_INTERVAL: Duration = Duration::from_secs(5);

/// One replica of a dependency.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// `host:port`, as the ledger, the log and the metric label show it.
    pub(crate) label: Arc<str>,
    /// The label the metrics use: its breaker's key, `scheme://host:port`
    /// ([`OTHER_LABEL`] past [`MAX_LABELLED`]).
    pub(crate) metric_label: Arc<str>,
    /// Where the URL is pointed: `None` for the URL as it is (read by the
    /// reqwest transport, and for its scheme by the gRPC layer).
    #[cfg(any(feature = "client", feature = "grpc", test))]
    pub(crate) target: Option<Target>,
    /// Its own breaker (outlier ejection), when the dependency has one.
    pub(crate) breaker: Option<Arc<CircuitBreaker>>,
    /// Its latency estimate.
    pub(crate) load: PeakEwma,
    /// Its own adaptive concurrency limit, when the dependency's is
    /// adaptive and it has replicas: each replica is a partner with its
    /// own workers and its own no-queue latency (docs/architecture.md,
    /// "Replicas").
    pub(crate) limit: Option<AdaptiveLimit>,
    outstanding: AtomicUsize,
}

/// The scheme, host and port an endpoint puts in the URL: the reqwest
/// transport reads them all, the gRPC layer the scheme alone.
#[cfg(any(feature = "client", feature = "grpc", test))]
#[derive(Clone, Debug)]
pub(crate) struct Target {
    scheme: Option<String>,
    #[cfg(any(feature = "client", test))]
    host: Host,
    #[cfg(any(feature = "client", test))]
    port: Option<u16>,
    /// The `Host` header to keep (a resolved name's endpoints).
    #[cfg(any(feature = "client", test))]
    pub(crate) host_header: Option<HeaderValue>,
}

#[cfg(any(feature = "client", test))]
#[derive(Clone, Debug)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

#[cfg(any(feature = "client", feature = "grpc", test))]
impl Target {
    /// An `endpoints` entry's target: its scheme, host and port
    /// ([`parse_entry`] checked that it names a host).
    fn of_entry(url: &Url) -> Self {
        Self {
            scheme: Some(url.scheme().to_owned()),
            #[cfg(any(feature = "client", test))]
            host: match url.host() {
                Some(url::Host::Ipv4(ip)) => Host::Ip(IpAddr::V4(ip)),
                Some(url::Host::Ipv6(ip)) => Host::Ip(IpAddr::V6(ip)),
                Some(url::Host::Domain(d)) => Host::Name(d.to_owned()),
                None => Host::Name(String::new()),
            },
            #[cfg(any(feature = "client", test))]
            port: url.port_or_known_default(),
            #[cfg(any(feature = "client", test))]
            host_header: None,
        }
    }
}

#[cfg(any(feature = "client", test))]
impl Target {
    /// `url` pointed at this endpoint.
    pub(crate) fn apply(&self, url: &mut Url) {
        if let Some(scheme) = &self.scheme {
            // Both http or https: a special scheme to a special scheme.
            let _ = url.set_scheme(scheme);
        }
        match &self.host {
            Host::Ip(ip) => {
                let _ = url.set_ip_host(*ip);
            }
            Host::Name(name) => {
                let _ = url.set_host(Some(name));
            }
        }
        let _ = url.set_port(self.port);
    }
}

impl Endpoint {
    /// An endpoint for the URL as it is (see [`with_target`](Self::with_target)).
    fn new(
        label: String,
        metric_label: Arc<str>,
        breaker: Option<Arc<CircuitBreaker>>,
        limit: Option<AdaptiveLimitConfig>,
    ) -> Self {
        Self {
            label: label.into(),
            metric_label,
            #[cfg(any(feature = "client", feature = "grpc", test))]
            target: None,
            breaker,
            load: PeakEwma::new(),
            // The config was validated when the endpoints were built.
            limit: limit.and_then(|c| AdaptiveLimit::new(c).ok()),
            outstanding: AtomicUsize::new(0),
        }
    }

    /// The same endpoint, with the URL pointed at `target`.
    #[cfg(any(feature = "client", feature = "grpc", test))]
    fn with_target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Its origin, `scheme://host:port` (`scheme` when it keeps the URL's):
    /// where a balanced gRPC layer points an attempt.
    #[cfg(feature = "grpc")]
    pub(crate) fn origin(&self, scheme: &str) -> String {
        let scheme = self
            .target
            .as_ref()
            .and_then(|t| t.scheme.as_deref())
            .unwrap_or(scheme);
        format!("{scheme}://{}", self.label)
    }

    /// Whether its own limit would let one more call in now (always,
    /// without a limit of its own).
    pub(crate) fn has_room(&self) -> bool {
        self.limit
            .as_ref()
            .is_none_or(|limit| self.outstanding() < limit.current())
    }

    /// Calls in flight to it.
    pub(crate) fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::Relaxed)
    }

    /// Counts a call in flight until the guard is dropped.
    pub(crate) fn start(self: &Arc<Self>) -> InFlight {
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        InFlight(Arc::clone(self))
    }
}

impl PartialEq for Endpoint {
    fn eq(&self, other: &Self) -> bool {
        self.label == other.label
    }
}

impl Eq for Endpoint {}

/// A call in flight to an endpoint.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Endpoint>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.outstanding.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How an endpoint's breaker is made.
#[derive(Clone, Debug)]
pub(crate) struct Breakers {
    policy: BreakerPolicy,
    registry: Option<BreakerRegistry>,
}

impl Breakers {
    pub(crate) fn new(policy: BreakerPolicy, registry: Option<BreakerRegistry>) -> Self {
        Self { policy, registry }
    }

    fn for_key(&self, key: &str) -> Arc<CircuitBreaker> {
        match &self.registry {
            Some(registry) => registry.get_observed(key, self.policy.observer()),
            None => Arc::new(CircuitBreaker::new(key, self.policy.clone())),
        }
    }
}

/// A dependency's endpoints. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Endpoints {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    name: Arc<str>,
    breakers: Option<Breakers>,
    /// Each replica's own adaptive limit (a set that is not fixed at one
    /// endpoint, with an adaptive limit in budget mode).
    limit: Option<AdaptiveLimitConfig>,
    set: RwLock<Arc<[Arc<Endpoint>]>>,
    /// The one endpoint, when the set is fixed at one (read without the
    /// lock: the usual case costs what it did before replicas).
    only: Option<Arc<Endpoint>>,
    /// The host name to resolve, when the set comes from DNS.
    dns: Option<Dns>,
}

struct Dns {
    host: String,
    port: u16,
    /// The `Host` header every resolved endpoint sends.
    #[cfg(any(feature = "client", test))]
    host_header: HeaderValue,
    interval: Duration,
    lookup: resolve::Lookup,
    /// When the set was last resolved (`None`: never).
    resolved_at: Mutex<Option<Instant>>,
    /// A lookup is running.
    refreshing: AtomicBool,
    /// Labels handed out so far (for [`MAX_LABELLED`]).
    labelled: AtomicUsize,
}

impl Endpoints {
    /// The endpoints of `base` (its own, or `list`'s, or its host name's
    /// addresses), each with a breaker from `breakers` and, when there may
    /// be several, an adaptive limit of its own from `limit`. Errors name
    /// the field: `endpoints[i]` for a bad entry, `concurrency.*` for a
    /// bad limit.
    pub(crate) fn new(
        name: &Arc<str>,
        base: &Url,
        list: &[String],
        resolve_interval: Duration,
        breakers: Option<Breakers>,
        limit: Option<AdaptiveLimitConfig>,
    ) -> Result<Self, ConfigError> {
        Self::build(
            name,
            base,
            list,
            resolve_interval,
            (breakers, limit),
            resolve::system(),
        )
    }

    /// [`new`](Self::new) with names looked up by `lookup`.
    fn build(
        name: &Arc<str>,
        base: &Url,
        list: &[String],
        resolve_interval: Duration,
        (breakers, limit): (Option<Breakers>, Option<AdaptiveLimitConfig>),
        lookup: resolve::Lookup,
    ) -> Result<Self, ConfigError> {
        if let Some(limit) = &limit {
            limit.validate().map_err(|e| e.within("concurrency"))?;
        }
        let name_to_resolve = match base.host() {
            Some(url::Host::Domain(host))
                if list.is_empty() && base.scheme() == "http" && !resolve_interval.is_zero() =>
            {
                Some(host.to_owned())
            }
            _ => None,
        };
        // A limit per endpoint only where there may be several; one
        // endpoint keeps the dependency's.
        let limit = limit.filter(|_| list.len() > 1 || name_to_resolve.is_some());
        let shared = |set: Vec<Arc<Endpoint>>, dns: Option<Dns>| Shared {
            name: Arc::clone(name),
            breakers: breakers.clone(),
            limit,
            only: match &*set {
                [one] if dns.is_none() => Some(Arc::clone(one)),
                _ => None,
            },
            set: RwLock::new(set.into()),
            dns,
        };
        if !list.is_empty() {
            let set = listed(list, breakers.as_ref(), limit)?;
            return Ok(Self {
                shared: Arc::new(shared(set, None)),
            });
        }
        let key = base_key(base)?;
        let label = label_of(base);
        match name_to_resolve {
            None => {
                let breaker = breakers.as_ref().map(|b| b.for_key(&key));
                let only = Endpoint::new(label.clone(), label.into(), breaker, None);
                Ok(Self {
                    shared: Arc::new(shared(vec![Arc::new(only)], None)),
                })
            }
            Some(host) => {
                let dns = Dns::new(base, host, resolve_interval, lookup)?;
                Ok(Self {
                    shared: Arc::new(shared(Vec::new(), Some(dns))),
                })
            }
        }
    }

    /// One endpoint, the URL as it is, with `breaker` (a gRPC channel's
    /// or an adapter's dependency: the client it wraps is what connects).
    #[cfg(any(
        feature = "grpc",
        feature = "tower-client",
        feature = "reqwest-middleware",
        feature = "postgres"
    ))]
    pub(crate) fn single(name: &Arc<str>, breaker: Option<Arc<CircuitBreaker>>) -> Self {
        let label = breaker
            .as_ref()
            .map_or_else(|| name.to_string(), |b| b.key().to_owned());
        let only = Arc::new(Endpoint::new(label.clone(), label.into(), breaker, None));
        Self {
            shared: Arc::new(Shared {
                name: Arc::clone(name),
                breakers: None,
                limit: None,
                set: RwLock::new(vec![Arc::clone(&only)].into()),
                only: Some(only),
                dns: None,
            }),
        }
    }

    /// Whether the set may hold more than one endpoint (an `endpoints`
    /// list, or a host name to resolve).
    pub(crate) fn replicated(&self) -> bool {
        self.shared.only.is_none()
    }

    /// The dependency's name.
    pub(crate) fn name(&self) -> &Arc<str> {
        &self.shared.name
    }

    /// The endpoints now, without waiting: empty for a name not resolved
    /// yet.
    pub(crate) fn current(&self) -> Arc<[Arc<Endpoint>]> {
        Arc::clone(
            &self
                .shared
                .set
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The one endpoint when the set is fixed at one (the URL as it is):
    /// its breaker is the dependency's.
    pub(crate) fn only(&self) -> Option<&Arc<Endpoint>> {
        self.shared.only.as_ref()
    }

    /// The endpoints for a call: the current set, refreshed in the
    /// background when older than the interval, or resolved here first
    /// when the name has never resolved (the lookup bounded by `until`).
    pub(crate) async fn for_call(
        &self,
        until: Option<Instant>,
    ) -> Result<Arc<[Arc<Endpoint>]>, ResolveError> {
        let Some(dns) = &self.shared.dns else {
            return Ok(self.current());
        };
        let resolved_at = *dns
            .resolved_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match resolved_at {
            None => {
                let lookup = (dns.lookup)(dns.host.clone(), dns.port);
                let addrs = match until {
                    Some(until) => tokio::time::timeout_at(until, lookup)
                        .await
                        .map_err(|_| ResolveError::timed_out(&dns.host))??,
                    None => lookup.await?,
                };
                self.install(addrs);
                Ok(self.current())
            }
            Some(at) => {
                if at.elapsed() >= dns.interval
                    && !dns.refreshing.swap(true, Ordering::AcqRel)
                    && let Ok(runtime) = tokio::runtime::Handle::try_current()
                {
                    let this = self.clone();
                    runtime.spawn(async move { this.refresh().await });
                }
                Ok(self.current())
            }
        }
    }

    /// Resolves the name again; a failure keeps the last good set.
    async fn refresh(&self) {
        let Some(dns) = &self.shared.dns else { return };
        match (dns.lookup)(dns.host.clone(), dns.port).await {
            Ok(addrs) => self.install(addrs),
            Err(e) => {
                crate::telemetry::meter::resolve_failed(&self.shared.name);
                tracing::warn!(dependency = %self.shared.name, error = %e, "lookup failed; keeping the last endpoints");
                // Try again after the interval, as after a good lookup.
                *dns.resolved_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
            }
        }
        dns.refreshing.store(false, Ordering::Release);
    }

    /// The resolved addresses as the set: endpoints already known keep
    /// their state, new ones start cold, gone ones are dropped (calls in
    /// flight hold their own reference and finish).
    fn install(&self, addrs: Vec<SocketAddr>) {
        let Some(dns) = &self.shared.dns else { return };
        let old = self.current();
        let mut set: Vec<Arc<Endpoint>> = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let label = addr.to_string();
            if set.iter().any(|e| *e.label == *label) {
                continue;
            }
            if let Some(known) = old.iter().find(|e| *e.label == *label) {
                set.push(Arc::clone(known));
                continue;
            }
            let n = dns.labelled.fetch_add(1, Ordering::Relaxed);
            let key = format!("http://{label}");
            let metric_label = metric_label(n, &key);
            let breaker = self.shared.breakers.as_ref().map(|b| b.for_key(&key));
            let endpoint = Endpoint::new(label, metric_label, breaker, self.shared.limit);
            // The address, with the name as its `Host` (the reqwest
            // transport's; the gRPC layer's channels connect by label).
            #[cfg(any(feature = "client", test))]
            let endpoint = endpoint.with_target(Target {
                scheme: None,
                host: Host::Ip(addr.ip()),
                port: Some(addr.port()),
                host_header: Some(dns.host_header.clone()),
            });
            set.push(Arc::new(endpoint));
        }
        *self
            .shared
            .set
            .write()
            .unwrap_or_else(PoisonError::into_inner) = set.into();
        *dns.resolved_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }

    /// Whether each endpoint has an adaptive limit of its own.
    pub(crate) fn limited(&self) -> bool {
        self.shared.limit.is_some()
    }

    /// The sum of the endpoints' own limits now: what the dependency may
    /// have in flight in all (0 for a set without limits, or empty).
    pub(crate) fn limit_total(&self) -> usize {
        self.current()
            .iter()
            .filter_map(|e| e.limit.as_ref())
            .map(AdaptiveLimit::current)
            .fold(0, usize::saturating_add)
    }

    /// The breaker of the one endpoint, when the dependency is one.
    #[cfg(any(feature = "client", test))]
    pub(crate) fn breaker(&self) -> Option<&CircuitBreaker> {
        self.only().and_then(|e| e.breaker.as_deref())
    }
}

/// The endpoints of an `endpoints` list, each with its breaker and
/// limit; an entry that does not parse or repeats another is the error
/// naming it (`endpoints[i]`).
fn listed(
    list: &[String],
    breakers: Option<&Breakers>,
    limit: Option<AdaptiveLimitConfig>,
) -> Result<Vec<Arc<Endpoint>>, ConfigError> {
    let mut set = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let field = format!("endpoints[{i}]");
        let url = parse_entry(entry, &field)?;
        let key =
            base_key(&url).map_err(|e| ConfigError::new(field.clone(), e.problem().to_owned()))?;
        let label = label_of(&url);
        if set.iter().any(|e: &Arc<Endpoint>| *e.label == *label) {
            return Err(ConfigError::new(field, format!("repeats `{label}`")));
        }
        let metric_label = metric_label(i, &key);
        let breaker = breakers.map(|b| b.for_key(&key));
        let endpoint = Endpoint::new(label, metric_label, breaker, limit);
        #[cfg(any(feature = "client", feature = "grpc", test))]
        let endpoint = endpoint.with_target(Target::of_entry(&url));
        set.push(Arc::new(endpoint));
    }
    Ok(set)
}

impl Dns {
    /// `base`'s `host`, looked up by `lookup` every `interval`, its
    /// addresses on `base`'s port with `base`'s name as their `Host`.
    fn new(
        base: &Url,
        host: String,
        interval: Duration,
        lookup: resolve::Lookup,
    ) -> Result<Self, ConfigError> {
        let port = base.port_or_known_default().unwrap_or(80);
        // Checked whatever the transport: the same config is valid or not
        // with every feature.
        let host_header = HeaderValue::from_str(&label_host_header(base)).map_err(|e| {
            ConfigError::new("url", format!("has a host that is not a header value: {e}"))
        });
        #[cfg(any(feature = "client", test))]
        let host_header = host_header?;
        #[cfg(not(any(feature = "client", test)))]
        host_header?;
        Ok(Self {
            host,
            port,
            #[cfg(any(feature = "client", test))]
            host_header,
            interval,
            lookup,
            resolved_at: Mutex::new(None),
            refreshing: AtomicBool::new(false),
            labelled: AtomicUsize::new(0),
        })
    }
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dns")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// An `endpoints` entry, checked: `scheme://host:port`, http or https.
fn parse_entry(entry: &str, field: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(entry).map_err(|e| {
        ConfigError::new(
            field.to_owned(),
            format!("`{entry}` is not an absolute URL: {e}"),
        )
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ConfigError::new(
            field.to_owned(),
            format!("`{entry}` must be http or https, not {:?}", url.scheme()),
        ));
    }
    match url.host() {
        Some(url::Host::Domain(d)) if !d.is_empty() => {}
        Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => {}
        _ => {
            return Err(ConfigError::new(
                field.to_owned(),
                format!("`{entry}` must name a host"),
            ));
        }
    }
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(ConfigError::new(
            field.to_owned(),
            format!(
                "`{entry}` must be scheme://host:port only: the path and query come from `url`"
            ),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ConfigError::new(
            field.to_owned(),
            format!("`{entry}` must not carry credentials"),
        ));
    }
    Ok(url)
}

/// The breaker key of `url`: `scheme://host:port`.
fn base_key(url: &Url) -> Result<String, ConfigError> {
    let uri: http::Uri = url
        .as_str()
        .parse()
        .map_err(|e| ConfigError::new("url", format!("is not a valid URI: {e}")))?;
    endpoint_key(&uri).ok_or_else(|| ConfigError::new("url", "names no endpoint"))
}

/// `host:port` of `url` (the port filled in).
fn label_of(url: &Url) -> String {
    let host = match url.host() {
        Some(url::Host::Ipv6(ip)) => format!("[{ip}]"),
        Some(host) => host.to_string(),
        None => String::new(),
    };
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// `Host` for a resolved name: the name, with the port when not the
/// scheme's default.
fn label_host_header(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

fn metric_label(n: usize, label: &str) -> Arc<str> {
    if n < MAX_LABELLED {
        Arc::from(label)
    } else {
        Arc::from(OTHER_LABEL)
    }
}

#[cfg(test)]
mod tests;
