//! The counters behind `GET /stats`: [`StatsSnapshot`] is what the outside
//! sees (its docs say what each counter means and how memory is bounded);
//! `Stats` is the live, shared version.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::hangs::{Hangs, HungPath};
use crate::workers::{PathWorkers, Workers};

/// How many `x-request-id`s are remembered by default.
pub const DEFAULT_MAX_TRACKED_IDS: usize = 10_000;

/// How many requests are listed per id (the most recent ones).
pub const MAX_CALLS_PER_ID: usize = 64;

/// How many paths per id have their own attempt counter.
pub const MAX_PATHS_PER_ID: usize = 64;

/// Longer `x-request-id`s are cut to this many bytes (at a character
/// boundary).
pub const MAX_ID_LEN: usize = 128;

/// Longer paths are cut to this many bytes (at a character boundary) in the
/// stats.
pub const MAX_PATH_LEN: usize = 256;

/// A point-in-time copy of the counters: the body of `GET /stats`.
///
/// What a test or a load run wants to know about the partner's side of the
/// story: how many requests came, what they were answered, which arrived
/// with a budget, and how much work was **late**: work whose delay and body
/// finished after the budget the request arrived with had run out, so that
/// nobody was waiting for its result any more. Lateness is only judged for
/// requests that carried a (valid) budget.
///
/// When the caller goes away before the work is done (it gave up at its
/// deadline and closed the connection), the work is **abandoned**. The
/// partner plays a partner that ignores budgets and would have kept working,
/// so abandoned work counts as ending when it was planned to end (arrival +
/// delay + jitter + drip pauses), and it is late when that is past its
/// budget.
///
/// Per `x-request-id`, each request is listed with its path, attempt number
/// and the budget it arrived with. Memory is bounded:
///
/// - at most [`PartnerConfig::max_tracked_ids`](crate::PartnerConfig::max_tracked_ids)
///   ids (default [`DEFAULT_MAX_TRACKED_IDS`]); when a new id would exceed
///   it, the id seen first is forgotten (first in, first out) and
///   [`evicted_ids`](Self::evicted_ids) counts it. A forgotten id that comes
///   back starts again at attempt 1;
/// - per id, the last [`MAX_CALLS_PER_ID`] requests are listed (the
///   `attempts` count stays exact), and at most [`MAX_PATHS_PER_ID`] paths
///   have attempt counters (requests on further paths are attempt 1);
/// - ids longer than [`MAX_ID_LEN`] bytes and paths longer than
///   [`MAX_PATH_LEN`] bytes are cut.
///
/// `POST /stats/reset` (or [`PartnerHandle::reset_stats`](crate::PartnerHandle::reset_stats))
/// zeroes everything, attempt counters included (of the worker pools, only
/// what is *now* stays: see [`PathWorkers`]).
///
/// # Example
///
/// ```
/// use slow_partner::StatsSnapshot;
///
/// let json = r#"{"requests":2,"answered":{"200":1,"503":1},"with_budget":1,"late":1,
///   "abandoned":0,"evicted_ids":0,"ids":{"abc":{"attempts":2,"calls":[
///   {"path":"/pricing","attempt":1,"budget_ms":900},
///   {"path":"/pricing","attempt":2,"budget_ms":null}]}}}"#;
/// let stats: StatsSnapshot = serde_json::from_str(json).unwrap();
/// assert_eq!(stats.answered(503), 1);
/// assert_eq!(stats.ids["abc"].budgets_ms(), vec![Some(900), None]);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// Work requests received (every path but the reserved ones), including
    /// those answered `400` for a malformed query.
    pub requests: u64,
    /// Requests answered, by status (in JSON the keys are strings: `"200"`).
    pub answered: BTreeMap<u16, u64>,
    /// Requests that arrived with a valid budget header.
    pub with_budget: u64,
    /// Requests with a budget whose work finished after that budget ran out.
    pub late: u64,
    /// Requests whose caller went away before the work was done.
    pub abandoned: u64,
    /// Ids forgotten to keep the map bounded.
    pub evicted_ids: u64,
    /// Per `x-request-id`: its requests and the budgets they arrived with.
    pub ids: BTreeMap<String, IdStats>,
    /// Per path with a worker limit
    /// ([`PartnerConfig::workers`](crate::PartnerConfig::workers) or
    /// [`path_workers`](crate::PartnerConfig::path_workers)): its capacity,
    /// queue and queue waits. A configured path is listed from the start,
    /// another once it was asked for. Empty (and absent from older JSON)
    /// when no path is limited.
    #[serde(default)]
    pub paths: BTreeMap<String, PathWorkers>,
    /// Per path that hangs, hung since the last reset, or still holds
    /// calls ([`PartnerHandle::set_path_hang`](crate::PartnerHandle::set_path_hang)):
    /// the calls held now and at most at once. Empty (and absent from
    /// older JSON) when no path hung.
    #[serde(default)]
    pub hung: BTreeMap<String, HungPath>,
}

