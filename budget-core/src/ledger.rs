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

use std::fmt::{self, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `Server-Timing` metric name of the ingress entry.
pub const INGRESS_METRIC: &str = "budget";
/// The `desc` of the ingress entry.
pub const INGRESS_DESC: &str = "ingress";
/// The suffix added to a dependency's name for its backoff waits.
pub const WAIT_SUFFIX: &str = "-wait";

/// One line of the ledger.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::ledger::Entry;
///
/// let e = Entry::attempt("pricing", 2, Duration::from_millis(40), "503");
/// assert_eq!(e.to_string(), "pricing;dur=40;desc=\"503\"");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Entry {
    /// The budget the request arrived with (after default and clamp).
    Ingress {
        /// The budget.
        #[serde(with = "humantime_serde")]
        budget: Duration,
    },
    /// One attempt of a downstream call.
    Attempt {
        /// The dependency's name.
        dependency: String,
        /// 1 for the first attempt, 2 for the first retry, ...
        attempt: u32,
        /// How long the attempt took.
        #[serde(with = "humantime_serde")]
        duration: Duration,
        /// The status code, or the kind of failure (`connect`, `timeout`, ...).
        outcome: String,
    },
    /// A backoff wait before a retry, paid from the budget.
    Wait {
        /// The dependency being waited for.
        dependency: String,
        /// How long the wait was.
        #[serde(with = "humantime_serde")]
        duration: Duration,
    },
    /// A call that was not made, with the reason.
    Skip {
        /// The dependency that was skipped.
        dependency: String,
        /// Why, e.g. `skipped: 850ms < floor 1000ms`.
        reason: String,
    },
    /// A local step of the handler (a database query, a computation).
    Local {
        /// The step's name.
        name: String,
        /// How long it took.
        #[serde(with = "humantime_serde")]
        duration: Duration,
        /// An optional description.
        desc: Option<String>,
    },
}

impl Entry {
    /// The ingress entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::ingress(Duration::from_secs(2)).to_string(), "budget;dur=2000;desc=\"ingress\"");
    /// ```
    pub fn ingress(budget: Duration) -> Self {
        Entry::Ingress { budget }
    }

    /// An attempt entry; `outcome` is a status code or a failure kind.
    /// Successful (2xx) attempts render without a `desc`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::attempt("inv", 1, Duration::from_millis(3), "200").to_string(), "inv;dur=3");
    /// ```
    pub fn attempt(
        dependency: impl Into<String>,
        attempt: u32,
        duration: Duration,
        outcome: impl Into<String>,
    ) -> Self {
        Entry::Attempt {
            dependency: dependency.into(),
            attempt,
            duration,
            outcome: outcome.into(),
        }
    }

    /// A backoff wait entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::wait("pricing", Duration::from_millis(200)).to_string(), "pricing-wait;dur=200");
    /// ```
    pub fn wait(dependency: impl Into<String>, duration: Duration) -> Self {
        Entry::Wait {
            dependency: dependency.into(),
            duration,
        }
    }

    /// A skipped-call entry.
    ///
    /// ```
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::skip("recs", "skipped: circuit open").to_string(), "recs;desc=\"skipped: circuit open\"");
    /// ```
    pub fn skip(dependency: impl Into<String>, reason: impl Into<String>) -> Self {
        Entry::Skip {
            dependency: dependency.into(),
            reason: reason.into(),
        }
    }

    /// A local step entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::local("db", Duration::from_micros(1500), None).to_string(), "db;dur=1.5");
    /// ```
    pub fn local(name: impl Into<String>, duration: Duration, desc: Option<String>) -> Self {
        Entry::Local {
            name: name.into(),
            duration,
            desc,
        }
    }
}

impl fmt::Display for Entry {
    /// Renders the entry as one `Server-Timing` metric.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        self.render(&mut out);
        f.write_str(&out)
    }
}

impl Entry {
    /// Appends the entry as one `Server-Timing` metric to `out`.
    fn render(&self, out: &mut String) {
        match self {
            Entry::Ingress { budget } => {
                write_metric(out, INGRESS_METRIC, "", Some(*budget), Some(INGRESS_DESC))
            }
            Entry::Attempt {
                dependency,
                duration,
                outcome,
                ..
            } => {
                let ok = outcome.len() == 3 && outcome.starts_with('2');
                let desc = (!ok).then_some(outcome.as_str());
                write_metric(out, dependency, "", Some(*duration), desc)
            }
            Entry::Wait {
                dependency,
                duration,
            } => write_metric(out, dependency, WAIT_SUFFIX, Some(*duration), None),
            Entry::Skip { dependency, reason } => {
                write_metric(out, dependency, "", None, Some(reason))
            }
            Entry::Local {
                name,
                duration,
                desc,
            } => write_metric(out, name, "", Some(*duration), desc.as_deref()),
        }
    }
}

/// Writes `name[suffix][;dur=ms][;desc="..."]`, keeping `name` a valid token
/// and `desc` a valid quoted-string. Text that needs no mending is copied
/// whole (the common case, on every response).
fn write_metric(
    out: &mut String,
    name: &str,
    suffix: &str,
    dur: Option<Duration>,
    desc: Option<&str>,
) {
    if name.is_empty() {
        out.push('_');
    }
    for part in [name, suffix] {
        if part.chars().all(is_tchar) {
            out.push_str(part);
        } else {
            out.extend(part.chars().map(|c| if is_tchar(c) { c } else { '_' }));
        }
    }
    if let Some(d) = dur {
        out.push_str(";dur=");
        write_millis(out, d);
    }
    if let Some(desc) = desc {
        out.push_str(";desc=\"");
        let plain = |c: char| c == '\t' || ((' '..='~').contains(&c) && c != '"' && c != '\\');
        if desc.chars().all(plain) {
            out.push_str(desc);
        } else {
            for c in desc.chars() {
                match c {
                    '"' | '\\' => {
                        out.push('\\');
                        out.push(c);
                    }
                    // Header values are visible ASCII, space and tab only.
                    c if c == '\t' || (' '..='~').contains(&c) => out.push(c),
                    _ => out.push('?'),
                }
            }
        }
        out.push('"');
    }
}

