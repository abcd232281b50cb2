//! The per-request knobs: what the query string asks the partner to do.
//!
//! | parameter | meaning | form |
//! | --- | --- | --- |
//! | `delay` | time before the response head | humantime: `300ms`, `2s` |
//! | `jitter` | extra uniformly random delay, up to this much | humantime |
//! | `status` | the status to answer with (default 200) | `200`..=`599` |
//! | `retry_after` | a `Retry-After` header, sent verbatim | any header value: `2`, an HTTP-date |
//! | `script` | a per-attempt plan: attempt N gets entry N, the last repeats | `503@250ms,200@400ms`; an entry is `STATUS` or `STATUS@DELAY` |
//! | `drip` | send the body in [`DRIP_CHUNKS`] chunks with this pause between them | humantime |
//! | `body_bytes` | the size of the body | `0`..=[`MAX_BODY_BYTES`] |
//! | `tail` | a share of the requests wait this long instead of `delay` (a latency tail) | `SHARE@DELAY`: `0.05@1s` (5 % of them wait 1 s) |
//!
//! A `script` entry's status replaces `status`; its delay, when it has one,
//! replaces `delay` (an entry without `@DELAY` uses `delay`). A request drawn
//! into the `tail` waits the tail's delay instead of either. `jitter` is
//! added on top in every case.
//!
//! Bad input gets a precise error, never a silent default: a malformed value,
//! a value out of range or a knob given twice is a [`QueryError`] that names
//! the parameter, and the partner answers it with `400`. Parameters the
//! partner does not know are ignored, so that a dependency URL may carry its
//! own query (`/pricing?sku=42&delay=100ms`).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use slow_partner::Knobs;
//!
//! let knobs = Knobs::from_query("script=503@250ms,200&delay=400ms&retry_after=1").unwrap();
//! let first = knobs.plan(1);
//! assert_eq!((first.status.as_u16(), first.delay), (503, Duration::from_millis(250)));
//! let later = knobs.plan(7); // the last entry repeats
//! assert_eq!((later.status.as_u16(), later.delay), (200, Duration::from_millis(400)));
//!
//! let err = Knobs::from_query("delay=abc").unwrap_err();
//! assert_eq!(err.parameter(), "delay");
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use http::{HeaderValue, StatusCode};

/// The longest `delay`, `jitter` or `drip` accepted: an hour is forever for
/// a chaos partner, and the cap keeps every sum of durations far from
/// overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(60 * 60);

/// The largest `body_bytes` accepted (64 MiB).
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// The most entries a `script` may have.
pub const MAX_SCRIPT_ENTRIES: usize = 100;

/// A dripped body is sent in this many chunks (fewer when the body has fewer
/// bytes), with the `drip` pause between two chunks: a body of `n >= 16`
/// bytes takes at least `15 × drip` after its head.
pub const DRIP_CHUNKS: usize = 16;

/// Values quoted in error messages are cut to this many characters.
const QUOTE_MAX: usize = 64;

/// The knobs of one request, parsed from its query string.
///
/// `Knobs::default()` is an immediate `200`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Knobs {
    /// `delay`: the wait before the response head.
    pub delay: Duration,
    /// `jitter`: the most extra random delay added to every wait.
    pub jitter: Duration,
    /// `status`: the status to answer with.
    pub status: StatusCode,
    /// `retry_after`: the `Retry-After` value to send, verbatim.
    pub retry_after: Option<HeaderValue>,
    /// `script`: the per-attempt plan, when given.
    pub script: Option<Script>,
    /// `drip`: the pause between two body chunks, when dripping.
    pub drip: Option<Duration>,
    /// `body_bytes`: the body size asked for.
    pub body_bytes: Option<usize>,
    /// `tail`: a share of the requests that wait longer.
    pub tail: Option<Tail>,
}

