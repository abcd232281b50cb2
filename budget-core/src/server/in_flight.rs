//! The in-flight limit: overload protection that answers instead of queueing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many requests a service works on at once, shared by every clone of
/// the layer's services.
#[derive(Debug)]
pub(crate) struct InFlight {
    limit: usize,
    count: AtomicUsize,
}

impl InFlight {
    pub(crate) fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            count: AtomicUsize::new(0),
        })
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// A slot, or `None` at the limit. Lock-free: the count may pass the
    /// limit for an instant between the add and the undo, never admitting
    /// more than `limit`.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<InFlightGuard> {
        if self.count.fetch_add(1, Ordering::AcqRel) >= self.limit {
            self.count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(InFlightGuard(self.clone()))
    }

    /// Requests in flight now.
    #[cfg(test)]
    pub(crate) fn current(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }
}

/// One admitted request; its slot frees when the response future is done
/// or dropped.
#[derive(Debug)]
pub(crate) struct InFlightGuard(Arc<InFlight>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_and_frees_on_drop() {
        let in_flight = InFlight::new(2);
        let a = in_flight.try_acquire().expect("first");
        let b = in_flight.try_acquire().expect("second");
        assert!(in_flight.try_acquire().is_none(), "third is refused");
        assert_eq!(in_flight.current(), 2);
        drop(a);
        let c = in_flight.try_acquire().expect("a slot came free");
        drop((b, c));
        assert_eq!(in_flight.current(), 0);
    }
}
