//! Milliseconds as `Server-Timing` writes them (at most one decimal),
//! by hand on the stack, and the ingress entry's header value, the one
//! every response carries, built from constant parts around them.

use std::time::Duration;

use super::*;

/// Milliseconds with at most one decimal: `300`, `1.5`, `0.4`.
pub(super) fn write_millis(out: &mut String, d: Duration) {
    out.push_str(std::str::from_utf8(MillisText::new(d).as_bytes()).unwrap_or("0"));
}

/// `d` in milliseconds with at most one decimal, as ASCII on the stack. By
/// hand: `write!` goes through the formatter's machinery, and this runs on
/// every response.
pub(super) struct MillisText {
    /// The text is `bytes[start..]`: written from the end, the tenth last.
    bytes: [u8; crate::decimal::U64_DIGITS + 2],
    start: usize,
}

impl MillisText {
    pub(super) fn new(d: Duration) -> Self {
        // u64 arithmetic (the u128 of `as_micros` divides slowly); a
        // duration too long for u64 milliseconds (585 million years)
        // saturates.
        let (whole, tenth) = match d
            .as_secs()
            .checked_mul(1000)
            .and_then(|ms| ms.checked_add(u64::from(d.subsec_millis())))
        {
            Some(whole) => (whole, (d.subsec_micros() % 1000 / 100) as u8),
            None => (u64::MAX, 0),
        };
        let mut bytes = [0u8; crate::decimal::U64_DIGITS + 2];
        let mut at = bytes.len();
        if tenth != 0 {
            bytes[at - 1] = b'0' + tenth;
            bytes[at - 2] = b'.';
            at -= 2;
        }
        let start = crate::decimal::digits_ending_at(&mut bytes, at, whole);
        Self { bytes, start }
    }

    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    /// The text of `d` as a number, in tenths of a millisecond: one key per
    /// text. `None` past what a `u64` holds (no budget is that long).
    #[cfg(feature = "server")]
    pub(super) fn key(d: Duration) -> Option<u64> {
        d.as_secs()
            .checked_mul(10_000)?
            .checked_add(u64::from(d.subsec_micros() / 100))
    }
}

/// `parts` joined, at compile time (`N` is their total length).
const fn joined<const N: usize>(parts: &[&[u8]]) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut at, mut part) = (0, 0);
    while part < parts.len() {
        let mut i = 0;
        while i < parts[part].len() {
            out[at] = parts[part][i];
            at += 1;
            i += 1;
        }
        part += 1;
    }
    assert!(at == N, "N is the parts' total length");
    out
}

/// What comes before the budget's milliseconds in the ingress entry.
pub(super) const INGRESS_HEAD: [u8; INGRESS_METRIC.len() + 5] =
    joined(&[INGRESS_METRIC.as_bytes(), b";dur="]);
/// What comes after them.
pub(super) const INGRESS_TAIL: [u8; INGRESS_DESC.len() + 8] =
    joined(&[b";desc=\"", INGRESS_DESC.as_bytes(), b"\""]);

/// The ingress entry as `Server-Timing`, `budget;dur=1500;desc="ingress"`,
/// in parts (`millis` from [`MillisText`]): every response's first entry,
/// whose name and description are constants that need no mending. The one
/// rendering of it, for [`Entry::render`] and the server's header fast
/// path (`ingress_header_value`).
pub(super) fn ingress_parts(millis: &[u8]) -> [&[u8]; 3] {
    [&INGRESS_HEAD, millis, &INGRESS_TAIL]
}

/// The ingress-only ledger's header value: the same budget's value of an
/// earlier response on this thread when there is one (the server's header
/// cache), else built on the stack from [`ingress_parts`] and copied into
/// the header once.
#[cfg(feature = "server")]
pub(super) fn ingress_header_value(budget: Duration) -> Option<http::HeaderValue> {
    match MillisText::key(budget) {
        Some(key) => {
            header_cache::get_or_render(key, || ingress_header_render(&MillisText::new(budget)))
        }
        None => ingress_header_render(&MillisText::new(budget)),
    }
}

#[cfg(feature = "server")]
fn ingress_header_render(millis: &MillisText) -> Option<http::HeaderValue> {
    let mut buf = [0u8; 64];
    let mut at = 0;
    for part in ingress_parts(millis.as_bytes()) {
        buf[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    http::HeaderValue::from_bytes(&buf[..at]).ok()
}
