//! The HTTP routes: the reserved paths, the admin endpoint and the work
//! fallback (the table is in the crate docs).
//!
//! The mode to switch to comes from the query (`?mode=hang`) or the body:
//! a form (`mode=hang`), JSON (`{"mode":"hang"}`) or the bare name (`hang`).
//! The answer is `{"mode":"hang","previous":"normal"}` once the switch has
//! taken effect; a missing or unknown mode is a `400` naming `mode`, a port
//! that cannot be opened a `500`.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::knobs::{QueryError, Reason};
use crate::mode::Mode;
use crate::stats::Stats;
use crate::supervisor::Control;

/// What every route shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) stats: Arc<Stats>,
    pub(crate) control: Control,
    pub(crate) mode: watch::Receiver<Mode>,
}

/// The main port's routes: admin, stats, health, and the work fallback.
pub(crate) fn main_router(state: AppState) -> Router {
    admin_routes().fallback(crate::work::work).with_state(state)
}

/// The admin listener's routes: admin, stats, health; nothing else.
pub(crate) fn admin_router(state: AppState) -> Router {
    admin_routes().with_state(state)
}

fn admin_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/stats", get(stats))
        .route("/stats/reset", post(reset_stats))
        .route("/admin/mode", get(get_mode).put(set_mode).post(set_mode))
}

async fn stats(State(app): State<AppState>) -> Response {
    Json(app.stats.snapshot()).into_response()
}

async fn reset_stats(State(app): State<AppState>) -> StatusCode {
    app.stats.reset();
    StatusCode::NO_CONTENT
}

/// The body of the admin endpoint's answers.
#[derive(Debug, Serialize, Deserialize)]
struct ModeBody {
    mode: Mode,
    #[serde(skip_serializing_if = "Option::is_none", skip_deserializing)]
    previous: Option<Mode>,
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
fn requested_mode(query: Option<&str>, body: &[u8]) -> Result<Mode, QueryError> {
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

impl IntoResponse for QueryError {
    fn into_response(self) -> Response {
        problem(
            StatusCode::BAD_REQUEST,
            "urn:slow-partner:problem:bad-parameter",
            "Bad parameter",
            self.to_string(),
            Some(self.parameter()),
        )
    }
}

/// An `application/problem+json` answer (RFC 9457).
fn problem(
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
        assert_eq!(requested_mode(Some("mode=hang"), b"reset"), Ok(Mode::Hang));
        assert_eq!(requested_mode(Some("x=1"), b"reset"), Ok(Mode::Reset));
    }

    #[test]
    fn the_mode_body_may_be_a_form_json_or_a_bare_name() {
        assert_eq!(requested_mode(None, b"mode=refuse"), Ok(Mode::Refuse));
        assert_eq!(
            requested_mode(None, br#"{"mode":"blackhole"}"#),
            Ok(Mode::Blackhole)
        );
        assert_eq!(requested_mode(None, b" normal\n"), Ok(Mode::Normal));
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