/// Milliseconds with at most one decimal: `300`, `1.5`, `0.4`.
fn write_millis(out: &mut String, d: Duration) {
    // u64 formats much faster than the u128 `as_micros` gives; a duration
    // too long for u64 tenths of a millisecond (58 million years) saturates.
    let tenths = u64::try_from(d.as_micros() / 100).unwrap_or(u64::MAX);
    let (whole, frac) = (tenths / 10, tenths % 10);
    let _ = write!(out, "{whole}");
    if frac != 0 {
        out.push('.');
        out.push(char::from(b'0' + frac as u8));
    }
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// A request's append-only record of how its budget was spent.
///
/// Clones share the same entries, so the server layer, the handler and the
/// client can all write to one ledger.
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
#[derive(Clone, Default)]
pub struct Ledger {
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl Ledger {
    /// An empty ledger.
    ///
    /// ```
    /// # use budget_core::ledger::Ledger;
    /// assert!(Ledger::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an entry.
    ///
    /// ```
    /// # use budget_core::ledger::{Entry, Ledger};
    /// let l = Ledger::new();
    /// l.record(Entry::skip("x", "skipped: circuit open"));
    /// assert!(!l.is_empty());
    /// ```
    pub fn record(&self, entry: Entry) {
        self.lock().push(entry);
    }

    /// A copy of the entries so far, in the order they were recorded.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::{Entry, Ledger};
    /// let l = Ledger::new();
    /// l.record(Entry::ingress(Duration::from_secs(1)));
    /// assert_eq!(l.entries(), vec![Entry::ingress(Duration::from_secs(1))]);
    /// ```
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().clone()
    }

    /// True when nothing has been recorded.
    ///
    /// ```
    /// # use budget_core::ledger::Ledger;
    /// assert!(Ledger::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// The ledger as a `Server-Timing` header value: metrics joined by `, `.
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
        let entries = self.lock();
        let mut out = String::with_capacity(entries.len() * 40);
        for (i, e) in entries.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            e.render(&mut out);
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A panic while holding the lock cannot leave a Vec half-pushed in a
        // way that matters here: keep recording.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.lock().iter()).finish()
    }
}

impl Serialize for Ledger {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.lock().serialize(s)
    }
}

/// One metric of a parsed `Server-Timing` header.
///
/// # Example
///
/// ```
/// use budget_core::ledger::{parse_server_timing, Metric};
///
/// let m = parse_server_timing("pricing;dur=250;desc=\"503\"");
/// assert_eq!(m, vec![Metric { name: "pricing".into(), dur: Some(250.0), desc: Some("503".into()) }]);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// The metric name.
    pub name: String,
    /// The duration in milliseconds, if given.
    pub dur: Option<f64>,
    /// The description, if given (unescaped).
    pub desc: Option<String>,
}

/// Parses a `Server-Timing` header value into its metrics, leniently: a
/// malformed parameter is ignored, a metric without a name is dropped.
/// Commas and semicolons inside quoted descriptions are respected.
///
/// # Example
///
/// ```
/// use budget_core::ledger::parse_server_timing;
///
/// let m = parse_server_timing("budget;dur=2000;desc=\"ingress\", recs;desc=\"skipped: a, b\"");
/// assert_eq!(m.len(), 2);
/// assert_eq!(m[1].desc.as_deref(), Some("skipped: a, b"));
/// ```
pub fn parse_server_timing(value: &str) -> Vec<Metric> {
    let mut metrics = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        // name
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c == ',' || c == ';' {
                break;
            }
            name.push(c);
            chars.next();
        }
        let mut metric = Metric {
            name: name.trim().to_owned(),
            dur: None,
            desc: None,
        };
        // params
        while chars.peek() == Some(&';') {
            chars.next();
            let mut key = String::new();
            while let Some(&c) = chars.peek() {
                if c == '=' || c == ';' || c == ',' {
                    break;
                }
                key.push(c);
                chars.next();
            }
            let mut val = String::new();
            if chars.peek() == Some(&'=') {
                chars.next();
                while chars.peek().is_some_and(|c| *c == ' ') {
                    chars.next();
                }
                if chars.peek() == Some(&'"') {
                    chars.next();
                    while let Some(c) = chars.next() {
                        match c {
                            '\\' => {
                                if let Some(n) = chars.next() {
                                    val.push(n);
                                }
                            }
                            '"' => break,
                            c => val.push(c),
                        }
                    }
                    // anything up to the next separator is junk
                    while chars.peek().is_some_and(|c| *c != ';' && *c != ',') {
                        chars.next();
                    }
                } else {
                    while let Some(&c) = chars.peek() {
                        if c == ';' || c == ',' {
                            break;
                        }
                        val.push(c);
                        chars.next();
                    }
                    val = val.trim().to_owned();
                }
            }
            match key.trim().to_ascii_lowercase().as_str() {
                "dur" if metric.dur.is_none() => {
                    metric.dur = val.parse::<f64>().ok().filter(|d| d.is_finite())
                }
                "desc" if metric.desc.is_none() => metric.desc = Some(val),
                _ => {}
            }
        }
        if !metric.name.is_empty() {
            metrics.push(metric);
        }
        match chars.next() {
            Some(',') => continue,
            _ => break,
        }
    }
    metrics
}

#[cfg(test)]
mod tests {
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
