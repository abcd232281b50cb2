//! What the `reconnect-storm` scenario measures: SSE clients that follow
//! the slow partner's `/events`, each checking that its event ids are
//! contiguous, cut off at once by a partner restart; how hard they come
//! back ([`StormReport`]).
//!
//! # Definitions
//!
//! - **peak openings per 100 ms**: the most stream openings the restarted
//!   partner recorded in any window of [`WINDOW`] (a sliding window over
//!   its `GET /admin/streams` `opens_unix_ms`: the new process records
//!   every reconnect, and nothing else, since the clients were all
//!   connected to the old one).
//! - **back**: a client is back at the first event it receives from the
//!   new process (any event received after the new process started: the
//!   old one had been gone for [`RESTART_DOWN`]), counted from the cut
//!   (the instant the old process started to stop); **99 % back** is the
//!   time from the cut until [`BACK_SHARE`] of the clients that were
//!   following before the cut are back (none when fewer came back within
//!   the watch). Events, not openings: every follower shows its events,
//!   and events flowing again is what "back" means to the app.
//! - **events lost**: each client checks that every event's id is its
//!   previous one plus one; the ids it skipped are lost (a resumed stream
//!   that starts after `Last-Event-ID` + 1). Ids seen again (a resume
//!   that starts earlier) are counted apart, as repeated. Ids are a pure
//!   function of the position in the stream, so they survive the restart
//!   (the partner's `/events`, docs/binaries.md).
//!
//! The followers of each mode are [`followers`]: `budget`
//! (`budget_core`'s `EventSource`), `naive` (a hand-written loop) and
//! `peer` (`reqwest-eventsource`).
//!
//! ```
//! use load_tests::storm::peak_in_window;
//! // Three openings within 100 ms of each other, one later.
//! assert_eq!(peak_in_window(&[1_000, 1_040, 1_099, 1_500], 100), 3);
//! assert_eq!(peak_in_window(&[], 100), 0);
//! ```

pub mod followers;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// How many clients follow the stream, unless `--requests` says.
pub const STORM_CLIENTS: u64 = 1_000;

/// Events per second on each stream (the partner's `rate`): 2 000 events
/// a second for the default 1 000 clients, light enough for a shared
/// machine, frequent enough that a gap shows within the run.
pub const EVENT_RATE: u32 = 2;

/// How long the partner is down between the old process and the new one:
/// connects are refused in between.
pub const RESTART_DOWN: Duration = Duration::from_secs(2);

/// The window of the peak reconnect rate.
pub const WINDOW: Duration = Duration::from_millis(100);

/// The share of the clients that must be back for "99 % back".
pub const BACK_SHARE: f64 = 0.99;

/// Budget mode's peak must be at most the naive mode's divided by this.
pub const PEAK_FACTOR: u64 = 5;

/// The longest the scenario waits after the cut for the clients to come
/// back.
pub const WATCH_LIMIT: Duration = Duration::from_secs(90);

/// Where the clients follow the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StormTarget {
    /// The partner's `/events`, directly.
    Direct,
    /// Edge's `/events` (edge's defaults), which opens the partner's.
    Edge,
}

impl StormTarget {
    /// Both, in the order a run follows them.
    pub const ALL: [StormTarget; 2] = [StormTarget::Direct, StormTarget::Edge];

    /// What the clients follow, in a few words.
    ///
    /// ```
    /// use load_tests::storm::StormTarget;
    /// assert_eq!(StormTarget::Edge.describe(), "through edge");
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            StormTarget::Direct => "directly",
            StormTarget::Edge => "through edge",
        }
    }
}

/// What one mode's runs of `reconnect-storm` measured, a
/// [`StormReport`] per [`StormTarget`] followed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StormRuns {
    /// In the order followed.
    pub targets: Vec<StormReport>,
}

impl StormRuns {
    /// The report of `target`, when it was followed.
    pub fn of(&self, target: StormTarget) -> Option<&StormReport> {
        self.targets.iter().find(|r| r.target == target)
    }
}

