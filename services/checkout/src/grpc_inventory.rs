//! Inventory over gRPC: when `inventory_url` is `grpc://host:port/path?query`,
//! checkout calls the partner's `budget.partner.v1.Partner/Call` (the slow
//! partner's gRPC face) through `GrpcBudgetLayer` instead of HTTP: the
//! budget travels as `grpc-timeout`, the attempts go into the ledger, a
//! failure becomes the same problems as over HTTP.
//!
//! The layer is made from the `DependencyConfig` inventory's HTTP client
//! would have, and runs on the same call engine: the learned floor, the
//! retry policy, and with `budget_mode = on` the default breaker, retry
//! budget, permit queue and adaptive concurrency, and with
//! `on_unavailable = "stale"` the stale fallback (the last good answer,
//! marked degraded). It is balanced
//! (`GrpcBudgetLayer::balanced`): a host name is every address it resolves
//! to and `[inventory] endpoints` lists replicas, one channel each, chosen
//! per attempt as over HTTP. With `budget_mode = off`
//! no budget is sent (no `grpc-timeout`, as no budget header over HTTP)
//! and the layer enforces the fixed timeout itself: a call with no answer
//! by then is `DEADLINE_EXCEEDED`.

use std::time::Duration;

use budget_core::config::ConfigError;
use budget_core::grpc::{
    EndpointChannels, GRPC_RETRY_PUSHBACK_MS, GrpcBudgetLayer, GrpcBudgetService, Pushback, Stale,
    parse_pushback,
};
use budget_core::problem::{Problem, ProblemKind};
use http::{HeaderValue, Uri};
use partner_grpc::CallRequest;
use partner_grpc::partner_client::PartnerClient;
use serde_json::Value;
use tonic::Code;
use tonic::transport::Channel;

/// The name of the dependency in the ledger and in problems.
pub(crate) const INVENTORY: &str = "inventory";

/// How a replica's channel is made: connected on its first call (a
/// channel needs the runtime; the config is validated without one).
pub(crate) type Connect = fn(Uri) -> Channel;

/// One replica's channel.
pub(crate) fn connect(uri: Uri) -> Channel {
    Channel::builder(uri).connect_lazy()
}

/// Inventory's gRPC client.
#[derive(Debug)]
pub(crate) struct GrpcInventory {
    client: PartnerClient<GrpcBudgetService<EndpointChannels<Connect, Channel>>>,
    path: String,
    query: String,
}

/// True when `url` asks for gRPC.
pub(crate) fn is_grpc(url: &str) -> bool {
    url.starts_with("grpc://")
}

/// The `http://host:port` of a `grpc://host:port/...` URL: the endpoint a
/// dependency's configuration names (its breaker is kept per endpoint).
pub(crate) fn endpoint_url(url: &str) -> Result<String, ConfigError> {
    let bad = |why: String| ConfigError::new("inventory_url", why);
    let uri: Uri = url.parse().map_err(|e| bad(format!("{url:?}: {e}")))?;
    let authority = uri
        .authority()
        .ok_or_else(|| bad(format!("{url:?} names no host")))?;
    Ok(format!("http://{authority}"))
}

impl GrpcInventory {
    /// The client of `url` (`grpc://host:port/path?query`) through
    /// `layer` and its `channels`, connecting on first use.
    pub(crate) fn new(
        url: &str,
        layer: GrpcBudgetLayer,
        channels: EndpointChannels<Connect, Channel>,
    ) -> Result<Self, ConfigError> {
        let bad = |why: String| ConfigError::new("inventory_url", why);
        let uri: Uri = url.parse().map_err(|e| bad(format!("{url:?}: {e}")))?;
        let channel = tower::ServiceBuilder::new().layer(layer).service(channels);
        Ok(Self {
            client: PartnerClient::new(channel),
            path: uri.path().to_owned(),
            query: uri.query().unwrap_or_default().to_owned(),
        })
    }

    /// Inventory's JSON and, when the layer served it from its stale cache
    /// (`on_unavailable = "stale"`), its age; or the problem to answer
    /// with.
    pub(crate) async fn call(
        &self,
        request_id: Option<&HeaderValue>,
    ) -> Result<(Value, Option<Duration>), Problem> {
        let mut req = tonic::Request::new(CallRequest {
            path: self.path.clone(),
            query: self.query.clone(),
        });
        if let Some(id) = request_id.and_then(|id| id.to_str().ok())
            && let Ok(id) = id.parse()
        {
            req.metadata_mut().insert("x-request-id", id);
        }
        let mut client = self.client.clone();
        let reply = client.call(req).await;
        let reply = reply.map_err(problem)?;
        let age = reply.extensions().get::<Stale>().map(Stale::age);
        let value = serde_json::from_str(&reply.into_inner().body).map_err(|e| {
            Problem::new(
                ProblemKind::DependencyFailed,
                format!("inventory's answer is not JSON: {e}"),
            )
            .with_dependency(INVENTORY)
        })?;
        Ok((value, age))
    }
}

/// A failed call as the problem the HTTP client would give: out of budget
/// for `DEADLINE_EXCEEDED`, the partner's wait passed up when
/// `UNAVAILABLE` came with a pushback, unavailable without one, failed for
/// anything else.
fn problem(status: tonic::Status) -> Problem {
    tracing::warn!(code = ?status.code(), message = status.message(), "inventory (gRPC) failed");
    let pushback = status
        .metadata()
        .get(GRPC_RETRY_PUSHBACK_MS.as_str())
        .and_then(|v| parse_pushback(v.as_bytes()));
    let detail = format!("inventory: {:?}: {}", status.code(), status.message());
    let problem = match (status.code(), pushback) {
        (Code::DeadlineExceeded | Code::Cancelled, _) => {
            Problem::new(ProblemKind::DependencyOutOfBudget, detail)
        }
        (Code::Unavailable, Some(Pushback::After(wait))) => {
            Problem::new(ProblemKind::Deferred { status: 503 }, detail).with_retry_after(wait)
        }
        (Code::Unavailable, _) => Problem::new(ProblemKind::DependencyUnavailable, detail),
        _ => Problem::new(ProblemKind::DependencyFailed, detail),
    };
    problem.with_dependency(INVENTORY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_id_key_is_checkout_s() {
        assert_eq!(crate::X_REQUEST_ID.as_str(), "x-request-id");
    }

    #[test]
    fn a_grpc_url_needs_a_host() {
        assert!(is_grpc("grpc://127.0.0.1:9000/inventory"));
        assert!(!is_grpc("http://127.0.0.1:9000/inventory"));
        let err = endpoint_url("grpc:///inventory").unwrap_err();
        assert_eq!(err.field(), "inventory_url");
        assert_eq!(
            endpoint_url("grpc://127.0.0.1:9000/inventory").unwrap(),
            "http://127.0.0.1:9000"
        );
    }

    #[test]
    fn statuses_become_the_http_client_s_problems() {
        assert_eq!(problem(tonic::Status::deadline_exceeded("x")).status, 504);
        assert_eq!(problem(tonic::Status::unavailable("x")).status, 504);
        let mut waiting = tonic::Status::unavailable("busy");
        waiting
            .metadata_mut()
            .insert("grpc-retry-pushback-ms", "1500".parse().unwrap());
        let p = problem(waiting);
        assert_eq!((p.status, p.retry_after_ms), (503, Some(1500)));
        assert_eq!(problem(tonic::Status::internal("x")).status, 502);
        assert_eq!(
            problem(tonic::Status::internal("x")).dependency.as_deref(),
            Some("inventory")
        );
    }
}
