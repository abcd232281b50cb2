//! What the uploader's handles and its flush task share.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::config::Overflow;
use super::metrics;
use super::queue::Queue;

/// The queue behind its mutex (held for a few instructions, never across
/// an await), and the flush task's wake-up.
pub(crate) struct Shared {
    queue: Mutex<Queue>,
    pub(crate) wake: Notify,
    pub(crate) dependency: Arc<str>,
    policy: &'static str,
}

impl Shared {
    pub(crate) fn new(queue: Queue, dependency: &str, overflow: Overflow) -> Self {
        let policy = match overflow {
            Overflow::Reject => "reject",
            Overflow::DropOldest => "drop_oldest",
            Overflow::DropNewest => "drop_newest",
        };
        Self {
            queue: Mutex::new(queue),
            wake: Notify::new(),
            dependency: Arc::from(dependency),
            policy,
        }
    }

    /// Reads the queue without changing it.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&Queue) -> R) -> R {
        f(&self.lock())
    }

    /// Changes the queue, and records what changed in the metrics.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut Queue) -> R) -> R {
        let mut queue = self.lock();
        let before = queue.stats();
        let out = f(&mut queue);
        let after = queue.stats();
        drop(queue);
        metrics::record(&self.dependency, self.policy, &before, &after);
        out
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // The queue's invariants hold between statements: a panic elsewhere
        // while it was held leaves it usable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
