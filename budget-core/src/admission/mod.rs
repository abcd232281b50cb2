//! Admission: who gets one of a dependency's limited concurrency permits,
//! in what order, and who is refused early, so that overload fails fast and
//! the requests that can still finish are the ones served.
//!
//! - [`criticality`]: how much a request matters ([`Criticality`]) and its
//!   `request-criticality` header.
//!
//! Everything here is pure: no I/O, no HTTP, no spawned task. The client
//! and server sides wire it in.
//!
//! # Example
//!
//! ```
//! use budget_core::admission::Criticality;
//!
//! let mut headers = http::HeaderMap::new();
//! headers.insert("request-criticality", "critical".parse().unwrap());
//! assert_eq!(Criticality::from_headers(&headers).criticality, Criticality::Critical);
//! ```

pub mod criticality;

pub use criticality::{Criticality, REQUEST_CRITICALITY, ReadCriticality};
