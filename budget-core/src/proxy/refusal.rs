//! Envoy's own answers: [`ProxyReply::recognise`] and what it names
//! ([`ProxyRefusal`]), by the rule of docs/contract.md §2, "Envoy in the
//! path".

use std::fmt;

use http::header::SERVER;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::{X_ENVOY_OVERLOADED, X_ENVOY_RESPONSE_FLAGS, X_ENVOY_UPSTREAM_SERVICE_TIME};
use crate::grpc_status::{GRPC_MESSAGE, GRPC_STATUS};

/// At most this many bytes of a body are read for Envoy's local-reply text
/// (its texts are shorter; a long body is not one of them).
const MESSAGE_BYTES: usize = 256;

/// Why Envoy answered a call itself instead of carrying the dependency's
/// answer: the kind of its local reply, by its response flag where it has
/// one.
///
/// ```
/// use budget_core::proxy::ProxyRefusal;
/// assert_eq!(ProxyRefusal::UpstreamTimeout.flag(), Some("UT"));
/// assert_eq!(ProxyRefusal::Overflow.label(), "envoy-overflow");
/// assert!(ProxyRefusal::ConcurrencyLimit.sheds());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProxyRefusal {
    /// `UT`: the route's `timeout` (or `per_try_timeout`) ran out before
    /// the dependency answered: the dependency too slow for the route.
    UpstreamTimeout,
    /// The stream's `max_stream_duration` ran out (over gRPC, the deadline
    /// Envoy took from `grpc-timeout` under `grpc_timeout_header_max`):
    /// Envoy's `DEADLINE_EXCEEDED`.
    StreamDuration,
    /// `UO`: a circuit-breaker threshold overflowed
    /// (`x-envoy-overloaded`): the mesh shedding load.
    Overflow,
    /// The adaptive concurrency filter's limit was reached: the mesh
    /// shedding load.
    ConcurrencyLimit,
    /// `UF`: Envoy could not connect to the dependency.
    ConnectFailure,
    /// `UR`: the dependency's connection was reset before its answer.
    UpstreamReset,
    /// `UH`: no healthy endpoint (all ejected by outlier detection or
    /// failing health checks).
    NoHealthyUpstream,
    /// Another local reply of Envoy's, named by its status.
    Other,
}

impl ProxyRefusal {
    /// Envoy's response flag for it, where Envoy has one.
    ///
    /// ```
    /// use budget_core::proxy::ProxyRefusal;
    /// assert_eq!(ProxyRefusal::Overflow.flag(), Some("UO"));
    /// assert_eq!(ProxyRefusal::ConcurrencyLimit.flag(), None);
    /// ```
    pub fn flag(self) -> Option<&'static str> {
        match self {
            ProxyRefusal::UpstreamTimeout => Some("UT"),
            ProxyRefusal::Overflow => Some("UO"),
            ProxyRefusal::ConnectFailure => Some("UF"),
            ProxyRefusal::UpstreamReset => Some("UR"),
            ProxyRefusal::NoHealthyUpstream => Some("UH"),
            ProxyRefusal::StreamDuration | ProxyRefusal::ConcurrencyLimit | ProxyRefusal::Other => {
                None
            }
        }
    }

    /// What it is, in Envoy's words where Envoy has them.
    ///
    /// ```
    /// use budget_core::proxy::ProxyRefusal;
    /// assert_eq!(ProxyRefusal::UpstreamTimeout.text(), "upstream request timeout");
    /// ```
    pub fn text(self) -> &'static str {
        match self {
            ProxyRefusal::UpstreamTimeout => "upstream request timeout",
            ProxyRefusal::StreamDuration => "max stream duration reached",
            ProxyRefusal::Overflow => "upstream overflow",
            ProxyRefusal::ConcurrencyLimit => "reached concurrency limit",
            ProxyRefusal::ConnectFailure => "upstream connection failure",
            ProxyRefusal::UpstreamReset => "upstream reset before headers",
            ProxyRefusal::NoHealthyUpstream => "no healthy upstream",
            ProxyRefusal::Other => "local reply",
        }
    }

    /// The metrics' and spans' outcome label (`envoy-upstream-timeout`):
    /// apart from every status and gRPC code a dependency can answer with.
    ///
    /// ```
    /// use budget_core::proxy::ProxyRefusal;
    /// assert_eq!(ProxyRefusal::StreamDuration.label(), "envoy-stream-duration");
    /// ```
    pub fn label(self) -> &'static str {
        match self {
            ProxyRefusal::UpstreamTimeout => "envoy-upstream-timeout",
            ProxyRefusal::StreamDuration => "envoy-stream-duration",
            ProxyRefusal::Overflow => "envoy-overflow",
            ProxyRefusal::ConcurrencyLimit => "envoy-concurrency-limit",
            ProxyRefusal::ConnectFailure => "envoy-connect-failure",
            ProxyRefusal::UpstreamReset => "envoy-upstream-reset",
            ProxyRefusal::NoHealthyUpstream => "envoy-no-healthy-upstream",
            ProxyRefusal::Other => "envoy-other",
        }
    }

    /// True for the mesh shedding load (an overflowed circuit breaker, the
    /// concurrency limit): not a sign that the dependency is unwell, and
    /// not worth an immediate retry through the same proxy.
    ///
    /// ```
    /// use budget_core::proxy::ProxyRefusal;
    /// assert!(ProxyRefusal::Overflow.sheds());
    /// assert!(!ProxyRefusal::UpstreamTimeout.sheds());
    /// ```
    pub fn sheds(self) -> bool {
        matches!(
            self,
            ProxyRefusal::Overflow | ProxyRefusal::ConcurrencyLimit
        )
    }

    /// True for a timeout (the route's, or the stream's duration).
    ///
    /// ```
    /// use budget_core::proxy::ProxyRefusal;
    /// assert!(ProxyRefusal::StreamDuration.timed_out());
    /// assert!(!ProxyRefusal::ConnectFailure.timed_out());
    /// ```
    pub fn timed_out(self) -> bool {
        matches!(
            self,
            ProxyRefusal::UpstreamTimeout | ProxyRefusal::StreamDuration
        )
    }
}