impl StatsSnapshot {
    /// How many requests were answered with `status`.
    ///
    /// ```
    /// assert_eq!(slow_partner::StatsSnapshot::default().answered(200), 0);
    /// ```
    pub fn answered(&self, status: u16) -> u64 {
        self.answered.get(&status).copied().unwrap_or(0)
    }
}

/// What the partner remembers of one `x-request-id`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IdStats {
    /// Requests with this id, over all paths (exact, never cut).
    pub attempts: u64,
    /// The last [`MAX_CALLS_PER_ID`] requests, oldest first.
    pub calls: Vec<CallRecord>,
}

impl IdStats {
    /// The budget each listed request arrived with, oldest first, in
    /// milliseconds (`None`: no valid budget header).
    ///
    /// ```
    /// assert!(slow_partner::IdStats::default().budgets_ms().is_empty());
    /// ```
    pub fn budgets_ms(&self) -> Vec<Option<u64>> {
        self.calls.iter().map(|c| c.budget_ms).collect()
    }
}

/// One request of an `x-request-id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallRecord {
    /// The request's path.
    pub path: String,
    /// Its attempt number for this id and path, from 1.
    pub attempt: u32,
    /// The budget it arrived with, in whole milliseconds; `None` when no
    /// valid budget header came.
    pub budget_ms: Option<u64>,
}

/// The live counters, shared by every connection.
#[derive(Debug)]
pub(crate) struct Stats {
    inner: Mutex<Inner>,
    max_ids: usize,
    workers: Workers,
    hangs: Hangs,
}

#[derive(Debug, Default)]
struct Inner {
    requests: u64,
    answered: BTreeMap<u16, u64>,
    with_budget: u64,
    late: u64,
    abandoned: u64,
    evicted_ids: u64,
    ids: HashMap<String, IdEntry>,
    /// Ids in the order they were first seen, for eviction.
    order: VecDeque<String>,
}

#[derive(Debug, Default)]
struct IdEntry {
    attempts: u64,
    per_path: HashMap<String, u32>,
    calls: VecDeque<CallRecord>,
}

