//! The ledger: where a request's budget went.
//!
//! Every budget-aware service keeps one ledger per request: the budget at
//! ingress, each downstream attempt with its duration and outcome, each
//! backoff wait, each skipped call with its reason, and any local step a
//! handler cares to record. It is rendered as a W3C `Server-Timing` header
//! value on the response (the "budget table"), and parsed back by the demos
//! and load tests.
//!
//! Recording is cheap: a ledger is a shared, append-only vector behind a
//! short-held mutex; clones share the same entries.
//!
//! # Bounded
//!
//! A ledger holds at most [`LedgerLimits::max_entries`] entries (default
//! 64) and renders at most [`LedgerLimits::max_bytes`] of `Server-Timing`
//! (default 4 KiB, below nginx's default 4-8 KiB proxy buffers and HTTP/2's
//! common 16 KiB header lists), however many calls a handler makes or a
//! downstream hop reports. Over either, it keeps the first entries (the
//! ingress budget among them) and the latest ones (how the request ended),
//! and says how many it left out between them as one more metric,
//! `ledger;desc="+812 more"` ([`DROPPED_METRIC`]).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::ledger::{Entry, Ledger};
//!
//! let ledger = Ledger::new();
//! ledger.record(Entry::ingress(Duration::from_millis(2000)));
//! ledger.record(Entry::attempt("inventory", 1, Duration::from_millis(300), "200"));
//! ledger.record(Entry::attempt("pricing", 1, Duration::from_millis(250), "503"));
//! ledger.record(Entry::wait("pricing", Duration::from_millis(200)));
//! ledger.record(Entry::attempt("pricing", 2, Duration::from_millis(400), "200"));
//! ledger.record(Entry::skip("recommendations", "skipped: 850ms < floor 1000ms"));
//!
//! assert_eq!(
//!     ledger.server_timing(),
//!     "budget;dur=2000;desc=\"ingress\", inventory;dur=300, \
//!      pricing;dur=250;desc=\"503\", pricing-wait;dur=200, pricing;dur=400, \
//!      recommendations;desc=\"skipped: 850ms < floor 1000ms\""
//! );
//! ```

mod entry;
#[cfg(feature = "server")]
mod header_cache;
mod millis;
mod parse;

#[cfg(outbound)]
pub(crate) use entry::is_tchar;
pub use entry::{Entry, stale_note};
#[cfg(feature = "server")]
use millis::ingress_header_value;
pub use parse::{Metric, parse_server_timing, parse_server_timing_limited};

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

// The names below are the ledger's wire format (docs/contract.md §4): a
// reader of a `Server-Timing` header matches on them, so they stay public.

/// The `Server-Timing` metric name of the ingress entry (wire format,
/// docs/contract.md §4).
pub const INGRESS_METRIC: &str = "budget";
/// The `desc` of the ingress entry (wire format, docs/contract.md §4).
pub const INGRESS_DESC: &str = "ingress";
/// The suffix added to a dependency's name for its backoff waits
/// (`pricing-wait;dur=200`; wire format, docs/contract.md §4).
pub const WAIT_SUFFIX: &str = "-wait";
/// The metric of a request's wait for a slot at the server's
/// `max_in_flight`: the ingress metric's name with the `-queue` suffix a
/// client's permit wait has (`pricing-queue`).
///
/// ```
/// # use std::time::Duration;
/// use budget_core::ledger::{Entry, IN_FLIGHT_QUEUE_METRIC};
/// let e = Entry::local(IN_FLIGHT_QUEUE_METRIC, Duration::from_millis(34), None);
/// assert_eq!(e.to_string(), "budget-queue;dur=34");
/// ```
pub const IN_FLIGHT_QUEUE_METRIC: &str = "budget-queue";
/// The metric that stands for the entries a bounded ledger left out
/// (`ledger;desc="+812 more"`).
pub const DROPPED_METRIC: &str = "ledger";

