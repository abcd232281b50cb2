use std::sync::Arc;

use tower_layer::Layer;

use crate::server::{StreamLimit, StreamPolicy};

/// Applies a route's [`StreamPolicy`] to its responses' bodies
/// ([`StreamLimit`]). Made by [`StreamPolicy::layer`], which validates.
///
/// Put it on the route (`get(handler).layer(..)`), inside the
/// [`BudgetLayer`](crate::server::BudgetLayer): the budget holds until
/// the head, this layer after it.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use axum::{Router, routing::get};
/// use budget_core::server::StreamPolicy;
///
/// let mut policy = StreamPolicy::default();
/// policy.max_duration = Some(Duration::from_secs(600));
/// let layer = policy.layer().unwrap();
/// assert_eq!(layer.policy().max_duration, Some(Duration::from_secs(600)));
/// let app: Router = Router::new().route("/feed", get(|| async { "" }).layer(layer));
/// # let _ = app;
/// ```
#[derive(Clone, Debug)]
pub struct StreamLimitLayer {
    policy: Arc<StreamPolicy>,
}

impl StreamLimitLayer {
    pub(crate) fn from_policy(policy: Arc<StreamPolicy>) -> Self {
        Self { policy }
    }

    /// The policy the layer applies.
    ///
    /// ```
    /// # use budget_core::server::StreamPolicy;
    /// let layer = StreamPolicy::default().layer().unwrap();
    /// assert_eq!(layer.policy(), &StreamPolicy::default());
    /// ```
    pub fn policy(&self) -> &StreamPolicy {
        &self.policy
    }
}

impl<S> Layer<S> for StreamLimitLayer {
    type Service = StreamLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        StreamLimit::from_parts(inner, Arc::clone(&self.policy))
    }
}
