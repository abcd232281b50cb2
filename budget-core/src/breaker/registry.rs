//! [`BreakerRegistry`]: one breaker per endpoint, shared by every client of
//! it; [`endpoint_key`]: what "one endpoint" means.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use http::Uri;

use super::{BreakerPolicy, CircuitBreaker, SharedObserver};

/// The breaker key of `uri`: `scheme://host:port`, scheme and host in lower
/// case, the port filled in when the URI leaves it out (`80` for `http` and
/// `ws`, `443` for `https` and `wss`). Path, query and user info do not
/// matter: they reach the same endpoint.
///
/// `None` when the URI has no scheme or host (`/path`), or has no port and
/// a scheme whose default port is unknown.
///
/// # Example
///
/// ```
/// use budget_core::breaker::endpoint_key;
///
/// let key = |s: &str| endpoint_key(&s.parse().unwrap());
/// assert_eq!(key("http://Pricing.Internal/quote?x=1").as_deref(), Some("http://pricing.internal:80"));
/// assert_eq!(key("HTTPS://auth:8443").as_deref(), Some("https://auth:8443"));
/// assert_eq!(key("http://[::1]:9000/").as_deref(), Some("http://[::1]:9000"));
/// assert_eq!(key("/relative"), None);
/// ```
pub fn endpoint_key(uri: &Uri) -> Option<String> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host().filter(|h| !h.is_empty())?.to_ascii_lowercase();
    let port = match uri.port_u16() {
        Some(port) => port,
        None => match scheme.as_str() {
            "http" | "ws" => 80,
            "https" | "wss" => 443,
            _ => return None,
        },
    };
    Some(format!("{scheme}://{host}:{port}"))
}

/// One [`CircuitBreaker`] per endpoint key, all made with one policy.
///
/// Clones share the same breakers (an `Arc` inside), so every client of an
/// endpoint in the process sees the same breaker. Breakers are kept for the
/// registry's life: keys are the endpoints a service is configured to call,
/// a bounded set.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use budget_core::breaker::{BreakerPolicy, BreakerRegistry};
///
/// let registry = BreakerRegistry::new(BreakerPolicy::default());
/// let a = registry.get_for(&"http://Inventory:80/stock".parse().unwrap()).unwrap();
/// let b = registry.clone().get_for(&"http://inventory/other".parse().unwrap()).unwrap();
/// assert!(Arc::ptr_eq(&a, &b));
/// ```
#[derive(Clone, Default)]
pub struct BreakerRegistry {
    inner: Arc<RegistryInner>,
}

#[derive(Default)]
struct RegistryInner {
    policy: BreakerPolicy,
    breakers: Mutex<HashMap<String, Arc<CircuitBreaker>>>,
}

impl BreakerRegistry {
    /// An empty registry whose breakers follow `policy`.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerConfig, BreakerRegistry};
    /// let mut config = BreakerConfig::default();
    /// config.failure_threshold = 3;
    /// let policy = config.build().unwrap();
    /// let registry = BreakerRegistry::new(policy);
    /// assert_eq!(registry.get("http://a:80").policy().failure_threshold(), 3);
    /// ```
    pub fn new(policy: BreakerPolicy) -> Self {
        Self {
            inner: Arc::new(RegistryInner {
                policy,
                breakers: Mutex::default(),
            }),
        }
    }

    /// The policy new breakers are made with.
    ///
    /// ```
    /// # use budget_core::breaker::BreakerRegistry;
    /// assert_eq!(BreakerRegistry::default().policy().failure_threshold(), 5);
    /// ```
    pub fn policy(&self) -> &BreakerPolicy {
        &self.inner.policy
    }

    /// The breaker for `key`, made closed on first use. The key is used as
    /// given; use [`get_for`](Self::get_for) to key by URI.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use budget_core::breaker::BreakerRegistry;
    /// let registry = BreakerRegistry::default();
    /// assert!(Arc::ptr_eq(&registry.get("http://a:80"), &registry.get("http://a:80")));
    /// assert!(!Arc::ptr_eq(&registry.get("http://a:80"), &registry.get("http://a:81")));
    /// ```
    pub fn get(&self, key: &str) -> Arc<CircuitBreaker> {
        self.get_observed(key, None)
    }