/// The default [`LedgerLimits::max_entries`]: 64.
pub const DEFAULT_MAX_ENTRIES: usize = 64;
/// The default [`LedgerLimits::max_bytes`]: 4 KiB.
pub const DEFAULT_MAX_BYTES: usize = 4096;

/// The most room the `ledger;desc="+N more"` metric takes, with its
/// separator: `, ledger;desc="+18446744073709551615 more"`.
const DROPPED_ROOM: usize = 46;

/// How much a [`Ledger`] keeps and renders (see the [module docs](self)).
///
/// ```
/// use budget_core::ledger::LedgerLimits;
/// let limits: LedgerLimits = serde_json::from_str(r#"{"max_bytes": 2048}"#).unwrap();
/// assert_eq!((limits.max_entries, limits.max_bytes), (64, 2048));
/// assert_eq!(LedgerLimits { max_entries: 1, ..limits }.validate().unwrap_err().field(), "max_entries");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LedgerLimits {
    /// Entries kept: the first half and the latest half of them; at least
    /// 2. Default 64.
    pub max_entries: usize,
    /// Bytes of rendered `Server-Timing` at most, the `+N more` metric
    /// included; at least 256. Default 4096.
    pub max_bytes: usize,
}

impl Default for LedgerLimits {
    fn default() -> Self {
        Self {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl LedgerLimits {
    /// Checks both fields.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`](crate::config::ConfigError) naming `max_entries`
    /// (below 2) or `max_bytes` (below 256).
    ///
    /// ```
    /// use budget_core::ledger::LedgerLimits;
    /// assert!(LedgerLimits::default().validate().is_ok());
    /// let err = LedgerLimits { max_bytes: 10, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid config: `max_bytes` must be at least 256");
    /// ```
    pub fn validate(&self) -> Result<(), crate::config::ConfigError> {
        if self.max_entries < 2 {
            return Err(crate::config::ConfigError::new(
                "max_entries",
                "must be at least 2",
            ));
        }
        if self.max_bytes < 256 {
            return Err(crate::config::ConfigError::new(
                "max_bytes",
                "must be at least 256",
            ));
        }
        Ok(())
    }
}

/// A request's append-only record of how its budget was spent.
///
/// Clones share the same entries, so the server layer, the handler and the
/// client can all write to one ledger.
///
/// A ledger that is never cloned and holds at most the ingress budget (a
/// request whose handler recorded nothing, most requests) keeps it inline
/// and allocates nothing; the first clone, any record, or a first entry of
/// another kind puts the entries behind a shared lock.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::ledger::{Entry, Ledger};
///
/// let ledger = Ledger::new();
/// let shared = ledger.clone();
/// shared.record(Entry::wait("pricing", Duration::from_millis(5)));
/// assert_eq!(ledger.entries().len(), 1);
/// ```
#[derive(Default)]
pub struct Ledger {
    /// The entries once shared: every clone, every record and every first
    /// entry other than the ingress budget goes here.
    shared: OnceLock<Arc<Mutex<Entries>>>,
    /// The limits until then (not read once `shared` is set).
    limits: LedgerLimits,
    /// The ingress budget held inline until then: the one entry of most
    /// server ledgers, kept in 16 bytes rather than an [`Entry`], so the
    /// request context the layer moves stays small (BENCHMARKS.md, "The
    /// server layer's cost in instructions").
    ingress: Option<Duration>,
}

impl Clone for Ledger {
    fn clone(&self) -> Self {
        Self {
            shared: OnceLock::from(Arc::clone(self.share())),
            limits: LedgerLimits::default(),
            ingress: None,
        }
    }
}

/// A ledger's entries, read: behind the lock once shared, made from the
/// inline ingress budget before.
enum Read<'a> {
    Shared(MutexGuard<'a, Entries>),
    Inline(Entries),
}

impl std::ops::Deref for Read<'_> {
    type Target = Entries;

    fn deref(&self) -> &Entries {
        match self {
            Read::Shared(guard) => guard,
            Read::Inline(entries) => entries,
        }
    }
}

/// What a ledger holds: the first entries, the latest ones, and how many
/// fell out between them.
#[derive(Clone, Debug, Default)]
struct Entries {
    limits: LedgerLimits,
    /// The first entry (the ingress budget, on a server).
    first: Option<Entry>,
    /// The next entries, up to `max_entries - max_entries / 2` with `first`.
    head: Vec<Entry>,
    /// The latest `max_entries / 2` after the head.
    tail: VecDeque<Entry>,
    /// Entries recorded after the head and pushed out of the tail.
    dropped: usize,
}

impl Entries {
    fn push(&mut self, entry: Entry) {
        if self.first.is_none() {
            self.first = Some(entry);
            return;
        }
        let head_room = self.limits.max_entries - self.limits.max_entries / 2;
        if 1 + self.head.len() < head_room {
            self.head.push(entry);
            return;
        }
        if self.tail.len() == self.limits.max_entries / 2 {
            self.tail.pop_front();
            self.dropped = self.dropped.saturating_add(1);
        }
        self.tail.push_back(entry);
    }

    fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.first
            .iter()
            .chain(self.head.iter())
            .chain(self.tail.iter())
    }

    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.head.len() + self.tail.len()
    }
}

