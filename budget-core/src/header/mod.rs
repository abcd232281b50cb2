//! The header codec: the budget as it travels on the wire.
//!
//! A caller says how long it is still willing to wait as a *relative*
//! duration in a request header (never a timestamp: the clocks of two hosts
//! disagree). Callers speak several dialects, so every known format is read
//! and the smallest value wins. [`INBOUND`] lists them (header, value,
//! origin), in the order that breaks ties.
//!
//! The pieces, from the wire inwards:
//!
//! - [`parse_millis`] and [`parse_grpc_timeout`] are pure parsers of one
//!   value. Their digit caps make overflow impossible, so a hostile value is
//!   either a (possibly huge) duration or an [`InvalidReason`], never a panic
//!   and never a silent zero.
//! - [`decode`] reads every inbound format of a request and answers
//!   [`Decoded::Absent`], [`Decoded::Valid`] or [`Decoded::Invalid`]; it does
//!   not allocate unless a value is malformed.
//! - [`Inbound`] is the ingress policy of one service: the default budget
//!   when none arrives, the maximum every budget is clamped to (at every hop),
//!   and what to do with a malformed header ([`OnMalformed`]).
//! - [`encode_ms`] and [`encode_grpc_timeout`] write the outbound headers,
//!   always rounding down: a callee never gets more time than we had.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::header::{self, Decoded, Inbound};
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert(header::REQUEST_BUDGET_MS, header::encode_ms(Duration::from_millis(1500)));
//! headers.insert(header::GRPC_TIMEOUT, header::encode_grpc_timeout(Duration::from_millis(900)));
//! assert_eq!(headers[&header::GRPC_TIMEOUT], "900000u");
//!
//! // The smallest value wins, and says where it came from.
//! assert_eq!(
//!     header::decode(&headers),
//!     Decoded::Valid { budget: Duration::from_millis(900), header: header::GRPC_TIMEOUT },
//! );
//!
//! // At ingress: a default when nothing arrives, a clamp on what does.
//! let inbound = Inbound::new(Duration::from_millis(300), Duration::from_millis(500))?;
//! let resolved = inbound.resolve(&headers)?;
//! assert_eq!(resolved.budget, Duration::from_millis(500));
//! assert!(resolved.clamped);
//!
//! // A malformed value is an error that names the header.
//! headers.insert(header::REQUEST_BUDGET_MS, http::HeaderValue::from_static("-5"));
//! let err = inbound.resolve(&headers).unwrap_err();
//! assert_eq!(err.to_string(), "malformed `request-budget-ms` header \"-5\": sign '-' not allowed");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use http::HeaderName;

mod decode;
mod grpc;
mod inbound;
mod millis;

pub use decode::{Decoded, InvalidHeader, InvalidReason, decode};
pub use grpc::{encode_grpc_timeout, parse_grpc_timeout};
#[cfg(feature = "server")]
pub(crate) use inbound::envoy_cut_note;
pub use inbound::{Inbound, OnMalformed, Resolved};
pub use millis::{encode_ms, parse_millis};

