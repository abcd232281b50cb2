//! [`Scanned`]: the request headers the budget layer reads besides the
//! budget, picked up in the budget decoder's one pass over the map.

use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue};

use crate::admission::criticality::REQUEST_CRITICALITY;
use crate::context::{TRACEPARENT, TRACESTATE};

/// The first value of each header the layer reads besides the budget
/// formats: looking each up by name would hash the name (a byte at a
/// time) once more per header and request.
#[derive(Debug, Default)]
pub(crate) struct Scanned<'a> {
    /// The request is a gRPC call (its `content-type`).
    pub(crate) grpc: bool,
    pub(crate) criticality: Option<&'a HeaderValue>,
    pub(crate) traceparent: Option<&'a HeaderValue>,
    pub(crate) tracestate: Option<&'a HeaderValue>,
}

impl<'a> Scanned<'a> {
    /// Notes `value` if `name` is one of the headers read, and the first of
    /// its name (as `HeaderMap::get` would answer).
    pub(crate) fn note(&mut self, name: &HeaderName, value: &'a HeaderValue) {
        if *name == CONTENT_TYPE {
            self.grpc = crate::grpc::is_grpc(value.as_bytes());
            return;
        }
        let slot = if *name == REQUEST_CRITICALITY {
            &mut self.criticality
        } else if *name == TRACEPARENT {
            &mut self.traceparent
        } else if *name == TRACESTATE {
            &mut self.tracestate
        } else {
            return;
        };
        slot.get_or_insert(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_of_each_read_header_is_kept_as_get_would_answer() {
        let mut headers = http::HeaderMap::new();
        for (name, value) in [
            ("request-criticality", "critical"),
            ("request-criticality", "sheddable"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "a=1"),
            ("tracestate", "b=2"),
            ("x-other", "1"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let mut scanned = Scanned::default();
        for (name, value) in &headers {
            scanned.note(name, value);
        }
        assert_eq!(scanned.criticality, headers.get(REQUEST_CRITICALITY));
        assert_eq!(scanned.traceparent, headers.get(TRACEPARENT));
        assert_eq!(scanned.tracestate, headers.get(TRACESTATE));
        assert_eq!(scanned.tracestate.unwrap(), "a=1");
    }

    #[test]
    fn a_grpc_content_type_marks_a_grpc_call() {
        let mut scanned = Scanned::default();
        let json = HeaderValue::from_static("application/json");
        scanned.note(&CONTENT_TYPE, &json);
        assert!(!scanned.grpc);
        let grpc = HeaderValue::from_static("application/grpc+proto");
        scanned.note(&CONTENT_TYPE, &grpc);
        assert!(scanned.grpc);
    }

    #[test]
    fn nothing_is_noted_from_other_headers() {
        let mut scanned = Scanned::default();
        let value = HeaderValue::from_static("x");
        scanned.note(&http::header::HOST, &value);
        assert!(scanned.criticality.is_none() && scanned.traceparent.is_none());
        assert!(scanned.tracestate.is_none());
    }
}
