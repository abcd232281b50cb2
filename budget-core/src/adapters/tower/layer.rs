//! [`OutboundBudgetLayer`]: makes an [`OutboundBudget`] of a client.

use std::sync::Arc;

use tower_layer::Layer;

use super::OutboundBudget;
use crate::adapters::outbound::Outbound;
use crate::client::DependencyConfig;
use crate::config::ConfigError;
use crate::floor::Floor;

/// Applies [`OutboundBudget`] to a tower client of `http::Request`s: each
/// request made inside a request's budget scope carries what is left, is
/// bounded by it, is not made below the floor, and is recorded in the
/// ledger (see the [module docs](super)).
///
/// One per dependency, named as its ledger entries should be.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::adapters::tower::OutboundBudgetLayer;
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use tower::Layer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let layer = OutboundBudgetLayer::new("pricing").floor(Duration::from_millis(50));
/// assert_eq!(layer.dependency(), "pricing");
/// let http = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
/// let pricing = layer.layer(http);
/// # drop(pricing);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct OutboundBudgetLayer {
    outbound: Outbound,
}

impl OutboundBudgetLayer {
    /// The layer for `dependency` (the name its ledger entries carry),
    /// with no floor.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// assert!(OutboundBudgetLayer::new("pricing").current_floor().get().is_zero());
    /// ```
    pub fn new(dependency: impl Into<Arc<str>>) -> Self {
        Self {
            outbound: Outbound::new(dependency.into()),
        }
    }

    /// The layer with everything `config` gives a
    /// `BudgetClient` (see
    /// [`OutboundBudget::from_config`]).
    ///
    /// # Errors
    ///
    /// The first invalid field, named as
    /// `DependencyConfig::build`
    /// names it.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// use budget_core::client::DependencyConfig;
    /// let config = DependencyConfig::new("pricing", "http://127.0.0.1:9000");
    /// let layer = OutboundBudgetLayer::from_config(&config).unwrap();
    /// assert_eq!(layer.dependency(), "pricing");
    /// ```
    pub fn from_config(config: &DependencyConfig) -> Result<Self, ConfigError> {
        Ok(Self {
            outbound: Outbound::from_config(config)?,
        })
    }

    /// The same layer with a fixed floor: a request is not made when what
    /// is left of the budget, less the reserve, is below it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// let layer = OutboundBudgetLayer::new("pricing").floor(Duration::from_millis(80));
    /// assert_eq!(layer.current_floor().get(), Duration::from_millis(80));
    /// ```
    pub fn floor(mut self, floor: impl Into<Floor>) -> Self {
        self.outbound = self.outbound.with_floor(floor.into());
        self
    }

    /// The old name of [`floor`](Self::floor).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # #[allow(deprecated)]
    /// let layer = budget_core::adapters::tower::OutboundBudgetLayer::new("pricing")
    ///     .with_floor(Duration::from_millis(80));
    /// assert_eq!(layer.current_floor().get(), Duration::from_millis(80));
    /// ```
    #[deprecated(note = "renamed to `floor`, as `GrpcBudgetLayer::floor`")]
    pub fn with_floor(self, floor: impl Into<Floor>) -> Self {
        self.floor(floor)
    }

    /// The dependency's name.
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// assert_eq!(OutboundBudgetLayer::new("pricing").dependency(), "pricing");
    /// ```
    pub fn dependency(&self) -> &str {
        self.outbound.dependency()
    }

    /// The floor now (zero unless set; a learned floor's current value).
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// assert!(OutboundBudgetLayer::new("pricing").current_floor().get().is_zero());
    /// ```
    pub fn current_floor(&self) -> Floor {
        self.outbound.floor()
    }
}

impl<S> Layer<S> for OutboundBudgetLayer {
    type Service = OutboundBudget<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OutboundBudget::from_parts(inner, self.outbound.clone())
    }
}
