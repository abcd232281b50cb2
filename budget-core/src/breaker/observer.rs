//! [`Observer`]: what a breaker reports, and to whom.

use std::sync::Arc;

use super::BreakerState;

/// Told of a breaker's life: when it is made and each time its state
/// changes. Never on an ordinary call: a breaker that stays closed says
/// nothing after [`registered`](Self::registered).
///
/// The breaker knows nothing of metrics or logs beyond its own `tracing`
/// events: whoever builds it hands it an observer through its policy
/// ([`BreakerPolicy::with_observer`](super::BreakerPolicy::with_observer)).
/// [`BreakerConfig::build`](super::BreakerConfig::build) gives none (each
/// call is a no-op); a client built from a
/// `DependencyConfig` with the
/// `metrics` feature installs `telemetry::Metrics`,
/// which counts the transitions as `budget_breaker_transitions_total`.
///
/// Both methods do nothing by default. They run on the thread that made
/// the breaker or caused the change, after the breaker's lock is released:
/// keep them short (count, log).
///
/// # Example
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use budget_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker, Observer, Verdict};
///
/// #[derive(Default)]
/// struct Opened(Mutex<Vec<String>>);
///
/// impl Observer for Opened {
///     fn transition(&self, key: &str, _from: BreakerState, to: BreakerState) {
///         if to == BreakerState::Open {
///             self.0.lock().unwrap().push(key.to_owned());
///         }
///     }
/// }
///
/// let opened = Arc::new(Opened::default());
/// let mut config = BreakerConfig::default();
/// config.failure_threshold = 1;
/// let policy = config.build().unwrap().with_observer(opened.clone());
/// let breaker = CircuitBreaker::new("http://a:80", policy);
/// breaker.try_acquire().unwrap().record(Verdict::Failure);
/// assert_eq!(*opened.0.lock().unwrap(), ["http://a:80"]);
/// ```
pub trait Observer: Send + Sync {
    /// The breaker of endpoint `key` was made (closed).
    ///
    /// ```
    /// # use budget_core::breaker::{NoObserver, Observer};
    /// NoObserver.registered("http://a:80");
    /// ```
    fn registered(&self, key: &str) {
        let _ = key;
    }

    /// The breaker of endpoint `key` went from `from` to `to`.
    ///
    /// ```
    /// # use budget_core::breaker::{BreakerState, NoObserver, Observer};
    /// NoObserver.transition("http://a:80", BreakerState::Closed, BreakerState::Open);
    /// ```
    fn transition(&self, key: &str, from: BreakerState, to: BreakerState) {
        let _ = (key, from, to);
    }
}

/// The observer that hears nothing: the default of every policy.
///
/// ```
/// use std::sync::Arc;
/// use budget_core::breaker::{BreakerPolicy, NoObserver};
///
/// let policy = BreakerPolicy::default().with_observer(Arc::new(NoObserver));
/// # let _ = policy;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// A shared observer, as a policy holds it.
pub(crate) type SharedObserver = Arc<dyn Observer>;
