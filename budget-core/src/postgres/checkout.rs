//! Taking a connection from the pool under the request's budget: the
//! wait is paid from it and ends when what is left reaches the
//! statement's floor, as the engine's wait for a concurrency permit does
//! (the pool's connections are the database's permits).

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{PoolError, TimeoutType, Timeouts};
use tokio::time::Instant;

use super::{Connection, Database, QueryError};
use crate::breaker::{CircuitOpen, Verdict};
use crate::ledger::Entry;
use crate::outbound::error::CallError;
use crate::outbound::record::{self, Refusal};
use crate::outbound::{Dependency, Plan, QUEUE_SUFFIX, Timing};
use crate::retry::TransportKind;

/// A wait shorter than this is not a wait worth a ledger entry: the pool
/// had an idle connection.
const SHOWN_WAIT: Duration = Duration::from_millis(1);

impl Database {
    /// A connection for a statement of `dep`: refused below the floor
    /// before any wait, then waited for until what is left reaches the
    /// floor (the fixed timeout in fixed mode; with no budget to spend,
    /// the fixed timeout too, so no caller waits forever).
    pub(super) async fn checkout(&self, dep: &Dependency) -> Result<Connection, QueryError> {
        let plan = self.plan();
        let (wait, floor) = match &plan {
            Some(plan) => admit(dep, plan)?,
            None => (self.shared.defaults.fixed_timeout, Duration::ZERO),
        };
        // An open circuit refuses before any wait; the permit hears how
        // the connect went (a connection from the pool says nothing).
        let breaker = match &self.shared.breaker {
            Some(breaker) => match breaker.try_acquire() {
                Ok(permit) => Some(permit),
                Err(open) => return Err(self.circuit_open(plan.as_ref(), open)),
            },
            None => None,
        };
        let started = Instant::now();
        let timeouts = Timeouts {
            wait: Some(wait),
            create: Some(wait),
            recycle: Some(wait),
        };
        let got = self.shared.pool.timeout_get(&timeouts).await;
        let waited = started.elapsed();
        let name = &self.shared.name;
        // A connect that failed shows as its own entry (`orders-db;desc=
        // "connect-timeout"`), with the same time: not twice.
        let queue_shown =
            !matches!(&got, Err(e) if !matches!(e, PoolError::Timeout(TimeoutType::Wait)));
        if let Some(plan) = &plan
            && queue_shown
            && waited >= SHOWN_WAIT
        {
            record::ledger(
                plan,
                Entry::local(format!("{name}{QUEUE_SUFFIX}"), waited, None),
            );
        }
        match got {
            Ok(conn) => Ok(Connection::new(self.clone(), conn)),
            Err(PoolError::Timeout(TimeoutType::Wait)) => {
                Err(self.no_connection(plan.as_ref(), waited, floor))
            }
            Err(e) => {
                if let Some(permit) = breaker {
                    permit.record(Verdict::Failure);
                }
                Err(self.unreachable(plan.as_ref(), waited, e))
            }
        }
    }

    /// The database's circuit is open: refused, as the engine refuses.
    fn circuit_open(&self, plan: Option<&Plan>, open: CircuitOpen) -> QueryError {
        let name = &self.shared.name;
        match plan {
            Some(plan) => {
                record::refused(name, plan.timing, &plan.ledger, Refusal::CircuitOpen(open)).into()
            }
            None => CallError::new(Arc::clone(name), crate::client::CallErrorKind::CircuitOpen)
                .with_source(open)
                .into(),
        }
    }

    /// No connection came free while the budget allowed the statement.
    fn no_connection(&self, plan: Option<&Plan>, waited: Duration, floor: Duration) -> QueryError {
        let name = &self.shared.name;
        let Some(plan) = plan else {
            return CallError::new(Arc::clone(name), crate::client::CallErrorKind::NoPermit).into();
        };
        let refusal = Refusal::NoPermit {
            waited,
            floor: crate::floor::Floor::new(floor),
            queue: None,
            left: plan.timing.remaining(),
        };
        record::refused(name, plan.timing, &plan.ledger, refusal).into()
    }

    /// The pool could not make a connection: the server refused, did not
    /// answer in time, or failed the start-up.
    fn unreachable(&self, plan: Option<&Plan>, waited: Duration, e: PoolError) -> QueryError {
        let kind = match e {
            PoolError::Timeout(_) => TransportKind::ConnectTimeout,
            PoolError::Backend(_) => TransportKind::Connect,
            _ => TransportKind::Other,
        };
        let name = &self.shared.name;
        let mut error = CallError::from_transport(Arc::clone(name), kind).with_source(e);
        if let Some(plan) = plan {
            record::ledger(
                plan,
                Entry::attempt(&**name, 1, waited, error.kind().as_str()),
            );
            if let Some(left) = plan.timing.remaining() {
                error = error.with_budget(left, false);
            }
        }
        error.into()
    }
}

/// Rule 2 before the wait: below the floor, no wait at all; otherwise the
/// wait may take what is left down to the floor.
fn admit(dep: &Dependency, plan: &Plan) -> Result<(Duration, Duration), QueryError> {
    let floor = dep.floor.current();
    plan.check_floor(&floor).map_err(|below| {
        record::refused(
            &dep.name,
            plan.timing,
            &plan.ledger,
            Refusal::BelowFloor(below),
        )
    })?;
    let floor = floor.floor.get();
    Ok(match plan.timing {
        Timing::Budget(budget) => (budget.remaining().saturating_sub(floor), floor),
        Timing::Fixed(timeout) => (timeout, Duration::ZERO),
    })
}