impl Stats {
    /// Counters that remember at most `max_ids` ids (at least one), and
    /// the worker pools of every limited path.
    pub(crate) fn new(max_ids: usize, workers: Workers) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_ids: max_ids.max(1),
            workers,
            hangs: Hangs::default(),
        }
    }

    /// The worker pools.
    pub(crate) fn workers(&self) -> &Workers {
        &self.workers
    }

    /// The hanging paths.
    pub(crate) fn hangs(&self) -> &Hangs {
        &self.hangs
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The counters stay consistent even if a holder panicked: every
        // update is a handful of plain assignments.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Work requests received since start or the last reset (the
    /// snapshot's `requests`), without copying anything else.
    pub(crate) fn requests(&self) -> u64 {
        self.lock().requests
    }

    /// Records an arriving work request; returns its attempt number for
    /// (`request_id`, `path`), which is 1 when there is no id.
    pub(crate) fn arrive(
        &self,
        request_id: Option<&str>,
        path: &str,
        budget: Option<Duration>,
    ) -> u32 {
        let mut inner = self.lock();
        inner.requests += 1;
        if budget.is_some() {
            inner.with_budget += 1;
        }
        let Some(id) = request_id else {
            return 1;
        };
        let id = cut(id, MAX_ID_LEN);
        let path = cut(path, MAX_PATH_LEN);
        if !inner.ids.contains_key(id) {
            while inner.order.len() >= self.max_ids {
                if let Some(old) = inner.order.pop_front() {
                    inner.ids.remove(&old);
                    inner.evicted_ids += 1;
                }
            }
            inner.order.push_back(id.to_owned());
            inner.ids.insert(id.to_owned(), IdEntry::default());
        }
        let entry = inner
            .ids
            .get_mut(id)
            .expect("an id is in the map once inserted above");
        entry.attempts += 1;
        let tracked = entry.per_path.len();
        let attempt = match entry.per_path.get_mut(path) {
            Some(n) => {
                *n = n.saturating_add(1);
                *n
            }
            None => {
                if tracked < MAX_PATHS_PER_ID {
                    entry.per_path.insert(path.to_owned(), 1);
                }
                1
            }
        };
        if entry.calls.len() == MAX_CALLS_PER_ID {
            entry.calls.pop_front();
        }
        entry.calls.push_back(CallRecord {
            path: path.to_owned(),
            attempt,
            budget_ms: budget.map(whole_millis),
        });
        attempt
    }

    /// Records a response head sent with `status`.
    pub(crate) fn answered(&self, status: u16) {
        *self.lock().answered.entry(status).or_insert(0) += 1;
    }

    /// Records the end of one request's work.
    pub(crate) fn finished(&self, late: bool, abandoned: bool) {
        let mut inner = self.lock();
        inner.late += u64::from(late);
        inner.abandoned += u64::from(abandoned);
    }

    /// A copy of every counter.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let inner = self.lock();
        StatsSnapshot {
            requests: inner.requests,
            answered: inner.answered.clone(),
            with_budget: inner.with_budget,
            late: inner.late,
            abandoned: inner.abandoned,
            evicted_ids: inner.evicted_ids,
            ids: inner
                .ids
                .iter()
                .map(|(id, e)| {
                    let stats = IdStats {
                        attempts: e.attempts,
                        calls: e.calls.iter().cloned().collect(),
                    };
                    (id.clone(), stats)
                })
                .collect(),
            paths: self.workers.snapshot(),
            hung: self.hangs.snapshot(),
        }
    }

    /// Zeroes every counter and forgets every id.
    pub(crate) fn reset(&self) {
        *self.lock() = Inner::default();
        self.workers.reset();
        self.hangs.reset();
    }
}

