//! Every observability name this crate emits, in one place (a rule of this
//! crate: a name is defined here once and used through these constants, never
//! spelt out where it is emitted): span names, span attribute keys and
//! values, metric names and labels.
//!
//! Where the OpenTelemetry semantic conventions define a name (HTTP server
//! and client spans, `url.*`, `server.*`, `error.type`), it is used as is;
//! the budget's own attributes live under one `budget.*` namespace. The
//! `otel.*` keys are not attributes: `tracing-opentelemetry` reads them to
//! set the OpenTelemetry span's kind, name and status.
//!
//! # What each span carries
//!
//! | span | kind | attributes |
//! | --- | --- | --- |
//! | [`SERVER_SPAN`]: one per request, opened by the server layer | server | [`HTTP_REQUEST_METHOD`], [`URL_PATH`], [`HTTP_ROUTE`] (axum's matched path, when the layer is added with `Router::layer`), [`HTTP_RESPONSE_STATUS_CODE`], [`ERROR_TYPE`] (5xx), [`BUDGET_INGRESS_MS`], [`BUDGET_FLOOR_MS`], [`BUDGET_OUTCOME`], [`BUDGET_LEDGER`] |
//! | [`ATTEMPT_SPAN`]: one per attempt of a dependency call | client | [`HTTP_REQUEST_METHOD`], [`URL_FULL`] (userinfo removed), [`SERVER_ADDRESS`], [`SERVER_PORT`], [`HTTP_RESPONSE_STATUS_CODE`], [`HTTP_REQUEST_RESEND_COUNT`] (retries only), [`ERROR_TYPE`], [`RPC_SYSTEM`] and [`RPC_GRPC_STATUS_CODE`] (gRPC calls), [`BUDGET_DEPENDENCY`], [`BUDGET_REMAINING_MS`], [`BUDGET_WAIT_MS`], [`BUDGET_OUTCOME`], [`BUDGET_DECISION`] |
//! | [`REFUSED_SPAN`]: a dependency call not made (floor, circuit, permit) | client | [`BUDGET_DEPENDENCY`], [`BUDGET_REMAINING_MS`], [`BUDGET_FLOOR_MS`], [`BUDGET_FLOOR_SOURCE`], [`BUDGET_OUTCOME`], [`ERROR_TYPE`] |
//! | [`STALE_SPAN`]: a dependency's last good answer served in place of a call not made or failed | internal | [`BUDGET_DEPENDENCY`], [`BUDGET_STALE_AGE_MS`], [`BUDGET_OUTCOME`] ([`OUTCOME_STALE`]) |
//!
//! The OpenTelemetry span name (`otel.name`) is `{method} {route}` (or
//! `{method}`) for a server span, as the conventions say, and
//! `{method} {dependency}` for an attempt: the dependency's configured name
//! stands in for the conventions' `url.template`, low in cardinality and
//! what a reader of the trace looks for.
//!
//! # Example
//!
//! ```
//! use budget_core::telemetry::semconv;
//!
//! assert_eq!(semconv::BUDGET_OUTCOME, "budget.outcome");
//! assert_eq!(semconv::OUTCOME_SHED, "shed");
//! assert_eq!(semconv::METRIC_SHED_TOTAL, "budget_shed_total");
//! ```

// ---------------------------------------------------------------- spans

/// The `tracing` target of every span this crate opens, for filters:
/// the binaries' subscriber (`service_kit::telemetry::init`) keeps them
/// out of the log lines unless the log filter names this target (`RUST_LOG=info,budget_core::spans=info`).
pub const SPAN_TARGET: &str = "budget_core::spans";
/// The `tracing` name of the server layer's span (one per request).
pub const SERVER_SPAN: &str = "budget.server";
/// The `tracing` name of a dependency attempt's span (one per attempt).
pub const ATTEMPT_SPAN: &str = "budget.attempt";
/// The `tracing` name of the span of a dependency call that was not made.
pub const REFUSED_SPAN: &str = "budget.refused";
/// The `tracing` name of the span of a stale answer served for a
/// dependency call that was not made or failed (`on_unavailable = "stale"`).
pub const STALE_SPAN: &str = "budget.stale";

// ------------------------------------------- tracing-opentelemetry fields

/// Sets the OpenTelemetry span kind (`server`, `client`).
pub const OTEL_KIND: &str = "otel.kind";
/// Overrides the OpenTelemetry span name.
pub const OTEL_NAME: &str = "otel.name";
/// Sets the OpenTelemetry span status (`ok`, `error`).
pub const OTEL_STATUS_CODE: &str = "otel.status_code";

