//! What `POST /ingest` remembers: the idempotency keys it applied, its
//! counters (`GET /admin/ingest`), its failing window and its batch limit
//! (`PUT /admin/ingest`), documented in docs/binaries.md.
//!
//! Memory is bounded: at most [`MAX_INGEST_KEYS`] keys are remembered;
//! past that, the key applied first is forgotten (first in, first out),
//! and a batch sent again with a forgotten key would be applied again. A
//! load run stays far below the bound (a batch per key).
//!
//! It also remembers a fingerprint (a 64-bit hash of its JSON text) of
//! each item applied, at most [`MAX_INGEST_ITEMS`], first in, first out:
//! an item applied whose JSON equals one applied before, under any key,
//! counts in `items_applied_again`. That is how a load test whose items
//! are all different (each carries its own number) tells an item applied
//! twice (a batch whose answer was lost, sent again under a new key) from
//! an item applied once, without trusting the client's word.
//!
//! `POST /stats/reset` zeroes the counters but keeps the keys, the failing
//! window and the limit: forgetting what was applied would let a retried
//! batch be applied twice.

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::knobs::{MAX_BODY_BYTES, QueryError, Reason, parse_duration, parse_status};

/// The most idempotency keys remembered.
pub(crate) const MAX_INGEST_KEYS: usize = 1_000_000;

/// The most item fingerprints remembered.
pub(crate) const MAX_INGEST_ITEMS: usize = 1_000_000;

/// The default `max_batch_bytes`: 1 MiB.
pub(crate) const DEFAULT_MAX_BATCH_BYTES: usize = 1 << 20;

/// How a failing `/ingest` fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailMode {
    /// Answers the failure's status (a problem, maybe `Retry-After`).
    Status,
    /// Holds the request without an answer until the window ends.
    Hang,
    /// Closes the connection without an answer.
    Reset,
    /// Handles the request as when healthy (a new key's batch is applied,
    /// a known key's is a duplicate), then closes the connection without
    /// the answer: the server applied it, the client never hears so.
    AppliedReset,
}

/// A failing window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) until: Instant,
    pub(crate) status: StatusCode,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) mode: FailMode,
}

/// The body of `GET /admin/ingest`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct IngestSnapshot {
    pub(crate) batches_applied: u64,
    pub(crate) items_applied: u64,
    pub(crate) items_applied_again: u64,
    pub(crate) duplicates: u64,
    pub(crate) requests: u64,
    pub(crate) requests_while_failing: u64,
    pub(crate) failing: bool,
    pub(crate) keys: u64,
    pub(crate) max_batch_bytes: usize,
}

#[derive(Debug)]
struct Inner {
    counts: IngestSnapshot,
    keys: HashSet<Arc<str>>,
    order: VecDeque<Arc<str>>,
    items: HashSet<u64>,
    item_order: VecDeque<u64>,
    failure: Option<Failure>,
    max_batch_bytes: usize,
}

/// The ingest sink's shared state.
#[derive(Debug)]
pub(crate) struct Ingest {
    inner: Mutex<Inner>,
    /// Fingerprints the items applied.
    hasher: RandomState,
    /// Wakes the requests held by a `hang` window when it changes.
    changed: Notify,
}

impl Default for Ingest {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                counts: IngestSnapshot::default(),
                keys: HashSet::new(),
                order: VecDeque::new(),
                items: HashSet::new(),
                item_order: VecDeque::new(),
                failure: None,
                max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            }),
            hasher: RandomState::new(),
            changed: Notify::new(),
        }
    }
}

impl Ingest {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Plain assignments only: consistent even if a holder panicked.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts an arriving request; returns the failing window in force
    /// (counted as a request while failing) and the batch limit.
    pub(crate) fn arrive(&self) -> (Option<Failure>, usize) {
        let mut inner = self.lock();
        let failure = failure_now(&mut inner);
        inner.counts.requests += 1;
        if failure.is_some() {
            inner.counts.requests_while_failing += 1;
        }
        (failure, inner.max_batch_bytes)
    }

    /// The failing window in force now.
    pub(crate) fn failure(&self) -> Option<Failure> {
        failure_now(&mut self.lock())
    }

