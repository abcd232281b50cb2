//! `GET /events` through edge, against the slow partner's `/events` on
//! loopback: the events arrive in order and unchanged, `Last-Event-ID`
//! resumes, the partner's refusal and a partner that is not there are
//! problems, a cut or a silent partner ends the client's stream (no hang),
//! the stream outlives the opening's budget, edge's shutdown ends its
//! streams, and CORS answers only the configured origins.

use std::time::Duration;

use edge::EdgeConfig;
use slow_partner::{PartnerConfig, PartnerHandle};
use test_support::bounded;
use tokio::time::{Instant, timeout};

/// A partner with its admin port, both on free loopback ports.
async fn partner() -> PartnerHandle {
    let loopback = "127.0.0.1:0".parse().unwrap();
    let config = PartnerConfig::new(loopback)
        .with_admin_listen(loopback)
        .with_shutdown_grace(test_support::PARTNER_GRACE);
    slow_partner::spawn(config)
        .await
        .expect("the partner starts")
}

/// Edge in front of `events_url` (checkout is not used), `edit`ed first;
/// returns its `/events` URL.
async fn edge(events_url: String, edit: impl FnOnce(&mut EdgeConfig)) -> String {
    let mut config = EdgeConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:9");
    config.events_url = events_url;
    edit(&mut config);
    let (addr, _) = edge::spawn(&config, std::future::pending())
        .await
        .expect("edge starts");
    format!("http://{addr}/events")
}

/// The ids of the `id:` lines of an SSE text.
fn ids(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|id| id.trim().parse().expect("a u64 id"))
        .collect()
}

/// Reads `res`'s body until it holds `n` events (or ends); returns the text.
async fn read_events(res: &mut reqwest::Response, n: usize) -> String {
    let mut text = String::new();
    while ids(&text).len() < n {
        match res.chunk().await.expect("the stream reads") {
            Some(chunk) => text.push_str(std::str::from_utf8(&chunk).unwrap()),
            None => break,
        }
    }
    text
}

/// Reads `res` to its end, within `within`; returns the text and when it
/// ended. An abrupt end (an error) is an end too, but edge ends cleanly.
async fn read_to_end(res: &mut reqwest::Response, within: Duration) -> (String, Instant) {
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = res.chunk().await.expect("edge ends the stream cleanly") {
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    };
    timeout(within, read)
        .await
        .expect("the stream ends in time, no hang");
    (text, Instant::now())
}

