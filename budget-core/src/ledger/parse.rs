//! Reading a `Server-Timing` header back into its metrics, bounded.

use std::iter::Peekable;

use serde::{Deserialize, Serialize};

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
    parse_server_timing_limited(value, usize::MAX).0
}

/// [`parse_server_timing`] keeping at most `limit` metrics: the first ones,
/// and how many more the value held. Time is linear in the value's length
/// and memory is bounded by `limit` (the metrics past it are read and
/// counted, not kept), so a peer's oversized header costs no more than its
/// bytes.
///
/// # Example
///
/// ```
/// use budget_core::ledger::parse_server_timing_limited;
///
/// let value = vec!["a;dur=1"; 10_000].join(", ");
/// let (metrics, more) = parse_server_timing_limited(&value, 64);
/// assert_eq!((metrics.len(), more), (64, 9_936));
/// ```
pub fn parse_server_timing_limited(value: &str, limit: usize) -> (Vec<Metric>, usize) {
    let mut metrics = Vec::new();
    let mut more = 0usize;
    let mut chars = value.chars().peekable();
    loop {
        let metric = read_metric(&mut chars);
        if !metric.name.is_empty() {
            if metrics.len() < limit {
                metrics.push(metric);
            } else {
                more = more.saturating_add(1);
            }
        }
        match chars.next() {
            Some(',') => continue,
            _ => break,
        }
    }
    (metrics, more)
}

/// The characters of a header value still to read.
type Chars<'a> = Peekable<std::str::Chars<'a>>;

/// One metric: its name and its parameters, up to the `,` that ends it
/// (left unread) or the end of the value.
fn read_metric(chars: &mut Chars<'_>) -> Metric {
    let name = read_until(chars, |c| c == ',' || c == ';');
    let mut metric = Metric {
        name: name.trim().to_owned(),
        dur: None,
        desc: None,
    };
    while chars.peek() == Some(&';') {
        chars.next();
        let key = read_until(chars, |c| c == '=' || c == ';' || c == ',');
        let mut val = String::new();
        if chars.peek() == Some(&'=') {
            chars.next();
            val = read_value(chars);
        }
        apply_param(&mut metric, &key, val);
    }
    metric
}

/// The characters up to the first that `stop` matches (left unread) or
/// the end of the value.
fn read_until(chars: &mut Chars<'_>, stop: impl Fn(char) -> bool) -> String {
    let mut read = String::new();
    while let Some(&c) = chars.peek() {
        if stop(c) {
            break;
        }
        read.push(c);
        chars.next();
    }
    read
}

/// A parameter's value, after its `=`: a quoted string (unescaped, and
/// anything after its closing quote up to the next separator dropped) or
/// a token (trimmed).
fn read_value(chars: &mut Chars<'_>) -> String {
    while chars.peek().is_some_and(|c| *c == ' ') {
        chars.next();
    }
    if chars.peek() != Some(&'"') {
        return read_until(chars, |c| c == ';' || c == ',')
            .trim()
            .to_owned();
    }
    chars.next();
    let mut val = String::new();
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
    val
}

/// Keeps a parameter the metric knows (`dur`, `desc`; the first of each);
/// any other is ignored.
fn apply_param(metric: &mut Metric, key: &str, val: String) {
    match key.trim().to_ascii_lowercase().as_str() {
        "dur" if metric.dur.is_none() => {
            metric.dur = val.parse::<f64>().ok().filter(|d| d.is_finite())
        }
        "desc" if metric.desc.is_none() => metric.desc = Some(val),
        _ => {}
    }
}
