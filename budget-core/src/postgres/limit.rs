//! The server's own limit on a statement (`statement_timeout`), set from
//! what the call has left: the rule, and the SQL that sets it.
//!
//! The caller stops a statement at its own deadline: the engine drops the
//! attempt, and its cancel is confirmed before the connection is used
//! again (the [`cancel`](super::cancel) module). The server's limit is the
//! backstop for a caller that can no longer cancel (its process gone, the
//! network between cut), so it is what the attempt has left (its budget,
//! already less the request's per-hop reserve) rounded *up* to a step of a
//! ladder with eight steps per doubling:
//!
//! - it never fires before the caller's deadline, so a statement the
//!   caller still waits for is never stopped early, and the server's timer
//!   never races a statement that ends in time: PostgreSQL's timer firing
//!   as a statement ends can stop the connection's *next* statement, which
//!   is a later caller's (measured in tests/postgres.rs before this rule);
//! - when nobody is left to cancel, at most an eighth more runs;
//! - connections keep their setting across calls whose budgets differ by
//!   less than a step, so most statements need no `SET` of their own.
//!
//! A lower limit of the connection's own (a role's default) or of the
//! caller's transaction (`SET LOCAL`) is kept, never widened
//! (docs/postgres.md, "The server's limit").

use std::time::Duration;

/// Steps per doubling: the limit is at most `1/STEPS` over what is left.
const STEPS: u64 = 8;

/// Inside the caller's transaction: the setting is local to it (gone at
/// its end) and never wider than the transaction's own (a `SET LOCAL` of
/// the caller's, or an earlier statement's).
pub(crate) const SET_LOCAL: &str = "select set_config('statement_timeout', \
     (case when t.ms = 0 then $1::int8 else least(t.ms, $1::int8) end)::text, true) \
     from (select (extract(epoch from current_setting('statement_timeout')::interval) \
     * 1000)::int8 as ms) as t";

/// The connection's own setting when nothing was `SET`: the server's,
/// the database's or the role's default (`0`: none).
pub(crate) const READ_DEFAULT: &str =
    "select reset_val from pg_settings where name = 'statement_timeout'";

/// The server's limit, in whole milliseconds, for a statement with `left`
/// of its budget (the attempt's) on a connection whose own default is
/// `default_ms` (`0`: none): the ladder step at or above what is left,
/// never wider than the default and never `0` (which the server reads as
/// "no limit").
pub(crate) fn server_limit(left: Duration, default_ms: u64) -> u64 {
    // Whole milliseconds, rounded up: a limit below what is left would
    // stop a statement its caller still waits for.
    let ms = u64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
    // The server takes at most `INT_MAX` milliseconds (24 days).
    let stepped = step_up(ms.max(1)).min(MAX_MS);
    match default_ms {
        0 => stepped,
        own => stepped.min(own),
    }
}

/// The largest `statement_timeout` the server accepts.
const MAX_MS: u64 = i32::MAX as u64;

/// The smallest ladder step at or above `ms`: below `STEPS` every
/// millisecond is a step; above, `2^k * (1 + i/STEPS)`.
fn step_up(ms: u64) -> u64 {
    if ms <= STEPS {
        return ms;
    }
    let octave = 1u64 << (63 - ms.leading_zeros());
    let step = octave / STEPS;
    ms.div_ceil(step).saturating_mul(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn the_limit_is_what_is_left_rounded_up_a_step() {
        assert_eq!(server_limit(ms(1000), 0), 1024);
        assert_eq!(server_limit(ms(1024), 0), 1024);
        assert_eq!(server_limit(ms(1025), 0), 1152);
        assert_eq!(server_limit(Duration::from_micros(4100), 0), 5);
        // Nothing left is still a limit: 0 would be none at all.
        assert_eq!(server_limit(Duration::ZERO, 0), 1);
        assert_eq!(server_limit(Duration::MAX, 0), MAX_MS);
    }

    #[test]
    fn the_connections_own_default_is_never_widened() {
        assert_eq!(server_limit(ms(5000), 300), 300);
        assert_eq!(server_limit(ms(100), 300), 104);
    }

    proptest! {
        /// Never below what is left (less the reserve), at most an eighth
        /// over it, and one value for a whole step of budgets.
        #[test]
        fn a_step_is_never_below_and_at_most_an_eighth_over(left in 1u64..1_000_000_000) {
            let limit = server_limit(ms(left), 0);
            prop_assert!(limit >= left);
            prop_assert!(limit * STEPS <= left * (STEPS + 1) || left <= STEPS, "{left} -> {limit}");
            prop_assert_eq!(server_limit(ms(limit), 0), limit);
        }
    }
}
