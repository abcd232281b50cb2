//! The outbound headers, one rule per header, for every transport
//! (docs/contract.md §1, "Outbound").
//!
//! | header | sent when | value |
//! | --- | --- | --- |
//! | `request-budget-ms` | over HTTP: budget mode and `forward` | the attempt's budget, whole milliseconds rounded down; replaces any value there |
//! | `grpc-timeout` | over gRPC: budget mode (gRPC's own deadline, `forward` or not); over HTTP: budget mode, `forward` and `grpc_timeout = true` | the attempt's budget (over HTTP in whole milliseconds); replaces any value there; over gRPC removed in fixed mode |
//! | `request-criticality` | budget mode and `forward`, unless the caller set one | the request's criticality |
//! | `traceparent`, `tracestate` | always | the attempt's span's context, or the caller's as it came when there is no span |
//!
//! The deadline goes in the protocol's own header: `request-budget-ms`
//! over HTTP, `grpc-timeout` over gRPC (which every gRPC server reads);
//! the rest is the same for every transport.
//!
//! [`HeaderRules`] are read once per call, before the engine; each
//! transport's [`stamp`](super::Transport::stamp) applies them to every
//! attempt with the budget of that attempt.

use std::time::Duration;

use http::HeaderMap;

use crate::admission::criticality::{Criticality, REQUEST_CRITICALITY};
#[cfg(any(feature = "client", feature = "tower-client", test))]
use crate::budget::whole_millis;
use crate::context::InboundTrace;
use crate::header::{GRPC_TIMEOUT, REQUEST_BUDGET_MS, encode_grpc_timeout, encode_ms};
use crate::telemetry::carry;

/// How a transport carries the budget besides `request-budget-ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// HTTP: `request-budget-ms` alone.
    #[cfg(any(feature = "client", feature = "tower-client", test))]
    Http,
    /// HTTP with `grpc_timeout = true`: `grpc-timeout` too, in whole
    /// milliseconds (the same value as `request-budget-ms`).
    #[cfg(any(feature = "client", feature = "tower-client", test))]
    HttpAndGrpcTimeout,
    /// gRPC: `grpc-timeout` is the protocol's deadline, sent in budget
    /// mode whatever `forward` says, in the finest unit that fits.
    Grpc,
    /// No headers: a database statement (its deadline is the server's
    /// `statement_timeout`, set by the statement's transport).
    #[cfg(feature = "postgres")]
    None,
}

/// What one call's attempts carry besides their budget: read once, before
/// the engine, from the dependency's configuration and the request the
/// call is made in.
#[derive(Clone, Debug)]
pub(crate) struct HeaderRules {
    /// The budget and criticality headers are sent.
    pub(crate) forward: bool,
    /// How the deadline goes.
    pub(crate) deadline: Deadline,
    /// The request's criticality.
    pub(crate) criticality: Criticality,
    /// The caller's trace context as it came to this hop.
    pub(crate) inbound_trace: Option<InboundTrace>,
}

impl HeaderRules {
    /// Writes the headers of one attempt sent with `budget` (`None` in
    /// fixed mode) into `headers`, by the table in the [module
    /// docs](self). The trace context is the current span's: the engine
    /// runs every attempt inside its span.
    #[inline]
    pub(crate) fn apply(&self, headers: &mut HeaderMap, budget: Option<Duration>) {
        if self.deadline == Deadline::Grpc {
            // The call's own `grpc-timeout` was read into its budget (the
            // smaller wins); what goes is the attempt's.
            headers.remove(GRPC_TIMEOUT);
        }
        if let Some(budget) = budget {
            if self.forward {
                if self.deadline != Deadline::Grpc {
                    headers.insert(REQUEST_BUDGET_MS, encode_ms(budget));
                }
                if !headers.contains_key(REQUEST_CRITICALITY) {
                    headers.insert(REQUEST_CRITICALITY, self.criticality.header_value());
                }
            }
            match self.deadline {
                Deadline::Grpc => {
                    headers.insert(GRPC_TIMEOUT, encode_grpc_timeout(budget));
                }
                #[cfg(any(feature = "client", feature = "tower-client", test))]
                Deadline::HttpAndGrpcTimeout if self.forward => {
                    let whole = Duration::from_millis(whole_millis(budget));
                    headers.insert(GRPC_TIMEOUT, encode_grpc_timeout(whole));
                }
                #[cfg(any(feature = "client", feature = "tower-client", test))]
                Deadline::Http | Deadline::HttpAndGrpcTimeout => {}
                #[cfg(feature = "postgres")]
                Deadline::None => {}
            }
        }
        carry::propagate(
            &tracing::Span::current(),
            headers,
            self.inbound_trace.as_ref(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(forward: bool, deadline: Deadline) -> HeaderRules {
        HeaderRules {
            forward,
            deadline,
            criticality: Criticality::Critical,
            inbound_trace: None,
        }
    }

    fn stamped(
        rules: &HeaderRules,
        own: &[(&'static str, &'static str)],
        budget: Option<u64>,
    ) -> Vec<String> {
        let mut headers = HeaderMap::new();
        for (k, v) in own {
            headers.insert(*k, v.parse().unwrap());
        }
        rules.apply(&mut headers, budget.map(Duration::from_millis));
        let mut seen: Vec<String> = headers
            .iter()
            .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap()))
            .collect();
        seen.sort();
        seen
    }

    #[test]
    fn budget_mode_forwarding_sends_the_budget_and_the_criticality() {
        let r = rules(true, Deadline::Http);
        assert_eq!(
            stamped(&r, &[("request-budget-ms", "9999")], Some(380)),
            ["request-budget-ms: 380", "request-criticality: critical"]
        );
    }

    #[test]
    fn the_caller_s_criticality_stays() {
        let r = rules(true, Deadline::Http);
        assert_eq!(
            stamped(&r, &[("request-criticality", "sheddable")], Some(5)),
            ["request-budget-ms: 5", "request-criticality: sheddable"]
        );
    }

    #[test]
    fn without_forward_nothing_of_ours_goes_but_grpc_keeps_its_deadline() {
        assert!(stamped(&rules(false, Deadline::HttpAndGrpcTimeout), &[], Some(380)).is_empty());
        assert_eq!(
            stamped(&rules(false, Deadline::Grpc), &[], Some(380)),
            ["grpc-timeout: 380000u"]
        );
    }

    #[test]
    fn http_s_grpc_timeout_is_whole_milliseconds_and_grpc_s_alone_the_finest_unit() {
        let budget = Some(1500);
        assert_eq!(
            stamped(&rules(true, Deadline::HttpAndGrpcTimeout), &[], budget),
            [
                "grpc-timeout: 1500000u",
                "request-budget-ms: 1500",
                "request-criticality: critical"
            ]
        );
        assert_eq!(
            stamped(
                &rules(true, Deadline::Grpc),
                &[("grpc-timeout", "1H")],
                budget
            ),
            ["grpc-timeout: 1500000u", "request-criticality: critical"]
        );
    }

    #[test]
    fn fixed_mode_sends_no_budget_header_and_removes_a_grpc_callers_own() {
        assert!(stamped(&rules(true, Deadline::Http), &[], None).is_empty());
        assert!(
            stamped(
                &rules(true, Deadline::Grpc),
                &[("grpc-timeout", "1S")],
                None
            )
            .is_empty()
        );
    }
}
