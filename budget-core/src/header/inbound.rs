//! Ingress: from a request's headers to the budget the service works with.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use super::decode::{self, Decoded, InvalidHeader};
use crate::config::ConfigError;

/// What to do with a budget header that is present but malformed.
///
/// Deserialises from `"reject"` or `"use-default"`.
///
/// # Example
///
/// ```
/// use budget_core::header::OnMalformed;
///
/// assert_eq!(OnMalformed::default(), OnMalformed::Reject);
/// let policy: OnMalformed = serde_json::from_str("\"use-default\"").unwrap();
/// assert_eq!(policy, OnMalformed::UseDefault);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OnMalformed {
    /// Refuse the request: `400 Bad Request` naming the header.
    #[default]
    Reject,
    /// Ignore the malformed header(s): the smallest remaining valid header
    /// wins, else the default budget applies.
    UseDefault,
}

/// One service's ingress policy: the budget when none arrives, the maximum
/// any budget is clamped to, and what to do with a malformed header.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::{Inbound, OnMalformed};
///
/// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(10))?
///     .with_on_malformed(OnMalformed::UseDefault);
///
/// // No header: the default.
/// let resolved = inbound.resolve(&http::HeaderMap::new())?;
/// assert_eq!((resolved.budget, resolved.source), (Duration::from_secs(2), None));
///
/// // An untrusted caller cannot make the service wait an hour.
/// let mut headers = http::HeaderMap::new();
/// headers.insert("request-budget-ms", "3600000".parse()?);
/// let resolved = inbound.resolve(&headers)?;
/// assert_eq!(resolved.budget, Duration::from_secs(10));
/// assert!(resolved.clamped);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inbound {
    default: Duration,
    max: Duration,
    on_malformed: OnMalformed,
}

impl Inbound {
    /// A policy with budget `default` when no header arrives and `max` as
    /// the clamp, rejecting malformed headers.
    ///
    /// Errors name the field: `max` or `default` is zero, or `default` is
    /// greater than `max`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::header::Inbound;
    /// let err = Inbound::new(Duration::from_secs(3), Duration::from_secs(2)).unwrap_err();
    /// assert_eq!(err.field(), "default");
    /// assert_eq!(err.to_string(), "invalid config: `default` must not exceed the maximum (3s > 2s)");
    /// ```
    pub fn new(default: Duration, max: Duration) -> Result<Self, ConfigError> {
        if max.is_zero() {
            return Err(ConfigError::new("max", "must be greater than zero"));
        }
        if default.is_zero() {
            return Err(ConfigError::new("default", "must be greater than zero"));
        }
        if default > max {
            let problem = format!(
                "must not exceed the maximum ({} > {})",
                humantime::format_duration(default),
                humantime::format_duration(max),
            );
            return Err(ConfigError::new("default", problem));
        }
        Ok(Self {
            default,
            max,
            on_malformed: OnMalformed::default(),
        })
    }

    /// The same policy with `on_malformed` for malformed headers.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::header::{Inbound, OnMalformed};
    /// let inbound = Inbound::new(Duration::from_secs(1), Duration::from_secs(1))?
    ///     .with_on_malformed(OnMalformed::UseDefault);
    /// assert_eq!(inbound.on_malformed(), OnMalformed::UseDefault);
    /// # Ok::<(), budget_core::config::ConfigError>(())
    /// ```
    pub fn with_on_malformed(mut self, on_malformed: OnMalformed) -> Self {
        self.on_malformed = on_malformed;
        self
    }

    /// The budget when no header arrives.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::header::Inbound;
    /// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(5))?;
    /// assert_eq!(inbound.default(), Duration::from_secs(2));
    /// # Ok::<(), budget_core::config::ConfigError>(())
    /// ```
    pub fn default(&self) -> Duration {
        self.default
    }

    /// The most any budget may be, whatever the caller sends.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::header::Inbound;
    /// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(5))?;
    /// assert_eq!(inbound.max(), Duration::from_secs(5));
    /// # Ok::<(), budget_core::config::ConfigError>(())
    /// ```
    pub fn max(&self) -> Duration {
        self.max
    }

    /// What is done with a malformed header.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::header::{Inbound, OnMalformed};
    /// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(5))?;
    /// assert_eq!(inbound.on_malformed(), OnMalformed::Reject);
    /// # Ok::<(), budget_core::config::ConfigError>(())
    /// ```
    pub fn on_malformed(&self) -> OnMalformed {
        self.on_malformed
    }