/// A latency tail: `share` of the requests (drawn at random, each on its
/// own) wait `delay` instead of their usual delay. `tail=0.05@1s`.
///
/// ```
/// use std::time::Duration;
/// use slow_partner::Tail;
///
/// let tail: Tail = "0.05@1s".parse().unwrap();
/// assert_eq!((tail.share(), tail.delay()), (0.05, Duration::from_secs(1)));
/// assert_eq!(tail.to_string(), "0.05@1s");
/// assert!("5%@1s".parse::<Tail>().is_err());
/// assert!("1.5@1s".parse::<Tail>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The share, in millionths: exact, comparable, and `Eq` for [`Knobs`].
    millionths: u32,
    delay: Duration,
}

/// A tail's share is counted in millionths.
const MILLION: f64 = 1_000_000.0;

impl Tail {
    /// The share of requests in the tail, in `(0, 1]`, to a millionth.
    ///
    /// ```
    /// # use slow_partner::Tail;
    /// assert_eq!("1@2s".parse::<Tail>().unwrap().share(), 1.0);
    /// ```
    pub fn share(&self) -> f64 {
        f64::from(self.millionths) / MILLION
    }

    /// What a request in the tail waits.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slow_partner::Tail;
    /// assert_eq!("0.5@20ms".parse::<Tail>().unwrap().delay(), Duration::from_millis(20));
    /// ```
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// The delay of one request whose usual delay is `usual`, given a
    /// uniform draw `roll` in `[0, 1)`: the tail's when `roll < share`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use slow_partner::Tail;
    /// let tail: Tail = "0.05@1s".parse().unwrap();
    /// let usual = Duration::from_millis(50);
    /// assert_eq!(tail.pick(usual, 0.01), Duration::from_secs(1));
    /// assert_eq!(tail.pick(usual, 0.05), usual);
    /// ```
    pub fn pick(&self, usual: Duration, roll: f64) -> Duration {
        if roll < self.share() {
            self.delay
        } else {
            usual
        }
    }
}

impl FromStr for Tail {
    type Err = Reason;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((share, delay)) = s.split_once('@') else {
            return Err(Reason::NotATail);
        };
        let share: f64 = share.trim().parse().map_err(|_| Reason::NotATail)?;
        // In (0, 1], and at least one millionth once rounded (NaN fails too).
        let millionths = (share * MILLION).round();
        if !(share <= 1.0 && millionths >= 1.0) {
            return Err(Reason::ShareOutOfRange);
        }
        let delay = parse_duration(delay.trim())?;
        Ok(Tail {
            millionths: millionths as u32,
            delay,
        })
    }
}

impl fmt::Display for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}@{}",
            self.share(),
            humantime::format_duration(self.delay)
        )
    }
}

/// What one attempt does: the outcome of [`Knobs::plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// The status to answer with.
    pub status: StatusCode,
    /// The delay before the response head, without jitter.
    pub delay: Duration,
}

impl Knobs {
    /// Parses a raw (percent-encoded) query string, without the `?`.
    ///
    /// ```
    /// use std::time::Duration;
    /// # use slow_partner::Knobs;
    /// let k = Knobs::from_query("delay=2s&jitter=100ms&status=503&body_bytes=4096&drip=10ms").unwrap();
    /// assert_eq!(k.delay, Duration::from_secs(2));
    /// assert_eq!(k.status.as_u16(), 503);
    /// assert_eq!(k.body_bytes, Some(4096));
    /// assert_eq!(Knobs::from_query("").unwrap(), Knobs::default());
    /// ```
    pub fn from_query(query: &str) -> Result<Self, QueryError> {
        let mut knobs = Knobs::default();
        let mut seen = [false; Param::ALL.len()];
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let Some(param) = Param::ALL.into_iter().find(|p| p.name() == key) else {
                continue;
            };
            let err = |reason| QueryError::new(param.name(), &value, reason);
            if std::mem::replace(&mut seen[param as usize], true) {
                return Err(err(Reason::Repeated));
            }
            match param {
                Param::Delay => knobs.delay = parse_duration(&value).map_err(err)?,
                Param::Jitter => knobs.jitter = parse_duration(&value).map_err(err)?,
                Param::Status => knobs.status = parse_status(&value).map_err(err)?,
                Param::RetryAfter => {
                    knobs.retry_after = Some(parse_header_value(&value).map_err(err)?);
                }
                Param::Script => knobs.script = Some(value.parse().map_err(err)?),
                Param::Drip => knobs.drip = Some(parse_duration(&value).map_err(err)?),
                Param::BodyBytes => knobs.body_bytes = Some(parse_body_bytes(&value).map_err(err)?),
                Param::Tail => knobs.tail = Some(value.parse().map_err(err)?),
            }
        }
        Ok(knobs)
    }

    /// The status and delay of attempt number `attempt` (1-based): the
    /// script's entry when there is a script, else `status` and `delay`.
    ///
    /// ```
    /// # use slow_partner::Knobs;
    /// let k = Knobs::from_query("status=429").unwrap();
    /// assert_eq!(k.plan(1).status.as_u16(), 429);
    /// assert_eq!(k.plan(99).status.as_u16(), 429);
    /// ```
    pub fn plan(&self, attempt: u32) -> Plan {
        match &self.script {
            Some(script) => {
                let entry = script.entry(attempt);
                Plan {
                    status: entry.status,
                    delay: entry.delay.unwrap_or(self.delay),
                }
            }
            None => Plan {
                status: self.status,
                delay: self.delay,
            },
        }
    }
}