/// What one run of `reconnect-storm` measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StormReport {
    /// What the clients followed.
    pub target: StormTarget,
    /// What the clients' reconnect policy is, in a few words.
    pub policy: String,
    /// The policy's backoff cap, seconds (`None`: uncapped).
    pub cap_s: Option<f64>,
    /// Clients started.
    pub clients: u64,
    /// Of them, those that had received an event before the cut.
    pub following: u64,
    /// How the streams were cut: `restart` (the partner process stopped,
    /// its port closed for [`RESTART_DOWN`], a new process on the same
    /// port).
    pub cut: String,
    /// How long the port was closed, ms.
    pub down_ms: u64,
    /// Stream openings the new process recorded.
    pub opens_after: u64,
    /// The most openings it recorded in any [`WINDOW`].
    pub peak_per_window: u64,
    /// Clients back (an event from the new process) within the watch.
    pub back: u64,
    /// Seconds from the cut until [`BACK_SHARE`] of the clients following
    /// before it were back; `None`: not within the watch.
    pub back_99_s: Option<f64>,
    /// Seconds from the cut until the last of them was back.
    pub back_all_s: Option<f64>,
    /// Event ids skipped, over every client.
    pub events_lost: u64,
    /// Event ids received again, over every client.
    pub events_repeated: u64,
    /// Events received, over every client.
    pub events: u64,
    /// Clients whose follower gave up (an error it does not retry), with
    /// the first such error.
    pub gave_up: u64,
    /// The first error of a client that gave up.
    pub first_give_up: Option<String>,
}

/// What one client saw: when its events arrived and the contiguity of
/// their ids. Shared between the client's task and the scenario.
#[derive(Clone, Debug, Default)]
pub struct ClientLog(Arc<Mutex<ClientState>>);

/// One client's record ([`ClientLog`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientState {
    /// The last event id received.
    pub last: Option<u64>,
    /// Events received.
    pub events: u64,
    /// Ids skipped.
    pub lost: u64,
    /// Ids received again.
    pub repeated: u64,
    /// When the last event arrived.
    pub last_at: Option<Instant>,
    /// When each event arrived, from the mark on ([`ClientLog::mark`]).
    pub since_mark: Vec<Instant>,
    /// Whether events are timed ([`ClientLog::mark`]).
    pub marked: bool,
    /// Why the follower gave up, when it did.
    pub gave_up: Option<String>,
}

impl ClientLog {
    /// From now on, the time of each event is kept (the new process's
    /// start: [`client_counts`] reads them).
    pub fn mark(&self) {
        self.with(|s| s.marked = true);
    }

    /// An event with id `id` arrived: checked against the last one.
    ///
    /// ```
    /// use load_tests::storm::ClientLog;
    /// let log = ClientLog::default();
    /// for id in [1, 2, 5, 5, 6] {
    ///     log.event(id);
    /// }
    /// let s = log.state();
    /// assert_eq!((s.events, s.lost, s.repeated, s.last), (5, 2, 1, Some(6)));
    /// ```
    pub fn event(&self, id: u64) {
        let now = Instant::now();
        self.with(|s| {
            s.events += 1;
            s.last_at = Some(now);
            if s.marked {
                s.since_mark.push(now);
            }
            match s.last {
                Some(last) if id > last => {
                    s.lost += id - last - 1;
                    s.last = Some(id);
                }
                Some(_) => s.repeated += 1,
                None => s.last = Some(id),
            }
        });
    }

    /// Whether an event arrived since the mark, or the follower gave up.
    pub fn is_settled(&self) -> bool {
        self.with(|s| !s.since_mark.is_empty() || s.gave_up.is_some())
    }

    /// Whether any event arrived, or the follower gave up.
    pub fn is_started(&self) -> bool {
        self.with(|s| s.events > 0 || s.gave_up.is_some())
    }

    /// The follower gave up for `why`.
    pub fn gave_up(&self, why: String) {
        self.with(|s| {
            s.gave_up.get_or_insert(why);
        });
    }

    /// The last id received (what a resume sends as `Last-Event-ID`).
    pub fn last(&self) -> Option<u64> {
        self.with(|s| s.last)
    }

