//! Per-path hangs switched at run time: while a path hangs, every request
//! to it is counted and then held without an answer, until its caller goes
//! away or the partner stops: the listener's `hang` mode for one path,
//! while the other paths answer as usual (a dependency that accepts and
//! never replies, behind a partner that is otherwise healthy).
//!
//! Set through [`PartnerHandle::set_path_hang`](crate::PartnerHandle::set_path_hang).
//! Requests already held when the hang ends stay held (nothing answers
//! them late); the end concerns requests that arrive after it. A path with
//! a status override ([`PartnerHandle::set_path_status`](crate::PartnerHandle::set_path_status))
//! answers that status instead: the override is checked first.
//!
//! Per path, [`HungPath`] counts the calls held now and at most at once
//! (since start or the last reset), in [`StatsSnapshot::hung`](crate::StatsSnapshot::hung):
//! how many calls a client kept sending into a dependency that never
//! answers.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::overrides::{MAX_PATH_OVERRIDES, OverrideError, check_path};

/// One path that hangs or hung, as `GET /stats` lists it (in
/// [`StatsSnapshot::hung`](crate::StatsSnapshot::hung)).
///
/// ```
/// use slow_partner::HungPath;
///
/// let p: HungPath = serde_json::from_str(
///     r#"{"hanging":true,"in_flight":1,"in_flight_max":3,"calls":7}"#,
/// ).unwrap();
/// assert_eq!((p.in_flight, p.in_flight_max, p.calls), (1, 3, 7));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HungPath {
    /// Whether the path hangs now.
    pub hanging: bool,
    /// Calls held now (their callers have not gone away yet).
    pub in_flight: u64,
    /// The most calls held at once since start or the last reset (a reset
    /// starts it at `in_flight`).
    pub in_flight_max: u64,
    /// Calls held since start or the last reset.
    pub calls: u64,
}

/// The hanging paths and their counters, shared by every connection.
#[derive(Debug, Default)]
pub(crate) struct Hangs {
    map: Mutex<BTreeMap<String, HungPath>>,
}

impl Hangs {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, HungPath>> {
        // Plain counters stay consistent even if a holder panicked.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes `path` hang (`true`) or answer again (`false`).
    pub(crate) fn set(&self, path: &str, hang: bool) -> Result<(), OverrideError> {
        check_path(path)?;
        let mut map = self.lock();
        if hang && !map.contains_key(path) && map.len() >= MAX_PATH_OVERRIDES {
            map.retain(|_, p| p.hanging || p.in_flight > 0);
            if map.len() >= MAX_PATH_OVERRIDES {
                return Err(OverrideError::TooMany {
                    max: MAX_PATH_OVERRIDES,
                });
            }
        }
        match map.get_mut(path) {
            Some(p) => p.hanging = hang,
            None if hang => {
                map.insert(
                    path.to_owned(),
                    HungPath {
                        hanging: true,
                        ..HungPath::default()
                    },
                );
            }
            None => {}
        }
        Ok(())
    }

    /// When `path` hangs, counts one more call held on it and returns
    /// `true`; the caller must [`leave`](Self::leave) when the call ends.
    pub(crate) fn enter(&self, path: &str) -> bool {
        let mut map = self.lock();
        let Some(p) = map.get_mut(path).filter(|p| p.hanging) else {
            return false;
        };
        p.in_flight += 1;
        p.in_flight_max = p.in_flight_max.max(p.in_flight);
        p.calls += 1;
        true
    }

    /// One call held on `path` ended.
    pub(crate) fn leave(&self, path: &str) {
        if let Some(p) = self.lock().get_mut(path) {
            p.in_flight = p.in_flight.saturating_sub(1);
        }
    }

    /// Every path that hangs, hung since the last reset, or still holds
    /// calls.
    pub(crate) fn snapshot(&self) -> BTreeMap<String, HungPath> {
        self.lock().clone()
    }

    /// The counters of `path`, if it hangs or hung.
    pub(crate) fn get(&self, path: &str) -> Option<HungPath> {
        self.lock().get(path).copied()
    }

    /// Forgets the paths that neither hang nor hold a call, and restarts
    /// the others' counts from now.
    pub(crate) fn reset(&self) {
        let mut map = self.lock();
        map.retain(|_, p| p.hanging || p.in_flight > 0);
        for p in map.values_mut() {
            p.in_flight_max = p.in_flight;
            p.calls = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_hanging_path_holds_calls_and_the_most_at_once_is_kept() {
        let hangs = Hangs::default();
        assert!(!hangs.enter("/inventory"), "not hanging: not held");
        hangs.set("/inventory", true).unwrap();
        assert!(hangs.enter("/inventory"));
        assert!(hangs.enter("/inventory"));
        assert!(!hangs.enter("/pricing"));
        hangs.leave("/inventory");
        assert!(hangs.enter("/inventory"));
        let p = hangs.get("/inventory").unwrap();
        assert_eq!((p.in_flight, p.in_flight_max, p.calls), (2, 2, 3));
        // The hang ends: held calls stay held, new ones are not.
        hangs.set("/inventory", false).unwrap();
        assert!(!hangs.enter("/inventory"));
        hangs.reset();
        let p = hangs.get("/inventory").unwrap();
        assert_eq!(
            (p.hanging, p.in_flight, p.in_flight_max, p.calls),
            (false, 2, 2, 0)
        );
        hangs.leave("/inventory");
        hangs.leave("/inventory");
        hangs.leave("/inventory");
        assert_eq!(hangs.get("/inventory").unwrap().in_flight, 0);
        hangs.reset();
        assert!(
            hangs.snapshot().is_empty(),
            "idle and not hanging: forgotten"
        );
    }

    #[test]
    fn a_hang_takes_the_paths_an_override_takes() {
        let hangs = Hangs::default();
        assert_eq!(
            hangs.set("inventory", true).unwrap_err().parameter(),
            "path"
        );
        assert!(matches!(
            hangs.set("/stats", true),
            Err(OverrideError::Reserved(_))
        ));
        hangs.set("/never-hung", false).unwrap();
        assert!(hangs.snapshot().is_empty());
        for i in 0..MAX_PATH_OVERRIDES {
            hangs.set(&format!("/{i}"), true).unwrap();
        }
        assert!(matches!(
            hangs.set("/one-more", true),
            Err(OverrideError::TooMany { .. })
        ));
        hangs.set("/0", false).unwrap();
        hangs.set("/one-more", true).unwrap();
    }
}
