//! gRPC on the wire, without tonic: the status codes ([`GrpcCode`]), the
//! encoding of `grpc-message`, `grpc-retry-pushback-ms`. Part of the core
//! (the retry rules read a gRPC answer's status); public as
//! [`budget_core::grpc`](crate::grpc).

use http::{HeaderName, HeaderValue};

/// The status header of a gRPC answer.
pub const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
/// The message header of a gRPC answer (percent-encoded).
pub const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
/// How long a client should wait before retrying (gRPC's retry design,
/// A6): milliseconds, or negative for "do not retry".
pub const GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// The gRPC status codes a budget problem can read as (gRPC's
/// `statuscodes.md`; the number is the wire value).
///
/// # Example
///
/// ```
/// use budget_core::grpc::GrpcCode;
/// assert_eq!(GrpcCode::for_http_status(504), GrpcCode::DeadlineExceeded);
/// assert_eq!(GrpcCode::DeadlineExceeded as u8, 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrpcCode {
    /// 2: no better code applies.
    Unknown = 2,
    /// 3: a malformed budget header (or body).
    InvalidArgument = 3,
    /// 4: the budget is spent, below the floor, or ran out in the handler.
    DeadlineExceeded = 4,
    /// 8: a request larger than the service takes.
    ResourceExhausted = 8,
    /// 12: no such method (a path the service does not serve).
    Unimplemented = 12,
    /// 13: the service failed.
    Internal = 13,
    /// 14: overloaded, a dependency's circuit open, or a dependency that
    /// asked for a wait (`429`/`503` passed up): retryable, with
    /// `grpc-retry-pushback-ms` when known.
    Unavailable = 14,
}

impl GrpcCode {
    /// The code of a problem with HTTP `status`: the contract's mapping
    /// (`504` is `DEADLINE_EXCEEDED`, `503` and `429` `UNAVAILABLE`, a
    /// malformed budget's `400` `INVALID_ARGUMENT`), and otherwise gRPC's
    /// own HTTP-to-gRPC table (`http-grpc-status-mapping.md`).
    ///
    /// `UNAVAILABLE` rather than `RESOURCE_EXHAUSTED` for an overloaded
    /// server: gRPC clients retry `UNAVAILABLE` (elsewhere, after the
    /// pushback), while `RESOURCE_EXHAUSTED` says a quota of the caller's
    /// ran out, which retrying at once will not fix.
    ///
    /// ```
    /// use budget_core::grpc::GrpcCode;
    /// assert_eq!(GrpcCode::for_http_status(400), GrpcCode::InvalidArgument);
    /// assert_eq!(GrpcCode::for_http_status(503), GrpcCode::Unavailable);
    /// assert_eq!(GrpcCode::for_http_status(404), GrpcCode::Unimplemented);
    /// ```
    pub fn for_http_status(status: u16) -> Self {
        match status {
            400 => GrpcCode::InvalidArgument,
            404 | 405 => GrpcCode::Unimplemented,
            413 => GrpcCode::ResourceExhausted,
            429 | 502 | 503 => GrpcCode::Unavailable,
            504 => GrpcCode::DeadlineExceeded,
            500..=599 => GrpcCode::Internal,
            _ => GrpcCode::Unknown,
        }
    }

    /// The `grpc-status` value.
    ///
    /// ```
    /// # use budget_core::grpc::GrpcCode;
    /// assert_eq!(GrpcCode::Unavailable.header_value(), "14");
    /// ```
    pub fn header_value(self) -> HeaderValue {
        HeaderValue::from(u16::from(self as u8))
    }
}

/// `message` as a `grpc-message` value: gRPC's Percent-Encoded form, where
/// every byte of the UTF-8 text outside `0x20..=0x7E`, and `%` itself, is
/// written `%XX` (upper-case hex).
///
/// ```
/// use budget_core::grpc::encode_message;
/// assert_eq!(encode_message("budget 5ms < floor"), "budget 5ms < floor");
/// assert_eq!(encode_message("100% \u{2192} 0"), "100%25 %E2%86%92 0");
/// ```
pub fn encode_message(message: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(message.len());
    for &byte in message.as_bytes() {
        if (0x20..=0x7E).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        }
    }
    out
}

