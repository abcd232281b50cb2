//! The knobs of one stream (`GET /events`, `GET /ws`): its query string
//! over the defaults set with `PUT /admin/events` (docs/binaries.md).
//!
//! | parameter | meaning | form |
//! | --- | --- | --- |
//! | `rate` | events per second | a number, `0 < rate <= 10000` (default 10) |
//! | `retry` | an SSE stream starts with `retry: <ms>` | humantime |
//! | `drop_after` | end the stream cleanly after this many events | a whole number |
//! | `stall` | after the first event, send nothing this long | humantime or `forever` |
//! | `heartbeat` | an SSE comment `: hb` every interval while idle | humantime |
//! | `status` | refuse the opening with this status (`200`: a stream) | `200`..=`599` |
//! | `from` | the first id (SSE, without `Last-Event-ID`) | a u64 (default 1) |
//! | `last_id` | resume a WebSocket after this id | a u64 |
//! | `close_code` | the WebSocket close code after `drop_after` | a u16 (default 1000) |
//!
//! As for the work knobs, a malformed or repeated value is a `400` naming
//! the parameter, and unknown parameters are ignored.

use std::time::Duration;

use http::StatusCode;
use serde_json::{Value, json};

use crate::knobs::{QueryError, Reason, parse_duration, parse_status};

/// The default and the largest `rate`, in events per second.
const DEFAULT_RATE: f64 = 10.0;
const MAX_RATE: f64 = 10_000.0;

/// After the first event, how long a stream sends nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stall {
    /// This long, then the stream continues.
    For(Duration),
    /// Until the stream is cut or its client goes away.
    Forever,
}

/// What a stream does, before its own ids: the admin defaults, or one
/// stream's after its query overrode them.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StreamDefaults {
    pub(crate) rate: f64,
    pub(crate) retry: Option<Duration>,
    pub(crate) drop_after: Option<u64>,
    pub(crate) stall: Option<Stall>,
    pub(crate) heartbeat: Option<Duration>,
    pub(crate) status: Option<StatusCode>,
}

impl Default for StreamDefaults {
    fn default() -> Self {
        Self {
            rate: DEFAULT_RATE,
            retry: None,
            drop_after: None,
            stall: None,
            heartbeat: None,
            status: None,
        }
    }
}

/// One stream's plan: its knobs, where its ids start, how a WebSocket closes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StreamKnobs {
    pub(crate) base: StreamDefaults,
    /// `from`, the SSE stream's first id without `Last-Event-ID`.
    pub(crate) from: u64,
    /// `last_id + 1`: where a resumed WebSocket starts.
    pub(crate) resume_at: Option<u64>,
    pub(crate) close_code: u16,
}

/// The query parameters a stream reads.
const PARAMS: [&str; 9] = [
    "rate",
    "retry",
    "drop_after",
    "stall",
    "heartbeat",
    "status",
    "from",
    "last_id",
    "close_code",
];

impl StreamKnobs {
    /// The knobs of `query` over `defaults`.
    pub(crate) fn from_query(query: &str, defaults: StreamDefaults) -> Result<Self, QueryError> {
        let mut knobs = StreamKnobs {
            base: defaults,
            from: 1,
            resume_at: None,
            close_code: 1000,
        };
        let mut seen = [false; PARAMS.len()];
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let Some(index) = PARAMS.iter().position(|p| *p == key) else {
                continue;
            };
            let name = PARAMS[index];
            let err = |reason| QueryError::new(name, &value, reason);
            if std::mem::replace(&mut seen[index], true) {
                return Err(err(Reason::Repeated));
            }
            knobs.set(name, &value).map_err(err)?;
        }
        Ok(knobs)
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), Reason> {
        let base = &mut self.base;
        match name {
            "rate" => base.rate = parse_rate(value)?,
            "retry" => base.retry = Some(parse_duration(value)?),
            "drop_after" => base.drop_after = Some(parse_u64(value)?),
            "stall" => base.stall = Some(parse_stall(value)?),
            "heartbeat" => base.heartbeat = Some(parse_interval(value)?),
            "status" => base.status = stream_status(parse_status(value)?),
            "from" => self.from = parse_u64(value)?,
            "last_id" => self.resume_at = Some(resume_after(value)?),
            _ => {
                self.close_code = value
                    .parse()
                    .map_err(|_| Reason::OutOfRange("a whole number 0..=65535"))?;
            }
        }
        Ok(())
    }
}

