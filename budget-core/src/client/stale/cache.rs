//! The stale cache: a client's last good answers (see the
//! [module docs](super)), kept and served by the HTTP client and the gRPC
//! layer.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
#[cfg(feature = "client")]
use http::Method;
use http::header::CACHE_CONTROL;
use http::{HeaderMap, StatusCode, Version};
use tokio::time::Instant;
#[cfg(feature = "client")]
use url::Url;

use super::StaleCacheConfig;
use crate::client::config::OnUnavailable;
#[cfg(feature = "client")]
use crate::client::response::BudgetResponse;
use crate::config::ConfigError;
use crate::ledger::{Entry, Ledger};
#[cfg(feature = "client")]
use crate::outbound::error::CallError;
use crate::outbound::error::CallErrorKind;
use crate::telemetry::{meter, trace};

/// [Checks](super::check) `max_stale` and `stale_cache` and builds the
/// cache when `on_unavailable` is `stale`.
pub(crate) fn build(
    on_unavailable: OnUnavailable,
    max_stale: Duration,
    cache: &StaleCacheConfig,
) -> Result<Option<Arc<StaleCache>>, ConfigError> {
    super::check(max_stale, cache)?;
    Ok((on_unavailable == OnUnavailable::Stale).then(|| {
        Arc::new(StaleCache {
            max_stale,
            limits: *cache,
            store: Mutex::new(Store::default()),
        })
    }))
}

/// A client's last good answers, by method and URL.
pub(crate) struct StaleCache {
    max_stale: Duration,
    limits: StaleCacheConfig,
    store: Mutex<Store>,
}

/// What a call is kept and looked up under: `GET http://...`, or for a
/// gRPC call its path and request message (`grpc /inventory.Stock/Get`
/// and the message's bytes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct StaleKey(Arc<[u8]>);

#[derive(Default)]
struct Store {
    entries: HashMap<StaleKey, Kept>,
    /// The keys by when they were kept, oldest first.
    order: BTreeMap<u64, StaleKey>,
    next: u64,
    bytes: u64,
}

/// One kept answer.
struct Kept {
    seq: u64,
    at: Instant,
    size: u64,
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
    /// A gRPC answer's trailers (its `grpc-status`); `None` for HTTP.
    #[cfg(feature = "grpc")]
    trailers: Option<HeaderMap>,
}

/// A kept answer served in place of a call: the answer, its trailers
/// (a gRPC answer's; the HTTP client keeps none) and its age.
pub(crate) struct Served {
    pub(crate) answer: http::Response<Bytes>,
    #[cfg(feature = "grpc")]
    pub(crate) trailers: Option<HeaderMap>,
    pub(crate) age: Duration,
}

impl StaleCache {
    /// The key of a call, or `None` for a method whose answers are not kept.
    #[cfg(feature = "client")]
    pub(crate) fn key(method: &Method, url: &Url) -> Option<StaleKey> {
        (*method == Method::GET || *method == Method::HEAD)
            .then(|| StaleKey(Arc::from(format!("{method} {url}").into_bytes())))
    }

    /// The key of a gRPC call: its path and its request message, so that
    /// only the same question gets the kept answer.
    #[cfg(feature = "grpc")]
    pub(crate) fn grpc_key(path: &str, message: &[u8]) -> StaleKey {
        let mut key = Vec::with_capacity(5 + path.len() + 1 + message.len());
        key.extend_from_slice(b"grpc ");
        key.extend_from_slice(path.as_bytes());
        key.push(b' ');
        key.extend_from_slice(message);
        StaleKey(Arc::from(key))
    }

