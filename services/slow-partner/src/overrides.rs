//! Per-path faults switched at run time: while a path has an override,
//! every request to it is answered with the override's status at once (no
//! delay, no worker), for an "outage" of one dependency in a load test.
//!
//! Set through [`PartnerHandle::set_path_status`](crate::PartnerHandle::set_path_status)
//! or `PUT /admin/paths/{path}` (the HTTP side is in the app module).
//! Requests already waiting for a worker or in their delay when an override
//! is set finish as they started; the override concerns requests that
//! arrive after it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use http::{HeaderValue, StatusCode};
use serde::{Deserialize, Serialize};

use crate::stats::MAX_PATH_LEN;
use crate::workers::is_reserved_path;

/// How many paths may be overridden at once.
pub const MAX_PATH_OVERRIDES: usize = 1024;

/// What a path answers while it is overridden, as `GET /admin/paths` lists
/// it.
///
/// ```
/// use slow_partner::PathOverride;
///
/// let o: PathOverride = serde_json::from_str(r#"{"status":503,"retry_after":"1"}"#).unwrap();
/// assert_eq!((o.status, o.retry_after.as_deref()), (503, Some("1")));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PathOverride {
    /// The status every request to the path gets (`200..=599`).
    pub status: u16,
    /// The `Retry-After` header sent with it, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
}

/// Why an override cannot be set.
///
/// ```
/// let err = slow_partner::OverrideError::Status(99);
/// assert_eq!(err.parameter(), "status");
/// assert_eq!(err.to_string(), "status 99 is outside 200..=599 (a 1xx is not a final answer)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OverrideError {
    /// The status is outside `200..=599`.
    #[error("status {0} is outside 200..=599 (a 1xx is not a final answer)")]
    Status(u64),
    /// The path does not start with `/`.
    #[error("path `{0}` must start with `/`")]
    NoLeadingSlash(String),
    /// The path is one of the partner's own (`/stats`, `/healthz`,
    /// `/admin/...`).
    #[error("path `{0}` is reserved and cannot be overridden")]
    Reserved(String),
    /// The path is longer than [`MAX_PATH_LEN`](crate::MAX_PATH_LEN) bytes.
    #[error("path is longer than {max} bytes")]
    PathTooLong {
        /// The maximum.
        max: usize,
    },
    /// `retry_after` is not a valid header value.
    #[error("retry_after `{0}` is not a valid header value")]
    RetryAfter(String),
    /// [`MAX_PATH_OVERRIDES`] paths are overridden already.
    #[error("more than {max} paths would be overridden")]
    TooMany {
        /// The maximum.
        max: usize,
    },
    /// The admin request's body is not what the endpoint takes.
    #[error(
        "body is not {{\"status\": 503}}, {{\"status\": 503, \"retry_after\": \"1\"}} or {{\"status\": null}}: {0}"
    )]
    Body(String),
}

impl OverrideError {
    /// The input that is wrong: `status`, `path`, `retry_after` or `body`.
    ///
    /// ```
    /// # use slow_partner::OverrideError;
    /// assert_eq!(OverrideError::NoLeadingSlash("p".into()).parameter(), "path");
    /// ```
    pub fn parameter(&self) -> &'static str {
        match self {
            Self::Status(_) => "status",
            Self::NoLeadingSlash(_) | Self::Reserved(_) | Self::PathTooLong { .. } => "path",
            Self::TooMany { .. } => "path",
            Self::RetryAfter(_) => "retry_after",
            Self::Body(_) => "body",
        }
    }
}

/// A validated override, ready to answer with.
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    pub(crate) status: StatusCode,
    pub(crate) retry_after: Option<HeaderValue>,
}

impl Fault {
    /// Checks `status` (`200..=599`) and `retry_after` (a header value).
    pub(crate) fn new(status: u64, retry_after: Option<&str>) -> Result<Self, OverrideError> {
        let status = u16::try_from(status)
            .ok()
            .filter(|s| (200..=599).contains(s))
            .and_then(|s| StatusCode::from_u16(s).ok())
            .ok_or(OverrideError::Status(status))?;
        let retry_after = retry_after
            .map(|v| {
                HeaderValue::from_str(v)
                    .ok()
                    .filter(|_| !v.is_empty())
                    .ok_or_else(|| OverrideError::RetryAfter(v.to_owned()))
            })
            .transpose()?;
        Ok(Self {
            status,
            retry_after,
        })
    }