/// The id after `last` (a `Last-Event-ID` or a `last_id`): `last + 1`.
pub(crate) fn resume_after(last: &str) -> Result<u64, Reason> {
    parse_u64(last)?
        .checked_add(1)
        .ok_or(Reason::OutOfRange("an id below 18446744073709551615"))
}

/// `200` asks for the stream itself; any other status refuses it.
fn stream_status(status: StatusCode) -> Option<StatusCode> {
    (status != StatusCode::OK).then_some(status)
}

fn parse_u64(value: &str) -> Result<u64, Reason> {
    if value.is_empty() {
        return Err(Reason::Empty);
    }
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Reason::NotANumber);
    }
    value
        .parse()
        .map_err(|_| Reason::OutOfRange("a whole number up to 18446744073709551615"))
}

fn parse_rate(value: &str) -> Result<f64, Reason> {
    let rate: f64 = value.parse().map_err(|_| Reason::NotANumber)?;
    check_rate(rate)
}

fn check_rate(rate: f64) -> Result<f64, Reason> {
    if rate.is_finite() && rate > 0.0 && rate <= MAX_RATE {
        Ok(rate)
    } else {
        Err(Reason::OutOfRange("0 < rate <= 10000"))
    }
}

fn parse_stall(value: &str) -> Result<Stall, Reason> {
    if value == "forever" {
        return Ok(Stall::Forever);
    }
    parse_duration(value).map(Stall::For)
}

/// A heartbeat interval: a duration, not zero.
fn parse_interval(value: &str) -> Result<Duration, Reason> {
    let d = parse_duration(value)?;
    if d.is_zero() {
        return Err(Reason::OutOfRange("a duration above zero"));
    }
    Ok(d)
}

impl StreamDefaults {
    /// The JSON of `GET /admin/events`: durations in humantime, `null`
    /// when unset.
    pub(crate) fn to_json(&self) -> Value {
        let duration = |d: Option<Duration>| {
            d.map_or(Value::Null, |d| {
                Value::String(humantime::format_duration(d).to_string())
            })
        };
        let rate = if self.rate.fract() == 0.0 {
            json!(self.rate as u64)
        } else {
            json!(self.rate)
        };
        let stall = match self.stall {
            None => Value::Null,
            Some(Stall::Forever) => Value::String("forever".to_owned()),
            Some(Stall::For(d)) => duration(Some(d)),
        };
        json!({
            "rate": rate,
            "retry": duration(self.retry),
            "drop_after": self.drop_after,
            "stall": stall,
            "heartbeat": duration(self.heartbeat),
            "status": self.status.map(|s| s.as_u16()),
        })
    }

    /// These defaults with the fields of a `PUT /admin/events` body
    /// applied: a field given sets its default (`null` unsets it, back to
    /// 10 for `rate`), a field absent keeps it.
    pub(crate) fn updated(&self, body: &[u8]) -> Result<Self, QueryError> {
        let bad = |why: String| QueryError::new("body", "", Reason::Body(why));
        let value: Value = serde_json::from_slice(body).map_err(|e| bad(e.to_string()))?;
        let object = value
            .as_object()
            .ok_or_else(|| bad("not a json object".to_owned()))?;
        let mut next = self.clone();
        for (key, value) in object {
            let Some(name) = PARAMS[..6].iter().find(|p| **p == key) else {
                return Err(bad(format!("unknown field `{key}`")));
            };
            next.set_json(name, value)?;
        }
        Ok(next)
    }

