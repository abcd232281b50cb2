//! The stream endpoints on the wire (docs/binaries.md): `GET /events`
//! (SSE), `GET /ws` (WebSocket), their admin knobs, the cut and the
//! streams' counters; a real partner on 127.0.0.1:0, reqwest and
//! tokio-tungstenite clients.

mod common;

use std::pin::Pin;
use std::time::{Duration, UNIX_EPOCH};

use budget_core::clock::{SystemClock, WallClock};
use bytes::Bytes;
use common::{admin, assert_bad_request, bounded, client, partner};
use futures_util::{SinkExt, Stream, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use slow_partner::{PartnerConfig, PartnerHandle};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// An SSE body read frame by frame (a frame ends with a blank line).
struct Sse {
    body: Body,
    buf: String,
}

impl Sse {
    /// Opens `path` with an optional `Last-Event-ID`; asserts a `200`
    /// event stream.
    async fn open(partner: &PartnerHandle, path: &str, last_id: Option<&str>) -> Sse {
        let mut request = client().get(partner.url(path));
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Sse {
            body: Box::pin(response.bytes_stream()),
            buf: String::new(),
        }
    }

    /// The next frame; `Ok(None)` at a clean end of the body, `Err` when
    /// the body broke off.
    async fn frame(&mut self) -> Result<Option<String>, reqwest::Error> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let frame = self.buf[..end].to_owned();
                self.buf.drain(..end + 2);
                return Ok(Some(frame));
            }
            match self.body.next().await {
                Some(chunk) => self.buf.push_str(std::str::from_utf8(&chunk?).unwrap()),
                None => {
                    assert!(self.buf.is_empty(), "a partial frame: {:?}", self.buf);
                    return Ok(None);
                }
            }
        }
    }

    /// The ids of the events until the clean end of the body.
    async fn ids_to_end(&mut self) -> Vec<u64> {
        let mut ids = Vec::new();
        while let Some(frame) = self.frame().await.unwrap() {
            if let Some(id) = id_of(&frame) {
                ids.push(id);
            }
        }
        ids
    }
}

/// The id of an event frame, checking the frame's exact shape.
fn id_of(frame: &str) -> Option<u64> {
    let id: u64 = frame
        .strip_prefix("id: ")?
        .split('\n')
        .next()?
        .parse()
        .ok()?;
    assert_eq!(
        frame,
        format!("id: {id}\nevent: tick\ndata: {{\"id\":{id}}}")
    );
    Some(id)
}

async fn streams_stats(partner: &PartnerHandle) -> Value {
    admin(partner, Method::GET, "/admin/streams", "").await.2
}