/// The knobs, by name; the discriminant indexes the "seen" table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Param {
    Delay,
    Jitter,
    Status,
    RetryAfter,
    Script,
    Drip,
    BodyBytes,
    Tail,
}

impl Param {
    const ALL: [Param; 8] = [
        Param::Delay,
        Param::Jitter,
        Param::Status,
        Param::RetryAfter,
        Param::Script,
        Param::Drip,
        Param::BodyBytes,
        Param::Tail,
    ];

    const fn name(self) -> &'static str {
        match self {
            Param::Delay => "delay",
            Param::Jitter => "jitter",
            Param::Status => "status",
            Param::RetryAfter => "retry_after",
            Param::Script => "script",
            Param::Drip => "drip",
            Param::BodyBytes => "body_bytes",
            Param::Tail => "tail",
        }
    }
}

/// A per-attempt plan: `503@250ms,200@400ms`.
///
/// Attempt N (1-based, counted per `x-request-id` and path) gets entry N;
/// attempts past the end get the last entry. An entry is `STATUS` or
/// `STATUS@DELAY`; whitespace around entries is ignored.
///
/// ```
/// use std::time::Duration;
/// use slow_partner::Script;
///
/// let script: Script = "503@250ms, 429, 200@1s".parse().unwrap();
/// assert_eq!(script.entries().len(), 3);
/// assert_eq!(script.entry(2).status.as_u16(), 429);
/// assert_eq!(script.entry(2).delay, None);
/// assert_eq!(script.entry(3).delay, Some(Duration::from_secs(1)));
/// assert_eq!(script.entry(30), script.entry(3));
/// assert_eq!(script.to_string(), "503@250ms,429,200@1s");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    entries: Vec<ScriptEntry>,
}

/// One step of a [`Script`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptEntry {
    /// The status this attempt answers with.
    pub status: StatusCode,
    /// The delay of this attempt; `None` uses the request's `delay`.
    pub delay: Option<Duration>,
}

impl Script {
    /// The entries, in order; never empty.
    ///
    /// ```
    /// # use slow_partner::Script;
    /// assert_eq!("200".parse::<Script>().unwrap().entries().len(), 1);
    /// ```
    pub fn entries(&self) -> &[ScriptEntry] {
        &self.entries
    }

    /// The entry for attempt number `attempt` (1-based; 0 counts as 1); the
    /// last entry repeats.
    ///
    /// ```
    /// # use slow_partner::Script;
    /// let s: Script = "503,200".parse().unwrap();
    /// assert_eq!(s.entry(0).status.as_u16(), 503);
    /// assert_eq!(s.entry(u32::MAX).status.as_u16(), 200);
    /// ```
    pub fn entry(&self, attempt: u32) -> &ScriptEntry {
        let index = usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX);
        let last = self.entries.len() - 1; // never empty: `from_str` guarantees it
        &self.entries[index.min(last)]
    }
}

