//! The project's own documentation, rendered with the API: the pages of
//! the repository's `docs/` directory (linked into the crate's own
//! `docs/`, so that the published crate carries them). Their Rust blocks
//! are compiled, and run unless marked `no_run`, with the crate's
//! doctests; a page whose examples need features is rendered in full
//! when they are on (as on docs.rs), and as a pointer otherwise.
//!
//! Using the crate:
//!
//! - [`server`]: `BudgetLayer`, the extractors, the headers, `docs/server.md`.
//! - [`client`]: `BudgetClient`, calls outside a request, bearer tokens,
//!   replicas, `docs/client.md`.
//! - [`grpc`]: tonic servers and channels, `docs/grpc.md`.
//! - [`overload`]: learned floors, deadline-aware permit queues, adaptive
//!   concurrency, `docs/overload.md`.
//! - [`hedging_and_stale`]: hedged requests, fail, skip or stale,
//!   `docs/hedging-and-stale.md`.
//! - [`adapters`]: the budget on a reqwest-middleware stack or a tower
//!   client, with reqwest-retry, `docs/adapters.md`.
//! - [`postgres`]: PostgreSQL statements that spend the budget and stop on
//!   the server when their caller stops, `docs/postgres.md`.
//! - [`streams`]: streams under the budget: on the server (the budget to
//!   the head, then the route's stream policy), a stream's opening as a
//!   call, reconnects without a stampede, SSE and WebSocket followers,
//!   background batches, `docs/streams.md`.
//!
//! The example chain:
//!
//! - [`binaries`]: the demo, `edge`, `checkout`, `slow-partner`,
//!   `budget-check` and their flags, `docs/binaries.md`.
//! - [`load_tests`]: the load generator, its report, the soak,
//!   `docs/load-tests.md`.
//! - [`operations`]: HTTP server limits, metrics and traces, the compose
//!   chaos demos, fuzzing, `docs/operations.md`.
//!
//! Reference:
//!
//! - [`contract`]: the wire contract, `docs/contract.md`; the code cites it
//!   as `docs/contract.md §2 rule 4`.
//! - [`architecture`]: the path of one request, `docs/architecture.md`.

#[doc = include_str!("../docs/contract.md")]
pub mod contract {}

#[doc = include_str!("../docs/architecture.md")]
pub mod architecture {}

#[cfg_attr(feature = "server", doc = include_str!("../docs/server.md"))]
#[cfg_attr(
    not(feature = "server"),
    doc = "The server side, `docs/server.md`: rendered with the feature `server`."
)]
pub mod server {}

#[cfg_attr(
    all(feature = "server", feature = "client"),
    doc = include_str!("../docs/client.md")
)]
#[cfg_attr(
    not(all(feature = "server", feature = "client")),
    doc = "The client side, `docs/client.md`: rendered with the features `server` and `client`."
)]
pub mod client {}

#[cfg_attr(
    all(feature = "server", feature = "grpc"),
    doc = include_str!("../docs/grpc.md")
)]
#[cfg_attr(
    not(all(feature = "server", feature = "grpc")),
    doc = "gRPC, `docs/grpc.md`: rendered with the features `server` and `grpc`."
)]
pub mod grpc {}

#[cfg_attr(
    all(feature = "server", feature = "client"),
    doc = include_str!("../docs/overload.md")
)]
#[cfg_attr(
    not(all(feature = "server", feature = "client")),
    doc = "Overload and admission, `docs/overload.md`: rendered with the features `server` and `client`."
)]
pub mod overload {}

#[cfg_attr(feature = "client", doc = include_str!("../docs/hedging-and-stale.md"))]
#[cfg_attr(
    not(feature = "client"),
    doc = "Hedged requests and the stale fallback, `docs/hedging-and-stale.md`: rendered with the feature `client`."
)]
pub mod hedging_and_stale {}

#[cfg_attr(
    all(feature = "server", feature = "reqwest-middleware", feature = "tower-client"),
    doc = include_str!("../docs/adapters.md")
)]
#[cfg_attr(
    not(all(
        feature = "server",
        feature = "reqwest-middleware",
        feature = "tower-client"
    )),
    doc = "Adapters, `docs/adapters.md`: rendered with the features `server`, `reqwest-middleware` and `tower-client`."
)]
pub mod adapters {}
#[cfg_attr(
    all(feature = "server", feature = "postgres"),
    doc = include_str!("../docs/postgres.md")
)]
#[cfg_attr(
    not(all(feature = "server", feature = "postgres")),
    doc = "PostgreSQL, `docs/postgres.md`: rendered with the features `server` and `postgres`."
)]
pub mod postgres {}

#[cfg_attr(
    all(feature = "server", feature = "streams"),
    doc = include_str!("../docs/streams.md")
)]
#[cfg_attr(
    not(all(feature = "server", feature = "streams")),
    doc = "Streams, `docs/streams.md`: rendered with the features `server` and `streams`."
)]
pub mod streams {}

#[doc = include_str!("../docs/binaries.md")]
pub mod binaries {}

#[doc = include_str!("../docs/load-tests.md")]
pub mod load_tests {}

#[doc = include_str!("../docs/operations.md")]
pub mod operations {}

/// The repository's front page, `README.md`, whose example is compiled
/// with the doctests. It lies outside the package, so it is read only
/// when doctests are collected in the repository, never in a build of
/// the published crate.
#[cfg(all(doctest, feature = "server", feature = "client"))]
#[doc = include_str!("../../README.md")]
pub struct FrontPage;
