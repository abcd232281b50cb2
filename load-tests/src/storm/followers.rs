//! The SSE followers of `reconnect-storm`, one per mode, each recording
//! its openings and event ids in a [`ClientLog`]:
//!
//! - `budget`: `budget_core`'s `EventSource` over a `BudgetClient`, every
//!   default (jittered, capped exponential backoff; the server's `retry:`
//!   within the cap; `Last-Event-ID`);
//! - `naive` ([`follow_naive`]): the loop most hand-written clients have:
//!   after a drop, wait 1 s, then 2, 4, 8 ... ([`NAIVE_FIRST_DELAY`],
//!   doubling up to [`NAIVE_CAP`]), no jitter; it keeps the last id and
//!   sends it as `Last-Event-ID`, so it loses nothing either: what it
//!   lacks is the spread;
//! - `peer` ([`follow_peer`]): `reqwest-eventsource` 0.6 with its default
//!   retry policy, `ExponentialBackoff` from 300 ms, doubling, capped at
//!   5 s, **no jitter** (the policy has no jitter field). Chosen over
//!   `eventsource-client` 0.18 because it is built on reqwest, as the
//!   project's client is (the same hyper and tower underneath), and builds
//!   on the workspace's Rust version; `eventsource-client` 0.18 needs Rust
//!   1.95 and its own hyper transport with tower 0.4 beside the project's
//!   0.5. Its default policy (1 s doubling to 60 s, with a random delay
//!   between half and all of each step) would spread reconnects by half a
//!   step; `reqwest-eventsource`'s, like the naive loop, does not.

use std::future::Future;
use std::time::Duration;

use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::stream::StreamConfig;
use budget_core::stream::sse::EventSource;
use futures_util::StreamExt as _;
use http::header::ACCEPT;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::ClientLog;
use crate::chain::ChainMode;
use crate::run::RunError;
use crate::target::loopback_client;

/// How long the clients' first connections are spread over (they are
/// not measured: the old process serves them).
pub const STAGGER: Duration = Duration::from_secs(1);

/// The naive loop's first wait after a drop.
pub const NAIVE_FIRST_DELAY: Duration = Duration::from_secs(1);

/// The naive loop's longest wait (it doubles up to this).
pub const NAIVE_CAP: Duration = Duration::from_secs(64);

/// The peer's backoff cap: `reqwest-eventsource`'s default policy's
/// `max_duration`.
pub const PEER_CAP: Duration = Duration::from_secs(5);

/// A mode's reconnect policy, for the report.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// In a few words.
    pub text: String,
    /// Its backoff cap (`None`: none).
    pub cap: Option<Duration>,
}

/// Starts a follower of `base` + `path` per log, in `mode` (`budget`
/// for any mode but `naive` and `peer`), their first connections spread
/// over [`STAGGER`].
///
/// # Errors
///
/// When an HTTP client or a budget mode client cannot be built.
pub fn spawn_followers(
    mode: ChainMode,
    base: &str,
    path: &str,
    logs: &[ClientLog],
) -> Result<(JoinSet<()>, Policy), RunError> {
    let mut tasks = JoinSet::new();
    let url = format!("{base}{path}");
    let policy = match mode {
        ChainMode::Naive => {
            let http = loopback_client(Duration::from_secs(2))?;
            spawn_each(&mut tasks, logs, |log| {
                follow_naive(http.clone(), url.clone(), log)
            });
            Policy {
                text: "1 s, doubling, no jitter".into(),
                cap: Some(NAIVE_CAP),
            }
        }
        ChainMode::Peer => {
            let http = reqwest_012::Client::builder().no_proxy().build()?;
            spawn_each(&mut tasks, logs, |log| {
                follow_peer(http.clone(), url.clone(), log)
            });
            Policy {
                text: "reqwest-eventsource default: 300 ms, doubling, cap 5 s, no jitter".into(),
                cap: Some(PEER_CAP),
            }
        }
        _ => {
            let http = loopback_client(Duration::from_secs(2))?;
            let config = StreamConfig::default();
            // A client per follower: each app has its own breaker.
            let mut clients = logs
                .iter()
                .map(|_| {
                    BudgetClient::builder(DependencyConfig::new("events", base))
                        .http_client(http.clone())
                        .build()
                })
                .collect::<Result<Vec<_>, _>>()?
                .into_iter();
            spawn_each(&mut tasks, logs, |log| {
                follow_budget(clients.next(), path.to_owned(), config, log)
            });
            let r = config.reconnect;
            Policy {
                text: format!(
                    "budget_core EventSource defaults: {}, x{}, cap {}, {:?} jitter",
                    humantime::format_duration(r.initial),
                    r.multiplier,
                    humantime::format_duration(r.max),
                    r.jitter
                ),
                cap: Some(r.max),
            }
        }
    };
    Ok((tasks, policy))
}