    /// The breaker for `key`, as [`get`](Self::get); one made now is told
    /// to `fallback` when the registry's policy has no observer of its own
    /// (a client's observer, for a registry its user built without one).
    pub(crate) fn get_observed(
        &self,
        key: &str,
        fallback: Option<&SharedObserver>,
    ) -> Arc<CircuitBreaker> {
        let mut breakers = self
            .inner
            .breakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(breaker) = breakers.get(key) {
            return Arc::clone(breaker);
        }
        let policy = match fallback {
            Some(observer) if !self.inner.policy.has_observer() => self
                .inner
                .policy
                .clone()
                .with_observer(Arc::clone(observer)),
            _ => self.inner.policy.clone(),
        };
        let breaker = Arc::new(CircuitBreaker::new(key, policy));
        breakers.insert(key.to_owned(), Arc::clone(&breaker));
        breaker
    }

    /// The breaker for the endpoint of `uri` (keyed by [`endpoint_key`]);
    /// `None` when the URI names no endpoint.
    ///
    /// ```
    /// # use budget_core::breaker::BreakerRegistry;
    /// let registry = BreakerRegistry::default();
    /// let breaker = registry.get_for(&"https://auth.example/token".parse().unwrap()).unwrap();
    /// assert_eq!(breaker.key(), "https://auth.example:443");
    /// assert!(registry.get_for(&"/token".parse().unwrap()).is_none());
    /// ```
    pub fn get_for(&self, uri: &Uri) -> Option<Arc<CircuitBreaker>> {
        endpoint_key(uri).map(|key| self.get(&key))
    }
}

impl fmt::Debug for BreakerRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let breakers = self
            .inner
            .breakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("BreakerRegistry")
            .field("policy", &self.inner.policy)
            .field("breakers", &breakers.values().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::{BreakerConfig, BreakerState, Verdict};

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn equivalent_uris_share_one_breaker() {
        let registry = BreakerRegistry::default();
        let a = registry.get_for(&uri("http://A:80/x")).unwrap();
        let b = registry.get_for(&uri("http://a/y")).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.key(), "http://a:80");
    }

    #[test]
    fn different_ports_get_different_breakers() {
        let registry = BreakerRegistry::default();
        let a = registry.get_for(&uri("http://a:8080/")).unwrap();
        let b = registry.get_for(&uri("http://a:8081/")).unwrap();
        let c = registry.get_for(&uri("https://a/")).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.key(), "https://a:443");
    }

    #[test]
    fn clones_of_a_registry_share_breaker_state() {
        let policy = BreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        }
        .build()
        .unwrap();
        let registry = BreakerRegistry::new(policy);
        let client_a = registry.clone();
        client_a
            .get("http://dep:80")
            .try_acquire()
            .unwrap()
            .record(Verdict::Failure);
        assert_eq!(registry.get("http://dep:80").state(), BreakerState::Open);
    }

    #[test]
    fn endpoint_key_fills_default_ports_and_lower_cases() {
        let key = |s: &str| endpoint_key(&uri(s));
        assert_eq!(key("http://a").as_deref(), Some("http://a:80"));
        assert_eq!(
            key("https://A.Example").as_deref(),
            Some("https://a.example:443")
        );
        assert_eq!(key("ws://a/socket").as_deref(), Some("ws://a:80"));
        assert_eq!(key("wss://a/socket").as_deref(), Some("wss://a:443"));
        assert_eq!(key("http://user:pw@a:81/p").as_deref(), Some("http://a:81"));
        assert_eq!(key("http://[::1]/").as_deref(), Some("http://[::1]:80"));
        assert_eq!(key("grpc://a:50051").as_deref(), Some("grpc://a:50051"));
    }

    #[test]
    fn endpoint_key_is_none_without_scheme_host_or_known_port() {
        let key = |s: &str| endpoint_key(&uri(s));
        assert_eq!(key("/only/a/path"), None);
        assert_eq!(key("a:80"), None); // authority form: no scheme
        assert_eq!(key("grpc://a"), None); // no default port for grpc
        assert_eq!(key("*"), None);
    }
}