/// A duration in whole milliseconds, saturating (budget-core's rule).
/// `d` in whole milliseconds (rounded down), saturating at `u64::MAX`.
pub(crate) fn whole_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `s` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn attempts_count_per_request_id_and_path() {
        let stats = Stats::new(10, Workers::unlimited());
        assert_eq!(stats.arrive(Some("a"), "/pricing", None), 1);
        assert_eq!(stats.arrive(Some("a"), "/pricing", None), 2);
        assert_eq!(stats.arrive(Some("a"), "/inventory", None), 1);
        assert_eq!(stats.arrive(Some("b"), "/pricing", None), 1);
        assert_eq!(stats.arrive(None, "/pricing", None), 1);
        assert_eq!(stats.arrive(None, "/pricing", None), 1);
        let snap = stats.snapshot();
        assert_eq!(snap.requests, 6);
        assert_eq!(snap.ids["a"].attempts, 3);
        assert_eq!(snap.ids.len(), 2);
    }

    #[test]
    fn each_attempt_lists_the_budget_it_arrived_with() {
        let stats = Stats::new(10, Workers::unlimited());
        stats.arrive(Some("a"), "/p", Some(900 * MS));
        stats.arrive(Some("a"), "/p", None);
        stats.arrive(Some("a"), "/p", Some(Duration::from_micros(1999)));
        let snap = stats.snapshot();
        assert_eq!(snap.ids["a"].budgets_ms(), vec![Some(900), None, Some(1)]);
        assert_eq!(snap.with_budget, 2);
    }

    #[test]
    fn the_id_map_is_bounded_first_in_first_out() {
        let stats = Stats::new(2, Workers::unlimited());
        stats.arrive(Some("a"), "/", None);
        stats.arrive(Some("b"), "/", None);
        stats.arrive(Some("a"), "/", None); // seen again: not moved
        stats.arrive(Some("c"), "/", None); // evicts "a"
        let snap = stats.snapshot();
        assert_eq!(snap.ids.keys().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(snap.evicted_ids, 1);
        assert_eq!(
            stats.arrive(Some("a"), "/", None),
            1,
            "a forgotten id starts again"
        );
    }

    #[test]
    fn the_calls_of_one_id_are_bounded_but_attempts_stay_exact() {
        let stats = Stats::new(2, Workers::unlimited());
        for _ in 0..MAX_CALLS_PER_ID + 10 {
            stats.arrive(Some("a"), "/", None);
        }
        let snap = stats.snapshot();
        assert_eq!(snap.ids["a"].attempts, (MAX_CALLS_PER_ID + 10) as u64);
        assert_eq!(snap.ids["a"].calls.len(), MAX_CALLS_PER_ID);
        assert_eq!(snap.ids["a"].calls[0].attempt, 11);
    }

    #[test]
    fn the_paths_of_one_id_are_bounded() {
        let stats = Stats::new(2, Workers::unlimited());
        for i in 0..MAX_PATHS_PER_ID {
            stats.arrive(Some("a"), &format!("/{i}"), None);
        }
        assert_eq!(stats.arrive(Some("a"), "/0", None), 2);
        assert_eq!(stats.arrive(Some("a"), "/new", None), 1);
        assert_eq!(stats.arrive(Some("a"), "/new", None), 1, "untracked path");
    }

    #[test]
    fn long_ids_and_paths_are_cut_at_a_character_boundary() {
        let stats = Stats::new(2, Workers::unlimited());
        let id = "é".repeat(MAX_ID_LEN);
        stats.arrive(Some(&id), &"/é".repeat(MAX_PATH_LEN), None);
        let snap = stats.snapshot();
        let (id, entry) = snap.ids.iter().next().unwrap();
        assert!(id.len() <= MAX_ID_LEN);
        assert!(entry.calls[0].path.len() <= MAX_PATH_LEN);
    }

    #[test]
    fn reset_zeroes_counters_and_attempts() {
        let stats = Stats::new(10, Workers::unlimited());
        stats.arrive(Some("a"), "/", Some(MS));
        stats.answered(200);
        stats.finished(true, true);
        stats.reset();
        assert_eq!(stats.snapshot(), StatsSnapshot::default());
        assert_eq!(stats.arrive(Some("a"), "/", None), 1);
    }

    #[test]
    fn the_snapshot_round_trips_through_json() {
        let stats = Stats::new(10, Workers::unlimited());
        stats.arrive(Some("a"), "/p", Some(5 * MS));
        stats.answered(503);
        stats.finished(true, false);
        let snap = stats.snapshot();
        let json = serde_json::to_string(&snap).unwrap();
        assert!(json.contains(r#""answered":{"503":1}"#), "{json}");
        assert_eq!(serde_json::from_str::<StatsSnapshot>(&json).unwrap(), snap);
    }
}