/// [`OTEL_KIND`] of a server span.
pub const KIND_SERVER: &str = "server";
/// [`OTEL_KIND`] of a client span.
pub const KIND_CLIENT: &str = "client";
/// [`OTEL_STATUS_CODE`] of a failed span.
pub const STATUS_ERROR: &str = "error";

// ------------------------------------ OpenTelemetry semantic conventions

/// HTTP request method (`GET`). Semantic conventions, stable.
pub const HTTP_REQUEST_METHOD: &str = "http.request.method";
/// HTTP response status code, an integer. Semantic conventions, stable.
pub const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
/// The matched route template (`/orders/{id}`). Semantic conventions, stable.
pub const HTTP_ROUTE: &str = "http.route";
/// The ordinal of a resent request: 1 for the first retry. Absent on a
/// first attempt. Semantic conventions, stable.
pub const HTTP_REQUEST_RESEND_COUNT: &str = "http.request.resend_count";
/// The path of the request URL (server side). Semantic conventions, stable.
pub const URL_PATH: &str = "url.path";
/// The full request URL (client side), without userinfo. Semantic
/// conventions, stable.
pub const URL_FULL: &str = "url.full";
/// The peer's host name or address (client side). Semantic conventions, stable.
pub const SERVER_ADDRESS: &str = "server.address";
/// The peer's port, an integer (client side). Semantic conventions, stable.
pub const SERVER_PORT: &str = "server.port";
/// The request's scheme (`http`) (server span).
pub const URL_SCHEME: &str = "url.scheme";
/// The caller's address: the peer of the connection (server span).
pub const CLIENT_ADDRESS: &str = "client.address";
/// The caller's `User-Agent` (server span).
pub const USER_AGENT_ORIGINAL: &str = "user_agent.original";
/// The request's `x-request-id` (server span), named as OpenTelemetry
/// names a recorded request header.
pub const HTTP_REQUEST_HEADER_X_REQUEST_ID: &str = "http.request.header.x-request-id";
/// The class of error a span ended with: a status code (`503`), a
/// transport failure (`timeout`, `connect`), or a budget refusal
/// (`below_floor`). Semantic conventions, stable.
pub const ERROR_TYPE: &str = "error.type";
/// The RPC system of a dependency call made over gRPC (`grpc`); absent on
/// plain HTTP calls. Semantic conventions (RPC), development.
pub const RPC_SYSTEM: &str = "rpc.system";
/// The `grpc-status` a gRPC call's answer carried in its head (a
/// trailers-only answer). Semantic conventions (RPC), development.
pub const RPC_GRPC_STATUS_CODE: &str = "rpc.grpc.status_code";
/// [`RPC_SYSTEM`]'s value for gRPC.
pub const RPC_SYSTEM_GRPC: &str = "grpc";
/// A database statement's span (`postgres::Database`): its attempts'
/// spans are its children.
pub const STATEMENT_SPAN: &str = "budget.statement";
/// The database system of a statement's span (`postgresql`). Semantic
/// conventions (database), stable.
pub const DB_SYSTEM_NAME: &str = "db.system.name";
/// [`DB_SYSTEM_NAME`]'s value for PostgreSQL.
pub const DB_SYSTEM_POSTGRESQL: &str = "postgresql";
/// The statement's operation (`SELECT`, `UPDATE`), its first keyword.
/// Semantic conventions (database), stable.
pub const DB_OPERATION_NAME: &str = "db.operation.name";
/// A low-cardinality summary of the statement: its operation and label
/// (`UPDATE reserve-stock`), never its text or its parameters. Semantic
/// conventions (database), stable.
pub const DB_QUERY_SUMMARY: &str = "db.query.summary";
/// The SQLSTATE the server answered a failed statement with (`57014`).
/// Semantic conventions (database), stable.
pub const DB_RESPONSE_STATUS_CODE: &str = "db.response.status_code";

// ------------------------------------------------------ budget.* attributes

