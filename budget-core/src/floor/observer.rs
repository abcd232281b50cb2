//! [`Observer`]: who hears of a dependency's floor.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Told of the floor in force for a dependency: when reporting starts
/// ([`DependencyFloor::report_to`](super::DependencyFloor::report_to)) and
/// each time a learned floor is recomputed from its window (at most every
/// 100 ms, and only when new samples came or the window moved), never on
/// a call that merely reads the floor.
///
/// The floor knows nothing of metrics: whoever builds it hands it an
/// observer. A client built from a
/// `DependencyConfig` with the
/// `metrics` feature hands it `telemetry::Metrics`,
/// which sets the `budget_floor_seconds` gauge.
///
/// It runs under the learned floor's lock, on the thread that read the
/// floor: keep it short (set a gauge).
///
/// # Example
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use budget_core::floor::{FloorConfig, Observer};
///
/// #[derive(Default)]
/// struct Last(Mutex<Option<Duration>>);
///
/// impl Observer for Last {
///     fn floor_changed(&self, _dependency: &Arc<str>, floor: Duration) {
///         *self.0.lock().unwrap() = Some(floor);
///     }
/// }
///
/// let last = Arc::new(Last::default());
/// let floor = FloorConfig::fixed(Duration::from_millis(250)).build().unwrap();
/// floor.report_to(Arc::from("pricing"), last.clone());
/// assert_eq!(*last.0.lock().unwrap(), Some(Duration::from_millis(250)));
/// ```
pub trait Observer: Send + Sync {
    /// The floor in force for `dependency` is now `floor`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use budget_core::floor::Observer;
    /// struct Print;
    /// impl Observer for Print {
    ///     fn floor_changed(&self, dependency: &Arc<str>, floor: Duration) {
    ///         println!("{dependency}: {floor:?}");
    ///     }
    /// }
    /// Print.floor_changed(&Arc::from("pricing"), Duration::from_millis(5));
    /// ```
    fn floor_changed(&self, dependency: &Arc<str>, floor: Duration);
}

/// Whom a learned floor reports to: the dependency's name and the observer.
pub(super) struct Reporter {
    pub(super) dependency: Arc<str>,
    pub(super) observer: Arc<dyn Observer>,
}

impl Reporter {
    /// Tells the observer that the floor is now `floor`.
    pub(super) fn report(&self, floor: Duration) {
        self.observer.floor_changed(&self.dependency, floor);
    }
}

impl fmt::Debug for Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporter")
            .field("dependency", &self.dependency)
            .finish_non_exhaustive()
    }
}
