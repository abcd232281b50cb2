//! Starting a partner in-process, and the handle that controls it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app::{AppState, admin_router, main_router};
use crate::config::PartnerConfig;
use crate::error::PartnerError;
use crate::hangs::HungPath;
use crate::ingest_state::Ingest;
use crate::listener::{self, Conns, Serve};
use crate::mode::FaultMode;
use crate::overrides::{Fault, OverrideError, Overrides, PathOverride};
use crate::slowdown::{Slowdown, SlowdownError, Slowdowns};
use crate::stats::{Stats, StatsSnapshot};
use crate::streams::Streams;
use crate::supervisor::{self, Control, Supervisor};
use crate::workers::Workers;

/// How much longer than the shutdown grace [`PartnerHandle::shutdown`] waits
/// for the last tasks.
const SHUTDOWN_SLACK: Duration = Duration::from_secs(1);

/// Starts a partner: opens the main port in the configured mode (and the
/// admin listener when configured) and returns once both accept connections
/// (or, in `refuse`, once the port is known).
///
/// With port 0 in [`PartnerConfig::listen`], a free port is picked once;
/// [`PartnerHandle::addr`] tells which, and every mode switch rebinds it.
///
/// # Errors
///
/// [`PartnerError::Config`] for an invalid config, [`PartnerError::Bind`]
/// when a port cannot be opened, [`PartnerError::Blackhole`] when blackhole
/// mode cannot fill its queue.
///
/// # Example
///
/// ```no_run
/// use slow_partner::{FaultMode, PartnerConfig};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let partner = slow_partner::spawn(PartnerConfig::new("127.0.0.1:0".parse()?)).await?;
/// let url = partner.url("/pricing?script=503@250ms,200@400ms");
/// // ... point a client at `url` ...
/// partner.set_mode(FaultMode::Refuse).await?;
/// assert_eq!(partner.stats().late, 0);
/// partner.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub async fn spawn(config: PartnerConfig) -> Result<PartnerHandle, PartnerError> {
    config.validate()?;
    let addr = listener::resolve(config.listen).map_err(|source| PartnerError::Bind {
        addr: config.listen,
        purpose: "the main port".to_owned(),
        source,
    })?;
    let workers = Workers::new(config.workers, &config.path_workers);
    let stats = Arc::new(Stats::new(config.max_tracked_ids, workers));
    let overrides = Arc::new(Overrides::default());
    let slowdown = Arc::new(Slowdowns::default());
    let root = CancellationToken::new();
    let streams = Arc::new(Streams::new(root.clone()));
    let (control, commands) = supervisor::control(Arc::clone(&streams));
    let (mode_tx, mode) = watch::channel(FaultMode::Refuse);
    let state = AppState {
        stats: Arc::clone(&stats),
        control: control.clone(),
        mode: mode.clone(),
        overrides: Arc::clone(&overrides),
        slowdown: Arc::clone(&slowdown),
        streams,
        ingest: Arc::new(Ingest::default()),
    };
    let tracker = TaskTracker::new();
    let grace = config.shutdown_grace;
    let conns = Conns {
        limits: config.http,
        grace,
    };

    let mut supervisor = Supervisor::new(
        addr,
        main_router(state.clone()),
        tracker.clone(),
        root.clone(),
        conns,
        mode_tx,
        commands,
    );
    supervisor.start(config.mode).await?;

    let admin_addr = match config.admin_listen {
        None => None,
        Some(wanted) => {
            let socket = listener::bind(wanted, listener::BACKLOG).map_err(|source| {
                root.cancel();
                PartnerError::Bind {
                    addr: wanted,
                    purpose: "the admin listener".to_owned(),
                    source,
                }
            })?;
            let admin_addr = socket.local_addr().ok();
            tracker.spawn(listener::accept_loop(
                socket,
                Serve::Http(admin_router(state)),
                root.clone(),
                tracker.clone(),
                conns,
            ));
            admin_addr
        }
    };
    tracker.spawn(supervisor.run());
    tracing::info!(%addr, admin = ?admin_addr, mode = %config.mode, "slow partner started");

    Ok(PartnerHandle {
        addr,
        admin_addr,
        control,
        mode,
        stats,
        overrides,
        slowdown,
        root,
        tracker,
        grace,
    })
}

/// A running partner. Dropping it stops the partner too (without waiting);
/// [`shutdown`](Self::shutdown) stops it and waits.
#[derive(Debug)]
pub struct PartnerHandle {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    control: Control,
    mode: watch::Receiver<FaultMode>,
    stats: Arc<Stats>,
    overrides: Arc<Overrides>,
    slowdown: Arc<Slowdowns>,
    root: CancellationToken,
    tracker: TaskTracker,
    grace: Duration,
}

