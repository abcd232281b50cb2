//! `GET /ws`: a WebSocket that sends `{"id":N}` text messages on the same
//! schedule and ids as `/events` (the ticks module), documented in
//! docs/binaries.md.
//!
//! `last_id=K` resumes at K+1 (a WebSocket has no `Last-Event-ID`), else
//! the ids start at `from`. After `drop_after` messages the server sends a
//! Close frame with `close_code` (default 1000) and closes. A `status`
//! refuses the upgrade with that status and a problem body. Client text
//! and binary messages are ignored; a client Close is answered with a
//! Close (the client's code echoed) and ends the stream.
//!
//! A cut (`POST /admin/events/cut`, a mode switch, the partner stopping)
//! drops the connection without a Close frame: the client reads the end of
//! the TCP stream with no closing handshake.
//!
//! As for `/events`, the route takes no worker, fault or slowdown of the
//! work fallback; after the upgrade the socket is no longer an HTTP
//! request at all.

use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use futures_util::SinkExt;

use crate::app::AppState;
use crate::events::refusal;
use crate::stream_knobs::StreamKnobs;
use crate::ticks::{Tick, Ticks};

/// How long the server waits for the client's Close after its own.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// The handler of `GET /ws`.
pub(crate) async fn ws(
    State(app): State<AppState>,
    RawQuery(query): RawQuery,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let knobs =
        match StreamKnobs::from_query(query.as_deref().unwrap_or(""), app.streams.defaults()) {
            Ok(knobs) => knobs,
            Err(err) => return err.into_response(),
        };
    if let Some(status) = knobs.base.status {
        return refusal(status);
    }
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => return rejection.into_response(),
    };
    let first = knobs.resume_at.unwrap_or(knobs.from);
    let ticks = Ticks::new(&knobs.base, first, app.streams.open());
    let close_code = knobs.close_code;
    upgrade.on_upgrade(move |socket| serve(socket, ticks, close_code))
}

/// Sends the stream's messages until its end, the client's Close, or the
/// cut.
async fn serve(mut socket: WebSocket, mut ticks: Ticks, close_code: u16) {
    loop {
        let tick = tokio::select! {
            tick = ticks.next() => tick,
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) => {
                    // Reading it queued the answering Close (the client's
                    // code echoed): send it.
                    let _ = socket.flush().await;
                    return;
                }
                Some(Ok(_)) => continue,
                None | Some(Err(_)) => return,
            },
        };
        match tick {
            Tick::Event(id) => {
                let text = format!("{{\"id\":{id}}}");
                if socket.send(Message::Text(text.into())).await.is_err() {
                    return;
                }
            }
            Tick::Heartbeat => {
                if socket
                    .send(Message::Ping(Default::default()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Tick::End => {
                let frame = CloseFrame {
                    code: close_code,
                    reason: "".into(),
                };
                if socket.send(Message::Close(Some(frame))).await.is_ok() {
                    let _ = tokio::time::timeout(CLOSE_WAIT, drain(&mut socket, &ticks)).await;
                }
                return;
            }
            // Dropping the socket closes the connection, no Close frame.
            Tick::Cut => return,
        }
    }
}

/// After our Close: reads until the client's Close (or the end, or the
/// cut), so that the closing handshake completes.
async fn drain(socket: &mut WebSocket, ticks: &Ticks) {
    loop {
        tokio::select! {
            () = ticks.open().cut() => return,
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
}