    /// A copy of the record.
    pub fn state(&self) -> ClientState {
        self.with(|s| s.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut ClientState) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The most of `times_ms` (unix ms, any order) within any window of
/// `window_ms` (`[t, t + window_ms)`).
pub fn peak_in_window(times_ms: &[u64], window_ms: u64) -> u64 {
    let mut sorted = times_ms.to_vec();
    sorted.sort_unstable();
    let mut peak = 0;
    let mut from = 0;
    for (to, &t) in sorted.iter().enumerate() {
        while sorted[from].saturating_add(window_ms) <= t {
            from += 1;
        }
        peak = peak.max(to + 1 - from);
    }
    peak as u64
}

/// Seconds from `cut` until `share` of `following` clients were back,
/// given each client's time back (`None`: not back); `None` when fewer
/// came back.
///
/// ```
/// use std::time::Duration;
/// use load_tests::storm::back_after;
/// let back = [Some(Duration::from_millis(500)), Some(Duration::from_secs(2)), None];
/// assert_eq!(back_after(&back, 2, 0.99), Some(2.0));
/// assert_eq!(back_after(&back, 3, 0.99), None);
/// assert_eq!(back_after(&back, 3, 0.5), Some(2.0));
/// ```
pub fn back_after(back: &[Option<Duration>], following: u64, share: f64) -> Option<f64> {
    let mut times: Vec<Duration> = back.iter().flatten().copied().collect();
    times.sort_unstable();
    let needed = ((following as f64 * share).ceil() as usize).max(1);
    times.get(needed - 1).map(Duration::as_secs_f64)
}

/// The counts of every client's record, after a cut at `cut`, its logs
/// marked ([`ClientLog::mark`]) when the new process started: the part
/// of a [`StormReport`] its clients make (the caller adds the target, the
/// policy and the partner's openings). A client is back at its first
/// event after the mark; it was following when it had an event before.
pub fn client_counts(logs: &[ClientLog], cut: Instant) -> ClientCounts {
    let states: Vec<ClientState> = logs.iter().map(ClientLog::state).collect();
    let back: Vec<Option<Duration>> = states
        .iter()
        .map(|s| {
            s.since_mark
                .first()
                .map(|&t| t.saturating_duration_since(cut))
        })
        .collect();
    let following = states
        .iter()
        .filter(|s| s.events > s.since_mark.len() as u64)
        .count() as u64;
    let first_give_up = states.iter().find_map(|s| s.gave_up.clone());
    ClientCounts {
        clients: logs.len() as u64,
        following,
        back: back.iter().flatten().count() as u64,
        back_99_s: back_after(&back, following, BACK_SHARE),
        back_all_s: back_after(&back, following, 1.0),
        events: states.iter().map(|s| s.events).sum(),
        events_lost: states.iter().map(|s| s.lost).sum(),
        events_repeated: states.iter().map(|s| s.repeated).sum(),
        gave_up: states.iter().filter(|s| s.gave_up.is_some()).count() as u64,
        first_give_up,
    }
}

/// What the clients' records add up to ([`client_counts`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientCounts {
    /// See [`StormReport::clients`].
    pub clients: u64,
    /// See [`StormReport::following`].
    pub following: u64,
    /// See [`StormReport::back`].
    pub back: u64,
    /// See [`StormReport::back_99_s`].
    pub back_99_s: Option<f64>,
    /// See [`StormReport::back_all_s`].
    pub back_all_s: Option<f64>,
    /// See [`StormReport::events`].
    pub events: u64,
    /// See [`StormReport::events_lost`].
    pub events_lost: u64,
    /// See [`StormReport::events_repeated`].
    pub events_repeated: u64,
    /// See [`StormReport::gave_up`].
    pub gave_up: u64,
    /// See [`StormReport::first_give_up`].
    pub first_give_up: Option<String>,
}

/// The soft limit of open files of this process (`/proc/self/limits`),
/// where there is one.
pub fn open_files_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The file descriptors `clients` streams need in this process: a socket
/// at each end, twice through edge (the partner and edge run here too),
/// and room for the rest.
///
/// ```
/// assert_eq!(load_tests::storm::descriptors_needed(1_000), 4_256);
/// ```
pub fn descriptors_needed(clients: u64) -> u64 {
    clients.saturating_mul(4).saturating_add(256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_the_fullest_sliding_window_not_a_fixed_bucket() {
        // Fixed buckets of 100 ms would split 150..250 in two.
        let opens = [150, 160, 199, 200, 240, 600];
        assert_eq!(peak_in_window(&opens, 100), 5);
        assert_eq!(peak_in_window(&[5, 5, 5], 100), 3);
        assert_eq!(peak_in_window(&[0, 100, 200], 100), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_is_back_at_its_first_event_after_the_mark() {
        let (a, b, c) = (
            ClientLog::default(),
            ClientLog::default(),
            ClientLog::default(),
        );
        for log in [&a, &b] {
            log.event(1);
        }
        let cut = Instant::now();
        // An event read from the old connection after the cut is not "back".
        a.event(2);
        tokio::time::advance(Duration::from_secs(2)).await;
        for log in [&a, &b, &c] {
            log.mark();
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        a.event(3);
        tokio::time::advance(Duration::from_secs(1)).await;
        b.event(4);
        b.event(5);
        let counts = client_counts(&[a, b, c], cut);
        assert_eq!((counts.clients, counts.following, counts.back), (3, 2, 2));
        assert_eq!(counts.back_99_s, Some(4.0));
        assert_eq!(counts.back_all_s, Some(4.0));
        assert_eq!((counts.events, counts.events_lost), (6, 2));
    }

    #[test]
    fn the_open_files_limit_is_read_where_linux_has_one() {
        if std::path::Path::new("/proc/self/limits").exists() {
            assert!(open_files_limit().is_some_and(|n| n > 0));
        }
    }
}