impl FromStr for Script {
    type Err = Reason;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().is_empty() {
            return Err(Reason::Empty);
        }
        let mut entries = Vec::new();
        for (i, raw) in s.split(',').enumerate() {
            if i == MAX_SCRIPT_ENTRIES {
                return Err(Reason::TooManyEntries {
                    max: MAX_SCRIPT_ENTRIES,
                });
            }
            let raw = raw.trim();
            let bad = |part: &'static str, problem: Reason| Reason::ScriptEntry {
                index: i + 1,
                entry: shorten(raw),
                part,
                problem: Box::new(problem),
            };
            let (status, delay) = match raw.split_once('@') {
                Some((status, delay)) => (status, Some(delay)),
                None => (raw, None),
            };
            let status = parse_status(status).map_err(|p| bad("status", p))?;
            let delay = delay
                .map(parse_duration)
                .transpose()
                .map_err(|p| bad("delay", p))?;
            entries.push(ScriptEntry { status, delay });
        }
        Ok(Script { entries })
    }
}

impl fmt::Display for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", entry.status.as_u16())?;
            if let Some(delay) = entry.delay {
                write!(f, "@{}", humantime::format_duration(delay))?;
            }
        }
        Ok(())
    }
}

/// A query parameter the partner cannot use: which, what was given, and why.
///
/// Its `Display` is the `detail` of the `400` problem body.
///
/// ```
/// use slow_partner::Knobs;
///
/// let err = Knobs::from_query("status=99").unwrap_err();
/// assert_eq!(err.parameter(), "status");
/// assert_eq!(err.value(), "99");
/// assert_eq!(
///     err.to_string(),
///     "query parameter `status` = `99`: status 99 is outside 200..=599 (a 1xx is not a final answer)",
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("query parameter `{parameter}` = `{value}`: {reason}")]
pub struct QueryError {
    parameter: &'static str,
    value: String,
    #[source]
    reason: Reason,
}

impl QueryError {
    pub(crate) fn new(parameter: &'static str, value: &str, reason: Reason) -> Self {
        Self {
            parameter,
            value: shorten(value),
            reason,
        }
    }

    /// The parameter's name: `delay`, `status`, `script`, ...
    ///
    /// ```
    /// # use slow_partner::Knobs;
    /// assert_eq!(Knobs::from_query("script=5x3@").unwrap_err().parameter(), "script");
    /// ```
    pub fn parameter(&self) -> &'static str {
        self.parameter
    }

    /// The value given, percent-decoded and cut to a readable length.
    ///
    /// ```
    /// # use slow_partner::Knobs;
    /// assert_eq!(Knobs::from_query("delay=a%20b").unwrap_err().value(), "a b");
    /// ```
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Why the value cannot be used.
    ///
    /// ```
    /// # use slow_partner::{Knobs, Reason};
    /// assert_eq!(*Knobs::from_query("delay=1s&delay=2s").unwrap_err().reason(), Reason::Repeated);
    /// ```
    pub fn reason(&self) -> &Reason {
        &self.reason
    }
}