    /// The budget of a request with `headers`: no header, the default; a
    /// valid one, the smallest, clamped to the maximum (the clamp is applied
    /// at every hop).
    ///
    /// A malformed header is an error with [`OnMalformed::Reject`]; with
    /// [`OnMalformed::UseDefault`] it is ignored (and logged at `debug`
    /// level) and the smallest remaining valid header wins, else the default.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::header::{self, Inbound, OnMalformed};
    /// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(5))?;
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("grpc-timeout", "1H".parse()?);
    /// headers.insert("request-budget-ms", "1 000".parse()?);
    /// assert_eq!(inbound.resolve(&headers).unwrap_err().header(), header::REQUEST_BUDGET_MS);
    ///
    /// let lenient = inbound.with_on_malformed(OnMalformed::UseDefault);
    /// let resolved = lenient.resolve(&headers)?;
    /// assert_eq!(resolved.budget, Duration::from_secs(5));
    /// assert_eq!(resolved.source, Some(header::GRPC_TIMEOUT));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, headers: &HeaderMap) -> Result<Resolved, InvalidHeader> {
        self.resolve_with(headers, |_, _| {}, |_| {})
    }

    /// [`resolve`](Self::resolve), handing every header that is not a
    /// budget format to `other` in the same pass over the map, and every
    /// malformed one ignored ([`OnMalformed::UseDefault`]) to `ignored`.
    pub(crate) fn resolve_with<'a>(
        &self,
        headers: &'a HeaderMap,
        other: impl FnMut(&'a HeaderName, &'a HeaderValue),
        mut ignored: impl FnMut(InvalidHeader),
    ) -> Result<Resolved, InvalidHeader> {
        let found = match self.on_malformed {
            OnMalformed::Reject => match decode::decode_with(headers, other) {
                Decoded::Absent => None,
                Decoded::Valid { budget, header } => Some((budget, header)),
                Decoded::Invalid(err) => return Err(err),
            },
            OnMalformed::UseDefault => decode::smallest(
                headers,
                None,
                |rank, value, reason| {
                    let header = decode::name(rank);
                    let error = InvalidHeader::new(header, value.as_bytes(), reason);
                    tracing::debug!(
                        %header,
                        %error,
                        "ignoring a malformed budget header (on_malformed = use-default)",
                    );
                    ignored(error);
                },
                other,
            )
            .map(|(budget, rank)| (budget, decode::name(rank).clone())),
        };
        Ok(match found {
            None => Resolved {
                budget: self.default,
                source: None,
                clamped: false,
            },
            Some((budget, header)) => Resolved {
                budget: budget.min(self.max),
                source: Some(header),
                clamped: budget > self.max,
            },
        })
    }
}

/// The ledger's note when Envoy's route timeout cut the caller's budget:
/// the budget came from `x-envoy-expected-rq-timeout-ms`, and the caller's
/// own header said more (docs/contract.md §1, "Through Envoy"). A finding
/// the ledger shows, so that Envoy's `504` at its route timeout is no
/// mystery.
///
/// ```text
/// cut to 300ms by x-envoy-expected-rq-timeout-ms: request-budget-ms said 1983ms
/// ```
#[cfg(feature = "server")]
pub(crate) fn envoy_cut_note(headers: &HeaderMap, resolved: &Resolved) -> Option<String> {
    if resolved.source.as_ref() != Some(&super::X_ENVOY_EXPECTED_RQ_TIMEOUT_MS) {
        return None;
    }
    let (said, header) = decode::cut_by_envoy(headers, resolved.budget)?;
    Some(format!(
        "cut to {}ms by {}: {header} said {}ms",
        resolved.budget.as_millis(),
        super::X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
        said.as_millis()
    ))
}