/// Polls `/admin/streams` until `open` is `n` (at most 5 s).
async fn open_becomes(partner: &PartnerHandle, n: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stats = streams_stats(partner).await;
        if stats["open"] == n || Instant::now() > deadline {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn sse_ids_start_at_from_or_after_last_event_id_and_drop_after_ends_cleanly() {
    bounded(async {
        let partner = partner().await;
        let mut sse = Sse::open(&partner, "/events?rate=200&drop_after=3", None).await;
        assert_eq!(sse.ids_to_end().await, [1, 2, 3]);
        let mut sse = Sse::open(&partner, "/events?rate=200&drop_after=2&from=10", None).await;
        assert_eq!(sse.ids_to_end().await, [10, 11]);
        let path = "/events?rate=200&drop_after=2&from=10";
        let mut sse = Sse::open(&partner, path, Some("41")).await;
        assert_eq!(
            sse.ids_to_end().await,
            [42, 43],
            "Last-Event-ID wins over from"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_bad_last_event_id_is_a_problem_naming_the_header() {
    bounded(async {
        let partner = partner().await;
        for bad in ["abc", "-1", "", "18446744073709551615", "1.5"] {
            let response = client()
                .get(partner.url("/events"))
                .header("last-event-id", bad)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{bad:?}");
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let problem: Value = response.json().await.unwrap();
            assert_eq!(
                problem["type"],
                "urn:slow-partner:problem:bad-last-event-id"
            );
            assert_eq!(problem["parameter"], "Last-Event-ID");
        }
        let response = client()
            .get(partner.url("/events?rate=0"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn retry_opens_the_stream_and_heartbeats_fill_idle_time() {
    bounded(async {
        let partner = partner().await;
        let mut sse = Sse::open(&partner, "/events?retry=2500ms&drop_after=1", None).await;
        assert_eq!(sse.frame().await.unwrap().unwrap(), "retry: 2500");
        assert_eq!(sse.ids_to_end().await, [1]);

        let path = "/events?rate=2&heartbeat=100ms&drop_after=2";
        let mut sse = Sse::open(&partner, path, None).await;
        let mut frames = Vec::new();
        while let Some(frame) = sse.frame().await.unwrap() {
            frames.push(frame);
        }
        assert_eq!(id_of(&frames[0]), Some(1));
        assert_eq!(id_of(frames.last().unwrap()), Some(2));
        let beats = frames.iter().filter(|f| *f == ": hb").count();
        assert!((3..=5).contains(&beats), "{frames:?}");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_stall_holds_the_second_event() {
    bounded(async {
        let partner = partner().await;
        let path = "/events?rate=100&stall=600ms&drop_after=3";
        let mut sse = Sse::open(&partner, path, None).await;
        let first = sse.frame().await.unwrap().unwrap();
        let start = Instant::now();
        assert_eq!(id_of(&first), Some(1));
        assert_eq!(id_of(&sse.frame().await.unwrap().unwrap()), Some(2));
        assert!(
            start.elapsed() >= Duration::from_millis(550),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(sse.ids_to_end().await, [3]);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn status_refuses_the_opening_with_a_problem() {
    bounded(async {
        let partner = partner().await;
        for (status, retry_after) in [(503, Some("1")), (429, Some("1")), (401, None), (404, None)]
        {
            let response = client()
                .get(partner.url(&format!("/events?status={status}")))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status().as_u16(), status);
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let header = response.headers().get("retry-after");
            assert_eq!(header.map(|v| v.to_str().unwrap()), retry_after, "{status}");
        }
        assert_eq!(
            streams_stats(&partner).await["opened_total"],
            0,
            "a refusal opens nothing"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_admin_defaults_shape_new_streams() {
    bounded(async {
        let partner = partner().await;
        let body = r#"{"rate":200,"drop_after":2,"retry":"1s"}"#;
        let (status, _, now) = admin(&partner, Method::PUT, "/admin/events", body).await;
        assert_eq!(status, StatusCode::OK);
        let expected = json!({"rate":200,"retry":"1s","drop_after":2,"stall":null,
                              "heartbeat":null,"status":null});
        assert_eq!(now, expected);
        assert_eq!(
            admin(&partner, Method::GET, "/admin/events", "").await.2,
            expected
        );
        let mut sse = Sse::open(&partner, "/events", None).await;
        assert_eq!(sse.frame().await.unwrap().unwrap(), "retry: 1000");
        assert_eq!(sse.ids_to_end().await, [1, 2]);
        let mut sse = Sse::open(&partner, "/events?drop_after=1", None).await;
        assert_eq!(sse.ids_to_end().await, [1], "the query overrides a default");

        admin(&partner, Method::PUT, "/admin/events", r#"{"status":503}"#).await;
        let response = client().get(partner.url("/events")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        for (body, parameter) in [
            ("[1]", "body"),
            (r#"{"speed":1}"#, "body"),
            (r#"{"rate":0}"#, "rate"),
            (r#"{"stall":"soon"}"#, "stall"),
            (r#"{"status":99}"#, "status"),
        ] {
            let answer = admin(&partner, Method::PUT, "/admin/events", body).await;
            assert_bad_request(&answer, parameter, body);
        }
        partner.shutdown().await;
    })
    .await;
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws(partner: &PartnerHandle, path_and_query: &str) -> Ws {
    let url = format!("ws://{}{path_and_query}", partner.addr());
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// The ids of the text messages until a Close frame, and its code; the
/// closing handshake completed.
async fn ws_to_close(socket: &mut Ws) -> (Vec<u64>, Option<CloseCode>) {
    let mut ids = Vec::new();
    while let Some(message) = socket.next().await {
        match message.unwrap() {
            Message::Text(text) => {
                let value: Value = serde_json::from_str(&text).unwrap();
                ids.push(value["id"].as_u64().unwrap());
            }
            Message::Close(frame) => {
                // Reading on sends the answering Close tungstenite queued.
                while let Some(Ok(_)) = socket.next().await {}
                return (ids, frame.map(|f| f.code));
            }
            _ => {}
        }
    }
    (ids, None)
}

#[tokio::test]
async fn ws_sends_ids_resumes_after_last_id_and_closes_with_its_code() {
    bounded(async {
        let partner = partner().await;
        let mut socket = ws(&partner, "/ws?rate=200&drop_after=3").await;
        assert_eq!(
            ws_to_close(&mut socket).await,
            (vec![1, 2, 3], Some(CloseCode::Normal))
        );
        let mut socket = ws(
            &partner,
            "/ws?rate=200&drop_after=2&last_id=41&close_code=4000",
        )
        .await;
        assert_eq!(
            ws_to_close(&mut socket).await,
            (vec![42, 43], Some(CloseCode::from(4000)))
        );

        // A client message is ignored; a client Close is answered.
        let mut socket = ws(&partner, "/ws?rate=200&stall=forever").await;
        socket.send(Message::text("hello")).await.unwrap();
        let first = socket.next().await.unwrap().unwrap();
        assert_eq!(first, Message::text(r#"{"id":1}"#));
        socket.close(None).await.unwrap();
        let answer = socket.next().await.unwrap().unwrap();
        assert!(matches!(answer, Message::Close(_)), "{answer:?}");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_invalid_close_code_is_sent_and_the_client_reads_a_protocol_error() {
    bounded(async {
        let partner = partner().await;
        let mut socket = ws(&partner, "/ws?rate=200&drop_after=1&close_code=999").await;
        let first = socket.next().await.unwrap().unwrap();
        assert_eq!(first, Message::text(r#"{"id":1}"#));
        // tungstenite reads the peer's code 999 (not allowed on the wire)
        // as a protocol violation and reports a Close with 1002.
        let (ids, code) = ws_to_close(&mut socket).await;
        assert_eq!((ids.len(), code), (0, Some(CloseCode::Protocol)));
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn ws_status_refuses_the_upgrade() {
    bounded(async {
        let partner = partner().await;
        let url = format!("ws://{}/ws?status=503", partner.addr());
        match tokio_tungstenite::connect_async(url).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 503);
                assert_eq!(response.headers()["retry-after"], "1");
            }
            other => panic!("expected a refused upgrade: {other:?}"),
        }
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_cut_ends_every_open_stream_abruptly_and_new_ones_open() {
    bounded(async {
        let partner = partner().await;
        let mut first = Sse::open(&partner, "/events?rate=50", None).await;
        let mut second = Sse::open(&partner, "/events?stall=forever", Some("7")).await;
        let mut socket = ws(&partner, "/ws?rate=50").await;
        assert_eq!(id_of(&first.frame().await.unwrap().unwrap()), Some(1));
        assert_eq!(id_of(&second.frame().await.unwrap().unwrap()), Some(8));
        assert!(matches!(socket.next().await, Some(Ok(Message::Text(_)))));
        assert_eq!(open_becomes(&partner, 3).await["open"], 3);

        let (status, _, cut) = admin(&partner, Method::POST, "/admin/events/cut", "").await;
        assert_eq!((status, cut), (StatusCode::OK, json!({"cut": 3})));
        for sse in [&mut first, &mut second] {
            let end = loop {
                match sse.frame().await {
                    Ok(Some(_)) => continue,
                    end => break end,
                }
            };
            assert!(end.is_err(), "a cut is not a clean end: {end:?}");
        }
        let end = loop {
            match socket.next().await {
                Some(Ok(Message::Text(_))) => continue,
                end => break end,
            }
        };
        assert!(
            !matches!(end, Some(Ok(Message::Close(_)))),
            "a cut sends no Close frame: {end:?}"
        );
        assert_eq!(open_becomes(&partner, 0).await["open"], 0);
        let mut after = Sse::open(&partner, "/events?rate=200&drop_after=1", None).await;
        assert_eq!(
            after.ids_to_end().await,
            [1],
            "streams opened after a cut live"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn each_opening_is_recorded_with_its_wall_clock_time() {
    bounded(async {
        let partner = partner().await;
        let before = unix_ms();
        let mut sse = Sse::open(&partner, "/events?rate=200&drop_after=2", None).await;
        assert_eq!(sse.ids_to_end().await, [1, 2]);
        let mut socket = ws(&partner, "/ws?rate=200&drop_after=1").await;
        assert_eq!(ws_to_close(&mut socket).await.0, [1]);
        let after = unix_ms();
        let stats = open_becomes(&partner, 0).await;
        assert_eq!(
            (stats["opened_total"].clone(), stats["events_sent"].clone()),
            (json!(2), json!(3))
        );
        let opens: Vec<u64> = serde_json::from_value(stats["opens_unix_ms"].clone()).unwrap();
        assert_eq!(opens.len(), 2);
        assert!(
            opens.iter().all(|t| (before..=after).contains(t)),
            "{opens:?} {before} {after}"
        );

        let reset = client()
            .post(partner.url("/stats/reset"))
            .send()
            .await
            .unwrap();
        assert_eq!(reset.status(), StatusCode::NO_CONTENT);
        let stats = streams_stats(&partner).await;
        assert_eq!(
            stats,
            json!({"open":0,"opened_total":0,"opens_unix_ms":[],"events_sent":0})
        );
        partner.shutdown().await;
    })
    .await;
}

fn unix_ms() -> u64 {
    let since = SystemClock.now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

#[tokio::test]
async fn a_stream_holds_no_worker_of_a_limited_partner() {
    bounded(async {
        let config = PartnerConfig::new("127.0.0.1:0".parse().unwrap())
            .with_shutdown_grace(Duration::from_millis(500))
            .with_admin_listen("127.0.0.1:0".parse().unwrap())
            .with_workers(Some(1));
        let partner = slow_partner::spawn(config).await.unwrap();
        let mut sse = Sse::open(&partner, "/events?stall=forever", None).await;
        assert_eq!(id_of(&sse.frame().await.unwrap().unwrap()), Some(1));
        let response = client()
            .get(partner.url("/pricing"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "the one worker is free");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_mode_switch_cuts_the_open_streams() {
    bounded(async {
        let partner = partner().await;
        let mut socket = ws(&partner, "/ws?stall=forever").await;
        assert!(matches!(socket.next().await, Some(Ok(Message::Text(_)))));
        partner
            .set_mode(slow_partner::FaultMode::Refuse)
            .await
            .unwrap();
        let end = tokio::time::timeout(Duration::from_secs(2), socket.next())
            .await
            .expect("the upgraded connection is closed at the switch");
        assert!(!matches!(end, Some(Ok(Message::Close(_)))), "{end:?}");
        partner.shutdown().await;
    })
    .await;
}