/// The budget the request arrived with, after default and clamp, in
/// milliseconds (server span).
pub const BUDGET_INGRESS_MS: &str = "budget.ingress_ms";
/// What was left of the budget, net of the per-hop reserve, when the
/// attempt was sent: the `request-budget-ms` it carried, in milliseconds
/// (attempt span; on a refused call, what was left).
pub const BUDGET_REMAINING_MS: &str = "budget.remaining_ms";
/// The floor in milliseconds: the service's ingress floor (server span) or
/// the dependency's (refused span).
pub const BUDGET_FLOOR_MS: &str = "budget.floor_ms";
/// Where a refused call's floor came from: `fixed`, or a learned floor's
/// basis (`p99 407ms x 1.5`, `cold start: 3 of 20 samples`) (refused span).
pub const BUDGET_FLOOR_SOURCE: &str = "budget.floor_source";
/// What the budget did to the request or the call; one of the `OUTCOME_*`
/// values.
pub const BUDGET_OUTCOME: &str = "budget.outcome";
/// The backoff wait charged to the budget before this attempt, in
/// milliseconds (retries only).
pub const BUDGET_WAIT_MS: &str = "budget.wait_ms";
/// The dependency's configured name (client spans).
pub const BUDGET_DEPENDENCY: &str = "budget.dependency";
/// The request's ledger as its `Server-Timing` header value (server span,
/// at the end; docs/contract.md §4).
pub const BUDGET_LEDGER: &str = "budget.ledger";
/// The retry policy's decision after the attempt (`retry after 20ms`,
/// `stop: succeeded`).
pub const BUDGET_DECISION: &str = "budget.decision";
/// How old the stale answer served for a dependency call was, in
/// milliseconds (stale span).
pub const BUDGET_STALE_AGE_MS: &str = "budget.stale_age_ms";

// -------------------------------------------------- budget.outcome values

/// The budget did not cut anything short.
pub const OUTCOME_OK: &str = "ok";
/// Below the ingress floor on arrival: `504`, the handler was not run.
pub const OUTCOME_SHED: &str = "shed";
/// The budget ran out: the handler was dropped (server span), or the
/// attempt was cut at the deadline (attempt span).
pub const OUTCOME_EXPIRED: &str = "expired";
/// Below the dependency's floor: the call was not made (refused span), or
/// no retry followed because the wait and the floor did not fit (attempt span).
pub const OUTCOME_BELOW_FLOOR: &str = "below_floor";
/// The dependency's `Retry-After` did not fit: its answer is passed up.
pub const OUTCOME_RETRY_AFTER_TOO_LONG: &str = "retry_after_too_long";
/// The dependency's circuit is open: the call (or its retry) was not made.
pub const OUTCOME_CIRCUIT_OPEN: &str = "circuit_open";
/// No concurrency permit came free within the budget: the call was not made.
pub const OUTCOME_NO_PERMIT: &str = "no_permit";
/// The dependency's host name gave no endpoints: the call was not made.
pub const OUTCOME_UNRESOLVED: &str = "unresolved";
/// The call was not made or failed, and the dependency's last good answer
/// was served in its place (stale span).
pub const OUTCOME_STALE: &str = "stale";
/// A malformed budget header: `400`.
pub const OUTCOME_MALFORMED: &str = "malformed";
/// The service was at its in-flight limit: `503` with `Retry-After`.
pub const OUTCOME_OVERLOADED: &str = "overloaded";
/// The handler answered `504`: a required dependency could not be called,
/// or did not answer, within the budget (server span).
pub const OUTCOME_OUT_OF_BUDGET: &str = "out_of_budget";
/// The handler passed a dependency's `429`/`503` up (server span).
pub const OUTCOME_DEFERRED: &str = "deferred";
/// The handler answered another `5xx` (server span).
pub const OUTCOME_ERROR: &str = "error";

// ----------------------------------------------------------------- metrics

