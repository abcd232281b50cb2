//! [`upstream_time`]: how long the dependency took as Envoy saw it.

use std::time::Duration;

use http::HeaderMap;

use super::X_ENVOY_UPSTREAM_SERVICE_TIME;
use crate::header::{InvalidHeader, parse_millis};

/// What an answer's `x-envoy-upstream-service-time` says: the
/// dependency's time in Envoy's eyes, or the malformed value (the ledger
/// notes it: it is never read as zero).
///
/// ```
/// use std::time::Duration;
/// use budget_core::proxy::UpstreamTime;
///
/// let read: UpstreamTime = Ok(Duration::from_millis(35));
/// assert_eq!(read.unwrap().as_millis(), 35);
/// ```
pub type UpstreamTime = Result<Duration, InvalidHeader>;

/// Reads an answer's `x-envoy-upstream-service-time` (whole milliseconds,
/// the grammar of every millisecond header: docs/contract.md §1): `None`
/// when absent (an answer Envoy did not carry), an [`InvalidHeader`]
/// naming it when malformed.
///
/// ```
/// use std::time::Duration;
/// use budget_core::proxy::upstream_time;
///
/// let mut headers = http::HeaderMap::new();
/// assert!(upstream_time(&headers).is_none());
/// headers.insert("x-envoy-upstream-service-time", "35".parse()?);
/// assert_eq!(upstream_time(&headers).unwrap()?, Duration::from_millis(35));
/// headers.insert("x-envoy-upstream-service-time", "fast".parse()?);
/// let bad = upstream_time(&headers).unwrap().unwrap_err();
/// assert_eq!(bad.to_string(), "malformed `x-envoy-upstream-service-time` header \"fast\": non-digit character 'f'");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn upstream_time(headers: &HeaderMap) -> Option<UpstreamTime> {
    let value = headers.get(X_ENVOY_UPSTREAM_SERVICE_TIME)?;
    Some(parse_millis(value.as_bytes()).map_err(|reason| {
        InvalidHeader::new(&X_ENVOY_UPSTREAM_SERVICE_TIME, value.as_bytes(), reason)
    }))
}