/// The flags that name a refusal, in the order that decides when Envoy
/// sets several (`URX,UT`: the retries ran out, the last one timed out).
const FLAGS: [(&[u8], ProxyRefusal); 7] = [
    (b"UO", ProxyRefusal::Overflow),
    (b"UT", ProxyRefusal::UpstreamTimeout),
    (b"UMSDR", ProxyRefusal::StreamDuration),
    (b"UF", ProxyRefusal::ConnectFailure),
    (b"UH", ProxyRefusal::NoHealthyUpstream),
    (b"UR", ProxyRefusal::UpstreamReset),
    (b"LR", ProxyRefusal::UpstreamReset),
];

/// An answer Envoy made itself: why ([`ProxyRefusal`]), and what it
/// answered with (its HTTP status; over gRPC, its `grpc-status`).
///
/// ```
/// use budget_core::proxy::{ProxyRefusal, ProxyReply};
/// let reply = ProxyReply::grpc(ProxyRefusal::UpstreamTimeout, 14);
/// assert_eq!(reply.to_string(), "envoy UT: upstream request timeout (grpc-14)");
/// assert_eq!(reply.grpc_code(), Some(14));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProxyReply {
    refusal: ProxyRefusal,
    status: StatusCode,
    grpc: Option<u8>,
}

impl ProxyReply {
    /// Envoy's `refusal`, answered with HTTP `status`.
    ///
    /// ```
    /// use budget_core::proxy::{ProxyRefusal, ProxyReply};
    /// let reply = ProxyReply::new(ProxyRefusal::UpstreamTimeout, http::StatusCode::GATEWAY_TIMEOUT);
    /// assert_eq!(reply.to_string(), "envoy UT: upstream request timeout (504)");
    /// ```
    pub fn new(refusal: ProxyRefusal, status: StatusCode) -> Self {
        Self {
            refusal,
            status,
            grpc: None,
        }
    }

    /// Envoy's `refusal` of a gRPC call, answered trailers-only with
    /// `grpc-status` `code`.
    ///
    /// ```
    /// use budget_core::proxy::{ProxyRefusal, ProxyReply};
    /// let reply = ProxyReply::grpc(ProxyRefusal::StreamDuration, 4);
    /// assert_eq!(reply.to_string(), "envoy: max stream duration reached (grpc-4)");
    /// ```
    pub fn grpc(refusal: ProxyRefusal, code: u8) -> Self {
        Self {
            refusal,
            status: StatusCode::OK,
            grpc: Some(code),
        }
    }