/// Histogram: the budget at ingress, after default and clamp, in seconds.
pub const METRIC_INGRESS_SECONDS: &str = "budget_ingress_seconds";
/// Histogram: the budget sent with each dependency attempt (net of the
/// reserve), in seconds; label [`LABEL_DEPENDENCY`].
pub const METRIC_REMAINING_AT_CALL_SECONDS: &str = "budget_remaining_at_call_seconds";
/// Histogram: how long the service took to answer, in seconds (OpenTelemetry's
/// `http.server.request.duration`); labels [`LABEL_ROUTE`],
/// [`LABEL_METHOD`], [`LABEL_STATUS`]. Its `_count` is the request rate by
/// route and status: error and `504` rates come from it.
pub const METRIC_HTTP_SERVER_DURATION: &str = "http_server_request_duration_seconds";
/// Histogram: how long each dependency attempt took, in seconds
/// (OpenTelemetry's `http.client.request.duration`); labels
/// [`LABEL_DEPENDENCY`], [`LABEL_METHOD`], [`LABEL_OUTCOME`] (the status
/// code, the gRPC status `grpc-14`, or the failure: `connect`, `timeout`,
/// `reset`, ...), and [`LABEL_RPC_SYSTEM`] `grpc` on a gRPC call's series.
pub const METRIC_HTTP_CLIENT_DURATION: &str = "http_client_request_duration_seconds";
/// Histogram: how long each database statement's attempt took, in seconds
/// (OpenTelemetry's `db.client.operation.duration`); labels
/// [`LABEL_DB_SYSTEM_NAME`] (`postgresql`), [`LABEL_DEPENDENCY`] (the
/// database and the statement's label, `orders-db.reserve-stock`: the
/// query summary without its text) and [`LABEL_OUTCOME`] (`200`, `400` for
/// a statement the server refused, `503` for the server's own failure, or
/// `timeout`, `connect`, `reset`).
pub const METRIC_DB_CLIENT_DURATION: &str = "db_client_operation_duration_seconds";
/// Counter: requests answered `503` at the server's in-flight limit.
pub const METRIC_OVERLOADED_TOTAL: &str = "budget_overloaded_total";
/// Counter: requests shed below the ingress floor.
pub const METRIC_SHED_TOTAL: &str = "budget_shed_total";
/// Counter: requests whose budget ran out in the handler.
pub const METRIC_EXPIRED_TOTAL: &str = "budget_expired_total";
/// Counter: requests rejected for a malformed budget header.
pub const METRIC_MALFORMED_TOTAL: &str = "budget_malformed_total";
/// Counter: dependency calls not made below the dependency's floor; label
/// [`LABEL_DEPENDENCY`].
/// Requests whose `request-criticality` was unknown (read as `default`).
pub const METRIC_UNKNOWN_CRITICALITY_TOTAL: &str = "budget_unknown_criticality_total";
/// Dependency calls refused by their permit queue, by [`LABEL_DEPENDENCY`]
/// and [`LABEL_REASON`] (`expired`, `standing_queue`).
pub const METRIC_NO_PERMIT_TOTAL: &str = "budget_no_permit_total";
/// Gauge: a dependency's concurrency limit now (fixed or adaptive), by
/// [`LABEL_DEPENDENCY`].
pub const METRIC_CONCURRENCY_LIMIT: &str = "budget_concurrency_limit";
/// Gauge: the floor in force for a dependency (fixed or learned), in
/// seconds, by [`LABEL_DEPENDENCY`].
pub const METRIC_FLOOR_SECONDS: &str = "budget_floor_seconds";
/// Dependency calls not made below the floor, by [`LABEL_DEPENDENCY`].
pub const METRIC_BELOW_FLOOR_TOTAL: &str = "budget_below_floor_total";
/// Counter: retries made (attempts after the first); label [`LABEL_DEPENDENCY`].
pub const METRIC_RETRIES_TOTAL: &str = "budget_retries_total";
/// Counter: retries the per-client retry budget refused; label
/// [`LABEL_DEPENDENCY`].
pub const METRIC_RETRY_BUDGET_REFUSALS_TOTAL: &str = "budget_retry_budget_refusals_total";
/// Counter: dependency calls answered from the client's stale cache (the
/// call was not made or failed, `on_unavailable = "stale"`); label
/// [`LABEL_DEPENDENCY`].
pub const METRIC_STALE_SERVED_TOTAL: &str = "budget_stale_served_total";
/// Counter: hedges sent (`hedge` on a dependency); labels
/// [`LABEL_DEPENDENCY`] and [`LABEL_RESULT`] (`won`: the hedge answered
/// first; `lost`: the first attempt did, and the hedge was cancelled).
pub const METRIC_HEDGES_TOTAL: &str = "budget_hedges_total";
/// Counter: hedges that were due and not sent; labels [`LABEL_DEPENDENCY`]
/// and [`LABEL_REASON`] (`hedge_budget`, `floor`, `circuit`, `permit`, `no_other_replica`,
/// `cannot_win`).
pub const METRIC_HEDGES_DECLINED_TOTAL: &str = "budget_hedges_declined_total";
/// Metric label of [`METRIC_HEDGES_TOTAL`]: `won` or `lost`.
pub const LABEL_RESULT: &str = "result";
/// Counter: attempts to one endpoint of a dependency with several
/// (replicas); labels [`LABEL_DEPENDENCY`] and [`LABEL_ENDPOINT`]
/// (`host:port`; past the 16th endpoint of a dependency, `other`).
pub const METRIC_ENDPOINT_REQUESTS_TOTAL: &str = "budget_endpoint_requests_total";
/// Gauge: an endpoint's latency estimate (peak-EWMA) after its last
/// attempt, in seconds; labels as [`METRIC_ENDPOINT_REQUESTS_TOTAL`]'s.
pub const METRIC_ENDPOINT_LOAD_SECONDS: &str = "budget_endpoint_load_seconds";
/// Counter: lookups of a dependency's host name that failed (the last
/// good endpoints are kept); label [`LABEL_DEPENDENCY`].
pub const METRIC_RESOLVE_FAILURES_TOTAL: &str = "budget_resolve_failures_total";
/// Counter: circuit breaker state changes; labels [`LABEL_ENDPOINT`],
/// [`LABEL_FROM`], [`LABEL_TO`].
pub const METRIC_BREAKER_TRANSITIONS_TOTAL: &str = "budget_breaker_transitions_total";

