//! budget-core's stream followers against the real partner (docs/streams.md):
//! `stream::sse::EventSource` on `/events` and `stream::ws::WebSocket` on
//! `/ws`, each through streams the partner ends (`drop_after`) and cuts
//! (`POST /admin/events/cut`), resuming with no event lost and the
//! endpoint's breaker closed (a disconnect after the opening is not a
//! failure).

mod common;

use std::time::Duration;

use budget_core::breaker::{BreakerConfig, BreakerState};
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::stream::sse::EventSource;
use budget_core::stream::ws::{Message, Resume, WebSocket};
use budget_core::stream::{StreamConfig, StreamError};
use common::{bounded, client, partner};
use futures_util::{Stream, StreamExt};
use slow_partner::PartnerHandle;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A client of the partner with a breaker that three failures open.
fn budget_client(partner: &PartnerHandle) -> BudgetClient {
    let mut config = DependencyConfig::new("partner", partner.url(""));
    let mut breaker = BreakerConfig::default();
    breaker.failure_threshold = 3;
    config.breaker = Some(breaker);
    config.build().unwrap()
}

/// Reconnects within 10-40 ms, so the test is short.
fn fast() -> StreamConfig {
    let mut c = StreamConfig::default();
    c.reconnect.initial = ms(10);
    c.reconnect.max = ms(40);
    c
}

async fn cut(partner: &PartnerHandle) {
    let url = partner.admin_url("/admin/events/cut").unwrap();
    let res = client().post(url).send().await.unwrap();
    assert!(res.status().is_success());
}

/// The next `n` ids of `stream` (ids read by `id`), cutting every stream
/// once at the `cut_at`-th, and the errors met on the way.
async fn ids<S, T>(
    partner: &PartnerHandle,
    stream: &mut S,
    n: usize,
    cut_at: usize,
    id: impl Fn(&T) -> u64,
) -> (Vec<u64>, Vec<StreamError>)
where
    S: Stream<Item = Result<T, StreamError>> + Unpin,
{
    let (mut seen, mut errors) = (Vec::new(), Vec::new());
    while seen.len() < n {
        match stream.next().await.expect("the follower goes on") {
            Ok(item) => {
                seen.push(id(&item));
                if seen.len() == cut_at {
                    cut(partner).await;
                }
            }
            Err(e) => errors.push(e),
        }
    }
    (seen, errors)
}

#[tokio::test]
async fn event_source_resumes_after_ends_and_a_cut_with_no_event_lost() {
    bounded(async {
        let partner = partner().await;
        let c = budget_client(&partner);
        let mut events = EventSource::new(c.clone(), "/events?rate=200&drop_after=7", &fast())
            .expect("a valid path");
        let (seen, errors) = ids(&partner, &mut events, 30, 10, |e| {
            e.id.as_deref().unwrap().parse().unwrap()
        })
        .await;
        assert_eq!(seen, (1..=30).collect::<Vec<u64>>());
        assert!(errors.iter().all(|e| !e.is_final()), "{errors:?}");
        // Four clean ends (every 7 events) and one cut: five reopenings at
        // least, none of them a breaker failure.
        assert!(events.stats().opens() >= 5, "{:?}", events.stats());
        assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
    })
    .await;
}

#[tokio::test]
async fn websocket_resumes_by_last_id_after_closes_and_a_cut_with_no_message_lost() {
    bounded(async {
        let partner = partner().await;
        let c = budget_client(&partner);
        let resume = Resume::query("last_id", |m: &Message| {
            let v: serde_json::Value = serde_json::from_str(m.to_text().ok()?).ok()?;
            Some(v.get("id")?.to_string())
        });
        let mut socket = WebSocket::new(
            c.clone(),
            "/ws?rate=200&drop_after=7",
            &fast(),
            Some(resume),
        )
        .expect("a valid path");
        let (seen, errors) = ids(&partner, &mut socket, 30, 10, |m: &Message| {
            let v: serde_json::Value = serde_json::from_str(m.to_text().unwrap()).unwrap();
            v["id"].as_u64().unwrap()
        })
        .await;
        assert_eq!(seen, (1..=30).collect::<Vec<u64>>());
        assert!(errors.iter().all(|e| !e.is_final()), "{errors:?}");
        assert_eq!(c.breaker().unwrap().state(), BreakerState::Closed);
    })
    .await;
}

#[tokio::test]
async fn refused_openings_open_the_breaker_and_then_wait_for_its_probe() {
    bounded(async {
        let partner = partner().await;
        let c = budget_client(&partner);
        let mut events =
            EventSource::new(c.clone(), "/events?status=503", &fast()).expect("a valid path");
        // The opening's own retries (the engine's) and the follower's
        // reconnects are refused until the breaker opens; after that the
        // opening is not made at all.
        let mut refused = 0;
        loop {
            match events.next().await.unwrap().unwrap_err() {
                StreamError::Status { status, .. } => {
                    assert_eq!(status, 503);
                    refused += 1;
                }
                StreamError::Open(call) if call.is_unavailable() => break,
                e => panic!("{e}"),
            }
        }
        assert!(refused >= 1);
        assert_eq!(c.breaker().unwrap().state(), BreakerState::Open);
        let url = partner.admin_url("/admin/streams").unwrap();
        let streams: serde_json::Value = client()
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(streams["opened_total"], 0, "{streams}");
        // While it is open (30 s by default), the follower's reconnects are
        // refused in the client: no opening is sent.
        let more = tokio::time::timeout(ms(500), async {
            while let Some(Err(StreamError::Open(_))) = events.next().await {}
        })
        .await;
        assert!(more.is_err(), "the follower stopped or got an event");
    })
    .await;
}