impl Ledger {
    /// An empty ledger with the default [`LedgerLimits`].
    ///
    /// ```
    /// # use budget_core::ledger::Ledger;
    /// assert!(Ledger::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty ledger with `limits` (assumed valid: see
    /// [`LedgerLimits::validate`]; a `max_entries` below 2 keeps 2).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::ledger::{Entry, Ledger, LedgerLimits};
    ///
    /// let l = Ledger::with_limits(LedgerLimits { max_entries: 4, ..Default::default() });
    /// l.record(Entry::ingress(Duration::from_secs(2)));
    /// for i in 1..=10 {
    ///     l.record(Entry::attempt("pricing", i, Duration::from_millis(u64::from(i)), "503"));
    /// }
    /// assert_eq!(
    ///     l.server_timing(),
    ///     "budget;dur=2000;desc=\"ingress\", pricing;dur=1;desc=\"503\", \
    ///      ledger;desc=\"+7 more\", pricing;dur=9;desc=\"503\", pricing;dur=10;desc=\"503\""
    /// );
    /// ```
    pub fn with_limits(limits: LedgerLimits) -> Self {
        Self::from_first(limits, None)
    }

    /// [`with_limits`](Self::with_limits) holding `first` already, without
    /// taking the lock to record it: how the server layer starts every
    /// request's ledger.
    #[cfg(feature = "server")]
    pub(crate) fn starting_with(limits: LedgerLimits, first: Entry) -> Self {
        Self::from_first(limits, Some(first))
    }

    /// [`starting_with`](Self::starting_with) an ingress entry of
    /// `budget`, without making the [`Entry`] first: how the server layer
    /// starts every request it passes on.
    #[inline]
    pub(crate) fn for_ingress(limits: LedgerLimits, budget: Duration) -> Self {
        Self {
            shared: OnceLock::new(),
            limits: Self::kept(limits),
            ingress: Some(budget),
        }
    }

    /// `limits` as a ledger keeps them: at least two entries and room for
    /// the `+N more` metric.
    #[inline]
    fn kept(limits: LedgerLimits) -> LedgerLimits {
        LedgerLimits {
            max_entries: limits.max_entries.max(2),
            max_bytes: limits.max_bytes.max(DROPPED_ROOM),
        }
    }

    fn from_first(limits: LedgerLimits, first: Option<Entry>) -> Self {
        let limits = Self::kept(limits);
        match first {
            None => Self {
                shared: OnceLock::new(),
                limits,
                ingress: None,
            },
            Some(Entry::Ingress { budget }) => Self::for_ingress(limits, budget),
            Some(first) => Self {
                shared: OnceLock::from(Arc::new(Mutex::new(Entries {
                    limits,
                    first: Some(first),
                    ..Entries::default()
                }))),
                limits,
                ingress: None,
            },
        }
    }

