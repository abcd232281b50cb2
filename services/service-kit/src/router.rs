use crate::RequestLayer;
use axum::Router;
use axum::body::Body;
use axum::routing::{MethodRouter, get};
use http::{HeaderName, Request};
use tower::ServiceBuilder;
use tower_http::LatencyUnit;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;

/// The request id header, propagated along the chain: made up (a UUID) by
/// the first service that gets a request without one, echoed on every
/// response.
///
/// ```
/// assert_eq!(service_kit::X_REQUEST_ID, "x-request-id");
/// ```
pub const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Installs the process-wide Prometheus recorder that [`router`]'s
/// `/metrics` serves, if it is not yet installed. A service calls it before
/// it builds its dependency clients, so that their counters are registered
/// at 0 in it (a counter that first appears at 1 loses its first event to
/// `rate()`). Logs, and goes on, when another recorder is installed.
///
/// ```
/// service_kit::install_metrics();
/// ```
pub fn install_metrics() {
    if let Err(err) = crate::prometheus::install_prometheus() {
        tracing::warn!(error = %crate::error_chain(&err), "no Prometheus recorder");
    }
}

/// The routes of an HTTP service of the chain, with every layer: `route` at
/// `path`, behind `layer` (the budget layer, or with `budget_mode = off`
/// the ledger layer: [`RequestLayer`]); `GET /healthz` answering `200 ok`
/// and `GET /metrics` (Prometheus text, the process-wide recorder of
/// [`prometheus_router`](crate::prometheus::prometheus_router)), both outside it; a `404` problem for any other path and a `405` problem (with
/// `Allow`) for a method a route does not take ([`BodyBytes`](crate::BodyBytes)
/// gives the same for bodies); every answer timed in
/// `http_server_request_duration_seconds` (route, method, status); and
/// around them all, the request id (made
/// up when none arrives, echoed on the response) and request logs (method,
/// path, id, status, latency; never bodies or credentials).
///
/// ```
/// use axum::routing::get;
/// use budget_core::server::ServerConfig;
///
/// let layer = ServerConfig::default().layer().unwrap();
/// let app = service_kit::router("/checkout", get(|| async { "{}" }), layer.into());
/// # let _: axum::Router = app;
/// ```
pub fn router(path: &str, route: MethodRouter, layer: RequestLayer) -> Router {
    router_of(Router::new().route(path, route), layer)
}

/// [`router`] for a service with several routes: every route of `routes`
/// behind `layer`, with the same routes and layers around them.
///
/// ```
/// use axum::Router;
/// use axum::routing::get;
/// use budget_core::server::ServerConfig;
///
/// let layer = ServerConfig::default().layer().unwrap();
/// let routes = Router::new()
///     .route("/checkout", get(|| async { "{}" }))
///     .route("/events", get(|| async { "" }));
/// let app = service_kit::router_of(routes, layer.into());
/// # let _: axum::Router = app;
/// ```
pub fn router_of(mut routes: Router, layer: RequestLayer) -> Router {
    routes = match layer {
        RequestLayer::Budget(layer) => routes.layer(layer),
        RequestLayer::Ledger(layer) => routes.layer(layer),
    };
    routes = routes.route("/healthz", get(|| async { "ok" }));
    // Prometheus metrics, outside the budget layer: a scrape has no budget.
    match crate::prometheus::prometheus_router() {
        Ok(metrics) => routes = routes.merge(metrics),
        Err(err) => tracing::warn!(error = %crate::error_chain(&err), "no /metrics route"),
    }
    // After every route: the method fallback applies to the routes
    // registered before it.
    routes = routes
        .fallback(crate::refusals::not_found)
        .method_not_allowed_fallback(crate::refusals::method_not_allowed)
        .layer(axum::middleware::from_fn(red_metrics));
    routes.layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(request_span)
                    .on_response(
                        DefaultOnResponse::new()
                            .level(Level::INFO)
                            .latency_unit(LatencyUnit::Millis),
                    )
                    .on_failure(DefaultOnFailure::new().level(Level::WARN)),
            )
            .layer(PropagateRequestIdLayer::x_request_id()),
    )
}