/// Why a query value cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Reason {
    /// The knob appears more than once.
    #[error("given more than once")]
    Repeated,
    /// The value is empty.
    #[error("empty")]
    Empty,
    /// Not a humantime duration (`300ms`, `2s`).
    #[error("not a duration like `300ms` or `2s` ({0})")]
    NotADuration(String),
    /// A duration longer than [`MAX_DURATION`].
    #[error("longer than the maximum of 1h")]
    DurationTooLong,
    /// Not a three-digit status code.
    #[error("not a status code (three digits)")]
    NotAStatus,
    /// A status outside `200..=599`.
    #[error("status {0} is outside 200..=599 (a 1xx is not a final answer)")]
    StatusOutOfRange(u16),
    /// Not a valid header value (control characters).
    #[error("not a valid header value")]
    NotAHeaderValue,
    /// Not a number of bytes.
    #[error("not a number of bytes")]
    NotANumber,
    /// More bytes than [`MAX_BODY_BYTES`].
    #[error("larger than the maximum of {max} bytes")]
    TooLarge {
        /// The maximum.
        max: usize,
    },
    /// A script with more than [`MAX_SCRIPT_ENTRIES`] entries.
    #[error("more than {max} entries")]
    TooManyEntries {
        /// The maximum.
        max: usize,
    },
    /// One entry of a script is malformed.
    #[error("entry {index} `{entry}`: {part}: {problem}")]
    ScriptEntry {
        /// The entry's position, 1-based.
        index: usize,
        /// The entry as given (cut to a readable length).
        entry: String,
        /// Which part is wrong: `status` or `delay`.
        part: &'static str,
        /// What is wrong with it.
        problem: Box<Reason>,
    },
    /// Not a tail (`SHARE@DELAY`, e.g. `0.05@1s`).
    #[error("not a tail like `0.05@1s` (a share of the requests, then the delay they wait)")]
    NotATail,
    /// A tail share outside `(0, 1]` (or below a millionth).
    #[error("the share must be at least 0.000001 and at most 1")]
    ShareOutOfRange,
    /// Not a mode name (the admin endpoint's `mode`).
    #[error("expected one of normal, refuse, blackhole, reset, hang")]
    NotAMode,
    /// A required parameter is missing (the admin endpoint's `mode`).
    #[error("missing")]
    Missing,
    /// A number outside the range the knob accepts (a stream's `rate`,
    /// `from`, `last_id`, `Last-Event-ID`, `close_code`; an ingest knob).
    #[error("out of range: expected {0}")]
    OutOfRange(&'static str),
    /// An admin body that is not what the endpoint takes (not JSON, not an
    /// object, a field of the wrong type or unknown).
    #[error("{0}")]
    Body(String),
}

pub(crate) fn parse_duration(value: &str) -> Result<Duration, Reason> {
    if value.is_empty() {
        return Err(Reason::Empty);
    }
    let d = budget_core::config::duration::parse(value)
        .map_err(|e| Reason::NotADuration(e.to_string()))?;
    if d > MAX_DURATION {
        return Err(Reason::DurationTooLong);
    }
    Ok(d)
}

pub(crate) fn parse_status(value: &str) -> Result<StatusCode, Reason> {
    if value.is_empty() {
        return Err(Reason::Empty);
    }
    if value.len() > 3 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reason::NotAStatus);
    }
    let code: u16 = value.parse().map_err(|_| Reason::NotAStatus)?;
    if !(200..=599).contains(&code) {
        return Err(Reason::StatusOutOfRange(code));
    }
    StatusCode::from_u16(code).map_err(|_| Reason::StatusOutOfRange(code))
}

fn parse_header_value(value: &str) -> Result<HeaderValue, Reason> {
    if value.is_empty() {
        return Err(Reason::Empty);
    }
    HeaderValue::from_str(value).map_err(|_| Reason::NotAHeaderValue)
}

fn parse_body_bytes(value: &str) -> Result<usize, Reason> {
    if value.is_empty() {
        return Err(Reason::Empty);
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reason::NotANumber);
    }
    let too_large = Reason::TooLarge {
        max: MAX_BODY_BYTES,
    };
    // All digits: the only way `parse` fails is overflow.
    let n: usize = value.parse().map_err(|_| too_large.clone())?;
    if n > MAX_BODY_BYTES {
        return Err(too_large);
    }
    Ok(n)
}

