//! The HTTP routes: the reserved paths, the admin endpoints and the work
//! fallback (the table is in the crate docs).
//!
//! The mode to switch to comes from the query (`?mode=hang`) or the body:
//! a form (`mode=hang`), JSON (`{"mode":"hang"}`) or the bare name (`hang`).
//! The answer is `{"mode":"hang","previous":"normal"}` once the switch has
//! taken effect; a missing or unknown mode is a `400` naming `mode`, a port
//! that cannot be opened a `500`.
//!
//! `/admin/paths/{path}` takes the path without its leading `/`
//! (`/admin/paths/pricing` is `/pricing`; `/admin/paths/api/pricing` is
//! `/api/pricing`). `PUT` takes a JSON body `{"status": 503}`, optionally
//! with `"retry_after": "1"` (a string or a number), or `{"status": null}`
//! to remove the override; `DELETE` removes it too. Each answers the path's
//! override as it now is: `{"path":"/pricing","status":503,"retry_after":"1"}`
//! or `{"path":"/pricing","status":null}`. Bad input is a `400`
//! problem naming `status`, `retry_after`, `path` or `body`, as for a mode.
//!
//! `/admin/slowdown` takes a JSON body `{"factor": 10}` (a whole number,
//! 1 to 100; `1` ends the slowdown) with `PUT` or `POST`, and answers
//! `{"factor":10,"previous":1}`; `GET` answers `{"factor":10}`. Bad input
//! is a `400` problem naming `factor` or `body`.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::ingest_state::Ingest;
use crate::knobs::{QueryError, Reason};
use crate::mode::FaultMode;
use crate::overrides::{Fault, OverrideError, Overrides, PathOverride};
use crate::slowdown::{Slowdown, SlowdownError, Slowdowns, requested_slowdown};
use crate::stats::Stats;
use crate::stream_admin;
use crate::streams::Streams;
use crate::supervisor::Control;

/// What every route shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) stats: Arc<Stats>,
    pub(crate) control: Control,
    pub(crate) mode: watch::Receiver<FaultMode>,
    pub(crate) overrides: Arc<Overrides>,
    pub(crate) slowdown: Arc<Slowdowns>,
    pub(crate) streams: Arc<Streams>,
    pub(crate) ingest: Arc<Ingest>,
}

/// The main port's routes: admin, stats, health, the streams and the
/// ingest sink (routes of their own: no worker, fault or slowdown of the
/// work fallback applies to them), and the work fallback.
pub(crate) fn main_router(state: AppState) -> Router {
    admin_routes()
        .route("/events", get(crate::events::events))
        .route("/ws", get(crate::ws::ws))
        .route("/ingest", post(crate::ingest::ingest))
        .fallback(crate::work::work)
        .with_state(state.clone())
        .merge(crate::grpc::routes(state))
}

/// The admin listener's routes: admin, stats, health; nothing else.
pub(crate) fn admin_router(state: AppState) -> Router {
    admin_routes().with_state(state)
}

fn admin_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/stats", get(stats))
        .route("/metrics", get(metrics))
        .route("/stats/reset", post(reset_stats))
        .route("/admin/mode", get(get_mode).put(set_mode).post(set_mode))
        .route("/admin/paths", get(list_paths))
        .route(
            "/admin/paths/{*path}",
            get(get_path).put(put_path).delete(delete_path),
        )
        .route(
            "/admin/slowdown",
            get(get_slowdown).put(set_slowdown).post(set_slowdown),
        )
        .route(
            "/admin/events",
            get(stream_admin::get_events).put(stream_admin::put_events),
        )
        .route("/admin/events/cut", post(stream_admin::cut))
        .route("/admin/streams", get(stream_admin::streams))
        .route(
            "/admin/ingest",
            get(stream_admin::get_ingest).put(stream_admin::put_ingest),
        )
}

async fn stats(State(app): State<AppState>) -> Response {
    Json(app.stats.snapshot()).into_response()
}

async fn metrics(State(app): State<AppState>) -> Response {
    let text = crate::metrics_text::render(&app.stats.snapshot());
    (
        [(header::CONTENT_TYPE, crate::metrics_text::CONTENT_TYPE)],
        text,
    )
        .into_response()
}

async fn reset_stats(State(app): State<AppState>) -> StatusCode {
    app.stats.reset();
    app.streams.reset();
    app.ingest.reset();
    StatusCode::NO_CONTENT
}

/// The body of the admin endpoint's answers.
#[derive(Debug, Serialize, Deserialize)]
struct ModeBody {
    mode: FaultMode,
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    previous: Option<FaultMode>,
}

async fn get_mode(State(app): State<AppState>) -> Json<ModeBody> {
    Json(ModeBody {
        mode: *app.mode.borrow(),
        previous: None,
    })
}