    /// The call's answer, or a stale one in its place: keeps a good
    /// answer; for a call that ended without one (see the
    /// [module docs](super)), serves the kept answer if it is young enough,
    /// and says so in `ledger`, the metrics and the trace.
    #[cfg(feature = "client")]
    pub(crate) fn settle(
        &self,
        key: &StaleKey,
        result: Result<BudgetResponse, CallError>,
        dependency: &Arc<str>,
        ledger: Option<&Ledger>,
    ) -> Result<BudgetResponse, CallError> {
        let attempts = match &result {
            Ok(res) if res.status().is_success() => {
                self.keep(key, res.as_http(), None);
                return result;
            }
            Ok(res) if stands_in_for_status(res.status()) => res.attempts(),
            Err(e) if stands_in_for_error(e.kind()) => e.attempts(),
            _ => return result,
        };
        let Some(served) = self.serve(key, dependency, ledger) else {
            return result;
        };
        Ok(BudgetResponse::from_stale(
            served.answer,
            Arc::clone(dependency),
            attempts,
            served.age,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // No user code runs under the lock: a poisoned one is consistent.
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `res` (and a gRPC answer's `trailers`) under `key`, replacing
    /// what was there; evicts the oldest entries to stay within the
    /// bounds.
    pub(crate) fn keep(
        &self,
        key: &StaleKey,
        res: &http::Response<Bytes>,
        trailers: Option<&HeaderMap>,
    ) {
        if no_store(res.headers()) {
            self.lock().remove(key);
            return;
        }
        let header_bytes = res
            .headers()
            .iter()
            .chain(trailers.into_iter().flatten())
            .map(|(name, value)| name.as_str().len() + value.len())
            .fold(0u64, |sum, len| sum.saturating_add(len as u64));
        let size = (key.0.len() as u64)
            .saturating_add(header_bytes)
            .saturating_add(res.body().len() as u64);
        if size > self.limits.max_bytes {
            // Not kept, and the older answer is not the latest any more.
            self.lock().remove(key);
            return;
        }
        // Copied outside the lock.
        let headers = res.headers().clone();
        #[cfg(feature = "grpc")]
        let trailers = trailers.cloned();
        let body = Bytes::copy_from_slice(res.body());
        let now = Instant::now();
        let mut store = self.lock();
        store.remove(key);
        store.drop_expired(now, self.max_stale);
        while store.entries.len() >= self.limits.max_entries
            || store.bytes.saturating_add(size) > self.limits.max_bytes
        {
            if !store.pop_oldest() {
                break;
            }
        }
        let seq = store.next;
        store.next = seq.wrapping_add(1);
        store.order.insert(seq, key.clone());
        store.bytes = store.bytes.saturating_add(size);
        store.entries.insert(
            key.clone(),
            Kept {
                seq,
                at: now,
                size,
                status: res.status(),
                version: res.version(),
                headers,
                body,
                #[cfg(feature = "grpc")]
                trailers,
            },
        );
    }

    /// The answer kept under `key`, if it is at most `max_stale` old (an
    /// older one is dropped); when there is one, says that it stands in
    /// for `dependency`'s call in `ledger`, the metrics and the trace.
    pub(crate) fn serve(
        &self,
        key: &StaleKey,
        dependency: &Arc<str>,
        ledger: Option<&Ledger>,
    ) -> Option<Served> {
        let now = Instant::now();
        let served = {
            let mut store = self.lock();
            let kept = store.entries.get(key)?;
            let age = now.saturating_duration_since(kept.at);
            if age > self.max_stale {
                store.remove(key);
                return None;
            }
            let mut answer = http::Response::new(kept.body.clone());
            *answer.status_mut() = kept.status;
            *answer.version_mut() = kept.version;
            *answer.headers_mut() = kept.headers.clone();
            Served {
                answer,
                #[cfg(feature = "grpc")]
                trailers: kept.trailers.clone(),
                age,
            }
        };
        tracing::debug!(
            dependency = %dependency,
            age_ms = crate::budget::whole_millis(served.age),
            "dependency answered from its stale cache"
        );
        if let Some(ledger) = ledger {
            ledger.record(Entry::stale(&**dependency, served.age));
        }
        meter::stale_served(dependency);
        trace::stale(dependency, served.age);
        Some(served)
    }

    #[cfg(all(test, feature = "client"))]
    fn usage(&self) -> (usize, u64) {
        let store = self.lock();
        (store.entries.len(), store.bytes)
    }
}

impl Store {
    fn remove(&mut self, key: &StaleKey) {
        if let Some(kept) = self.entries.remove(key) {
            self.order.remove(&kept.seq);
            self.bytes = self.bytes.saturating_sub(kept.size);
        }
    }

    /// Drops the oldest entry; false when there is none.
    fn pop_oldest(&mut self) -> bool {
        let Some((_, key)) = self.order.pop_first() else {
            return false;
        };
        if let Some(kept) = self.entries.remove(&key) {
            self.bytes = self.bytes.saturating_sub(kept.size);
        }
        true
    }

    /// Drops the entries past `max_stale`: the oldest ones, at the front.
    fn drop_expired(&mut self, now: Instant, max_stale: Duration) {
        while let Some((_, key)) = self.order.first_key_value() {
            let expired = self
                .entries
                .get(key)
                .is_none_or(|kept| now.saturating_duration_since(kept.at) > max_stale);
            if !expired {
                break;
            }
            self.pop_oldest();
        }
    }
}

impl fmt::Debug for StaleCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // No keys: URLs may carry credentials.
        let store = self.lock();
        f.debug_struct("StaleCache")
            .field("max_stale", &self.max_stale)
            .field("limits", &self.limits)
            .field("entries", &store.entries.len())
            .field("bytes", &store.bytes)
            .finish()
    }
}

/// The statuses a stale answer stands in for: HTTP's `stale-if-error` set.
#[cfg(feature = "client")]
fn stands_in_for_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

/// The errors a stale answer stands in for: a call not made or with no
/// usable answer, not a caller's bug.
pub(crate) fn stands_in_for_error(kind: CallErrorKind) -> bool {
    match kind {
        CallErrorKind::BelowFloor
        | CallErrorKind::CircuitOpen
        | CallErrorKind::NoPermit
        | CallErrorKind::Auth
        | CallErrorKind::Unresolved
        | CallErrorKind::Timeout
        | CallErrorKind::ConnectTimeout
        | CallErrorKind::Connect
        | CallErrorKind::Reset
        | CallErrorKind::Body
        | CallErrorKind::Other => true,
        CallErrorKind::NoBudget
        | CallErrorKind::Status
        | CallErrorKind::Decode
        | CallErrorKind::Request => false,
    }
}

/// `Cache-Control: no-store` (any case, among other directives).
fn no_store(headers: &HeaderMap) -> bool {
    headers
        .get_all(CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|directive| directive.trim().eq_ignore_ascii_case("no-store"))
}

// The HTTP client's answers kept and served.
#[cfg(all(test, feature = "client"))]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn cache(max_stale: Duration, max_entries: usize, max_bytes: u64) -> Arc<StaleCache> {
        let limits = StaleCacheConfig {
            max_entries,
            max_bytes,
        };
        build(OnUnavailable::Stale, max_stale, &limits)
            .unwrap()
            .unwrap()
    }