    /// The limits this ledger keeps to.
    ///
    /// ```
    /// # use budget_core::ledger::{Ledger, LedgerLimits};
    /// assert_eq!(Ledger::new().limits(), LedgerLimits::default());
    /// ```
    pub fn limits(&self) -> LedgerLimits {
        self.read().limits
    }

    /// Appends an entry (past [`LedgerLimits::max_entries`], the oldest of
    /// the latest entries makes room and is counted as left out).
    ///
    /// ```
    /// # use budget_core::ledger::{Entry, Ledger};
    /// let l = Ledger::new();
    /// l.record(Entry::skip("x", "skipped: circuit open"));
    /// assert!(!l.is_empty());
    /// ```
    pub fn record(&self, entry: Entry) {
        self.lock_shared().push(entry);
    }

    /// Records that `count` entries were left out elsewhere (say, the
    /// metrics of a downstream hop's header beyond what was read): they
    /// count in the `+N more` metric.
    ///
    /// ```
    /// # use budget_core::ledger::{Entry, Ledger};
    /// let l = Ledger::new();
    /// l.record(Entry::skip("x", "skipped"));
    /// l.record_dropped(3);
    /// assert_eq!(l.dropped(), 3);
    /// assert!(l.server_timing().ends_with("ledger;desc=\"+3 more\""));
    /// ```
    pub fn record_dropped(&self, count: usize) {
        let mut entries = self.lock_shared();
        entries.dropped = entries.dropped.saturating_add(count);
    }

    /// How many entries were left out (recorded past the limit, or
    /// [`record_dropped`](Self::record_dropped)).
    ///
    /// ```
    /// # use budget_core::ledger::Ledger;
    /// assert_eq!(Ledger::new().dropped(), 0);
    /// ```
    pub fn dropped(&self) -> usize {
        self.read().dropped
    }

    /// A copy of the entries kept, in the order they were recorded (the
    /// first ones, then the latest ones).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::{Entry, Ledger};
    /// let l = Ledger::new();
    /// l.record(Entry::ingress(Duration::from_secs(1)));
    /// assert_eq!(l.entries(), vec![Entry::ingress(Duration::from_secs(1))]);
    /// ```
    pub fn entries(&self) -> Vec<Entry> {
        self.read().iter().cloned().collect()
    }

