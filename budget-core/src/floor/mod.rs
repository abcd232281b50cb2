//! The floor: the least time a dependency needs to be worth calling.
//!
//! A call whose remaining budget is below the floor cannot succeed in time,
//! so it is refused before any I/O: no connection is opened, no partner
//! does work nobody will wait for (docs/contract.md §2 rule 2).
//!
//! A floor is either fixed ([`Floor`], `floor = "250ms"`) or learned
//! ([`LearnedFloor`], `floor = "auto"` or a table, rule 10): the
//! dependency's observed latency quantile of its successful attempts times
//! a margin, clamped to `[min, max]`, so that it follows the partner when
//! its latency moves instead of being sized once by hand. Whatever the
//! floor, a refusal says where its number came from
//! (`420ms < floor 610ms (p99 407ms x 1.5)`): the ledger's skip note, the
//! refused call's span, and a gauge per dependency on `/metrics`.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use budget_core::floor::Floor;
//!
//! let floor = Floor::new(Duration::from_millis(1000));
//! assert!(floor.check(Duration::from_millis(1200)).is_ok());
//!
//! let err = floor.check(Duration::from_millis(850)).unwrap_err();
//! assert_eq!(err.remaining(), Duration::from_millis(850));
//! assert_eq!(err.floor(), Duration::from_millis(1000));
//! assert_eq!(err.to_string(), "850ms < floor 1000ms");
//! ```

mod config;
mod fixed;
mod learned;
mod observer;

pub use config::{DependencyFloor, FloorConfig};
pub use fixed::{BelowFloor, Floor};
#[cfg(all(test, feature = "client"))]
pub(crate) use learned::REFRESH;
pub use learned::{Clamp, Effective, FloorBasis, LearnedFloor, LearnedFloorConfig};
pub use observer::Observer;