async fn set_mode(State(app): State<AppState>, RawQuery(query): RawQuery, body: Bytes) -> Response {
    let mode = match requested_mode(query.as_deref(), &body) {
        Ok(mode) => mode,
        Err(err) => return err.into_response(),
    };
    match app.control.set_mode(mode).await {
        Ok(previous) => {
            tracing::info!(%mode, %previous, "mode switched");
            Json(ModeBody {
                mode,
                previous: Some(previous),
            })
            .into_response()
        }
        Err(err) => {
            tracing::error!(%mode, error = %crate::error::chain(&err), "mode switch failed");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "urn:slow-partner:problem:mode-switch-failed",
                "Mode switch failed",
                crate::error::chain(&err),
                None,
            )
        }
    }
}

/// The mode asked for: the query's `mode`, else the body's.
fn requested_mode(query: Option<&str>, body: &[u8]) -> Result<FaultMode, QueryError> {
    let from_query = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "mode")
            .map(|(_, v)| v.into_owned())
    });
    let given = match from_query {
        Some(given) => given,
        None => {
            let body = String::from_utf8_lossy(body);
            let body = body.trim();
            if body.starts_with('{') {
                #[derive(Deserialize)]
                struct Json {
                    mode: String,
                }
                serde_json::from_str::<Json>(body)
                    .map_err(|_| QueryError::new("mode", body, Reason::Missing))?
                    .mode
            } else if body.contains('=') {
                form_urlencoded::parse(body.as_bytes())
                    .find(|(k, _)| k == "mode")
                    .map(|(_, v)| v.into_owned())
                    .ok_or_else(|| QueryError::new("mode", body, Reason::Missing))?
            } else {
                body.to_owned()
            }
        }
    };
    if given.is_empty() {
        return Err(QueryError::new("mode", "", Reason::Missing));
    }
    given
        .parse()
        .map_err(|_| QueryError::new("mode", &given, Reason::NotAMode))
}

/// `GET /admin/paths`: `{"paths":{"/pricing":{"status":503}}}`.
async fn list_paths(State(app): State<AppState>) -> Response {
    #[derive(Serialize)]
    struct List {
        paths: std::collections::BTreeMap<String, PathOverride>,
    }
    Json(List {
        paths: app.overrides.list(),
    })
    .into_response()
}

/// The answer of every `/admin/paths/{path}` route: the path's override as
/// it now is.
#[derive(Debug, Serialize)]
struct PathState {
    path: String,
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after: Option<String>,
}

impl PathState {
    fn of(app: &AppState, path: String) -> Response {
        let now = app.overrides.list().remove(&path);
        Json(PathState {
            status: now.as_ref().map(|o| o.status),
            retry_after: now.and_then(|o| o.retry_after),
            path,
        })
        .into_response()
    }
}

/// The URL segment `pricing` (or `/pricing`, percent-encoded) is the path
/// `/pricing`.
fn path_of(segment: &str) -> String {
    format!("/{}", segment.strip_prefix('/').unwrap_or(segment))
}

async fn get_path(State(app): State<AppState>, Path(segment): Path<String>) -> Response {
    let path = path_of(&segment);
    if let Err(err) = crate::overrides::check_path(&path) {
        return err.into_response();
    }
    PathState::of(&app, path)
}

async fn put_path(
    State(app): State<AppState>,
    Path(segment): Path<String>,
    body: Bytes,
) -> Response {
    let path = path_of(&segment);
    let result = requested_fault(&body).and_then(|fault| app.overrides.set(&path, fault));
    match result {
        Ok(()) => {
            tracing::info!(%path, "path override set");
            PathState::of(&app, path)
        }
        Err(err) => err.into_response(),
    }
}

async fn delete_path(State(app): State<AppState>, Path(segment): Path<String>) -> Response {
    let path = path_of(&segment);
    match app.overrides.set(&path, None) {
        Ok(()) => {
            tracing::info!(%path, "path override removed");
            PathState::of(&app, path)
        }
        Err(err) => err.into_response(),
    }
}

/// The body of `/admin/slowdown`'s answers.
#[derive(Debug, Serialize)]
struct SlowdownBody {
    factor: Slowdown,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous: Option<Slowdown>,
}

async fn get_slowdown(State(app): State<AppState>) -> Json<SlowdownBody> {
    Json(SlowdownBody {
        factor: app.slowdown.get(),
        previous: None,
    })
}

async fn set_slowdown(State(app): State<AppState>, body: Bytes) -> Response {
    match requested_slowdown(&body) {
        Ok(factor) => {
            let previous = app.slowdown.set(factor);
            tracing::info!(
                factor = factor.factor(),
                previous = previous.factor(),
                "slowdown set"
            );
            Json(SlowdownBody {
                factor,
                previous: Some(previous),
            })
            .into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// The override a `PUT /admin/paths/{path}` body asks for (`None`: remove).
fn requested_fault(body: &[u8]) -> Result<Option<Fault>, OverrideError> {
    let bad = |why: &str| OverrideError::Body(why.to_owned());
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| OverrideError::Body(e.to_string()))?;
    let object = value.as_object().ok_or_else(|| bad("not a json object"))?;
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "status" | "retry_after"))
    {
        return Err(OverrideError::Body(format!("unknown field `{key}`")));
    }
    let retry_after = match object.get("retry_after") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Number(n)) if n.is_u64() => Some(n.to_string()),
        Some(_) => return Err(bad("`retry_after` is not a string or a whole number")),
    };
    match object.get("status") {
        None => Err(bad("no `status` field")),
        Some(serde_json::Value::Null) if retry_after.is_some() => {
            Err(bad("`retry_after` without a status"))
        }
        Some(serde_json::Value::Null) => Ok(None),
        Some(status) => {
            let status = status
                .as_u64()
                .ok_or_else(|| bad("`status` is not a whole number or null"))?;
            Fault::new(status, retry_after.as_deref()).map(Some)
        }
    }
}