/// Declares the inbound formats from one table: each entry is a header's
/// constant (with its docs), its name, its parser, and the value and origin
/// for the docs table. From the entries come the constants, [`INBOUND`] (in
/// entry order, which breaks ties), its docs table, and `format`, the
/// decoder's dispatch; a new format is one entry plus its parser.
macro_rules! inbound_formats {
    ($(
        $(#[$doc:meta])*
        $konst:ident = $name:literal, $parse:path, $value:literal, $origin:literal;
    )+) => {
        $(
            $(#[$doc])*
            pub const $konst: HeaderName = HeaderName::from_static($name);
        )+

        /// Where each format stands in [`INBOUND`]: its discriminant.
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        enum Rank {
            $($konst,)+
        }

        /// How many inbound formats there are.
        const FORMATS: usize = [$(Rank::$konst),+].len();

        /// Every header [`decode`] reads, in the order that breaks ties: when
        /// two headers carry the same smallest value, or several are
        /// malformed, the earlier one in this list is named.
        ///
        /// | header | value | origin |
        /// | --- | --- | --- |
        $(
            #[doc = concat!("| [`", $name, "`](", stringify!($konst), ") | ", $value, " | ", $origin, " |")]
        )+
        ///
        /// # Example
        ///
        /// ```
        /// use budget_core::header::{INBOUND, REQUEST_BUDGET_MS};
        /// assert_eq!(INBOUND[0], REQUEST_BUDGET_MS);
        /// assert!(INBOUND.iter().all(|name| name.as_str().ends_with("-ms") || name == "grpc-timeout"));
        /// ```
        pub const INBOUND: [HeaderName; FORMATS] = [$($konst),+];

        /// Where `header` stands in [`INBOUND`] and how its value is read;
        /// `None` for any other header.
        ///
        /// A `match` on the name compiles to a switch on its length and at
        /// most one comparison, faster than comparing each header against
        /// every name (1.2x on a typical request, 1.9x with all six present:
        /// see BENCHMARKS.md). The test `dispatch_follows_inbound` checks it
        /// against [`INBOUND`].
        fn format(header: &HeaderName) -> Option<(usize, decode::Parser)> {
            Some(match header.as_str() {
                $($name => (Rank::$konst as usize, $parse),)+
                _ => return None,
            })
        }
    };
}

inbound_formats! {
    /// `request-budget-ms`: this project's own header, the remaining budget in
    /// milliseconds. The one every budget-aware client sends.
    ///
    /// ```
    /// assert_eq!(budget_core::header::REQUEST_BUDGET_MS, "request-budget-ms");
    /// ```
    REQUEST_BUDGET_MS = "request-budget-ms", parse_millis,
        "1 to 10 ASCII digits, milliseconds", "this project's own";

    /// `grpc-timeout`: gRPC's deadline header, digits and a unit
    /// (see [`parse_grpc_timeout`]).
    ///
    /// ```
    /// assert_eq!(budget_core::header::GRPC_TIMEOUT, "grpc-timeout");
    /// ```
    GRPC_TIMEOUT = "grpc-timeout", parse_grpc_timeout,
        "1 to 8 ASCII digits + one unit of `H M S m u n`", "gRPC (PROTOCOL-HTTP2)";

    /// `x-envoy-expected-rq-timeout-ms`: the timeout Envoy expects the request
    /// to have, in milliseconds.
    ///
    /// ```
    /// use budget_core::header::X_ENVOY_EXPECTED_RQ_TIMEOUT_MS;
    /// assert_eq!(X_ENVOY_EXPECTED_RQ_TIMEOUT_MS, "x-envoy-expected-rq-timeout-ms");
    /// ```
    X_ENVOY_EXPECTED_RQ_TIMEOUT_MS = "x-envoy-expected-rq-timeout-ms", parse_millis,
        "1 to 10 ASCII digits, milliseconds", "Envoy";

    /// `connect-timeout-ms`: the Connect protocol's timeout, in milliseconds.
    ///
    /// ```
    /// assert_eq!(budget_core::header::CONNECT_TIMEOUT_MS, "connect-timeout-ms");
    /// ```
    CONNECT_TIMEOUT_MS = "connect-timeout-ms", parse_millis,
        "1 to 10 ASCII digits, milliseconds", "Connect protocol";

    /// `request-timeout-ms`: a common client convention, in milliseconds.
    ///
    /// ```
    /// assert_eq!(budget_core::header::REQUEST_TIMEOUT_MS, "request-timeout-ms");
    /// ```
    REQUEST_TIMEOUT_MS = "request-timeout-ms", parse_millis,
        "1 to 10 ASCII digits, milliseconds", "common client conventions";

    /// `x-request-timeout-ms`: a common client convention, in milliseconds.
    ///
    /// ```
    /// assert_eq!(budget_core::header::X_REQUEST_TIMEOUT_MS, "x-request-timeout-ms");
    /// ```
    X_REQUEST_TIMEOUT_MS = "x-request-timeout-ms", parse_millis,
        "1 to 10 ASCII digits, milliseconds", "common client conventions";
}