    /// True when nothing has been recorded.
    ///
    /// ```
    /// # use budget_core::ledger::Ledger;
    /// assert!(Ledger::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        let entries = self.read();
        entries.len() == 0 && entries.dropped == 0
    }

    /// The ledger as a `Server-Timing` header value: metrics joined by `, `,
    /// at most [`LedgerLimits::max_bytes`] long. When entries were left out
    /// (or do not fit), a `ledger;desc="+N more"` metric stands where they
    /// were: after the first entries that fit, before the latest ones that
    /// fit.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::{Entry, Ledger};
    /// let l = Ledger::new();
    /// l.record(Entry::ingress(Duration::from_millis(1500)));
    /// l.record(Entry::attempt("inventory", 1, Duration::from_millis(12), "200"));
    /// assert_eq!(l.server_timing(), "budget;dur=1500;desc=\"ingress\", inventory;dur=12");
    /// ```
    pub fn server_timing(&self) -> String {
        let entries = self.read();
        let max = entries.limits.max_bytes;
        let mut out = String::with_capacity((entries.len() * 40).min(max));
        for (i, e) in entries.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            e.render(&mut out);
            if out.len() > max {
                break;
            }
        }
        if entries.dropped == 0 && out.len() <= max {
            return out;
        }
        bounded(&entries)
    }

    /// [`server_timing`](Self::server_timing) as a header value, `None`
    /// when empty. A ledger that holds only the ingress budget (most
    /// responses) is rendered on the stack and copied once.
    #[cfg(feature = "server")]
    #[inline]
    pub(crate) fn header_value(&self) -> Option<http::HeaderValue> {
        if self.shared.get().is_none() {
            return self.ingress.and_then(ingress_header_value);
        }
        self.shared_header_value()
    }

    /// [`header_value`](Self::header_value) of a ledger whose entries are
    /// shared.
    #[cfg(feature = "server")]
    #[inline(never)]
    fn shared_header_value(&self) -> Option<http::HeaderValue> {
        let entries = self.read();
        if let (Some(Entry::Ingress { budget }), true, true, 0) = (
            &entries.first,
            entries.head.is_empty(),
            entries.tail.is_empty(),
            entries.dropped,
        ) {
            return ingress_header_value(*budget);
        }
        if entries.len() == 0 && entries.dropped == 0 {
            return None;
        }
        drop(entries);
        http::HeaderValue::try_from(self.server_timing()).ok()
    }

    /// The shared entries, made from the inline ones on first use.
    fn share(&self) -> &Arc<Mutex<Entries>> {
        self.shared
            .get_or_init(|| Arc::new(Mutex::new(self.inline())))
    }

    /// The shared entries, locked for a write.
    fn lock_shared(&self) -> MutexGuard<'_, Entries> {
        lock(self.share())
    }

    /// The entries, for a read.
    fn read(&self) -> Read<'_> {
        match self.shared.get() {
            Some(shared) => Read::Shared(lock(shared)),
            None => Read::Inline(self.inline()),
        }
    }

    /// The entries held inline: the ingress budget, if any.
    fn inline(&self) -> Entries {
        Entries {
            limits: self.limits,
            first: self.ingress.map(Entry::ingress),
            ..Entries::default()
        }
    }
}

fn lock(entries: &Mutex<Entries>) -> MutexGuard<'_, Entries> {
    // A panic while holding the lock cannot leave a Vec half-pushed in a way
    // that matters here: keep recording.
    entries.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The slow path of [`Ledger::server_timing`]: the first entries that fit,
/// the `+N more` metric, the latest entries that fit, in at most
/// `max_bytes`. Entries are taken from both ends in turn, and an end stops
/// at its first entry that does not fit, so that what is left out is one
/// run in the middle and neither the start nor the end of the request is
/// lost to one long entry.
fn bounded(entries: &Entries) -> String {
    let all: Vec<&Entry> = entries.iter().collect();
    let room = entries.limits.max_bytes.saturating_sub(DROPPED_ROOM);
    let (mut front, mut back) = (0, all.len());
    let (mut head, mut tail) = (Vec::new(), Vec::new());
    let (mut front_open, mut back_open) = (true, true);
    let mut used = 0;
    let mut from_front = true;
    while front < back && (front_open || back_open) {
        if !front_open {
            from_front = false;
        } else if !back_open {
            from_front = true;
        }
        let entry = if from_front {
            all[front]
        } else {
            all[back - 1]
        };
        let mut text = String::new();
        entry.render(&mut text);
        let cost = text.len() + 2;
        if used + cost > room {
            if from_front {
                front_open = false;
            } else {
                back_open = false;
            }
        } else {
            used += cost;
            if from_front {
                head.push(text);
                front += 1;
            } else {
                tail.push(text);
                back -= 1;
            }
        }
        from_front = !from_front;
    }
    let left_out = entries.dropped.saturating_add(back - front);
    let mut parts = head;
    if left_out > 0 {
        parts.push(format!("{DROPPED_METRIC};desc=\"+{left_out} more\""));
    }
    parts.extend(tail.into_iter().rev());
    parts.join(", ")
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.read().iter()).finish()
    }
}