impl PartnerHandle {
    /// The main port's address (the port picked when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin listener's address, when one was configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// `http://{addr}{path_and_query}`: a URL on the main port.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("http://{}{path_and_query}", self.addr)
    }

    /// `http://{admin_addr}{path_and_query}`, when there is an admin
    /// listener.
    pub fn admin_url(&self, path_and_query: &str) -> Option<String> {
        self.admin_addr
            .map(|addr| format!("http://{addr}{path_and_query}"))
    }

    /// The main port's current mode (`refuse` after a failed switch).
    pub fn mode(&self) -> FaultMode {
        *self.mode.borrow()
    }

    /// Switches the main port to `mode`; returns the previous mode once the
    /// new one is in effect (a connect right after sees it). Switching to
    /// the current mode changes nothing.
    ///
    /// # Errors
    ///
    /// [`PartnerError::Bind`] or [`PartnerError::Blackhole`] when the port
    /// cannot be opened in the new mode (it is then closed, as in
    /// `refuse`); [`PartnerError::Stopped`] after shutdown.
    pub async fn set_mode(&self, mode: FaultMode) -> Result<FaultMode, PartnerError> {
        self.control.set_mode(mode).await
    }

    /// A copy of the counters that `GET /stats` shows.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The work requests received since start or the last reset: the
    /// [`StatsSnapshot::requests`] counter alone, cheap enough to read
    /// every second of a load run (a snapshot copies every id).
    pub fn requests(&self) -> u64 {
        self.stats.requests()
    }

    /// Zeroes the counters (what `POST /stats/reset` does).
    pub fn reset_stats(&self) {
        self.stats.reset();
    }

    /// Makes every request to `path` answer `status` at once, without a
    /// delay or a worker (`Some`), or ends that (`None`): what
    /// `PUT`/`DELETE /admin/paths/{path}` do. Requests already queued or in
    /// their delay finish as they started.
    ///
    /// # Errors
    ///
    /// [`OverrideError`] when `path` does not start with `/`, is reserved
    /// or too long, when `status` is outside `200..=599`, or when
    /// [`MAX_PATH_OVERRIDES`](crate::MAX_PATH_OVERRIDES) paths are
    /// overridden already.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let partner = slow_partner::spawn(slow_partner::PartnerConfig::new("127.0.0.1:0".parse()?)).await?;
    /// partner.set_path_status("/pricing", Some(503))?; // the outage starts
    /// assert_eq!(partner.path_overrides()["/pricing"].status, 503);
    /// partner.set_path_status("/pricing", None)?; // and ends
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_path_status(&self, path: &str, status: Option<u16>) -> Result<(), OverrideError> {
        let fault = status
            .map(|status| Fault::new(u64::from(status), None))
            .transpose()?;
        self.overrides.set(path, fault)
    }

    /// Makes every request to `path` hang (`true`): counted, then held
    /// without an answer until its caller goes away or the partner stops,
    /// while the other paths answer as usual; or ends that (`false`) for
    /// the requests that arrive after it (those held stay held). The
    /// calls held now and at most at once are in
    /// [`StatsSnapshot::hung`] ([`hung`](Self::hung) reads one path's
    /// alone, cheaply). A status override of the same path
    /// ([`set_path_status`](Self::set_path_status)) is checked first.
    ///
    /// # Errors
    ///
    /// [`OverrideError`] when `path` does not start with `/`, is reserved
    /// or too long, or when [`MAX_PATH_OVERRIDES`](crate::MAX_PATH_OVERRIDES)
    /// paths hang or hold calls already.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let partner = slow_partner::spawn(slow_partner::PartnerConfig::new("127.0.0.1:0".parse()?)).await?;
    /// partner.set_path_hang("/inventory", true)?; // inventory stops answering
    /// partner.set_path_hang("/inventory", false)?; // and answers again
    /// assert!(partner.hung("/inventory").is_some_and(|p| !p.hanging));
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_path_hang(&self, path: &str, hang: bool) -> Result<(), OverrideError> {
        self.stats.hangs().set(path, hang)
    }

    /// The counters of one path that hangs or hung (`None`: it never hung
    /// since the last reset), without copying the rest of the stats.
    pub fn hung(&self, path: &str) -> Option<HungPath> {
        self.stats.hangs().get(path)
    }

    /// Makes the whole partner `factor` times slower (`1`: as the query
    /// strings say): every work request planned from now on waits `factor`
    /// times its `delay`, `jitter`, script or tail delay and `drip` pauses
    /// (the [`Slowdown`] docs); what `PUT /admin/slowdown` does. Requests
    /// already waiting finish as they started. Returns the previous factor.
    ///
    /// # Errors
    ///
    /// [`SlowdownError::Factor`] when `factor` is outside 1 to 100 (the
    /// factor in force is unchanged).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let partner = slow_partner::spawn(slow_partner::PartnerConfig::new("127.0.0.1:0".parse()?)).await?;
    /// partner.set_slowdown(10)?; // ten times slower
    /// assert_eq!(partner.slowdown().factor(), 10);
    /// assert_eq!(partner.set_slowdown(1)?.factor(), 10); // and back
    /// assert!(partner.set_slowdown(0).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_slowdown(&self, factor: u64) -> Result<Slowdown, SlowdownError> {
        Ok(self.slowdown.set(Slowdown::new(factor)?))
    }

    /// The slowdown in force (what `GET /admin/slowdown` shows).
    pub fn slowdown(&self) -> Slowdown {
        self.slowdown.get()
    }

    /// The paths overridden now (what `GET /admin/paths` lists).
    pub fn path_overrides(&self) -> std::collections::BTreeMap<String, PathOverride> {
        self.overrides.list()
    }

    /// Stops the partner: closes every listener at once, lets requests in
    /// flight finish for up to the shutdown grace, closes every connection,
    /// and returns when every task has ended (or a second after the grace).
    pub async fn shutdown(self) {
        self.root.cancel();
        self.tracker.close();
        let wait = self.grace.saturating_add(SHUTDOWN_SLACK);
        if tokio::time::timeout(wait, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                tasks = self.tracker.len(),
                "tasks still running after shutdown"
            );
        }
        tracing::info!(addr = %self.addr, "slow partner stopped");
    }
}

impl Drop for PartnerHandle {
    fn drop(&mut self) {
        self.root.cancel();
    }
}
