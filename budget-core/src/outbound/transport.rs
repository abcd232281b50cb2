//! The seam between the engine and what carries a call: [`Transport`].
//!
//! The engine decides (admission, the attempt's window, retries, hedges,
//! the record); a transport only stamps an attempt's headers, sends it,
//! and says what came back. reqwest ([`BudgetClient`](crate::client)),
//! a tonic channel ([`GrpcBudgetLayer`](crate::grpc)), a
//! `reqwest-middleware` stack and a tower client each implement it once;
//! a new transport is one more implementation.

use std::future::Future;
use std::time::Duration;

use http::HeaderMap;

use super::attempt::{AttemptError, AttemptSpec};
use super::headers::HeaderRules;
use crate::clock::WallClock;
use crate::retry::Outcome;

/// What carries one call's attempts.
///
/// The engine calls [`send`](Self::send) once per attempt (twice at once
/// when it hedges), each time under the attempt's deadline: an attempt
/// still running then is dropped. What came back is read by
/// [`classify`](Self::classify) (an answer, whatever its status) or
/// [`classify_error`](Self::classify_error) (no answer).
pub(crate) trait Transport: Sync {
    /// An answer, whatever its status.
    type Answer: Send;
    /// A failure to get an answer, as the transport gives it.
    type Error: Send;

    /// Writes an attempt's outgoing headers: the budget it may take
    /// (`None` in fixed mode), by the one rule every transport follows
    /// ([`HeaderRules::apply`]).
    #[inline]
    fn stamp(&self, headers: &mut HeaderMap, rules: &HeaderRules, budget: Option<Duration>) {
        rules.apply(headers, budget);
    }

    /// Sends attempt `spec`, its headers [stamped](Self::stamp) with
    /// `rules` and `spec.budget`.
    fn send(
        &self,
        spec: AttemptSpec,
        rules: &HeaderRules,
    ) -> impl Future<Output = Result<Self::Answer, Self::Error>> + Send;

    /// What an answer says: its status (and when to come back), read as
    /// its protocol reads it.
    fn classify(&self, answer: &Self::Answer, clock: &dyn WallClock) -> Outcome;

    /// What a failure is: its kind (connect, reset, timeout, ...) and what
    /// the breaker hears of it.
    fn classify_error(&self, error: Self::Error) -> AttemptError;

    /// An answer's head, for what the engine reads the same way in every
    /// protocol: a proxy's marks (Envoy's own refusals, its upstream
    /// time; [`crate::proxy`]). `None` for an answer without HTTP headers
    /// (a database's).
    fn head<'a>(&self, answer: &'a Self::Answer) -> Option<Head<'a>>;
}

/// What the engine reads of an answer besides its status.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head<'a> {
    /// Its headers (over gRPC, the initial metadata).
    pub(crate) headers: &'a HeaderMap,
    /// Its body, when the transport holds it whole (Envoy's local-reply
    /// text names the refusal when no header does).
    pub(crate) body: Option<&'a [u8]>,
}

impl<'a> Head<'a> {
    /// `headers`, with the body when the transport holds it whole
    /// (`None`: still to come, or none).
    pub(crate) fn new(headers: &'a HeaderMap, body: Option<&'a [u8]>) -> Self {
        Self { headers, body }
    }
}