/// Cuts a value quoted in a message to [`QUOTE_MAX`] characters.
pub(crate) fn shorten(value: &str) -> String {
    match value.char_indices().nth(QUOTE_MAX) {
        Some((end, _)) => format!("{}...", &value[..end]),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn absent_knobs_mean_an_immediate_200() {
        let k = Knobs::from_query("").unwrap();
        assert_eq!(
            k.plan(1),
            Plan {
                status: StatusCode::OK,
                delay: Duration::ZERO
            }
        );
        assert_eq!(k.jitter, Duration::ZERO);
        assert_eq!(k.drip, None);
        assert_eq!(k.body_bytes, None);
    }

    #[test]
    fn every_knob_is_read() {
        let k = Knobs::from_query(
            "delay=300ms&jitter=50ms&status=503&retry_after=Wed,%2021%20Oct%202015%2007:28:00%20GMT\
             &drip=5ms&body_bytes=100",
        )
        .unwrap();
        assert_eq!(k.delay, ms(300));
        assert_eq!(k.jitter, ms(50));
        assert_eq!(k.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(k.retry_after.unwrap(), "Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(k.drip, Some(ms(5)));
        assert_eq!(k.body_bytes, Some(100));
        let k = Knobs::from_query("delay=50ms&tail=0.05@500ms").unwrap();
        let tail = k.tail.unwrap();
        assert_eq!((tail.share(), tail.delay()), (0.05, ms(500)));
    }

    #[test]
    fn a_tail_takes_its_share_of_uniform_draws() {
        let tail: Tail = "0.05@500ms".parse().unwrap();
        let slow = (0..10_000)
            .map(|i| tail.pick(ms(50), f64::from(i) / 10_000.0))
            .filter(|d| *d == ms(500))
            .count();
        assert_eq!(slow, 500);
    }

    #[test]
    fn unknown_parameters_are_ignored() {
        let k = Knobs::from_query("sku=42&delay=10ms&x").unwrap();
        assert_eq!(k.delay, ms(10));
    }

    #[test]
    fn a_malformed_value_names_its_parameter() {
        for (query, parameter) in [
            ("delay=abc", "delay"),
            ("delay=", "delay"),
            ("delay=-1s", "delay"),
            ("jitter=1", "jitter"),
            ("status=99", "status"),
            ("status=600", "status"),
            ("status=2000", "status"),
            ("status=abc", "status"),
            ("status=+200", "status"),
            ("script=5x3@", "script"),
            ("script=", "script"),
            ("script=503@", "script"),
            ("script=503,,200", "script"),
            ("drip=fast", "drip"),
            ("body_bytes=-1", "body_bytes"),
            ("body_bytes=1e3", "body_bytes"),
            ("body_bytes=99999999999999999999999", "body_bytes"),
            ("retry_after=", "retry_after"),
            ("retry_after=a%0Ab", "retry_after"),
            ("tail=0.05", "tail"),
            ("tail=5%25@1s", "tail"),
            ("tail=0@1s", "tail"),
            ("tail=1.01@1s", "tail"),
            ("tail=NaN@1s", "tail"),
            ("tail=0.05@soon", "tail"),
            ("tail=0.05@2h", "tail"),
        ] {
            let err = Knobs::from_query(query).expect_err(query);
            assert_eq!(err.parameter(), parameter, "{query}: {err}");
            assert!(err.to_string().contains(parameter), "{err}");
        }
    }

    #[test]
    fn a_knob_given_twice_is_an_error_not_a_silent_choice() {
        let err = Knobs::from_query("status=200&status=503").unwrap_err();
        assert_eq!(err.parameter(), "status");
        assert_eq!(*err.reason(), Reason::Repeated);
    }

    #[test]
    fn durations_are_capped_at_an_hour() {
        assert_eq!(Knobs::from_query("delay=1h").unwrap().delay, MAX_DURATION);
        let err = Knobs::from_query("delay=61min").unwrap_err();
        assert_eq!(*err.reason(), Reason::DurationTooLong);
    }

    #[test]
    fn a_duration_humantime_would_panic_on_is_a_clear_error() {
        // humantime 2.4 panics on these (budget_core::config::duration says
        // why); the fuzzer found the script form.
        for query in [
            "delay=18446744073709551615s%20500ms%20500ms",
            "tail=0.5@18446744073709551615s500ms500ms",
            "script=503@18446744073709551615s%0A500ms%0A500ms",
        ] {
            let err = Knobs::from_query(query).unwrap_err();
            assert!(
                matches!(err.reason(), Reason::NotADuration(_))
                    || matches!(err.reason(), Reason::ScriptEntry { .. }),
                "{query}: {err}"
            );
            assert!(err.to_string().contains("too large"), "{query}: {err}");
        }
    }

    #[test]
    fn body_bytes_are_capped() {
        assert!(Knobs::from_query(&format!("body_bytes={MAX_BODY_BYTES}")).is_ok());
        let err = Knobs::from_query(&format!("body_bytes={}", MAX_BODY_BYTES + 1)).unwrap_err();
        assert_eq!(
            *err.reason(),
            Reason::TooLarge {
                max: MAX_BODY_BYTES
            }
        );
    }

    #[test]
    fn script_entry_n_serves_attempt_n_and_the_last_repeats() {
        let k = Knobs::from_query("script=503@250ms,429@1s,200").unwrap();
        assert_eq!(
            k.plan(1),
            Plan {
                status: StatusCode::SERVICE_UNAVAILABLE,
                delay: ms(250)
            }
        );
        assert_eq!(
            k.plan(2),
            Plan {
                status: StatusCode::TOO_MANY_REQUESTS,
                delay: ms(1000)
            }
        );
        assert_eq!(
            k.plan(3),
            Plan {
                status: StatusCode::OK,
                delay: Duration::ZERO
            }
        );
        assert_eq!(k.plan(4), k.plan(3));
    }

    #[test]
    fn a_script_entry_without_delay_uses_the_delay_knob_and_overrides_status() {
        let k = Knobs::from_query("status=418&delay=70ms&script=503,200@5ms").unwrap();
        assert_eq!(
            k.plan(1),
            Plan {
                status: StatusCode::SERVICE_UNAVAILABLE,
                delay: ms(70)
            }
        );
        assert_eq!(
            k.plan(2),
            Plan {
                status: StatusCode::OK,
                delay: ms(5)
            }
        );
    }

    #[test]
    fn a_malformed_script_entry_is_named_by_position_and_part() {
        let err = Knobs::from_query("script=5x3@").unwrap_err();
        assert_eq!(
            err.to_string(),
            "query parameter `script` = `5x3@`: entry 1 `5x3@`: status: not a status code (three digits)"
        );
        let err = "200@1s, 503@soon".parse::<Script>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "entry 2 `503@soon`: delay: not a duration like `300ms` or `2s` \
             (expected number at 0)"
        );
    }

    #[test]
    fn a_script_has_at_most_max_entries() {
        let ok = vec!["200"; MAX_SCRIPT_ENTRIES].join(",");
        assert!(ok.parse::<Script>().is_ok());
        let too_many = vec!["200"; MAX_SCRIPT_ENTRIES + 1].join(",");
        assert_eq!(
            too_many.parse::<Script>().unwrap_err(),
            Reason::TooManyEntries {
                max: MAX_SCRIPT_ENTRIES
            }
        );
    }

    #[test]
    fn a_script_displays_as_it_parses() {
        let s: Script = "503@250ms,200@1s,429".parse().unwrap();
        assert_eq!(s.to_string().parse::<Script>().unwrap(), s);
    }

    #[test]
    fn quoted_values_are_cut_short() {
        let long = "x".repeat(500);
        let err = Knobs::from_query(&format!("delay={long}")).unwrap_err();
        assert_eq!(err.value().len(), QUOTE_MAX + 3);
        assert!(err.to_string().len() < 300);
    }

    proptest! {
        #[test]
        fn the_query_parser_never_panics(query in ".{0,200}") {
            let _ = Knobs::from_query(&query);
        }

        #[test]
        fn the_script_parser_never_panics(script in "[0-9@,a-z ]{0,60}") {
            if let Ok(s) = script.parse::<Script>() {
                prop_assert!(!s.entries().is_empty());
                let _ = s.entry(0);
                let _ = s.entry(u32::MAX);
            }
        }

        #[test]
        fn every_valid_status_parses(code in 200u16..=599) {
            prop_assert_eq!(parse_status(&code.to_string()).unwrap().as_u16(), code);
        }
    }
}