/// Metric label: the dependency's configured name.
pub const LABEL_DEPENDENCY: &str = "dependency";
/// Metric label: the route template (`/checkout`); empty for a path no
/// route matched.
pub const LABEL_ROUTE: &str = "http_route";
/// Metric label: the request method.
pub const LABEL_METHOD: &str = "http_request_method";
/// Metric label: the response status code.
pub const LABEL_STATUS: &str = "http_response_status_code";
/// Metric label: how a dependency attempt ended (status code or failure).
pub const LABEL_OUTCOME: &str = "outcome";
/// The RPC system of a gRPC dependency call (`grpc`), on
/// [`METRIC_HTTP_CLIENT_DURATION`]; absent on plain HTTP calls.
pub const LABEL_RPC_SYSTEM: &str = "rpc_system";
/// Metric label: the database system of a statement (`postgresql`), on
/// [`METRIC_DB_CLIENT_DURATION`].
pub const LABEL_DB_SYSTEM_NAME: &str = "db_system_name";
/// Metric label: a breaker's endpoint key (`http://host:port`).
pub const LABEL_ENDPOINT: &str = "endpoint";
/// Label: why something was refused.
pub const LABEL_REASON: &str = "reason";
/// [`LABEL_REASON`] of [`METRIC_NO_PERMIT_TOTAL`]: the waiter's deadline
/// (less its floor) came before a permit.
pub const REASON_EXPIRED: &str = "expired";
/// [`LABEL_REASON`] of [`METRIC_NO_PERMIT_TOTAL`]: refused at arrival by a
/// standing queue (it admits only short waits while it stands).
pub const REASON_STANDING_QUEUE: &str = "standing_queue";
/// [`LABEL_REASON`] of [`METRIC_NO_PERMIT_TOTAL`]: the predicted wait plus
/// the floor did not fit in what the call had left (refused at arrival, or
/// once the prediction stopped fitting).
pub const REASON_PREDICTED_WAIT: &str = "predicted_wait";
/// Metric label: the state a breaker left (`closed`, `open`, `half-open`).
pub const LABEL_FROM: &str = "from";
/// Metric label: the state a breaker entered.
pub const LABEL_TO: &str = "to";

// ------------------------------------------------------ server streams

/// Counter: response bodies that stopped streaming, by [`LABEL_REASON`]:
/// [`STREAM_END_COMPLETE`], [`STREAM_END_IDLE`], [`STREAM_END_DURATION`],
/// [`STREAM_END_DEADLINE`], [`STREAM_END_CLIENT_GONE`],
/// [`STREAM_END_ERROR`]. A stream ended by its limit is a clean end,
/// counted by that limit and not as an error.
pub const METRIC_STREAM_ENDED_TOTAL: &str = "budget_stream_ended_total";
/// [`LABEL_REASON`] of [`METRIC_STREAM_ENDED_TOTAL`]: the handler's body ended.
pub const STREAM_END_COMPLETE: &str = "complete";
/// [`LABEL_REASON`] of [`METRIC_STREAM_ENDED_TOTAL`]: the route's idle timeout passed.
pub const STREAM_END_IDLE: &str = "idle";
/// [`LABEL_REASON`] of [`METRIC_STREAM_ENDED_TOTAL`]: the route's total duration passed.
pub const STREAM_END_DURATION: &str = "duration";
/// [`LABEL_REASON`] of [`METRIC_STREAM_ENDED_TOTAL`]: a gRPC call's deadline passed.
pub const STREAM_END_DEADLINE: &str = "deadline";
/// [`LABEL_REASON`] of [`METRIC_STREAM_ENDED_TOTAL`]: the body was dropped
/// before its end (the client went away).
pub const STREAM_END_CLIENT_GONE: &str = "client_gone";
/// [`LABEL_REASON`] of [`METRIC_STREAM_ENDED_TOTAL`]: the handler's body failed.
pub const STREAM_END_ERROR: &str = "error";