    /// Reads an answer's head (and its body, when the transport holds it
    /// whole) by the rule of docs/contract.md §2, "Envoy in the path":
    /// `Some` when Envoy made the answer itself.
    ///
    /// An answer carrying `x-envoy-upstream-service-time` is the
    /// dependency's, carried. Otherwise it is Envoy's when it failed (a
    /// `4xx` or `5xx`, or a non-`OK` `grpc-status` in its head) and it
    /// carries `x-envoy-overloaded` or `x-envoy-response-flags`, or it is
    /// a `503`, a `504` or a gRPC failure from `server: envoy`. Its kind
    /// comes from the flags, then `x-envoy-overloaded`, then Envoy's text
    /// (the body, over gRPC `grpc-message`), then the status (a `504` is
    /// the route's timeout, a gRPC `DEADLINE_EXCEEDED` the stream's
    /// duration). An empty body is fine: the head decides.
    ///
    /// ```
    /// use budget_core::proxy::{ProxyRefusal, ProxyReply};
    /// use http::{HeaderMap, StatusCode};
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("server", "envoy".parse()?);
    /// let timeout = ProxyReply::recognise(StatusCode::GATEWAY_TIMEOUT, &headers, Some(b"")).unwrap();
    /// assert_eq!(timeout.refusal(), ProxyRefusal::UpstreamTimeout);
    /// let limit = ProxyReply::recognise(StatusCode::SERVICE_UNAVAILABLE, &headers, Some(b"reached concurrency limit"));
    /// assert_eq!(limit.unwrap().refusal(), ProxyRefusal::ConcurrencyLimit);
    /// // Not Envoy's: a partner's 504 (no `server: envoy`), an OK answer.
    /// assert_eq!(ProxyReply::recognise(StatusCode::GATEWAY_TIMEOUT, &HeaderMap::new(), None), None);
    /// assert_eq!(ProxyReply::recognise(StatusCode::OK, &headers, None), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recognise(status: StatusCode, headers: &HeaderMap, body: Option<&[u8]>) -> Option<Self> {
        if headers.contains_key(X_ENVOY_UPSTREAM_SERVICE_TIME) {
            return None;
        }
        let grpc = headers
            .get(GRPC_STATUS)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok()?.parse::<u8>().ok())
            .filter(|code| *code != 0);
        let failed = grpc.is_some() || status.is_client_error() || status.is_server_error();
        let flags = headers
            .get(X_ENVOY_RESPONSE_FLAGS)
            .map(HeaderValue::as_bytes)
            .filter(|flags| !flags.is_empty() && *flags != b"-");
        let overloaded = headers.contains_key(X_ENVOY_OVERLOADED);
        let from_envoy = headers
            .get(SERVER)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"envoy"));
        let shaped = grpc.is_some() || matches!(status.as_u16(), 503 | 504);
        if !failed || !(overloaded || flags.is_some() || (from_envoy && shaped)) {
            return None;
        }
        let message = match grpc {
            Some(_) => headers.get(GRPC_MESSAGE).map(HeaderValue::as_bytes),
            None => body,
        };
        let refusal = flags
            .and_then(by_flags)
            .or_else(|| overloaded.then_some(ProxyRefusal::Overflow))
            .or_else(|| message.and_then(by_message))
            .unwrap_or_else(|| by_status(status, grpc));
        Some(Self {
            refusal,
            status,
            grpc,
        })
    }

    /// Why Envoy answered itself.
    ///
    /// ```
    /// use budget_core::proxy::{ProxyRefusal, ProxyReply};
    /// assert_eq!(ProxyReply::grpc(ProxyRefusal::Overflow, 14).refusal(), ProxyRefusal::Overflow);
    /// ```
    pub fn refusal(&self) -> ProxyRefusal {
        self.refusal
    }

    /// The HTTP status it answered with (`200` for a gRPC answer, whose
    /// status is [`grpc_code`](Self::grpc_code)).
    ///
    /// ```
    /// use budget_core::proxy::{ProxyRefusal, ProxyReply};
    /// let reply = ProxyReply::new(ProxyRefusal::Overflow, http::StatusCode::SERVICE_UNAVAILABLE);
    /// assert_eq!(reply.status(), http::StatusCode::SERVICE_UNAVAILABLE);
    /// ```
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The `grpc-status` it answered a gRPC call with.
    ///
    /// ```
    /// use budget_core::proxy::{ProxyRefusal, ProxyReply};
    /// assert_eq!(ProxyReply::grpc(ProxyRefusal::StreamDuration, 4).grpc_code(), Some(4));
    /// ```
    pub fn grpc_code(&self) -> Option<u8> {
        self.grpc
    }
}

