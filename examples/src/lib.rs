//! Shared pieces of the example programs: the budget table, and the
//! endpoint checker behind `budget-check`.

pub mod check;
pub mod table;
