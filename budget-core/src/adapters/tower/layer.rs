//! [`OutboundBudgetLayer`]: makes an [`OutboundBudget`] of a client.

use std::sync::Arc;

use tower_layer::Layer;

use super::OutboundBudget;
use crate::adapters::outbound::Outbound;
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
/// let layer = OutboundBudgetLayer::new("pricing").with_floor(Duration::from_millis(50));
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
    /// assert!(OutboundBudgetLayer::new("pricing").floor().get().is_zero());
    /// ```
    pub fn new(dependency: impl Into<Arc<str>>) -> Self {
        Self {
            outbound: Outbound::new(dependency.into()),
        }
    }

    /// The same layer with a floor: a request is not made when what is
    /// left of the budget, less the reserve, is below it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// let layer = OutboundBudgetLayer::new("pricing").with_floor(Duration::from_millis(80));
    /// assert_eq!(layer.floor().get(), Duration::from_millis(80));
    /// ```
    pub fn with_floor(mut self, floor: impl Into<Floor>) -> Self {
        self.outbound = self.outbound.with_floor(floor.into());
        self
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

    /// The floor (zero unless set).
    ///
    /// ```
    /// use budget_core::adapters::tower::OutboundBudgetLayer;
    /// assert!(OutboundBudgetLayer::new("pricing").floor().get().is_zero());
    /// ```
    pub fn floor(&self) -> Floor {
        self.outbound.floor()
    }
}

impl<S> Layer<S> for OutboundBudgetLayer {
    type Service = OutboundBudget<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OutboundBudget::from_parts(inner, self.outbound.clone())
    }
}
