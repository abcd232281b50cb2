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
//! This crate's core is pure: the [`Budget`] type, the [header codec](header),
//! the [`Floor`](floor::Floor), the [retry rules](retry), the [circuit breaker](breaker),
//! [bounded fan-out](fan_out), [single-flight refresh](single_flight), the
//! [ledger], [admission] to a dependency's concurrency permits and the
//! [configuration](config). None of it depends on a web
//! framework.
//!
//! # Documentation
//!
//! The wire behaviour (headers, statuses, the problem body, the
//! `Server-Timing` ledger, the slow partner's knobs, the services' flags)
//! is the [wire contract](docs::contract), `docs/contract.md` in the
//! repository; the code cites it as `docs/contract.md §2 rule 4`. The path
//! of one request through the layer, the handler, the client, the call
//! engine, the attempt and the ledger, with the file behind each step, is
//! the [architecture](docs::architecture) page, `docs/architecture.md`.
//!
//! # Example
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
pub mod problem;
pub mod retry;
pub mod single_flight;
// Its module docs link to the server layer, the client and the metrics
// functions, each behind its feature; that file is edited elsewhere, so
// its links are not made conditional here: until they are, the lint is off
// there unless all three features are on. Every other module's links
// resolve with any set of features (`.ci/run` checks each feature alone).
#[cfg_attr(
    not(all(feature = "server", feature = "client", feature = "metrics")),
    allow(rustdoc::broken_intra_doc_links)
)]
pub mod telemetry;

#[cfg(feature = "server")]
#[cfg_attr(docsrs, doc(cfg(feature = "server")))]
pub mod server;

#[cfg(any(feature = "client", feature = "grpc"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "client", feature = "grpc"))))]
pub mod client;

pub use budget::{Budget, Exhausted};
pub use error::error_chain;