    fn set_json(&mut self, name: &'static str, value: &Value) -> Result<(), QueryError> {
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let err = |reason| QueryError::new(name, &text, reason);
        if value.is_null() {
            match name {
                "rate" => self.rate = DEFAULT_RATE,
                "retry" => self.retry = None,
                "drop_after" => self.drop_after = None,
                "stall" => self.stall = None,
                "heartbeat" => self.heartbeat = None,
                _ => self.status = None,
            }
            return Ok(());
        }
        let string = || {
            value
                .as_str()
                .ok_or(Reason::Body(format!("`{name}` is not a string")))
        };
        let number = || value.as_u64().ok_or(Reason::NotANumber);
        match name {
            "rate" => {
                self.rate = value
                    .as_f64()
                    .ok_or(Reason::NotANumber)
                    .and_then(check_rate)
                    .map_err(err)?
            }
            "retry" => self.retry = Some(string().and_then(parse_duration).map_err(err)?),
            "drop_after" => self.drop_after = Some(number().map_err(err)?),
            "stall" => self.stall = Some(string().and_then(parse_stall).map_err(err)?),
            "heartbeat" => self.heartbeat = Some(string().and_then(parse_interval).map_err(err)?),
            _ => {
                let status = number()
                    .and_then(|n| parse_status(&n.to_string()))
                    .map_err(err)?;
                self.status = stream_status(status);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_overrides_the_defaults() {
        let defaults = StreamDefaults {
            drop_after: Some(5),
            ..StreamDefaults::default()
        };
        let knobs = StreamKnobs::from_query(
            "rate=2.5&retry=2s&stall=forever&status=503&from=7&last_id=9&close_code=4000",
            defaults,
        )
        .unwrap();
        assert_eq!(knobs.base.rate, 2.5);
        assert_eq!(knobs.base.retry, Some(Duration::from_secs(2)));
        assert_eq!(knobs.base.drop_after, Some(5));
        assert_eq!(knobs.base.stall, Some(Stall::Forever));
        assert_eq!(knobs.base.status, Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(
            (knobs.from, knobs.resume_at, knobs.close_code),
            (7, Some(10), 4000)
        );
    }

    #[test]
    fn bad_stream_knobs_name_their_parameter() {
        for (query, parameter) in [
            ("rate=0", "rate"),
            ("rate=10001", "rate"),
            ("rate=NaN", "rate"),
            ("rate=1&rate=2", "rate"),
            ("stall=sometime", "stall"),
            ("heartbeat=0s", "heartbeat"),
            ("status=99", "status"),
            ("from=-1", "from"),
            ("last_id=18446744073709551615", "last_id"),
            ("close_code=70000", "close_code"),
        ] {
            let err = StreamKnobs::from_query(query, StreamDefaults::default()).unwrap_err();
            assert_eq!(err.parameter(), parameter, "{query}");
        }
    }

    #[test]
    fn the_admin_body_updates_the_fields_it_names() {
        let defaults = StreamDefaults::default()
            .updated(br#"{"rate":20,"retry":"2s","stall":"forever","status":503}"#)
            .unwrap();
        assert_eq!(
            defaults.to_json(),
            json!({"rate":20,"retry":"2s","drop_after":null,"stall":"forever",
                   "heartbeat":null,"status":503})
        );
        let back = defaults.updated(br#"{"rate":null,"status":null}"#).unwrap();
        assert_eq!(back.rate, DEFAULT_RATE);
        assert_eq!(back.status, None);
        assert_eq!(back.retry, Some(Duration::from_secs(2)));
        for body in [
            &b"[]"[..],
            b"{\"nope\":1}",
            b"{\"rate\":0}",
            b"{\"retry\":5}",
        ] {
            assert!(defaults.updated(body).is_err(), "{body:?}");
        }
    }
}