impl Serialize for Ledger {
    /// The entries kept, as a sequence.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let entries = self.read();
        s.collect_seq(entries.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::millis::{INGRESS_HEAD, INGRESS_TAIL, MillisText};
    use super::*;

    #[test]
    fn contract_example_round_trips_through_the_parser() {
        let l = Ledger::new();
        l.record(Entry::ingress(Duration::from_millis(2000)));
        l.record(Entry::attempt(
            "pricing",
            1,
            Duration::from_millis(250),
            "503",
        ));
        l.record(Entry::wait("pricing", Duration::from_millis(200)));
        l.record(Entry::skip(
            "recommendations",
            "skipped: 850ms < floor 1000ms",
        ));
        let parsed = parse_server_timing(&l.server_timing());
        assert_eq!(parsed.len(), 4);
        assert_eq!(parsed[0].name, "budget");
        assert_eq!(parsed[0].dur, Some(2000.0));
        assert_eq!(parsed[1].desc.as_deref(), Some("503"));
        assert_eq!(parsed[2].name, "pricing-wait");
        assert_eq!(parsed[3].dur, None);
    }

    #[test]
    fn names_and_descriptions_are_escaped_into_valid_header_text() {
        let e = Entry::local(
            "a b/c",
            Duration::from_micros(250),
            Some("say \"hi\" \\ é".into()),
        );
        let s = e.to_string();
        assert_eq!(s, "a_b_c;dur=0.2;desc=\"say \\\"hi\\\" \\\\ ?\"");
        assert!(http::HeaderValue::from_str(&s).is_ok());
        let back = parse_server_timing(&s);
        assert_eq!(back[0].desc.as_deref(), Some("say \"hi\" \\ ?"));
    }

    #[test]
    fn serde_round_trip_keeps_every_field() {
        let l = Ledger::new();
        l.record(Entry::attempt(
            "inventory",
            1,
            Duration::from_millis(3),
            "timeout",
        ));
        let json = serde_json::to_string(&l).unwrap();
        let back: Vec<Entry> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, l.entries());
        assert!(json.contains("\"kind\":\"attempt\""));
    }

    fn ingress_and(n: u32, limits: LedgerLimits) -> Ledger {
        let l = Ledger::with_limits(limits);
        l.record(Entry::ingress(Duration::from_millis(2000)));
        for i in 1..=n {
            l.record(Entry::attempt(
                "pricing",
                i,
                Duration::from_millis(u64::from(i)),
                "503",
            ));
        }
        l
    }

    #[test]
    fn past_max_entries_the_first_and_latest_are_kept_and_the_rest_counted() {
        let l = ingress_and(1000, LedgerLimits::default());
        assert_eq!(l.entries().len(), 64);
        assert_eq!(l.dropped(), 1001 - 64);
        let header = l.server_timing();
        assert!(header.len() <= DEFAULT_MAX_BYTES);
        let metrics = parse_server_timing(&header);
        assert_eq!(metrics[0].name, INGRESS_METRIC);
        assert_eq!(metrics[32].name, DROPPED_METRIC);
        assert_eq!(metrics[32].desc.as_deref(), Some("+937 more"));
        assert_eq!(metrics[31].dur, Some(31.0), "the first 31 attempts");
        assert_eq!(metrics[33].dur, Some(969.0), "then the last 32");
        assert_eq!(metrics.last().unwrap().dur, Some(1000.0));
    }

    #[test]
    fn past_max_bytes_both_ends_are_kept_and_the_middle_counted() {
        let limits = LedgerLimits {
            max_entries: 1000,
            max_bytes: 512,
        };
        let l = ingress_and(100, limits);
        let header = l.server_timing();
        assert!(header.len() <= 512, "{}", header.len());
        let metrics = parse_server_timing(&header);
        let marker = metrics
            .iter()
            .position(|m| m.name == DROPPED_METRIC)
            .unwrap();
        let more: usize = metrics[marker].desc.as_deref().unwrap()[1..]
            .trim_end_matches(" more")
            .parse()
            .unwrap();
        assert_eq!(
            metrics.len() - 1 + more,
            101,
            "every entry shown or counted"
        );
        assert_eq!(metrics[0].name, INGRESS_METRIC);
        assert_eq!(metrics.last().unwrap().dur, Some(100.0));
        assert!(marker > 1 && marker < metrics.len() - 1, "{header}");
    }

