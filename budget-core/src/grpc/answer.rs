//! A budget problem as a gRPC answer: trailers-only, its status and
//! message in the response headers. Written by the budget layer for a gRPC
//! request it refuses or cuts short, and by the gRPC client layer for a call
//! it does not make.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response};

use super::{GRPC_MESSAGE, GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS, GrpcCode, encode_message};
use crate::problem::{Problem, ProblemBody};

/// `problem` as a gRPC trailers-only answer: HTTP 200 with no body, its
/// `grpc-status` ([`GrpcCode::for_http_status`]), `grpc-message` (the
/// detail, percent-encoded) and `grpc-retry-pushback-ms` when the problem
/// says when to retry. No `Server-Timing`: the layer adds it.
pub(crate) fn grpc_answer<B: ProblemBody>(problem: &Problem) -> Response<B> {
    let mut res = Response::new(B::from_problem(Bytes::new()));
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert(
        GRPC_STATUS,
        GrpcCode::for_http_status(problem.status).header_value(),
    );
    if let Ok(message) = HeaderValue::try_from(encode_message(&problem.detail)) {
        headers.insert(GRPC_MESSAGE, message);
    }
    if let Some(ms) = problem.retry_after_ms {
        headers.insert(GRPC_RETRY_PUSHBACK_MS, HeaderValue::from(ms));
    }
    res
}