impl IntoResponse for OverrideError {
    fn into_response(self) -> Response {
        bad_parameter(self.to_string(), self.parameter())
    }
}

impl IntoResponse for SlowdownError {
    fn into_response(self) -> Response {
        bad_parameter(self.to_string(), self.parameter())
    }
}

impl IntoResponse for QueryError {
    fn into_response(self) -> Response {
        bad_parameter(self.to_string(), self.parameter())
    }
}

/// The `400` problem of a bad query knob or admin input, naming it.
fn bad_parameter(detail: String, parameter: &'static str) -> Response {
    problem(
        StatusCode::BAD_REQUEST,
        "urn:slow-partner:problem:bad-parameter",
        "Bad parameter",
        detail,
        Some(parameter),
    )
}

/// An `application/problem+json` answer (RFC 9457).
pub(crate) fn problem(
    status: StatusCode,
    type_uri: &'static str,
    title: &'static str,
    detail: String,
    parameter: Option<&'static str>,
) -> Response {
    #[derive(Serialize)]
    struct Problem {
        r#type: &'static str,
        title: &'static str,
        status: u16,
        detail: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parameter: Option<&'static str>,
    }
    let body = Problem {
        r#type: type_uri,
        title,
        status: status.as_u16(),
        detail,
        parameter,
    };
    let mut response = (status, Json(body)).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(budget_core::problem::CONTENT_TYPE),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_comes_from_the_query_first() {
        assert_eq!(
            requested_mode(Some("mode=hang"), b"reset"),
            Ok(FaultMode::Hang)
        );
        assert_eq!(requested_mode(Some("x=1"), b"reset"), Ok(FaultMode::Reset));
    }

    #[test]
    fn the_mode_body_may_be_a_form_json_or_a_bare_name() {
        assert_eq!(requested_mode(None, b"mode=refuse"), Ok(FaultMode::Refuse));
        assert_eq!(
            requested_mode(None, br#"{"mode":"blackhole"}"#),
            Ok(FaultMode::Blackhole)
        );
        assert_eq!(requested_mode(None, b" normal\n"), Ok(FaultMode::Normal));
    }

    #[test]
    fn the_url_segment_is_the_path_without_its_slash() {
        assert_eq!(path_of("pricing"), "/pricing");
        assert_eq!(path_of("/pricing"), "/pricing");
        assert_eq!(path_of("api/pricing"), "/api/pricing");
    }

    #[test]
    fn an_override_body_sets_or_removes_a_status() {
        let fault = requested_fault(br#"{"status":503,"retry_after":"1"}"#)
            .unwrap()
            .unwrap();
        assert_eq!(fault.status.as_u16(), 503);
        assert_eq!(fault.retry_after.unwrap(), "1");
        let fault = requested_fault(br#"{"status":429,"retry_after":30}"#)
            .unwrap()
            .unwrap();
        assert_eq!(fault.retry_after.unwrap(), "30");
        assert!(requested_fault(br#"{"status":null}"#).unwrap().is_none());
    }

    #[test]
    fn a_bad_override_body_names_what_is_wrong() {
        for (body, parameter) in [
            (&b"503"[..], "body"),
            (b"{", "body"),
            (b"{}", "body"),
            (br#"{"status":"503"}"#, "body"),
            (br#"{"status":-1}"#, "body"),
            (br#"{"status":503,"delay":1}"#, "body"),
            (br#"{"status":null,"retry_after":"1"}"#, "body"),
            (br#"{"status":503,"retry_after":true}"#, "body"),
            (br#"{"status":600}"#, "status"),
            (br#"{"status":100}"#, "status"),
            (br#"{"status":503,"retry_after":"a\nb"}"#, "retry_after"),
        ] {
            let err = requested_fault(body).unwrap_err();
            assert_eq!(
                err.parameter(),
                parameter,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_missing_or_unknown_mode_names_the_mode_parameter() {
        for (query, body, reason) in [
            (None, &b""[..], Reason::Missing),
            (Some("mode="), b"", Reason::Missing),
            (None, b"mood=hang", Reason::Missing),
            (None, b"{}", Reason::Missing),
            (None, b"sleep", Reason::NotAMode),
            (Some("mode=HANG"), b"", Reason::NotAMode),
        ] {
            let err = requested_mode(query, body).unwrap_err();
            assert_eq!(err.parameter(), "mode");
            assert_eq!(*err.reason(), reason, "{query:?} {body:?}");
        }
    }
}
