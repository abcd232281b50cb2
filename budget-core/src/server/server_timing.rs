//! [`ServerTiming`]: whether a response shows the request's ledger, the
//! switch a public service turns (docs/contract.md §4).

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Whether the budget layer's responses carry the request's ledger as
/// `Server-Timing` (`server_timing` in [`ServerConfig`](super::ServerConfig)).
///
/// The ledger names a service's dependencies, their replicas' addresses
/// and why calls were skipped: what a caller inside the system wants to
/// read and a public one should not. A service that answers the public
/// sets `never`, or `when` a marker header that only trusted callers (an
/// internal gateway, an operator debugging) send.
///
/// | value | `Server-Timing` on the response |
/// | --- | --- |
/// | `"always"` (default) | the ledger, on every answer of the layer |
/// | `"never"` | none: the layer adds none and removes any the handler set |
/// | `{ when = { header = "x-budget-debug", value = "…" } }` | the ledger on requests that carry `header: value`; none on others |
///
/// With `never`, and `when` the marker is missing, the ledger is still
/// kept: the handler, its dependency calls, metrics and traces read it as
/// before. The marker's value is compared in time independent of where
/// it first differs, and never shows in `Debug` output.
///
/// # Example
///
/// ```
/// use budget_core::server::{ServerConfig, ServerTiming};
///
/// let public: ServerConfig = toml::from_str(r#"server_timing = "never""#).unwrap();
/// assert_eq!(public.server_timing, ServerTiming::Never);
///
/// let debug: ServerConfig = toml::from_str(
///     r#"server_timing = { when = { header = "x-budget-debug", value = "s3cret" } }"#,
/// ).unwrap();
/// let mut headers = http::HeaderMap::new();
/// assert!(!debug.server_timing.shows(&headers));
/// headers.insert("x-budget-debug", "s3cret".parse().unwrap());
/// assert!(debug.server_timing.shows(&headers));
///
/// let bad = toml::from_str::<ServerConfig>(r#"server_timing = { when = { header = "a b", value = "x" } }"#);
/// assert!(bad.unwrap_err().to_string().contains("not a valid header name"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum ServerTiming {
    /// Every answer carries the ledger.
    #[default]
    Always,
    /// No answer carries a `Server-Timing` header.
    Never,
    /// Only answers to requests carrying `header: value`.
    When {
        /// The marker's header name.
        #[serde(with = "name")]
        header: HeaderName,
        /// The marker's value (kept out of `Debug` output).
        #[serde(with = "value")]
        value: HeaderValue,
    },
}

impl ServerTiming {
    /// The ledger only on requests that carry `header: value`; `value` is
    /// marked sensitive (out of `Debug` output, and of HTTP/2 header
    /// compression's table should it be sent on).
    ///
    /// ```
    /// use budget_core::server::ServerTiming;
    /// use http::{HeaderName, HeaderValue};
    ///
    /// let when = ServerTiming::when(
    ///     HeaderName::from_static("x-budget-debug"),
    ///     HeaderValue::from_static("s3cret"),
    /// );
    /// assert!(!format!("{when:?}").contains("s3cret"));
    /// ```
    pub fn when(header: HeaderName, mut value: HeaderValue) -> Self {
        value.set_sensitive(true);
        Self::When { header, value }
    }

    /// Whether the answer to a request with `headers` carries the ledger.
    ///
    /// ```
    /// use budget_core::server::ServerTiming;
    /// let headers = http::HeaderMap::new();
    /// assert!(ServerTiming::Always.shows(&headers));
    /// assert!(!ServerTiming::Never.shows(&headers));
    /// ```
    #[inline]
    pub fn shows(&self, headers: &HeaderMap) -> bool {
        match self {
            Self::Always => true,
            Self::Never => false,
            Self::When { header, value } => marked(headers, header, value),
        }
    }
}

/// Whether `headers` carry `header` with `value` (`ServerTiming::When`).
#[inline(never)]
fn marked(headers: &HeaderMap, header: &HeaderName, value: &HeaderValue) -> bool {
    headers
        .get(header)
        .is_some_and(|sent| same(sent.as_bytes(), value.as_bytes()))
}

/// `a == b`, in a time that depends on their lengths only: a caller
/// guessing the marker learns nothing from how soon a guess is refused.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// `HeaderName` as a string in configs.
mod name {
    use super::*;

    pub(super) fn serialize<S: Serializer>(name: &HeaderName, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(name.as_str())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HeaderName, D::Error> {
        let text = String::deserialize(d)?;
        HeaderName::from_bytes(text.as_bytes())
            .map_err(|_| serde::de::Error::custom(format!("`{text}` is not a valid header name")))
    }
}

/// A sensitive `HeaderValue` as a string in configs.
mod value {
    use super::*;

    pub(super) fn serialize<S: Serializer>(value: &HeaderValue, s: S) -> Result<S::Ok, S::Error> {
        match value.to_str() {
            Ok(text) => s.serialize_str(text),
            Err(_) => s.serialize_bytes(value.as_bytes()),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HeaderValue, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Err(serde::de::Error::custom(
                "the marker's value must not be empty",
            ));
        }
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            serde::de::Error::custom("the marker's value is not a valid header value")
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_marker_shows_the_ledger() {
        let when = ServerTiming::when(
            HeaderName::from_static("x-budget-debug"),
            HeaderValue::from_static("s3cret"),
        );
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("x-budget-debug", HeaderValue::from_static(v));
            h
        };
        assert!(when.shows(&with("s3cret")));
        for wrong in ["s3cre", "s3cret!", "S3cret", ""] {
            assert!(!when.shows(&with(wrong)), "{wrong:?}");
        }
        assert!(!when.shows(&HeaderMap::new()));
    }

    #[test]
    fn an_empty_or_invalid_marker_is_a_config_error() {
        #[derive(Deserialize)]
        struct T {
            #[allow(dead_code)]
            server_timing: ServerTiming,
        }
        let parse = |s: &str| toml::from_str::<T>(s).err().map(|e| e.to_string());
        let empty = parse(r#"server_timing = { when = { header = "x-a", value = "" } }"#);
        assert!(empty.unwrap().contains("must not be empty"));
        let bad = parse(r#"server_timing = { when = { header = "x-a", value = "a\nb" } }"#);
        assert!(bad.unwrap().contains("not a valid header value"));
        let unknown = parse(r#"server_timing = "sometimes""#);
        assert!(unknown.unwrap().contains("unknown variant"));
        assert!(parse(r#"server_timing = "always""#).is_none());
    }

    #[test]
    fn the_marker_round_trips_through_a_config() {
        let when = ServerTiming::when(
            HeaderName::from_static("x-budget-debug"),
            HeaderValue::from_static("s3cret"),
        );
        let text = serde_json::to_string(&when).unwrap();
        assert_eq!(
            text,
            r#"{"when":{"header":"x-budget-debug","value":"s3cret"}}"#
        );
        assert_eq!(serde_json::from_str::<ServerTiming>(&text).unwrap(), when);
    }
}
