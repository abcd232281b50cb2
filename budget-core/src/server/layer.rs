use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use tower_layer::Layer;

use crate::admission::limit::AdaptiveLimit;
use crate::floor::Floor;
use crate::header::Inbound;
use crate::ledger::LedgerLimits;
use crate::server::in_flight::InFlight;
use crate::server::{BudgetService, OnBudgetEvent, ServerTiming};

/// Applies [`BudgetService`] to a service: every request gets a budget.
///
/// Build it from a validated [`ServerConfig`](crate::server::ServerConfig)
/// or from an [`Inbound`] policy plus the builder methods. One way per
/// type: a layer is a builder (each method returns it with one setting
/// changed), while a config is plain public fields without setters.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::header::Inbound;
/// use budget_core::server::BudgetLayer;
///
/// let inbound = Inbound::new(Duration::from_secs(2), Duration::from_secs(10)).unwrap();
/// let layer = BudgetLayer::new(inbound)
///     .floor(Duration::from_millis(20))
///     .reserve(Duration::from_millis(5));
/// let router: axum::Router = axum::Router::new().layer(layer);
/// # let _ = router;
/// ```
#[derive(Clone, Debug)]
pub struct BudgetLayer<E = ()> {
    settings: Arc<Settings>,
    on_event: E,
}

/// The default `Retry-After` of a `503` at the in-flight limit.
pub(crate) const DEFAULT_OVERLOAD_RETRY_AFTER: Duration = Duration::from_secs(1);

/// What every request of one service shares.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) inbound: Inbound,
    pub(crate) floor: Floor,
    pub(crate) reserve: Duration,
    /// The in-flight limit, shared by every service the layer makes.
    pub(crate) in_flight: Option<Arc<InFlight>>,
    /// The `Retry-After` of a `503` at the in-flight limit.
    pub(crate) overload_retry_after: Duration,
    /// How much each request's ledger keeps and renders.
    pub(crate) ledger: LedgerLimits,
    /// Whether the caller's budget and criticality headers are read.
    pub(crate) trust_inbound: bool,
    /// Whether answers carry the ledger as `Server-Timing`.
    pub(crate) server_timing: ServerTiming,
}

impl BudgetLayer {
    /// A layer reading budgets with `inbound`, with no floor, no reserve and
    /// no event hook.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{header::Inbound, server::BudgetLayer};
    /// let _ = BudgetLayer::new(Inbound::new(Duration::from_secs(1), Duration::from_secs(5)).unwrap());
    /// ```
    pub fn new(inbound: Inbound) -> Self {
        Self {
            settings: Arc::new(Settings {
                inbound,
                floor: Floor::default(),
                reserve: Duration::ZERO,
                in_flight: None,
                overload_retry_after: DEFAULT_OVERLOAD_RETRY_AFTER,
                ledger: LedgerLimits::default(),
                trust_inbound: true,
                server_timing: ServerTiming::Always,
            }),
            on_event: (),
        }
    }
}

impl<E> BudgetLayer<E> {
    /// Sheds requests whose budget is below `floor` on arrival.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let _ = ServerConfig::default().layer().unwrap().floor(Duration::from_millis(50));
    /// ```
    pub fn floor(mut self, floor: Duration) -> Self {
        Arc::make_mut(&mut self.settings).floor = Floor::new(floor);
        self
    }

    /// Holds back `reserve` from every outbound call made in a request.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::server::ServerConfig;
    /// let _ = ServerConfig::default().layer().unwrap().reserve(Duration::from_millis(10));
    /// ```
    pub fn reserve(mut self, reserve: Duration) -> Self {
        Arc::make_mut(&mut self.settings).reserve = reserve;
        self
    }

    /// Bounds every request's ledger by `limits` (default
    /// [`LedgerLimits::default`]: 64 entries, 4 KiB of `Server-Timing`).
    ///
    /// ```
    /// # use budget_core::ledger::LedgerLimits;
    /// # use budget_core::server::ServerConfig;
    /// let limits = LedgerLimits { max_bytes: 1024, ..Default::default() };
    /// let _ = ServerConfig::default().layer().unwrap().ledger_limits(limits);
    /// ```
    pub fn ledger_limits(mut self, limits: LedgerLimits) -> Self {
        Arc::make_mut(&mut self.settings).ledger = limits;
        self
    }