/// Records every answer in `http_server_request_duration_seconds` by
/// route template, method and status, in both budget modes: the request
/// rate, error rate and latency of the service (RED).
async fn red_metrics(req: Request<Body>, next: axum::middleware::Next) -> axum::response::Response {
    let start = tokio::time::Instant::now();
    let method = req.method().clone();
    // A clone of the matched path is a reference count; the label is
    // made from it once.
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .cloned();
    let res = next.run(req).await;
    budget_core::telemetry::record_server_request(
        route
            .as_ref()
            .map_or("", axum::extract::MatchedPath::as_str),
        &method,
        res.status().as_u16(),
        start.elapsed(),
    );
    res
}

/// The span of one request: method, path (no query: it may carry secrets)
/// and request id.
fn request_span(req: &Request<Body>) -> tracing::Span {
    let id = req
        .headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!("request", method = %req.method(), path = req.uri().path(), request_id = id)
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn healthz_answers_and_a_request_id_is_made_up_and_echoed() {
        let app = router(
            "/work",
            get(|| async { "done" }),
            RequestLayer::Ledger(Default::default()),
        );
        let res = app
            .clone()
            .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers().contains_key(X_REQUEST_ID));
        let res = app
            .oneshot(
                Request::get("/work")
                    .header(X_REQUEST_ID, "r-1")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()[X_REQUEST_ID], "r-1");
    }

    #[tokio::test]
    async fn unknown_routes_and_methods_are_problems() {
        use http_body_util::BodyExt;

        let app = router(
            "/work",
            get(|| async { "done" }),
            RequestLayer::Ledger(Default::default()),
        );
        for (method, path, status, allow) in [
            ("GET", "/nowhere", 404, None),
            ("DELETE", "/work", 405, Some("GET,HEAD")),
            ("POST", "/healthz", 405, Some("GET,HEAD")),
        ] {
            let req = Request::builder()
                .method(method)
                .uri(path)
                .body(Body::empty())
                .unwrap();
            let res = app.clone().oneshot(req).await.unwrap();
            assert_eq!(res.status().as_u16(), status, "{method} {path}");
            assert_eq!(res.headers()["content-type"], "application/problem+json");
            assert_eq!(
                res.headers().get("allow").map(|v| v.to_str().unwrap()),
                allow
            );
            assert!(res.headers().contains_key(X_REQUEST_ID));
            let body = res.into_body().collect().await.unwrap().to_bytes();
            let problem: budget_core::problem::Problem = serde_json::from_slice(&body).unwrap();
            assert_eq!(problem.status, status);
            assert!(!problem.retryable);
            assert!(problem.detail.contains(path), "{}", problem.detail);
        }
    }

    #[tokio::test]
    async fn metrics_are_scraped_outside_the_budget_layer_and_count_what_it_did() {
        use budget_core::server::ServerConfig;
        use http_body_util::BodyExt;

        let layer = ServerConfig::default().layer().unwrap();
        let app = router("/work", get(|| async { "done" }), layer.into());
        // A malformed budget: the layer answers 400 and counts it.
        let res = app
            .clone()
            .oneshot(
                Request::get("/work")
                    .header("request-budget-ms", "-1")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        // The scrape itself carries a malformed budget: it is not budgeted.
        let res = app
            .oneshot(
                Request::get("/metrics")
                    .header("request-budget-ms", "-1")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let body = res.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        let malformed = text
            .lines()
            .find(|l| l.starts_with(budget_core::telemetry::semconv::METRIC_MALFORMED_TOTAL))
            .unwrap_or_else(|| panic!("no malformed counter in:\n{text}"));
        let count: f64 = malformed.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(count >= 1.0, "{malformed}");
    }
}