/// What a `grpc-retry-pushback-ms` value asks of the caller (gRPC's retry
/// design, A6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pushback {
    /// Retry no sooner than this.
    After(std::time::Duration),
    /// A negative value: do not retry.
    DoNotRetry,
}

/// Reads a `grpc-retry-pushback-ms` value; `None` when it is not an integer.
///
/// ```
/// use std::time::Duration;
/// use budget_core::grpc::{Pushback, parse_pushback};
/// assert_eq!(parse_pushback(b"250"), Some(Pushback::After(Duration::from_millis(250))));
/// assert_eq!(parse_pushback(b"-1"), Some(Pushback::DoNotRetry));
/// assert_eq!(parse_pushback(b"soon"), None);
/// ```
pub fn parse_pushback(value: &[u8]) -> Option<Pushback> {
    let ms: i64 = std::str::from_utf8(value).ok()?.trim().parse().ok()?;
    Some(if ms < 0 {
        Pushback::DoNotRetry
    } else {
        Pushback::After(std::time::Duration::from_millis(ms.unsigned_abs()))
    })
}

/// True when `content_type` names a gRPC call (`application/grpc`,
/// `application/grpc+proto`, `application/grpc-web`, ...).
///
/// ```
/// use budget_core::grpc::is_grpc;
/// assert!(is_grpc(b"application/grpc+proto"));
/// assert!(!is_grpc(b"application/json"));
/// ```
pub fn is_grpc(content_type: &[u8]) -> bool {
    content_type
        .get(..16)
        .is_some_and(|head| head.eq_ignore_ascii_case(b"application/grpc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_the_layer_answers_has_the_contract_s_code() {
        use crate::problem::ProblemKind as K;
        for (kind, code) in [
            (K::MalformedBudget, GrpcCode::InvalidArgument),
            (K::BelowFloor, GrpcCode::DeadlineExceeded),
            (K::Expired, GrpcCode::DeadlineExceeded),
            (K::DependencyOutOfBudget, GrpcCode::DeadlineExceeded),
            (K::DependencyUnavailable, GrpcCode::DeadlineExceeded),
            (K::CircuitOpen, GrpcCode::Unavailable),
            (K::Overloaded, GrpcCode::Unavailable),
            (K::Deferred { status: 429 }, GrpcCode::Unavailable),
            (K::Deferred { status: 503 }, GrpcCode::Unavailable),
            (K::DependencyFailed, GrpcCode::Unavailable),
            (K::NotFound, GrpcCode::Unimplemented),
            (K::BodyTooLarge, GrpcCode::ResourceExhausted),
        ] {
            assert_eq!(GrpcCode::for_http_status(kind.status()), code, "{kind:?}");
        }
        assert_eq!(GrpcCode::for_http_status(500), GrpcCode::Internal);
        assert_eq!(GrpcCode::for_http_status(302), GrpcCode::Unknown);
    }

    #[test]
    fn messages_keep_printable_ascii_and_escape_the_rest() {
        assert_eq!(encode_message(""), "");
        assert_eq!(encode_message("a\tb\nc"), "a%09b%0Ac");
        assert_eq!(encode_message("~ \u{7f}"), "~ %7F");
        // grpc-go's vectors (TestEncodeGrpcMessage).
        for (raw, wire) in [
            ("Hello", "Hello"),
            ("\r\n", "%0D%0A"),
            ("\u{2192}", "%E2%86%92"),
            ("%", "%25"),
        ] {
            assert_eq!(encode_message(raw), wire);
            assert!(HeaderValue::from_str(&encode_message(raw)).is_ok());
        }
    }

    #[test]
    fn grpc_content_types_are_recognised_in_any_case() {
        assert!(is_grpc(b"application/grpc"));
        assert!(is_grpc(b"Application/GRPC"));
        assert!(is_grpc(b"application/grpc-web+proto"));
        assert!(!is_grpc(b"application/gr"));
        assert!(!is_grpc(b""));
    }
}