    fn dep() -> Arc<str> {
        Arc::from("inventory")
    }

    fn key(url: &str) -> StaleKey {
        StaleCache::key(&Method::GET, &Url::parse(url).unwrap()).unwrap()
    }

    fn answer(status: u16, body: &'static str) -> Result<BudgetResponse, CallError> {
        let mut res = http::Response::new(Bytes::from_static(body.as_bytes()));
        *res.status_mut() = StatusCode::from_u16(status).unwrap();
        Ok(BudgetResponse::new(res, dep(), 1, None, false))
    }

    fn failed(kind: CallErrorKind, attempts: u32) -> Result<BudgetResponse, CallError> {
        Err(CallError::new(dep(), kind).with_attempts(attempts))
    }

    /// Settles `result` for `key` with a fresh ledger: the outcome and
    /// what the ledger says.
    fn settle(
        cache: &StaleCache,
        key: &StaleKey,
        result: Result<BudgetResponse, CallError>,
    ) -> (Result<BudgetResponse, CallError>, String) {
        let ledger = Ledger::new();
        let out = cache.settle(key, result, &dep(), Some(&ledger));
        (out, ledger.server_timing())
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_call_gets_the_last_good_answer_with_its_age_in_the_ledger() {
        let cache = cache(ms(30_000), 16, 1 << 20);
        let k = key("http://inv/stock?sku=7");
        let (first, timing) = settle(&cache, &k, answer(200, "{\"stock\":3}"));
        assert_eq!(first.unwrap().stale(), None, "a call's own answer");
        assert_eq!(timing, "", "nothing to say about a good answer");

        tokio::time::advance(ms(12_400)).await;
        let (res, timing) = settle(&cache, &k, failed(CallErrorKind::Timeout, 2));
        let res = res.unwrap();
        assert_eq!(res.stale(), Some(ms(12_400)));
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text(), "{\"stock\":3}");
        assert_eq!(res.attempts(), 2, "the attempts of the call it stands for");
        assert_eq!(res.dependency(), "inventory");
        assert!(!res.passes_up() && res.error_for_status().is_ok());
        assert_eq!(timing, "inventory;desc=\"stale 12s\"");
    }