impl fmt::Display for ProxyReply {
    /// `envoy`, the flag, the refusal in Envoy's words and the answer on
    /// the wire: `envoy UT: upstream request timeout (504)`, `envoy:
    /// reached concurrency limit (503)`, `envoy UO: upstream overflow
    /// (grpc-14)`; the ledger's text for the attempt (docs/contract.md §4).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("envoy")?;
        if let Some(flag) = self.refusal.flag() {
            write!(f, " {flag}")?;
        }
        write!(f, ": {} (", self.refusal.text())?;
        match self.grpc {
            Some(code) => write!(f, "grpc-{code})"),
            None => write!(f, "{})", self.status.as_u16()),
        }
    }
}

/// The refusal Envoy's response flags name (`URX,UT`: `UT`).
fn by_flags(flags: &[u8]) -> Option<ProxyRefusal> {
    let set: Vec<&[u8]> = flags
        .split(|b| *b == b',')
        .map(<[u8]>::trim_ascii)
        .collect();
    FLAGS
        .iter()
        .find(|(flag, _)| set.contains(flag))
        .map(|(_, refusal)| *refusal)
}

/// The refusal Envoy's local-reply text names.
fn by_message(message: &[u8]) -> Option<ProxyRefusal> {
    const RESET: &[u8] = b"upstream connect error or disconnect/reset before headers";
    let message = message.get(..MESSAGE_BYTES).unwrap_or(message).trim_ascii();
    let contains = |needle: &[u8]| message.windows(needle.len()).any(|w| w == needle);
    Some(match message {
        b"upstream request timeout" => ProxyRefusal::UpstreamTimeout,
        b"downstream duration timeout" | b"upstream max stream duration reached" => {
            ProxyRefusal::StreamDuration
        }
        b"no healthy upstream" => ProxyRefusal::NoHealthyUpstream,
        b"reached concurrency limit" => ProxyRefusal::ConcurrencyLimit,
        m if m.starts_with(RESET) && contains(b"reset reason: overflow") => ProxyRefusal::Overflow,
        m if m.starts_with(RESET) && contains(b"connection failure") => {
            ProxyRefusal::ConnectFailure
        }
        m if m.starts_with(RESET) && contains(b"connection timeout") => {
            ProxyRefusal::ConnectFailure
        }
        m if m.starts_with(RESET) => ProxyRefusal::UpstreamReset,
        _ => return None,
    })
}