    #[test]
    fn one_entry_longer_than_the_cap_is_counted_not_rendered() {
        let l = Ledger::new();
        l.record(Entry::ingress(Duration::from_millis(2000)));
        l.record(Entry::skip("recs", "x".repeat(10_000)));
        l.record(Entry::attempt(
            "pricing",
            1,
            Duration::from_millis(5),
            "200",
        ));
        assert_eq!(
            l.server_timing(),
            "budget;dur=2000;desc=\"ingress\", ledger;desc=\"+1 more\", pricing;dur=5"
        );
    }

    #[cfg(feature = "server")]
    #[test]
    fn the_ingress_only_header_reads_as_the_general_rendering() {
        for ms in [0, 1, 999, 1500, 2000, 30_000, u64::MAX / 1000] {
            for extra_micros in [0, 100, 550] {
                let budget =
                    Duration::from_millis(ms).saturating_add(Duration::from_micros(extra_micros));
                let l = Ledger::new();
                l.record(Entry::ingress(budget));
                let value = l.header_value().unwrap();
                assert_eq!(value.to_str().unwrap(), l.server_timing(), "{budget:?}");
            }
        }
        assert!(Ledger::new().header_value().is_none());
        let l = Ledger::new();
        l.record(Entry::ingress(Duration::from_millis(5)));
        l.record(Entry::skip("x", "skipped"));
        assert_eq!(
            l.header_value().unwrap().to_str().unwrap(),
            l.server_timing()
        );
    }

    #[test]
    fn within_the_limits_nothing_changes() {
        let l = ingress_and(10, LedgerLimits::default());
        assert!(!l.server_timing().contains(DROPPED_METRIC));
        assert_eq!(l.dropped(), 0);
    }

    #[test]
    fn a_limited_parse_keeps_the_first_metrics_and_counts_the_rest() {
        let value = vec!["a;dur=1"; 100].join(", ");
        let (metrics, more) = parse_server_timing_limited(&value, 10);
        assert_eq!((metrics.len(), more), (10, 90));
        let (metrics, more) = parse_server_timing_limited(&value, 1000);
        assert_eq!((metrics.len(), more), (100, 0));
    }

    proptest::proptest! {
        /// Whatever is recorded, the header fits the cap and every entry is
        /// either rendered or counted in the marker.
        #[test]
        fn the_header_fits_and_accounts_for_every_entry(
            descs in proptest::collection::vec("[a-z ]{0,300}", 0..150),
            max_entries in 2usize..100,
            max_bytes in 256usize..5000,
        ) {
            let l = Ledger::with_limits(LedgerLimits { max_entries, max_bytes });
            l.record(Entry::ingress(Duration::from_millis(2000)));
            for d in &descs {
                l.record(Entry::skip("dep", d.clone()));
            }
            let header = l.server_timing();
            proptest::prop_assert!(header.len() <= max_bytes, "{} > {}", header.len(), max_bytes);
            let metrics = parse_server_timing(&header);
            let more: usize = metrics
                .iter()
                .find(|m| m.name == DROPPED_METRIC)
                .map_or(0, |m| m.desc.as_deref().unwrap()[1..].trim_end_matches(" more").parse().unwrap());
            let shown = metrics.iter().filter(|m| m.name != DROPPED_METRIC).count();
            proptest::prop_assert_eq!(shown + more, descs.len() + 1);
        }

        /// The hand-written milliseconds read as the formatter writes them:
        /// whole milliseconds, and one truncated decimal when it is not 0.
        #[test]
        fn milliseconds_are_written_as_the_formatter_would(secs in 0u64..=u64::MAX, nanos in 0u32..1_000_000_000) {
            let d = Duration::new(secs, nanos);
            let whole = u128::from(secs) * 1000 + u128::from(nanos / 1_000_000);
            let tenth = nanos / 100_000 % 10;
            let want = match (u64::try_from(whole), tenth) {
                (Err(_), _) => u64::MAX.to_string(),
                (Ok(w), 0) => w.to_string(),
                (Ok(w), t) => format!("{w}.{t}"),
            };
            let text = MillisText::new(d);
            proptest::prop_assert_eq!(std::str::from_utf8(text.as_bytes()).unwrap(), want);
        }
    }