/// Rule: the partner's events reach the caller in order and unchanged, as
/// `text/event-stream`, and the stream ends when the partner's does.
#[tokio::test]
async fn events_arrive_in_order_unchanged_and_end_with_the_partners_stream() {
    bounded(async {
        let partner = partner().await;
        let url = edge(partner.url("/events"), |_| {}).await;
        let mut res = test_support::client()
            .get(format!("{url}?rate=100&drop_after=12"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(res.headers()["content-type"], "text/event-stream");
        let timing = test_support::server_timing(&res);
        assert!(
            test_support::names(&timing).contains(&edge::EVENTS),
            "the opening is in edge's ledger: {timing:?}"
        );
        let (text, _) = read_to_end(&mut res, Duration::from_secs(5)).await;
        assert_eq!(ids(&text), (1..=12).collect::<Vec<_>>());
        assert!(
            text.contains("id: 3\nevent: tick\ndata: {\"id\":3}\n\n"),
            "unchanged: {text}"
        );
    })
    .await;
}

/// Rule: `Last-Event-ID` and the query string reach the partner: the
/// stream resumes after the last id the caller read.
#[tokio::test]
async fn last_event_id_resumes_after_the_last_id_read() {
    bounded(async {
        let partner = partner().await;
        let url = edge(partner.url("/events"), |_| {}).await;
        let mut res = test_support::client()
            .get(format!("{url}?rate=100&drop_after=3"))
            .header("last-event-id", "41")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let (text, _) = read_to_end(&mut res, Duration::from_secs(5)).await;
        assert_eq!(ids(&text), [42, 43, 44]);

        let res = test_support::client()
            .get(&url)
            .header("last-event-id", "not-a-number")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 400, "the partner's refusal is passed up");
        assert_eq!(res.headers()["content-type"], "application/problem+json");
    })
    .await;
}

/// Rule: the partner refusing the opening is a problem with its status
/// (and `Retry-After`), not a stream; a partner that is not there is
/// edge's own problem, in the opening's budget.
#[tokio::test]
async fn a_refused_or_failed_opening_is_a_problem() {
    bounded(async {
        let partner = partner().await;
        let url = edge(partner.url("/events"), |_| {}).await;
        let res = test_support::client()
            .get(format!("{url}?status=503"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        let problem: serde_json::Value = res.json().await.unwrap();
        assert_eq!(problem["status"], 503);

        // A closed port: the opening fails, a problem within the budget.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = format!("http://{}/events", closed.local_addr().unwrap());
        drop(closed);
        let url = edge(gone, |_| {}).await;
        let start = Instant::now();
        let res = test_support::client()
            .get(&url)
            .header("request-budget-ms", "800")
            .send()
            .await
            .unwrap();
        assert!(
            matches!(res.status().as_u16(), 502..=504),
            "{}",
            res.status()
        );
        assert_eq!(res.headers()["content-type"], "application/problem+json");
        assert!(start.elapsed() < Duration::from_millis(1_500));
    })
    .await;
}

/// Rule: a partner that cuts its streams (every connection closed at once,
/// no final event) ends the caller's stream through edge at once.
#[tokio::test]
async fn a_cut_ends_the_callers_stream() {
    bounded(async {
        let partner = partner().await;
        let url = edge(partner.url("/events"), |_| {}).await;
        let mut res = test_support::client()
            .get(format!("{url}?rate=20"))
            .send()
            .await
            .unwrap();
        let first = read_events(&mut res, 2).await;
        assert_eq!(ids(&first)[..2], [1, 2]);
        let cut = test_support::client()
            .post(partner.admin_url("/admin/events/cut").unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(cut.status(), 200);
        let cut_at = Instant::now();
        let (rest, ended) = read_to_end(&mut res, Duration::from_secs(3)).await;
        assert!(ended - cut_at < Duration::from_secs(1), "ended promptly");
        let all = ids(&format!("{first}{rest}"));
        assert_eq!(all, (1..=all.len() as u64).collect::<Vec<_>>());
    })
    .await;
}

/// Rule: a partner that stops sending (the connection held open) is ended
/// at edge's idle timeout; gaps shorter than it, and a stream longer than
/// the opening's budget, are not.
#[tokio::test]
async fn a_silent_partner_is_ended_at_the_idle_timeout_and_the_budget_covers_only_the_opening() {
    bounded(async {
        let partner = partner().await;
        let url = edge(partner.url("/events"), |c| {
            c.events_idle_timeout = Duration::from_millis(400);
        })
        .await;
        let mut res = test_support::client()
            .get(format!("{url}?rate=100&stall=forever"))
            .send()
            .await
            .unwrap();
        let first = read_events(&mut res, 1).await;
        let silent_from = Instant::now();
        let (rest, ended) = read_to_end(&mut res, Duration::from_secs(3)).await;
        assert_eq!(ids(&format!("{first}{rest}")), [1]);
        let silent = ended - silent_from;
        assert!(
            silent >= Duration::from_millis(300) && silent < Duration::from_millis(1_500),
            "{silent:?}"
        );

        // 10 events 100 ms apart (1 s) with a 300 ms budget for the opening.
        let mut res = test_support::client()
            .get(format!("{url}?rate=10&drop_after=10"))
            .header("request-budget-ms", "300")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let (text, _) = read_to_end(&mut res, Duration::from_secs(5)).await;
        assert_eq!(ids(&text), (1..=10).collect::<Vec<_>>());
    })
    .await;
}

/// Rule: edge's total duration ends a busy stream, cleanly.
#[tokio::test]
async fn a_busy_stream_is_ended_at_the_total_duration() {
    bounded(async {
        let partner = partner().await;
        let url = edge(partner.url("/events"), |c| {
            c.events_max_duration = Duration::from_millis(500);
        })
        .await;
        let start = Instant::now();
        let mut res = test_support::client()
            .get(format!("{url}?rate=50"))
            .send()
            .await
            .unwrap();
        let (text, ended) = read_to_end(&mut res, Duration::from_secs(3)).await;
        let lasted = ended - start;
        assert!(lasted < Duration::from_millis(1_500), "{lasted:?}");
        let got = ids(&text);
        assert!(got.len() >= 5, "{got:?}");
        assert_eq!(got, (1..=got.len() as u64).collect::<Vec<_>>());
    })
    .await;
}

/// Rule: a page of a configured origin may read `/events` (CORS); any
/// other origin, or any origin when none is configured, gets no grant.
#[tokio::test]
async fn cors_grants_only_the_configured_origins() {
    bounded(async {
        let partner = partner().await;
        let page = "http://127.0.0.1:3000";
        let open = edge(partner.url("/events"), |c| {
            c.cors_origins = vec![page.into()]
        })
        .await;
        let closed = edge(partner.url("/events"), |_| {}).await;
        let grant = |url: String, origin: &'static str| async move {
            let res = test_support::client()
                .get(format!("{url}?rate=100&drop_after=1"))
                .header("origin", origin)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200);
            res.headers()
                .get("access-control-allow-origin")
                .map(|v| v.to_str().unwrap().to_owned())
        };
        assert_eq!(grant(open.clone(), page).await.as_deref(), Some(page));
        assert_eq!(grant(open, "http://127.0.0.1:3001").await, None);
        assert_eq!(grant(closed, page).await, None);
        let bad = EdgeConfig {
            cors_origins: vec!["http://127.0.0.1:3000/page".into()],
            ..EdgeConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().field(), "cors_origins");
    })
    .await;
}

/// Rule: edge's shutdown ends the streams it serves (a clean end), so a
/// graceful shutdown is not held up by a stream that never ends.
#[tokio::test]
async fn shutdown_ends_open_streams_and_edge_stops() {
    bounded(async {
        let partner = partner().await;
        let mut config = EdgeConfig::new("127.0.0.1:0".parse().unwrap(), "http://127.0.0.1:9");
        config.events_url = partner.url("/events");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (addr, server) = edge::spawn(&config, async {
            let _ = stopped.await;
        })
        .await
        .expect("edge starts");
        let mut res = test_support::client()
            .get(format!("http://{addr}/events?rate=50"))
            .send()
            .await
            .unwrap();
        assert_eq!(ids(&read_events(&mut res, 2).await)[..2], [1, 2]);
        stop.send(()).unwrap();
        read_to_end(&mut res, Duration::from_secs(3)).await;
        timeout(Duration::from_secs(3), server)
            .await
            .expect("edge stops once its streams ended")
            .unwrap()
            .unwrap();
    })
    .await;
}