    fn view(&self) -> PathOverride {
        PathOverride {
            status: self.status.as_u16(),
            retry_after: self
                .retry_after
                .as_ref()
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        }
    }
}

/// Checks that `path` can be overridden.
pub(crate) fn check_path(path: &str) -> Result<(), OverrideError> {
    if !path.starts_with('/') {
        return Err(OverrideError::NoLeadingSlash(path.to_owned()));
    }
    if path.len() > MAX_PATH_LEN {
        return Err(OverrideError::PathTooLong { max: MAX_PATH_LEN });
    }
    if is_reserved_path(path) {
        return Err(OverrideError::Reserved(path.to_owned()));
    }
    Ok(())
}

/// The overrides of every path, shared by every connection and the handle.
#[derive(Debug, Default)]
pub(crate) struct Overrides {
    map: Mutex<BTreeMap<String, Fault>>,
}

impl Overrides {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Fault>> {
        // A map of plain values stays consistent even if a holder panicked.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets (`Some`) or removes (`None`) the override of `path`.
    pub(crate) fn set(&self, path: &str, fault: Option<Fault>) -> Result<(), OverrideError> {
        check_path(path)?;
        let mut map = self.lock();
        match fault {
            None => {
                map.remove(path);
            }
            Some(fault) => {
                if map.len() >= MAX_PATH_OVERRIDES && !map.contains_key(path) {
                    return Err(OverrideError::TooMany {
                        max: MAX_PATH_OVERRIDES,
                    });
                }
                map.insert(path.to_owned(), fault);
            }
        }
        Ok(())
    }

    /// The override of `path`, if any.
    pub(crate) fn get(&self, path: &str) -> Option<Fault> {
        self.lock().get(path).cloned()
    }

    /// Every override, by path.
    pub(crate) fn list(&self) -> BTreeMap<String, PathOverride> {
        self.lock()
            .iter()
            .map(|(path, fault)| (path.clone(), fault.view()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_must_be_a_final_one() {
        for bad in [0, 99, 100, 199, 600, 70_000] {
            assert_eq!(
                Fault::new(bad, None).unwrap_err(),
                OverrideError::Status(bad)
            );
        }
        assert_eq!(Fault::new(503, None).unwrap().status, 503);
        assert_eq!(Fault::new(200, None).unwrap().status, 200);
    }

    #[test]
    fn retry_after_must_be_a_non_empty_header_value() {
        assert!(matches!(
            Fault::new(503, Some("a\nb")),
            Err(OverrideError::RetryAfter(_))
        ));
        assert!(matches!(
            Fault::new(503, Some("")),
            Err(OverrideError::RetryAfter(_))
        ));
        assert_eq!(
            Fault::new(503, Some("1")).unwrap().retry_after.unwrap(),
            "1"
        );
    }

    #[test]
    fn only_a_slash_path_that_is_not_reserved_can_be_overridden() {
        let overrides = Overrides::default();
        let fault = || Some(Fault::new(503, None).unwrap());
        assert_eq!(
            overrides.set("pricing", fault()).unwrap_err().parameter(),
            "path"
        );
        assert!(matches!(
            overrides.set("/stats", fault()),
            Err(OverrideError::Reserved(_))
        ));
        assert!(matches!(
            overrides.set(&format!("/{}", "x".repeat(MAX_PATH_LEN)), fault()),
            Err(OverrideError::PathTooLong { .. })
        ));
        overrides.set("/pricing", fault()).unwrap();
        assert_eq!(overrides.list()["/pricing"].status, 503);
        overrides.set("/pricing", None).unwrap();
        assert!(overrides.list().is_empty());
        overrides.set("/never-set", None).unwrap();
    }

    #[test]
    fn the_overrides_are_bounded() {
        let overrides = Overrides::default();
        let fault = || Some(Fault::new(503, None).unwrap());
        for i in 0..MAX_PATH_OVERRIDES {
            overrides.set(&format!("/{i}"), fault()).unwrap();
        }
        assert_eq!(
            overrides.set("/one-more", fault()),
            Err(OverrideError::TooMany {
                max: MAX_PATH_OVERRIDES
            })
        );
        overrides.set("/0", fault()).unwrap();
    }
}
