//! A small per-thread cache of rendered header values, for the one header
//! the budget layer writes on every response: the ingress-only ledger's
//! `Server-Timing` (`budget;dur=1500;desc="ingress"`), which the ledger
//! renders (feature `server`).
//!
//! Rendering that value, checking it and copying it into a fresh
//! allocation is about half of what the layer adds to a request
//! (BENCHMARKS.md, "The server layer's cost in instructions"). Requests
//! arriving with the same budget (a public edge's default, a client's fixed
//! budget, a downstream hop's budgets a few milliseconds apart) share one
//! value instead: a cached value is handed out as a clone (a reference
//! count), and a response's header is the same bytes it would have been.
//!
//! Direct-mapped by the key (the budget in tenths of a millisecond): a slot
//! holds the last value whose key falls on it, so memory is bounded
//! ([`SLOTS`] values per thread that renders them) and a miss costs one
//! rendering, as without the cache.

use std::cell::RefCell;

use http::HeaderValue;

/// Slots per thread: budgets that differ by less than this many tenths of
/// a millisecond (25.6 ms) never evict each other.
pub(crate) const SLOTS: usize = 256;

thread_local! {
    /// Filled on a thread's first use only.
    static VALUES: RefCell<Vec<Option<(u64, HeaderValue)>>> = const { RefCell::new(Vec::new()) };
}

/// The value cached for `key` on this thread, or `render`'s (cached for the
/// next request with `key`). `None` when `render` gives none (nothing is
/// cached then).
#[inline]
pub(crate) fn get_or_render(
    key: u64,
    render: impl FnOnce() -> Option<HeaderValue>,
) -> Option<HeaderValue> {
    let slot = (key % SLOTS as u64) as usize;
    VALUES
        .try_with(|values| {
            let mut values = values.try_borrow_mut().ok()?;
            // A hit is a compare and a reference count; the rest is the miss.
            if let Some(Some((cached, value))) = values.get(slot)
                && *cached == key
            {
                return Some(value.clone());
            }
            miss(&mut values, slot, key, render)
        })
        .ok()
        .flatten()
}

/// Renders `key`'s value into `slot` (the table made on the thread's first
/// miss).
#[cold]
#[inline(never)]
fn miss(
    values: &mut Vec<Option<(u64, HeaderValue)>>,
    slot: usize,
    key: u64,
    render: impl FnOnce() -> Option<HeaderValue>,
) -> Option<HeaderValue> {
    if values.is_empty() {
        values.resize(SLOTS, None);
    }
    let value = render()?;
    values[slot] = Some((key, value.clone()));
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &'static str) -> Option<HeaderValue> {
        Some(HeaderValue::from_static(text))
    }

    #[test]
    fn a_key_is_rendered_once_then_served_from_the_slot() {
        let mut renders = 0;
        for _ in 0..3 {
            let got = get_or_render(15_000, || {
                renders += 1;
                value("budget;dur=1500;desc=\"ingress\"")
            });
            assert_eq!(got, value("budget;dur=1500;desc=\"ingress\""));
        }
        assert_eq!(renders, 1);
    }

    #[test]
    fn keys_on_the_same_slot_evict_each_other_and_stay_correct() {
        let (a, b) = (7, 7 + SLOTS as u64);
        assert_eq!(get_or_render(a, || value("a")), value("a"));
        assert_eq!(get_or_render(b, || value("b")), value("b"));
        let mut rendered = false;
        assert_eq!(
            get_or_render(a, || {
                rendered = true;
                value("a")
            }),
            value("a")
        );
        assert!(rendered, "b took the slot");
    }

    #[test]
    fn nothing_rendered_is_nothing_cached() {
        assert_eq!(get_or_render(99, || None), None);
        assert_eq!(get_or_render(99, || value("x")), value("x"));
    }

    #[test]
    fn each_thread_has_its_own_values() {
        assert_eq!(get_or_render(5, || value("here")), value("here"));
        let there = std::thread::spawn(|| get_or_render(5, || value("there")))
            .join()
            .unwrap();
        assert_eq!(there, value("there"));
    }
}
