//! What both adapters share: the dependency the call engine runs their
//! requests against, from a name and a floor or from a whole
//! [`DependencyConfig`], and the steps before the engine
//! ([`CallDefaults::resolve`]), as every transport takes them.

use std::error::Error as StdError;
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::client::{CallError, DependencyConfig, TimeoutMode};
use crate::clock::SystemClock;
use crate::config::ConfigError;
use crate::context::RequestContext;
use crate::floor::{DependencyFloor, Floor};
use crate::outbound::resolve::{CallDefaults, Own, Resolved};
use crate::outbound::{Call, Deadline, Dependency, Finished, Plan, Transport};
use crate::retry::{RetryConfig, TransportKind};

/// An adapter's dependency: what the engine knows of it, and how its
/// calls spend time. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Outbound {
    dep: Arc<Dependency>,
    defaults: CallDefaults,
}

impl Outbound {
    /// A dependency called `dependency`: no floor, one attempt per request
    /// (retries are the host stack's), no breaker, no permits; its calls
    /// spend the request's budget and pass through outside one.
    pub(crate) fn new(dependency: Arc<str>) -> Self {
        let retry = RetryConfig {
            max_attempts: 1,
            ..RetryConfig::default()
        };
        let policy = retry.build().unwrap_or_default();
        Self {
            dep: Arc::new(Dependency::single(dependency, policy)),
            defaults: CallDefaults {
                mode: TimeoutMode::Budget,
                fixed_timeout: crate::client::DEFAULT_FIXED_TIMEOUT,
                default_budget: None,
                forward: true,
                deadline: Deadline::Http,
            },
        }
    }

    /// Everything `config` gives a `BudgetClient` of the same dependency
    /// (its floor, learned or fixed; its retry policy and budget; breaker;
    /// concurrency limit and permit queue; timeout mode; default budget;
    /// `forward`), on the host stack's client.
    pub(crate) fn from_config(config: &DependencyConfig) -> Result<Self, ConfigError> {
        if !config.endpoints.is_empty() {
            return Err(ConfigError::new(
                "endpoints",
                "an adapter sends each request where its URL says: replicas are \
                 `BudgetClient`'s or `GrpcBudgetLayer::balanced`'s",
            ));
        }
        // The stack connects, not the adapter: the URL's name is one
        // endpoint, its breaker keyed by the URL.
        let mut config = config.clone();
        config.resolve_interval = Duration::ZERO;
        let settings = config.settings(None)?;
        Ok(Self {
            defaults: settings.defaults(),
            dep: Arc::new(settings.dependency),
        })
    }

    /// The same, with a fixed `floor`.
    pub(crate) fn with_floor(mut self, floor: Floor) -> Self {
        Arc::make_mut(&mut self.dep).floor = DependencyFloor::Fixed(floor);
        self
    }

    /// The dependency's name.
    pub(crate) fn dependency(&self) -> &Arc<str> {
        &self.dep.name
    }

    /// The dependency's floor now.
    pub(crate) fn floor(&self) -> Floor {
        self.dep.floor.current().floor
    }

    /// The retry policy's attempts.
    #[cfg(feature = "reqwest-middleware")]
    pub(crate) fn max_attempts(&self) -> u32 {
        self.dep.policy.max_attempts()
    }

    /// A request made in `cx` (or outside any request): how it spends
    /// time, or `None` when it has no budget to spend and passes through
    /// as it came.
    pub(crate) fn resolve(&self, cx: Option<&RequestContext>) -> Option<Resolved> {
        self.defaults.resolve(Own::default(), cx).ok()
    }

    /// Runs one call by `plan` over `transport`.
    pub(crate) async fn call<T: Transport>(
        &self,
        plan: Plan,
        transport: &T,
    ) -> Result<Finished<T::Answer>, CallError> {
        Call {
            dep: &self.dep,
            clock: &SystemClock,
            plan,
            transport,
        }
        .run()
        .await
    }
}

/// A call's answer as an adapter gives it: the response, or for a
/// failure what [`CallError::given_back`] says (the stack's own error
/// the transport kept in `failed`, or the `CallError` made the stack's by
/// `wrap`).
pub(crate) fn answer<R, E>(
    result: Result<Finished<R>, CallError>,
    failed: Mutex<Option<E>>,
    wrap: impl FnOnce(CallError) -> E,
) -> Result<R, E> {
    let failed = failed.into_inner().unwrap_or_else(PoisonError::into_inner);
    result
        .map(|finished| finished.response)
        .map_err(|error| error.given_back(failed, wrap))
}

/// The kind of a transport failure, from the I/O error in its source
/// chain: a connection refused or unreachable is `connect`, one reset,
/// aborted or closed early `reset`, an I/O timeout `timeout`; anything
/// else `other`.
pub(crate) fn failure_kind(error: &(dyn StdError + 'static)) -> TransportKind {
    let mut source = Some(error);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            match io.kind() {
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::HostUnreachable
                | io::ErrorKind::NetworkUnreachable
                | io::ErrorKind::AddrNotAvailable => return TransportKind::Connect,
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => return TransportKind::Reset,
                io::ErrorKind::TimedOut => return TransportKind::Timeout,
                _ => {}
            }
        }
        source = err.source();
    }
    TransportKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] io::Error);

    #[test]
    fn a_failure_s_kind_is_read_from_the_io_error_in_its_chain() {
        let kind = |k| failure_kind(&Outer(io::Error::from(k)));
        assert_eq!(
            kind(io::ErrorKind::ConnectionRefused),
            TransportKind::Connect
        );
        assert_eq!(kind(io::ErrorKind::ConnectionReset), TransportKind::Reset);
        assert_eq!(kind(io::ErrorKind::TimedOut), TransportKind::Timeout);
        assert_eq!(kind(io::ErrorKind::PermissionDenied), TransportKind::Other);
    }

    #[test]
    fn an_adapter_is_one_endpoint_and_refuses_a_list_of_replicas() {
        let config = DependencyConfig::new("pricing", "http://127.0.0.1:9000")
            .endpoints(["http://127.0.0.1:9001"]);
        assert_eq!(
            Outbound::from_config(&config).unwrap_err().field(),
            "endpoints"
        );
        let named = DependencyConfig::new("pricing", "http://localhost:9000");
        let one = Outbound::from_config(&named).unwrap();
        assert_eq!(one.dep.endpoints.current().len(), 1);
    }

    #[test]
    fn a_floor_and_the_name_are_the_dependency_s() {
        let o = Outbound::new("pricing".into()).with_floor(Floor::new(Duration::from_millis(50)));
        assert_eq!(&**o.dependency(), "pricing");
        assert_eq!(o.floor(), Floor::new(Duration::from_millis(50)));
        assert_eq!(o.dep.policy.max_attempts(), 1);
    }
}
