//! Shared pieces of the example programs: the budget table.

pub mod table;