    /// Resolves when the failing window is next changed by the admin
    /// (a change after this call, even before the first poll).
    pub(crate) fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Applies a batch of `items` under `key`; `false` when the key was
    /// applied already (nothing is applied again).
    pub(crate) fn apply(&self, key: &str, items: &[Value]) -> bool {
        let prints: Vec<u64> = items
            .iter()
            .map(|item| self.hasher.hash_one(item.to_string()))
            .collect();
        let mut inner = self.lock();
        if inner.keys.contains(key) {
            inner.counts.duplicates += 1;
            return false;
        }
        while inner.order.len() >= MAX_INGEST_KEYS {
            if let Some(old) = inner.order.pop_front() {
                inner.keys.remove(&old);
            }
        }
        let key: Arc<str> = Arc::from(key);
        inner.order.push_back(Arc::clone(&key));
        inner.keys.insert(key);
        inner.counts.batches_applied += 1;
        for print in prints {
            remember_item(&mut inner, print);
        }
        true
    }

    /// A copy of the counters.
    pub(crate) fn snapshot(&self) -> IngestSnapshot {
        let mut inner = self.lock();
        let failing = failure_now(&mut inner).is_some();
        IngestSnapshot {
            failing,
            keys: inner.keys.len() as u64,
            max_batch_bytes: inner.max_batch_bytes,
            ..inner.counts.clone()
        }
    }

    /// Zeroes the counters; keeps the keys, the window and the limit.
    pub(crate) fn reset(&self) {
        self.lock().counts = IngestSnapshot::default();
    }

    /// Applies a `PUT /admin/ingest` body (see [`AdminUpdate::parse`]).
    pub(crate) fn update(&self, update: AdminUpdate) {
        let mut inner = self.lock();
        if let Some(failure) = update.failure {
            inner.failure = failure;
        }
        if let Some(max) = update.max_batch_bytes {
            inner.max_batch_bytes = max;
        }
        drop(inner);
        self.changed.notify_waiters();
    }
}

/// Counts one item applied, and again when its fingerprint was seen.
fn remember_item(inner: &mut Inner, print: u64) {
    inner.counts.items_applied = inner.counts.items_applied.saturating_add(1);
    if !inner.items.insert(print) {
        inner.counts.items_applied_again = inner.counts.items_applied_again.saturating_add(1);
        return;
    }
    inner.item_order.push_back(print);
    while inner.item_order.len() > MAX_INGEST_ITEMS {
        if let Some(old) = inner.item_order.pop_front() {
            inner.items.remove(&old);
        }
    }
}

/// The window in force now; an ended one is forgotten.
fn failure_now(inner: &mut Inner) -> Option<Failure> {
    if inner.failure.is_some_and(|f| f.until <= Instant::now()) {
        inner.failure = None;
    }
    inner.failure
}

/// What a `PUT /admin/ingest` body asks for.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct AdminUpdate {
    /// `Some(None)`: recover now; `Some(Some(_))`: fail from now on;
    /// `None`: the window unchanged (`fail_for` absent).
    failure: Option<Option<Failure>>,
    max_batch_bytes: Option<usize>,
}

const ADMIN_FIELDS: [&str; 5] = [
    "fail_for",
    "status",
    "retry_after",
    "mode",
    "max_batch_bytes",
];