/// The refusal an answer's status alone says: Envoy's `504` is its route's
/// timeout, its gRPC `DEADLINE_EXCEEDED` the stream's duration.
fn by_status(status: StatusCode, grpc: Option<u8>) -> ProxyRefusal {
    match (grpc, status.as_u16()) {
        (Some(4), _) => ProxyRefusal::StreamDuration,
        (None, 504) => ProxyRefusal::UpstreamTimeout,
        _ => ProxyRefusal::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head as Envoy 1.40 sent it (recorded with curl, docs/contract.md
    /// §2 "Envoy in the path").
    fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, value.parse().unwrap());
        }
        headers
    }

    fn read(status: u16, pairs: &[(&'static str, &'static str)], body: &str) -> Option<String> {
        let status = StatusCode::from_u16(status).unwrap();
        ProxyReply::recognise(status, &head(pairs), Some(body.as_bytes())).map(|r| r.to_string())
    }

    const LOCAL: [(&str, &str); 2] = [("server", "envoy"), ("content-type", "text/plain")];

    #[test]
    fn envoy_s_recorded_http_local_replies_are_named() {
        let cases = [
            (
                504,
                "upstream request timeout",
                "envoy UT: upstream request timeout (504)",
            ),
            (
                503,
                "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure",
                "envoy UF: upstream connection failure (503)",
            ),
            (
                503,
                "no healthy upstream",
                "envoy UH: no healthy upstream (503)",
            ),
            (
                503,
                "reached concurrency limit",
                "envoy: reached concurrency limit (503)",
            ),
            (
                504,
                "downstream duration timeout",
                "envoy: max stream duration reached (504)",
            ),
            (503, "", "envoy: local reply (503)"),
        ];
        for (status, body, want) in cases {
            assert_eq!(read(status, &LOCAL, body).as_deref(), Some(want), "{body}");
        }
    }

    #[test]
    fn an_overflow_is_named_by_its_mark_whatever_the_body() {
        let mut pairs = LOCAL.to_vec();
        pairs.push(("x-envoy-overloaded", "true"));
        for body in [
            "upstream connect error or disconnect/reset before headers. reset reason: overflow",
            "",
        ] {
            assert_eq!(
                read(503, &pairs, body).as_deref(),
                Some("envoy UO: upstream overflow (503)")
            );
        }
        // Without `server: envoy` (a renamed proxy), the mark alone.
        assert_eq!(
            read(503, &[("x-envoy-overloaded", "true")], "").as_deref(),
            Some("envoy UO: upstream overflow (503)")
        );
    }

    #[test]
    fn an_empty_bodied_503_or_504_is_envoy_s_by_its_head() {
        let status = |s| StatusCode::from_u16(s).unwrap();
        let headers = head(&[("server", "envoy")]);
        let timeout = ProxyReply::recognise(status(504), &headers, None).unwrap();
        assert_eq!(timeout.refusal(), ProxyRefusal::UpstreamTimeout);
        let other = ProxyReply::recognise(status(503), &headers, Some(b"")).unwrap();
        assert_eq!(other.refusal(), ProxyRefusal::Other);
        assert_eq!(other.to_string(), "envoy: local reply (503)");
    }

    #[test]
    fn the_response_flags_name_the_refusal_first() {
        let flagged = |flags| {
            let mut pairs = LOCAL.to_vec();
            pairs.push(("x-envoy-response-flags", flags));
            read(504, &pairs, "upstream request timeout")
        };
        assert_eq!(
            flagged("URX,UT").as_deref(),
            Some("envoy UT: upstream request timeout (504)")
        );
        assert_eq!(
            flagged("UF").as_deref(),
            Some("envoy UF: upstream connection failure (504)")
        );
        // `-` is no flag: the text decides.
        assert_eq!(
            flagged("-").as_deref(),
            Some("envoy UT: upstream request timeout (504)")
        );
        // A flagged 429 of a renamed proxy is Envoy's too.
        assert_eq!(
            read(429, &[("x-envoy-response-flags", "RL")], "").as_deref(),
            Some("envoy: local reply (429)")
        );
    }

    #[test]
    fn envoy_s_recorded_grpc_local_replies_are_named_by_grpc_message() {
        let grpc = |code, message| {
            let pairs = [
                ("server", "envoy"),
                ("content-type", "application/grpc"),
                ("grpc-status", code),
                ("grpc-message", message),
            ];
            read(200, &pairs, "")
        };
        assert_eq!(
            grpc("14", "upstream request timeout").as_deref(),
            Some("envoy UT: upstream request timeout (grpc-14)")
        );
        assert_eq!(
            grpc("4", "downstream duration timeout").as_deref(),
            Some("envoy: max stream duration reached (grpc-4)")
        );
        assert_eq!(
            grpc("14", "no healthy upstream").as_deref(),
            Some("envoy UH: no healthy upstream (grpc-14)")
        );
        // No message: DEADLINE_EXCEEDED is the stream's duration, any other
        // code a local reply by its code.
        assert_eq!(
            grpc("4", "").as_deref(),
            Some("envoy: max stream duration reached (grpc-4)")
        );
        assert_eq!(
            grpc("14", "").as_deref(),
            Some("envoy: local reply (grpc-14)")
        );
    }

    #[test]
    fn a_carried_or_successful_answer_is_not_envoy_s() {
        // The partner's own 503, carried: it has Envoy's upstream time.
        let carried = [("server", "envoy"), ("x-envoy-upstream-service-time", "0")];
        assert_eq!(read(503, &carried, "{}"), None);
        // A partner's own 504 or gRPC failure with no sign of Envoy.
        assert_eq!(read(504, &[], "upstream request timeout"), None);
        assert_eq!(read(200, &[("grpc-status", "14")], ""), None);
        // Envoy's OK answers, and other statuses without its marks.
        assert_eq!(read(200, &LOCAL, ""), None);
        assert_eq!(
            read(200, &[("server", "envoy"), ("grpc-status", "0")], ""),
            None
        );
        assert_eq!(read(404, &LOCAL, ""), None);
        assert_eq!(read(200, &[("x-envoy-response-flags", "DI")], ""), None);
    }

    #[test]
    fn a_long_or_binary_body_is_read_no_further_than_its_head() {
        let mut body = vec![0xffu8; 10_000];
        body[..24].copy_from_slice(b"upstream request timeout");
        let reply =
            ProxyReply::recognise(StatusCode::SERVICE_UNAVAILABLE, &head(&LOCAL), Some(&body));
        assert_eq!(reply.map(|r| r.refusal()), Some(ProxyRefusal::Other));
    }
}