/// The budget a request arrived with, after default and clamp.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::{self, Inbound};
///
/// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(5))?;
/// let mut headers = http::HeaderMap::new();
/// headers.insert("connect-timeout-ms", "750".parse()?);
/// let resolved = inbound.resolve(&headers)?;
/// assert_eq!(resolved.budget, Duration::from_millis(750));
/// assert_eq!(resolved.source, Some(header::CONNECT_TIMEOUT_MS));
/// assert!(!resolved.clamped);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The budget to work with: at most the service's maximum.
    pub budget: Duration,
    /// The header it came from; `None` when the default applied.
    pub source: Option<HeaderName>,
    /// True when the caller asked for more than the maximum.
    pub clamped: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{CONNECT_TIMEOUT_MS, GRPC_TIMEOUT, REQUEST_BUDGET_MS};
    use http::HeaderValue;

    fn inbound() -> Inbound {
        Inbound::new(Duration::from_secs(2), Duration::from_secs(10)).expect("valid policy")
    }

    fn map(pairs: &[(&HeaderName, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| ((*name).clone(), HeaderValue::from_static(value)))
            .collect()
    }

    #[test]
    fn no_header_gets_the_default_unclamped() {
        let resolved = inbound()
            .resolve(&HeaderMap::new())
            .expect("no header is fine");
        assert_eq!(
            resolved,
            Resolved {
                budget: Duration::from_secs(2),
                source: None,
                clamped: false
            }
        );
    }

    #[test]
    fn a_valid_header_below_the_max_is_taken_as_is() {
        let resolved = inbound()
            .resolve(&map(&[(&GRPC_TIMEOUT, "1500000u")]))
            .expect("valid");
        assert_eq!(
            (resolved.budget, resolved.source, resolved.clamped),
            (Duration::from_millis(1500), Some(GRPC_TIMEOUT), false)
        );
    }

    #[test]
    fn a_header_at_the_max_is_not_clamped() {
        let resolved = inbound()
            .resolve(&map(&[(&REQUEST_BUDGET_MS, "10000")]))
            .expect("valid");
        assert_eq!(
            (resolved.budget, resolved.clamped),
            (Duration::from_secs(10), false)
        );
    }

    #[test]
    fn a_huge_ten_digit_header_is_clamped_to_the_max() {
        let headers = map(&[(&REQUEST_BUDGET_MS, "9999999999")]);
        let resolved = inbound().resolve(&headers).expect("valid");
        assert_eq!(
            (resolved.budget, resolved.source, resolved.clamped),
            (Duration::from_secs(10), Some(REQUEST_BUDGET_MS), true)
        );
        let headers = map(&[(&GRPC_TIMEOUT, "99999999H")]);
        assert_eq!(
            inbound().resolve(&headers).expect("valid").budget,
            Duration::from_secs(10)
        );
    }

    #[test]
    fn reject_policy_returns_the_malformed_header() {
        let headers = map(&[(&REQUEST_BUDGET_MS, "100"), (&CONNECT_TIMEOUT_MS, "1.5")]);
        let err = inbound().resolve(&headers).expect_err("malformed");
        assert_eq!(err.header(), CONNECT_TIMEOUT_MS);
        assert_eq!(err.value(), "1.5");
    }

    #[test]
    fn use_default_policy_takes_the_smallest_remaining_valid_header() {
        let lenient = inbound().with_on_malformed(OnMalformed::UseDefault);
        let headers = map(&[
            (&REQUEST_BUDGET_MS, "-1"),
            (&GRPC_TIMEOUT, "700m"),
            (&CONNECT_TIMEOUT_MS, "900"),
        ]);
        let resolved = lenient.resolve(&headers).expect("bad header ignored");
        assert_eq!(
            (resolved.budget, resolved.source),
            (Duration::from_millis(700), Some(GRPC_TIMEOUT))
        );
    }

    #[test]
    fn use_default_policy_falls_back_to_the_default_when_nothing_valid_remains() {
        let lenient = inbound().with_on_malformed(OnMalformed::UseDefault);
        let headers = map(&[(&REQUEST_BUDGET_MS, "-1"), (&GRPC_TIMEOUT, "5x")]);
        let resolved = lenient.resolve(&headers).expect("bad headers ignored");
        assert_eq!(
            (resolved.budget, resolved.source),
            (Duration::from_secs(2), None)
        );
    }

    #[test]
    fn a_zero_or_inverted_policy_is_a_config_error_naming_the_field() {
        let s = Duration::from_secs;
        let field = |default, max| {
            Inbound::new(default, max)
                .map(|_| ())
                .unwrap_err()
                .field()
                .to_owned()
        };
        assert_eq!(field(s(1), Duration::ZERO), "max");
        assert_eq!(field(Duration::ZERO, s(1)), "default");
        assert_eq!(field(s(3), s(2)), "default");
        assert!(Inbound::new(s(2), s(2)).is_ok());
    }

    #[test]
    fn on_malformed_reads_kebab_case_from_config() {
        #[derive(Deserialize)]
        struct Config {
            on_malformed: OnMalformed,
        }
        let config: Config = toml::from_str("on_malformed = \"use-default\"").expect("valid toml");
        assert_eq!(config.on_malformed, OnMalformed::UseDefault);
        assert_eq!(
            serde_json::to_string(&OnMalformed::Reject).expect("serialises"),
            "\"reject\""
        );
    }
}