    /// Whether the caller's budget headers (every format of
    /// docs/contract.md §1) and `request-criticality` are read (default
    /// `true`). A service that answers the public sets `false`: every
    /// request then gets the default budget and the default criticality,
    /// whatever its caller says, and a malformed budget header is not an
    /// error (it is not read). Trace context is read either way.
    ///
    /// ```
    /// # use budget_core::server::ServerConfig;
    /// let _ = ServerConfig::default().layer().unwrap().trust_inbound(false);
    /// ```
    pub fn trust_inbound(mut self, trust: bool) -> Self {
        Arc::make_mut(&mut self.settings).trust_inbound = trust;
        self
    }

    /// Whether answers carry the request's ledger as `Server-Timing`
    /// ([`ServerTiming`]; default [`ServerTiming::Always`]). A public
    /// service sets [`ServerTiming::Never`], or [`ServerTiming::when`] a
    /// marker header only trusted callers send.
    ///
    /// ```
    /// # use budget_core::server::{ServerConfig, ServerTiming};
    /// let _ = ServerConfig::default().layer().unwrap().server_timing(ServerTiming::Never);
    /// ```
    pub fn server_timing(mut self, server_timing: ServerTiming) -> Self {
        Arc::make_mut(&mut self.settings).server_timing = server_timing;
        self
    }

    /// Works on at most `limit` requests at once. Past it, a request waits
    /// for a slot, the more critical first, while what its budget has left
    /// still covers the floor, and is refused when it no longer does:
    /// `504` (`below-floor`), its handler never run. A line that has not
    /// been empty for the largest budget (`max_budget`) is sustained
    /// overload: its waiters are refused at once with `503` problem+json
    /// and `Retry-After` (`retry_after`, rounded up to whole seconds).
    /// Shed and malformed requests do not take a slot; a slot frees when
    /// the response is ready or the request is dropped. The wait is in the
    /// ledger (`budget-queue;dur=34`); see docs/contract.md §3.
    ///
    /// ```
    /// # use std::{num::NonZeroUsize, time::Duration};
    /// # use budget_core::server::ServerConfig;
    /// let limit = NonZeroUsize::new(256).unwrap();
    /// let _ = ServerConfig::default().layer().unwrap().max_in_flight(limit, Duration::from_secs(1));
    /// ```
    pub fn max_in_flight(mut self, limit: NonZeroUsize, retry_after: Duration) -> Self {
        let settings = Arc::make_mut(&mut self.settings);
        settings.in_flight = Some(InFlight::new(limit.get()));
        settings.overload_retry_after = retry_after;
        self
    }

    /// Like [`max_in_flight`](Self::max_in_flight), with a limit that
    /// follows `adaptive` (`max_in_flight = "auto"`, the queue's size set
    /// to the limit's value as it moves): every answered
    /// request's latency feeds it, a request dropped at its deadline or a
    /// `503`/`429` counts as a drop.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::{admission::limit::{AdaptiveLimit, AdaptiveLimitConfig}, server::ServerConfig};
    /// let adaptive = AdaptiveLimit::new(AdaptiveLimitConfig::default()).unwrap();
    /// let _ = ServerConfig::default().layer().unwrap().adaptive_in_flight(adaptive, Duration::from_secs(1));
    /// ```
    pub fn adaptive_in_flight(mut self, adaptive: AdaptiveLimit, retry_after: Duration) -> Self {
        let settings = Arc::make_mut(&mut self.settings);
        settings.in_flight = Some(InFlight::adaptive(adaptive));
        settings.overload_retry_after = retry_after;
        self
    }

    /// Calls `hook` on every shed, expired or malformed event.
    ///
    /// ```
    /// # use budget_core::server::{BudgetEvent, ServerConfig};
    /// let _ = ServerConfig::default().layer().unwrap()
    ///     .on_event(|e: &BudgetEvent<'_>| tracing::info!(?e, "budget event"));
    /// ```
    pub fn on_event<E2: OnBudgetEvent>(self, hook: E2) -> BudgetLayer<E2> {
        BudgetLayer {
            settings: self.settings,
            on_event: hook,
        }
    }
}

impl<S, E: Clone> Layer<S> for BudgetLayer<E> {
    type Service = BudgetService<S, E>;

    fn layer(&self, inner: S) -> Self::Service {
        BudgetService::from_parts(inner, self.settings.clone(), self.on_event.clone())
    }
}
