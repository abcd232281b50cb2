//! The project's own documentation, rendered with the API: the pages of
//! the repository's `docs/` directory (linked into the crate's own
//! `docs/`, so that the published crate carries them).
//!
//! - [`contract`]: the wire contract, `docs/contract.md`; the code cites it
//!   as `docs/contract.md §2 rule 4`.
//! - [`architecture`]: the path of one request, `docs/architecture.md`.

#[doc = include_str!("../docs/contract.md")]
pub mod contract {}

#[doc = include_str!("../docs/architecture.md")]
pub mod architecture {}