impl AdminUpdate {
    /// Reads `{"fail_for":"20s","status":503,"retry_after":"2s","mode":"status"}`
    /// (`status` 400..=599, default 503; `mode` `status`, `hang`,
    /// `reset` or `applied-reset`, default `status`), `{"fail_for":null}`, and optionally
    /// `"max_batch_bytes"` (1 to 64 MiB).
    pub(crate) fn parse(body: &[u8]) -> Result<Self, QueryError> {
        let bad = |why: String| QueryError::new("body", "", Reason::Body(why));
        let value: Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
        let object = value
            .as_object()
            .ok_or_else(|| bad("not a json object".to_owned()))?;
        if let Some(key) = object.keys().find(|k| !ADMIN_FIELDS.contains(&k.as_str())) {
            return Err(bad(format!("unknown field `{key}`")));
        }
        let field = |name: &'static str| object.get(name).filter(|v| !v.is_null());
        let err = |name: &'static str, reason| {
            let given = object.get(name).map(Value::to_string).unwrap_or_default();
            QueryError::new(name, &given, reason)
        };
        let duration = |name| {
            field(name)
                .map(|v| {
                    v.as_str()
                        .ok_or(Reason::NotADuration("not a string".to_owned()))
                })
                .transpose()
                .and_then(|s| s.map(parse_duration).transpose())
                .map_err(|r| err(name, r))
        };
        let status = match field("status") {
            None => StatusCode::SERVICE_UNAVAILABLE,
            Some(v) => v
                .as_u64()
                .ok_or(Reason::NotAStatus)
                .and_then(|n| parse_status(&n.to_string()))
                .and_then(|s| match s.as_u16() {
                    400..=599 => Ok(s),
                    _ => Err(Reason::OutOfRange("a status in 400..=599")),
                })
                .map_err(|r| err("status", r))?,
        };
        let mode = match field("mode").map(|v| v.as_str()) {
            None | Some(Some("status")) => FailMode::Status,
            Some(Some("hang")) => FailMode::Hang,
            Some(Some("reset")) => FailMode::Reset,
            Some(Some("applied-reset")) => FailMode::AppliedReset,
            Some(_) => {
                return Err(err(
                    "mode",
                    Reason::OutOfRange("status, hang, reset or applied-reset"),
                ));
            }
        };
        let retry_after = duration("retry_after")?;
        let failure = match object.get("fail_for") {
            None => None,
            Some(_) => Some(duration("fail_for")?.map(|fail_for| Failure {
                until: Instant::now() + fail_for,
                status,
                retry_after,
                mode,
            })),
        };
        let max_batch_bytes = field("max_batch_bytes")
            .map(|v| match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) if (1..=MAX_BODY_BYTES).contains(&n) => Ok(n),
                _ => Err(err(
                    "max_batch_bytes",
                    Reason::OutOfRange("1..=67108864 bytes"),
                )),
            })
            .transpose()?;
        Ok(Self {
            failure,
            max_batch_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_key_is_applied_once() {
        let ingest = Ingest::default();
        let (three, two) = (
            [json!(1), json!({"a": 2}), json!("x")],
            [json!(4), json!(5)],
        );
        assert!(ingest.apply("k1", &three));
        assert!(!ingest.apply("k1", &three));
        assert!(ingest.apply("k2", &two));
        let snap = ingest.snapshot();
        assert_eq!(
            (
                snap.batches_applied,
                snap.items_applied,
                snap.duplicates,
                snap.keys
            ),
            (2, 5, 1, 2)
        );
        assert_eq!(snap.items_applied_again, 0);
        ingest.reset();
        assert!(!ingest.apply("k1", &three), "a reset keeps the keys");
    }

    #[test]
    fn an_item_applied_again_under_a_new_key_is_counted() {
        let ingest = Ingest::default();
        assert!(ingest.apply("k1", &[json!({"seq": 1}), json!({"seq": 2})]));
        assert!(ingest.apply("k2", &[json!({"seq": 2}), json!({"seq": 3})]));
        let snap = ingest.snapshot();
        assert_eq!(
            (
                snap.items_applied,
                snap.items_applied_again,
                snap.duplicates
            ),
            (4, 1, 0)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_window_ends_by_itself_or_on_command() {
        let ingest = Ingest::default();
        let update =
            AdminUpdate::parse(br#"{"fail_for":"20s","retry_after":"2s","mode":"hang"}"#).unwrap();
        ingest.update(update);
        let (failure, max) = ingest.arrive();
        let failure = failure.unwrap();
        assert_eq!(failure.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(failure.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(
            (failure.mode, max),
            (FailMode::Hang, DEFAULT_MAX_BATCH_BYTES)
        );
        tokio::time::advance(Duration::from_secs(20)).await;
        assert!(ingest.failure().is_none());
        ingest.update(AdminUpdate::parse(br#"{"fail_for":"1h","status":500}"#).unwrap());
        assert!(ingest.snapshot().failing);
        ingest.update(AdminUpdate::parse(br#"{"max_batch_bytes":10}"#).unwrap());
        assert!(
            ingest.snapshot().failing,
            "a body without fail_for keeps the window"
        );
        ingest.update(AdminUpdate::parse(br#"{"fail_for":null}"#).unwrap());
        let snap = ingest.snapshot();
        assert!(!snap.failing);
        assert_eq!((snap.requests, snap.requests_while_failing), (1, 1));
        assert_eq!(snap.max_batch_bytes, 10);
    }

    #[test]
    fn a_bad_admin_body_names_what_is_wrong() {
        for (body, parameter) in [
            (&b"[]"[..], "body"),
            (br#"{"fail":"1s"}"#, "body"),
            (br#"{"fail_for":"soon"}"#, "fail_for"),
            (br#"{"fail_for":"1s","status":200}"#, "status"),
            (br#"{"fail_for":"1s","mode":"explode"}"#, "mode"),
            (br#"{"fail_for":"1s","mode":"applied_reset"}"#, "mode"),
            (br#"{"fail_for":"1s","retry_after":2}"#, "retry_after"),
            (br#"{"max_batch_bytes":0}"#, "max_batch_bytes"),
        ] {
            let err = AdminUpdate::parse(body).unwrap_err();
            assert_eq!(
                err.parameter(),
                parameter,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
