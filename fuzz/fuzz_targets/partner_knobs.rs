//! The slow partner's query knobs: `slow_partner::Knobs::from_query` and
//! the `script` parser (`slow_partner::Script: FromStr`).
//!
//! Input: the whole input, when UTF-8, is the raw query string (without the
//! `?`), and also, on its own, a `script` value.
//!
//! What must hold for any input:
//! - no panic, in parsing or in `Knobs::plan` / `Script::entry` for any
//!   attempt number;
//! - knobs that parse are within their documented bounds: durations at most
//!   `MAX_DURATION`, statuses in `200..=599`, `body_bytes` at most
//!   `MAX_BODY_BYTES`, a script of 1 to `MAX_SCRIPT_ENTRIES` entries, a
//!   tail's share in `(0, 1]`;
//! - a refused query names one of the knobs, its quoted value cut short;
//! - what parsed re-encodes: a script displays as text that parses to the
//!   same script, and the knobs, written back as a query
//!   (`form_urlencoded`, humantime durations), parse to the same knobs.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use slow_partner::{Knobs, MAX_BODY_BYTES, MAX_DURATION, MAX_SCRIPT_ENTRIES, Script};

const KNOBS: [&str; 8] = [
    "delay",
    "jitter",
    "status",
    "retry_after",
    "script",
    "drip",
    "body_bytes",
    "tail",
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(script) = text.parse::<Script>() {
        check_script(&script);
    }
    match Knobs::from_query(text) {
        Ok(knobs) => check_knobs(&knobs),
        Err(err) => {
            assert!(KNOBS.contains(&err.parameter()), "{err}");
            assert!(err.value().chars().count() <= 64 + 3, "{err}");
            assert!(err.to_string().contains(err.parameter()), "{err}");
        }
    }
});

fn check_duration(d: Duration) {
    assert!(d <= MAX_DURATION, "{d:?}");
}

fn check_status(status: http::StatusCode) {
    assert!((200..=599).contains(&status.as_u16()), "{status}");
}

fn check_script(script: &Script) {
    let entries = script.entries();
    assert!((1..=MAX_SCRIPT_ENTRIES).contains(&entries.len()));
    for entry in entries {
        check_status(entry.status);
        if let Some(delay) = entry.delay {
            check_duration(delay);
        }
    }
    assert_eq!(script.entry(0), &entries[0]);
    assert_eq!(script.entry(u32::MAX), entries.last().unwrap());
    let text = script.to_string();
    assert_eq!(text.parse::<Script>().as_ref(), Ok(script), "{text:?}");
}

fn check_knobs(knobs: &Knobs) {
    check_duration(knobs.delay);
    check_duration(knobs.jitter);
    if let Some(drip) = knobs.drip {
        check_duration(drip);
    }
    check_status(knobs.status);
    if let Some(n) = knobs.body_bytes {
        assert!(n <= MAX_BODY_BYTES);
    }
    if let Some(script) = &knobs.script {
        check_script(script);
    }
    if let Some(tail) = knobs.tail {
        check_duration(tail.delay());
        assert!(tail.share() > 0.0 && tail.share() <= 1.0, "{tail}");
    }
    for attempt in [0, 1, 2, 7, MAX_SCRIPT_ENTRIES as u32, u32::MAX] {
        let plan = knobs.plan(attempt);
        check_status(plan.status);
        check_duration(plan.delay);
    }

    let query = to_query(knobs);
    assert_eq!(
        Knobs::from_query(&query).as_ref(),
        Ok(knobs),
        "written back as {query:?}"
    );
}

/// The knobs as a query string, every knob that differs from the default.
fn to_query(knobs: &Knobs) -> String {
    let duration = |d: Duration| humantime::format_duration(d).to_string();
    let mut query = form_urlencoded::Serializer::new(String::new());
    if !knobs.delay.is_zero() {
        query.append_pair("delay", &duration(knobs.delay));
    }
    if !knobs.jitter.is_zero() {
        query.append_pair("jitter", &duration(knobs.jitter));
    }
    if knobs.status != http::StatusCode::OK {
        query.append_pair("status", knobs.status.as_str());
    }
    if let Some(value) = &knobs.retry_after {
        // It came from a query's `&str`: UTF-8.
        let value = std::str::from_utf8(value.as_bytes()).unwrap();
        query.append_pair("retry_after", value);
    }
    if let Some(script) = &knobs.script {
        query.append_pair("script", &script.to_string());
    }
    if let Some(drip) = knobs.drip {
        query.append_pair("drip", &duration(drip));
    }
    if let Some(n) = knobs.body_bytes {
        query.append_pair("body_bytes", &n.to_string());
    }
    if let Some(tail) = knobs.tail {
        query.append_pair("tail", &tail.to_string());
    }
    query.finish()
}