/// Spawns `follow(log)` for each log on `tasks`, the `i`-th after
/// `i` x [`STAGGER`] / the number of logs.
fn spawn_each<F>(
    tasks: &mut JoinSet<()>,
    logs: &[ClientLog],
    mut follow: impl FnMut(ClientLog) -> F,
) where
    F: Future<Output = ()> + Send + 'static,
{
    let step = STAGGER / u32::try_from(logs.len().max(1)).unwrap_or(u32::MAX);
    let start = Instant::now();
    for (i, log) in logs.iter().enumerate() {
        let at = start + step * u32::try_from(i).unwrap_or(u32::MAX);
        let follower = follow(log.clone());
        tasks.spawn(async move {
            tokio::time::sleep_until(at).await;
            follower.await;
        });
    }
}

/// Follows `path` of `client`'s dependency with `budget_core`'s
/// `EventSource` and `config` until a final error.
pub async fn follow_budget(
    client: Option<BudgetClient>,
    path: String,
    config: StreamConfig,
    log: ClientLog,
) {
    let Some(client) = client else {
        return log.gave_up("no client".into());
    };
    let mut events = match EventSource::new(client, path, &config) {
        Ok(events) => events,
        Err(e) => return log.gave_up(e.to_string()),
    };
    while let Some(item) = events.next().await {
        match item {
            Ok(event) => {
                if let Some(id) = event.id.as_deref().and_then(|id| id.parse().ok()) {
                    log.event(id);
                }
            }
            Err(e) if e.is_final() => return log.gave_up(e.to_string()),
            // Transient: the source reconnects by its policy.
            Err(_) => {}
        }
    }
}

/// Follows `url` for ever with the naive loop (see the module docs):
/// reconnects after every end, error or refused status, waiting 1 s, then
/// twice the last wait (up to [`NAIVE_CAP`]), the wait back to 1 s once a
/// stream opened.
pub async fn follow_naive(http: reqwest::Client, url: String, log: ClientLog) {
    let mut delay = NAIVE_FIRST_DELAY;
    loop {
        let mut request = http.get(&url).header(ACCEPT, "text/event-stream");
        if let Some(id) = log.last() {
            request = request.header("last-event-id", id.to_string());
        }
        if let Ok(mut response) = request.send().await
            && response.status().is_success()
        {
            delay = NAIVE_FIRST_DELAY;
            let mut frames = Frames::default();
            while let Ok(Some(chunk)) = response.chunk().await {
                frames.push(&chunk, |id| log.event(id));
            }
        }
        tokio::time::sleep(delay).await;
        delay = delay.saturating_mul(2).min(NAIVE_CAP);
    }
}

/// Follows `url` with `reqwest-eventsource`'s `EventSource` and its
/// default retry policy until it gives up (it does not retry a refused
/// status or a wrong content type).
pub async fn follow_peer(http: reqwest_012::Client, url: String, log: ClientLog) {
    let mut source = match reqwest_eventsource::EventSource::new(http.get(&url)) {
        Ok(source) => source,
        Err(e) => return log.gave_up(e.to_string()),
    };
    while let Some(event) = source.next().await {
        match event {
            Ok(reqwest_eventsource::Event::Open) => {}
            Ok(reqwest_eventsource::Event::Message(m)) => {
                if let Ok(id) = m.id.parse() {
                    log.event(id);
                }
            }
            // The source retries these by its policy.
            Err(
                reqwest_eventsource::Error::StreamEnded | reqwest_eventsource::Error::Transport(_),
            ) => {}
            Err(e) => return log.gave_up(e.to_string()),
        }
    }
}

/// The event stream's frames, as a hand-written client reads them: text
/// up to a blank line, its `id:` field (every other field and comment
/// ignored).
#[derive(Debug, Default)]
struct Frames {
    pending: Vec<u8>,
}

impl Frames {
    /// Adds `bytes`; calls `on_id` with the id of each complete frame that
    /// has one.
    fn push(&mut self, bytes: &[u8], mut on_id: impl FnMut(u64)) {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
            let frame: Vec<u8> = self.pending.drain(..end + 2).collect();
            let id = String::from_utf8_lossy(&frame)
                .lines()
                .find_map(|line| line.strip_prefix("id:").map(|v| v.trim().parse::<u64>()));
            if let Some(Ok(id)) = id {
                on_id(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_give_each_id_once() {
        let mut frames = Frames::default();
        let mut ids = Vec::new();
        frames.push(
            b"retry: 500\n\nid: 7\nevent: tick\ndata: {\"id\":7}\n",
            |id| ids.push(id),
        );
        assert!(ids.is_empty());
        frames.push(b"\n: hb\n\nid: 8\ndata: x\n\nid: ", |id| ids.push(id));
        frames.push(b"9\n\n", |id| ids.push(id));
        assert_eq!(ids, [7, 8, 9]);
    }
}