    #[cfg(feature = "server")]
    #[test]
    fn one_cache_key_per_text() {
        let text = |d| String::from_utf8(MillisText::new(d).as_bytes().to_vec()).unwrap();
        let mut seen = std::collections::HashMap::new();
        for micros in (0..3_000_000u64).step_by(37) {
            let d = Duration::from_micros(micros);
            let key = MillisText::key(d).unwrap();
            assert_eq!(
                seen.entry(key).or_insert_with(|| text(d)),
                &text(d),
                "{d:?}"
            );
        }
        assert_eq!(MillisText::key(Duration::MAX), None);
    }

    #[test]
    fn an_inline_ledger_shares_its_first_entry_with_its_first_clone() {
        let ledger = Ledger::with_limits(LedgerLimits::default());
        ledger.record(Entry::ingress(Duration::from_secs(1)));
        let inline = Ledger::from_first(
            LedgerLimits::default(),
            Some(Entry::ingress(Duration::from_secs(1))),
        );
        assert!(
            inline.shared.get().is_none(),
            "nothing allocated for one entry"
        );
        assert_eq!(inline.entries(), ledger.entries());
        assert_eq!(inline.server_timing(), "budget;dur=1000;desc=\"ingress\"");
        let clone = inline.clone();
        clone.record(Entry::wait("pricing", Duration::from_millis(5)));
        inline.record(Entry::skip("recs", "skipped"));
        for l in [&inline, &clone] {
            assert_eq!(l.entries().len(), 3, "one ledger seen through both");
            assert_eq!(l.entries()[0], Entry::ingress(Duration::from_secs(1)));
        }
        let clone_of_clone = clone.clone();
        clone_of_clone.record_dropped(2);
        assert_eq!(inline.dropped(), 2);

        let skip = Entry::skip(INGRESS_METRIC, "rejected: malformed");
        let other = Ledger::from_first(LedgerLimits::default(), Some(skip.clone()));
        assert!(other.shared.get().is_some(), "only the ingress is inline");
        assert_eq!(other.entries(), vec![skip]);
    }

    #[test]
    fn clones_made_at_once_from_threads_share_one_ledger() {
        let inline = Arc::new(Ledger::from_first(
            LedgerLimits::default(),
            Some(Entry::ingress(Duration::from_secs(1))),
        ));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let inline = Arc::clone(&inline);
                std::thread::spawn(move || {
                    inline
                        .clone()
                        .record(Entry::wait(format!("d{i}"), Duration::ZERO))
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(inline.entries().len(), 9);
    }

    #[test]
    fn milliseconds_at_the_edges() {
        for (d, want) in [
            (Duration::ZERO, "0"),
            (Duration::from_micros(99), "0"),
            (Duration::from_micros(400), "0.4"),
            (Duration::from_micros(1500), "1.5"),
            (Duration::from_micros(999_999), "999.9"),
            (Duration::from_secs(2), "2000"),
            (Duration::MAX, "18446744073709551615"),
        ] {
            assert_eq!(
                std::str::from_utf8(MillisText::new(d).as_bytes()).unwrap(),
                want,
                "{d:?}"
            );
        }
        assert_eq!(&INGRESS_HEAD, b"budget;dur=");
        assert_eq!(&INGRESS_TAIL, b";desc=\"ingress\"");
    }

    #[test]
    fn the_parser_survives_junk() {
        for s in [
            "",
            ",,,",
            ";dur=1",
            "a;dur=x",
            "a;desc=\"unterminated",
            "a;;;=,b",
        ] {
            let _ = parse_server_timing(s);
        }
        assert_eq!(parse_server_timing("a;dur=x")[0].dur, None);
    }
}
