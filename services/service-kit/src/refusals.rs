//! What a service answers when it refuses a request before its handler
//! does anything: an unknown route (`404`), a method the route does not
//! take (`405`, with `Allow`), a body too large (`413`) or not readable
//! whole (`400`). Every one is an `application/problem+json` body, as the
//! budget layer's own refusals are (docs/server.md, "What the layer answers"); axum's defaults
//! (an empty body, or `text/plain`) never reach a caller.
//!
//! ```
//! # #[tokio::main] async fn main() {
//! use axum::routing::post;
//! use http_body_util::BodyExt;
//! use tower::ServiceExt;
//!
//! let layer = service_kit::RequestLayer::Ledger(Default::default());
//! let app = service_kit::router("/work", post(|service_kit::BodyBytes(b)| async move { b }), layer);
//! let res = app.oneshot(http::Request::get("/nowhere").body(axum::body::Body::empty()).unwrap()).await.unwrap();
//! assert_eq!(res.status(), 404);
//! assert_eq!(res.headers()["content-type"], "application/problem+json");
//! # }
//! ```

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};
use budget_core::problem::{Problem, ProblemKind};
use http::{Method, StatusCode, Uri};

/// The request body, read whole (up to axum's body limit, 2 MiB unless a
/// `DefaultBodyLimit` layer says otherwise), like axum's [`Bytes`]
/// extractor; but a body over the limit is a `413` problem and one that
/// cannot be read whole (cut short, broken chunked framing) a `400`
/// problem, naming what went wrong.
///
/// ```
/// # #[tokio::main] async fn main() {
/// use axum::extract::FromRequest;
/// use service_kit::BodyBytes;
///
/// let req = http::Request::post("/").body(axum::body::Body::from("hi")).unwrap();
/// let BodyBytes(body) = BodyBytes::from_request(req, &()).await.unwrap();
/// assert_eq!(&body[..], b"hi");
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct BodyBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for BodyBytes {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map(BodyBytes)
            .map_err(body_problem)
    }
}

/// The problem for a body axum could not read.
fn body_problem(rejection: BytesRejection) -> Response {
    let kind = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ProblemKind::BodyTooLarge
    } else {
        ProblemKind::BadBody
    };
    refusal(Problem::new(kind, rejection.body_text()))
}

/// The fallback of every service's router: no route at this path.
pub(crate) async fn not_found(uri: Uri) -> Response {
    refusal(Problem::new(
        ProblemKind::NotFound,
        format!("no route for {}", uri.path()),
    ))
}

/// The method fallback of every route: axum adds the route's `Allow`.
pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    refusal(Problem::new(
        ProblemKind::MethodNotAllowed,
        format!("{} does not take {method}", uri.path()),
    ))
}

/// A refusal before the handler: no ledger of its own (the budget layer,
/// where there is one, adds its ledger to the response).
fn refusal(problem: Problem) -> Response {
    problem.into_response()
}
