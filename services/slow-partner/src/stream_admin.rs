//! The admin routes of the streams and the ingest sink (docs/binaries.md):
//! `GET`/`PUT /admin/events`, `POST /admin/events/cut`,
//! `GET /admin/streams`, `GET`/`PUT /admin/ingest`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::app::AppState;
use crate::ingest_state::AdminUpdate;

/// `GET /admin/events`: the defaults of new streams.
pub(crate) async fn get_events(State(app): State<AppState>) -> Response {
    Json(app.streams.defaults().to_json()).into_response()
}

/// `PUT /admin/events`: sets the defaults of new streams (the fields
/// given); answers them as `GET` does.
pub(crate) async fn put_events(State(app): State<AppState>, body: Bytes) -> Response {
    match app.streams.defaults().updated(&body) {
        Ok(defaults) => {
            tracing::info!(?defaults, "stream defaults set");
            let answer = defaults.to_json();
            app.streams.set_defaults(defaults);
            Json(answer).into_response()
        }
        Err(err) => err.into_response(),
    }
}

/// `POST /admin/events/cut`: ends every open SSE and WebSocket stream at
/// once, abruptly; answers `{"cut":n}`.
pub(crate) async fn cut(State(app): State<AppState>) -> Response {
    let cut = app.streams.cut();
    tracing::info!(cut, "streams cut");
    Json(json!({ "cut": cut })).into_response()
}

/// `GET /admin/streams`: the streams' counters.
pub(crate) async fn streams(State(app): State<AppState>) -> Response {
    Json(app.streams.snapshot()).into_response()
}

/// `GET /admin/ingest`: the ingest sink's counters.
pub(crate) async fn get_ingest(State(app): State<AppState>) -> Response {
    Json(app.ingest.snapshot()).into_response()
}

/// `PUT /admin/ingest`: starts or ends a failing window, or sets the batch
/// limit; answers as `GET` does.
pub(crate) async fn put_ingest(State(app): State<AppState>, body: Bytes) -> Response {
    match AdminUpdate::parse(&body) {
        Ok(update) => {
            tracing::info!(?update, "ingest knobs set");
            app.ingest.update(update);
            Json(app.ingest.snapshot()).into_response()
        }
        Err(err) => err.into_response(),
    }
}