    #[tokio::test(start_paused = true)]
    async fn every_refusal_and_transport_failure_and_5xx_gets_it_and_nothing_else_does() {
        let cache = cache(ms(30_000), 16, 1 << 20);
        let k = key("http://inv/stock");
        settle(&cache, &k, answer(200, "good")).0.unwrap();
        for kind in [
            CallErrorKind::BelowFloor,
            CallErrorKind::CircuitOpen,
            CallErrorKind::NoPermit,
            CallErrorKind::Auth,
            CallErrorKind::Unresolved,
            CallErrorKind::Timeout,
            CallErrorKind::ConnectTimeout,
            CallErrorKind::Connect,
            CallErrorKind::Reset,
            CallErrorKind::Body,
            CallErrorKind::Other,
        ] {
            let res = settle(&cache, &k, failed(kind, 0)).0;
            assert_eq!(res.unwrap().stale(), Some(Duration::ZERO), "{kind}");
        }
        for kind in [
            CallErrorKind::NoBudget,
            CallErrorKind::Request,
            CallErrorKind::Decode,
            CallErrorKind::Status,
        ] {
            let (res, timing) = settle(&cache, &k, failed(kind, 0));
            assert_eq!(res.unwrap_err().kind(), kind);
            assert_eq!(timing, "", "{kind}");
        }
        for status in [500, 502, 503, 504] {
            let res = settle(&cache, &k, answer(status, "oops")).0.unwrap();
            assert_eq!(
                (res.status().as_u16(), res.stale()),
                (200, Some(Duration::ZERO))
            );
        }
        for status in [404, 401, 429, 501, 304] {
            let res = settle(&cache, &k, answer(status, "theirs")).0.unwrap();
            assert_eq!((res.status().as_u16(), res.stale()), (status, None));
        }
        // Error answers left the good one in place.
        let res = settle(&cache, &k, failed(CallErrorKind::Reset, 1))
            .0
            .unwrap();
        assert_eq!(res.text(), "good");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_older_than_max_stale_is_never_served() {
        let cache = cache(ms(5000), 16, 1 << 20);
        let k = key("http://inv/stock");
        settle(&cache, &k, answer(200, "good")).0.unwrap();
        tokio::time::advance(ms(5000)).await;
        let res = settle(&cache, &k, failed(CallErrorKind::Connect, 3)).0;
        assert_eq!(
            res.unwrap().stale(),
            Some(ms(5000)),
            "max_stale itself is fine"
        );
        tokio::time::advance(ms(1)).await;
        let (res, timing) = settle(&cache, &k, failed(CallErrorKind::Connect, 3));
        let err = res.unwrap_err();
        assert_eq!((err.kind(), err.attempts()), (CallErrorKind::Connect, 3));
        assert_eq!(timing, "");
        assert_eq!(cache.usage().0, 0, "dropped once found too old");
    }

    #[tokio::test(start_paused = true)]
    async fn a_non_2xx_answer_is_never_kept() {
        let cache = cache(ms(30_000), 16, 1 << 20);
        let k = key("http://inv/stock");
        for status in [500, 404, 301, 429] {
            settle(&cache, &k, answer(status, "bad")).0.unwrap();
        }
        assert_eq!(cache.usage(), (0, 0));
        let err = settle(&cache, &k, failed(CallErrorKind::Timeout, 1)).0;
        assert!(err.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_key_is_the_method_and_the_whole_url() {
        let cache = cache(ms(30_000), 16, 1 << 20);
        let (a, b) = (key("http://inv/stock?sku=1"), key("http://inv/stock?sku=2"));
        settle(&cache, &a, answer(200, "one")).0.unwrap();
        settle(&cache, &b, answer(200, "two")).0.unwrap();
        let res = settle(&cache, &a, failed(CallErrorKind::Timeout, 1)).0;
        assert_eq!(res.unwrap().text(), "one");
        let res = settle(&cache, &b, failed(CallErrorKind::Timeout, 1)).0;
        assert_eq!(res.unwrap().text(), "two");
        let url = Url::parse("http://inv/stock?sku=1").unwrap();
        let head = StaleCache::key(&Method::HEAD, &url).unwrap();
        assert_ne!(head, a);
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            assert_eq!(StaleCache::key(&method, &url), None, "{method}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn past_max_entries_the_oldest_goes_first() {
        let cache = cache(ms(30_000), 2, 1 << 20);
        let keys: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|p| key(&format!("http://inv/{p}")))
            .collect();
        for k in &keys {
            settle(&cache, k, answer(200, "x")).0.unwrap();
            tokio::time::advance(ms(10)).await;
        }
        assert_eq!(cache.usage().0, 2);
        assert!(
            settle(&cache, &keys[0], failed(CallErrorKind::Timeout, 1))
                .0
                .is_err()
        );
        for k in &keys[1..] {
            assert!(
                settle(&cache, k, failed(CallErrorKind::Timeout, 1))
                    .0
                    .is_ok()
            );
        }
        // Keeping a key again makes it the newest: `b` goes next, not `c`.
        settle(&cache, &keys[1], answer(200, "y")).0.unwrap();
        settle(&cache, &keys[0], answer(200, "z")).0.unwrap();
        assert!(
            settle(&cache, &keys[2], failed(CallErrorKind::Timeout, 1))
                .0
                .is_err()
        );
        assert!(
            settle(&cache, &keys[1], failed(CallErrorKind::Timeout, 1))
                .0
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn past_max_bytes_the_oldest_goes_first_and_a_too_large_answer_is_not_kept() {
        let one = key("http://inv/1"); // "GET http://inv/1" = 16 bytes
        let two = key("http://inv/2");
        let body = "0123456789012345678901234567890123456789"; // 40 bytes: 56 an entry
        let cache = cache(ms(30_000), 100, 100);
        settle(&cache, &one, answer(200, body)).0.unwrap();
        assert_eq!(cache.usage(), (1, 56));
        settle(&cache, &two, answer(200, body)).0.unwrap();
        assert_eq!(cache.usage(), (1, 56), "both do not fit in 100 bytes");
        assert!(
            settle(&cache, &one, failed(CallErrorKind::Timeout, 1))
                .0
                .is_err()
        );
        assert!(
            settle(&cache, &two, failed(CallErrorKind::Timeout, 1))
                .0
                .is_ok()
        );

        let small = cache_with_room_for(40);
        settle(&small, &one, answer(200, "ok")).0.unwrap();
        assert_eq!(small.usage(), (1, 18));
        // A newer answer too large to keep drops the older one too.
        settle(&small, &one, answer(200, body)).0.unwrap();
        assert_eq!(small.usage(), (0, 0));
        assert!(
            settle(&small, &one, failed(CallErrorKind::Timeout, 1))
                .0
                .is_err()
        );
    }

    fn cache_with_room_for(bytes: u64) -> Arc<StaleCache> {
        cache(ms(30_000), 100, bytes)
    }

    #[tokio::test(start_paused = true)]
    async fn expired_entries_make_room_before_live_ones_are_evicted() {
        let cache = cache(ms(1000), 2, 1 << 20);
        let (a, b, c) = (
            key("http://inv/a"),
            key("http://inv/b"),
            key("http://inv/c"),
        );
        settle(&cache, &a, answer(200, "a")).0.unwrap();
        tokio::time::advance(ms(1500)).await;
        settle(&cache, &b, answer(200, "b")).0.unwrap();
        settle(&cache, &c, answer(200, "c")).0.unwrap();
        assert_eq!(cache.usage().0, 2);
        assert!(
            settle(&cache, &b, failed(CallErrorKind::Timeout, 1))
                .0
                .is_ok()
        );
        assert!(
            settle(&cache, &c, failed(CallErrorKind::Timeout, 1))
                .0
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_store_is_not_kept_and_drops_the_answer_kept_before() {
        let cache = cache(ms(30_000), 16, 1 << 20);
        let k = key("http://inv/stock");
        settle(&cache, &k, answer(200, "good")).0.unwrap();
        let mut res = http::Response::new(Bytes::from_static(b"secret"));
        res.headers_mut().insert(
            CACHE_CONTROL,
            http::HeaderValue::from_static("private, No-Store"),
        );
        let res = Ok(BudgetResponse::new(res, dep(), 1, None, false));
        settle(&cache, &k, res).0.unwrap();
        assert_eq!(cache.usage(), (0, 0));
        assert!(
            settle(&cache, &k, failed(CallErrorKind::Timeout, 1))
                .0
                .is_err()
        );
    }

    #[test]
    fn max_stale_and_the_bounds_are_checked_with_their_field_names() {
        let ok = StaleCacheConfig::default();
        let err = |on, max_stale, c: StaleCacheConfig| {
            build(on, max_stale, &c).unwrap_err().field().to_owned()
        };
        assert_eq!(err(OnUnavailable::Stale, Duration::ZERO, ok), "max_stale");
        // Checked whatever on_unavailable says.
        assert_eq!(err(OnUnavailable::Fail, Duration::ZERO, ok), "max_stale");
        let no_entries = StaleCacheConfig {
            max_entries: 0,
            ..ok
        };
        assert_eq!(
            err(OnUnavailable::Stale, ms(1), no_entries),
            "stale_cache.max_entries"
        );
        let no_bytes = StaleCacheConfig { max_bytes: 0, ..ok };
        assert_eq!(
            err(OnUnavailable::Skip, ms(1), no_bytes),
            "stale_cache.max_bytes"
        );
        assert!(build(OnUnavailable::Fail, ms(1), &ok).unwrap().is_none());
        assert!(build(OnUnavailable::Stale, ms(1), &ok).unwrap().is_some());
    }
}
