//! The partner's gRPC face, `budget.partner.v1.Partner/Call`, on the main
//! port beside the HTTP paths: a call plays the same work as an HTTP
//! request of its `path` and `query` (knobs, workers, overrides, stats),
//! with the budget read from its `grpc-timeout` (or any budget header in
//! its metadata) and `x-request-id` counting attempts.
//!
//! The answer's HTTP status becomes the call's gRPC status as the budget
//! layer maps it ([`GrpcCode::for_http_status`]: `503` and `429`
//! `UNAVAILABLE`, `504` `DEADLINE_EXCEEDED`, ...), with the body as the
//! message and a `Retry-After` as `grpc-retry-pushback-ms`. The listener's
//! fault modes (refuse, blackhole, hang, reset) apply to gRPC calls as to
//! any connection.

use axum::extract::State;
use axum::http::Uri;
use budget_core::clock::{SystemClock, WallClock};
use budget_core::grpc::GrpcCode;
use budget_core::retry::parse_retry_after;
use http_body_util::BodyExt;
use partner_grpc::partner_server::{Partner, PartnerServer};
use partner_grpc::{CallReply, CallRequest};
use tonic::{Code, Request, Response, Status};

use crate::app::AppState;

/// `grpc-retry-pushback-ms`, as tonic's metadata keys are named.
const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// The routes of the gRPC service, to merge into the main port's router.
pub(crate) fn routes(state: AppState) -> axum::Router {
    use tonic::server::NamedService;
    let path = format!("/{}/{{*method}}", PartnerServer::<GrpcPartner>::NAME);
    axum::Router::new().route_service(&path, PartnerServer::new(GrpcPartner { state }))
}

struct GrpcPartner {
    state: AppState,
}

#[tonic::async_trait]
impl Partner for GrpcPartner {
    async fn call(&self, request: Request<CallRequest>) -> Result<Response<CallReply>, Status> {
        let headers = request.metadata().clone().into_headers();
        let CallRequest { path, query } = request.into_inner();
        let path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        let uri: Uri = if query.is_empty() {
            path.parse()
        } else {
            format!("{path}?{query}").parse()
        }
        .map_err(|e| Status::invalid_argument(format!("path and query: {e}")))?;
        let answer = crate::work::work(State(self.state.clone()), uri, headers).await;
        let status = answer.status();
        // Seconds or an HTTP date, read as every budget-aware client reads it.
        let retry_after = answer
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| parse_retry_after(v.as_bytes(), SystemClock.now()).ok());
        let body = answer
            .into_body()
            .collect()
            .await
            .map_err(|e| Status::unavailable(format!("the answer's body: {e}")))?
            .to_bytes();
        let body = String::from_utf8_lossy(&body).into_owned();
        if status.is_success() {
            return Ok(Response::new(CallReply { body }));
        }
        let code = Code::from_i32(i32::from(GrpcCode::for_http_status(status.as_u16()) as u8));
        let mut failed = Status::new(code, body);
        if let Some(wait) = retry_after
            && let Ok(ms) = crate::stats::whole_millis(wait).to_string().parse()
        {
            failed.metadata_mut().insert(PUSHBACK, ms);
        }
        Err(failed)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pushback_key_is_the_budget_layer_s() {
        assert_eq!(
            super::PUSHBACK,
            budget_core::grpc::GRPC_RETRY_PUSHBACK_MS.as_str()
        );
    }
}
