use std::time::Duration;

use crate::header::InvalidHeader;

/// Something the budget layer did to a request, for metrics and logs.
///
/// # Example
///
/// ```
/// use budget_core::server::BudgetEvent;
/// fn name(e: &BudgetEvent<'_>) -> &'static str {
///     match e {
///         BudgetEvent::Malformed { .. } => "malformed",
///         BudgetEvent::Shed { .. } => "shed",
///         BudgetEvent::Expired { .. } => "expired",
///         _ => "other",
///     }
/// }
/// # let _ = name;
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum BudgetEvent<'a> {
    /// A malformed budget header was rejected with `400`.
    Malformed {
        /// The header and what is wrong with it.
        error: &'a InvalidHeader,
    },
    /// The budget was below the ingress floor, on arrival or after a wait
    /// for an in-flight slot that it could not cover: shed with `504`,
    /// handler not run.
    Shed {
        /// The budget the request arrived with.
        budget: Duration,
        /// The floor it fell short of.
        floor: Duration,
    },
    /// The budget ran out while the handler worked: `504`, handler dropped.
    Expired {
        /// The budget the request arrived with.
        budget: Duration,
    },
    /// The service was at its in-flight limit and its line had stood for
    /// the largest budget (overload): `503` with `Retry-After`, handler
    /// not run.
    Overloaded {
        /// The in-flight limit.
        limit: usize,
    },
}

/// A hook called on every [`BudgetEvent`].
///
/// `()` does nothing (the default); any `Fn(&BudgetEvent<'_>)` closure that
/// is `Clone + Send + Sync` is a hook.
///
/// # Example
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use budget_core::server::{BudgetEvent, BudgetLayer, ServerConfig};
///
/// let shed = Arc::new(AtomicUsize::new(0));
/// let counter = shed.clone();
/// let layer: BudgetLayer<_> = ServerConfig::default().layer().unwrap().on_event(move |e: &BudgetEvent<'_>| {
///     if matches!(e, BudgetEvent::Shed { .. }) {
///         counter.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// # let _ = layer;
/// ```
pub trait OnBudgetEvent: Clone + Send + Sync + 'static {
    /// Called once per event, on the request's task; keep it cheap.
    fn on_event(&self, event: &BudgetEvent<'_>);
}

impl OnBudgetEvent for () {
    #[inline]
    fn on_event(&self, _event: &BudgetEvent<'_>) {}
}

impl<F> OnBudgetEvent for F
where
    F: Fn(&BudgetEvent<'_>) + Clone + Send + Sync + 'static,
{
    fn on_event(&self, event: &BudgetEvent<'_>) {
        self(event)
    }
}
