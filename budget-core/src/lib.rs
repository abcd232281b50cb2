//! # budget-core
//!
//! One shared time budget for every service in a call chain.
//!
//! A request arrives with "you have 2000 ms"; each downstream call gets what
//! is left, minus what was spent; a call that cannot fit in what is left is
//! not made at all; retries and their backoff are paid from the same budget;
//! a slow partner turns into a fast, honest `504` instead of a pile-up of
//! waiting workers.
//!
//! # Example: a handler calling a dependency
//!
//! An axum service ([server layer][server], feature `server`) whose handler
//! calls one dependency through a [`BudgetClient`] (feature `client`)
//! within the caller's budget. The handler takes no budget argument to pass
//! on: the client reads the request's budget from the context the layer
//! set.
//!
//! ```no_run
//! # #[cfg(all(feature = "server", feature = "client"))] mod example {
//! use axum::{Router, extract::State, routing::get};
//! use budget_core::Budget;
//! use budget_core::client::{BudgetClient, CallError, DependencyConfig};
//! use budget_core::server::ServerConfig;
//!
//! async fn checkout(budget: Budget, State(pricing): State<BudgetClient>) -> Result<String, CallError> {
//!     // The client sends what is left less a per-hop reserve, does not call
//!     // below the dependency's floor, and pays retries from the same budget;
//!     // a `CallError` answers as the contract's 504/503/429/502 problem.
//!     let price = pricing.get("").send().await?.error_for_status()?.text().into_owned();
//!     Ok(format!("{price} ({} ms left)", budget.remaining().as_millis()))
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let pricing = DependencyConfig::new("pricing", "http://127.0.0.1:9000/pricing").build()?;
//!     let app = Router::new()
//!         .route("/checkout", get(checkout))
//!         .with_state(pricing)
//!         // Last: `.layer()` wraps the routes added before it.
//!         .layer(ServerConfig::default().layer()?);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     axum::serve(listener, app).await?;
//!     Ok(())
//! }
//! # }
//! # fn main() {}
//! ```
//!
//! # Modules for users
//!
//! Where a service starts:
//!
//! - [`server`][server] (feature `server`): [`BudgetLayer`][budget-layer]
//!   from a `ServerConfig`, for an axum or tonic server, and the [`Budget`]
//!   extractor.
//! - [`client`][client] (feature `client`): [`BudgetClient`] built from a
//!   `DependencyConfig`: floors, retries, hedging, breakers, permit queues,
//!   replicas.
//! - [`grpc`]: `GrpcBudgetLayer` for a tonic client's channel (feature
//!   `grpc`), and how the layer answers a gRPC call.
//! - [`adapters`][adapters] (features `reqwest-middleware`, `tower-client`):
//!   the budget on a client stack you keep.
//! - [`config`]: the configuration structs and their typed errors.
//! - [`problem`]: the problem+json body every refusal answers with.
//! - [`context`]: the request's budget outside a handler (a spawned task, a
//!   background job).
//! - [`docs`]: the guides and the [wire contract](docs::contract)
//!   (`docs/contract.md`; the code cites it as `docs/contract.md §2 rule
//!   4`) and the path of one request, the [architecture](docs::architecture).
//!
//! # Building blocks
//!
//! What those are made of; pure (no web framework), public for tests,
//! tools and services that compose their own:
//!
//! - [`header`]: the header codec (`request-budget-ms`, `grpc-timeout`, ...).
//! - [`floor`]: the least time a call needs ([`Floor`](floor::Floor), the
//!   learned floor).
//! - [`retry`]: the retry rules and the retry budget.
//! - [`breaker`]: the circuit breaker.
//! - [`admission`]: concurrency permits, their queue and adaptive limits.
//! - [`ledger`]: where the budget went (`Server-Timing`).
//! - [`proxy`]: a proxy in the path (Envoy): its own refusals, told apart
//!   from the dependency's answers, and its upstream time.
//! - [`telemetry`]: spans and metrics names.
//! - [`clock`]: the injected wall clock; public because the API takes one
//!   (`BudgetClientBuilder::wall_clock`, `retry::Outcome::from_response`) and
//!   workspace binaries use it (the slow partner's gRPC server, the load
//!   tests' HTML report).
//! - [`fan_out`]: bounded fan-out under one deadline; public because the
//!   workspace's `budget-check` example uses it.
//! - [`error_chain`]: an error and its sources on one line.
//!
//! The core with none of the features on:
//!
//! ```
//! use std::time::Duration;
//! use budget_core::Budget;
//! use budget_core::floor::Floor;
//! use budget_core::header::{self, Decoded};
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert("request-budget-ms", "1500".parse().unwrap());
//! headers.insert("grpc-timeout", "900m".parse().unwrap());
//!
//! // Every known format is read; the smallest wins.
//! let Decoded::Valid { budget, .. } = header::decode(&headers) else { panic!() };
//! assert_eq!(budget, Duration::from_millis(900));
//!
//! let budget = Budget::new(budget);
//! // A call that needs at least 1 s is not made with 900 ms left.
//! assert!(Floor::new(Duration::from_secs(1)).check(budget.remaining()).is_err());
//! ```
//!
#![cfg_attr(feature = "client", doc = "[`BudgetClient`]: client::BudgetClient")]
#![cfg_attr(not(feature = "client"), doc = "[`BudgetClient`]: docs::client")]
#![cfg_attr(any(feature = "client", feature = "grpc"), doc = "[client]: client")]
#![cfg_attr(
    not(any(feature = "client", feature = "grpc")),
    doc = "[client]: docs::client"
)]
#![cfg_attr(feature = "server", doc = "[server]: server")]
#![cfg_attr(not(feature = "server"), doc = "[server]: docs::server")]
#![cfg_attr(feature = "server", doc = "[budget-layer]: server::BudgetLayer")]
#![cfg_attr(not(feature = "server"), doc = "[budget-layer]: docs::server")]
#![cfg_attr(
    any(feature = "reqwest-middleware", feature = "tower-client"),
    doc = "[adapters]: adapters"
)]
#![cfg_attr(
    not(any(feature = "reqwest-middleware", feature = "tower-client")),
    doc = "[adapters]: docs::client"
)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "reqwest-middleware", feature = "tower-client"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "reqwest-middleware", feature = "tower-client")))
)]
pub mod adapters;
pub mod admission;
pub mod breaker;
mod budget;
pub mod clock;
pub mod config;
pub mod context;
mod decimal;
pub mod docs;

/// The crate's `README.md`, whose example is compiled with the doctests.
#[cfg(all(doctest, feature = "server", feature = "client"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
mod error;
pub mod fan_out;
pub mod floor;
pub mod grpc;
mod grpc_status;
pub mod header;
pub mod ledger;
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres;
pub mod problem;
pub mod proxy;
pub mod retry;
// Internal: the token refresh's single flight. Public only for its
// doctests and its users of old; no workspace crate uses it.
#[doc(hidden)]
pub mod single_flight;
#[cfg(feature = "streams")]
#[cfg_attr(docsrs, doc(cfg(feature = "streams")))]
pub mod stream;
pub mod telemetry;

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;

#[cfg(outbound)]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "client", feature = "grpc", feature = "tower-client")))
)]
pub mod client;

#[cfg(outbound)]
mod outbound;

#[cfg(feature = "batch")]
#[cfg_attr(docsrs, doc(cfg(feature = "batch")))]
pub mod batch;

pub use budget::{Budget, Exhausted};
pub use error::error_chain;
