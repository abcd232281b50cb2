//! The supervisor: one task that owns the main port and switches its mode.
//!
//! Mode switches are serialised through this task, so two admin requests
//! cannot race each other into two listeners. A switch first stops the old
//! mode completely (its accept loop has returned and the listener is closed;
//! a blackhole's own queued connections are closed) and only then opens the
//! new one on the same port. [`Control::set_mode`] returns once the new mode
//! is in effect, so a test that switches to `refuse` can connect at once and
//! be refused.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpSocket;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::PartnerError;
use crate::listener::{self, Blackhole, Conns, Serve};
use crate::mode::FaultMode;
use crate::streams::Streams;

/// A request to switch the main port to `mode`; the reply is the previous
/// mode.
struct Command {
    mode: FaultMode,
    reply: oneshot::Sender<Result<FaultMode, PartnerError>>,
}

/// The way to ask the supervisor for a mode switch (shared by the handle and
/// the admin endpoint).
#[derive(Clone, Debug)]
pub(crate) struct Control {
    commands: mpsc::Sender<Command>,
    streams: Arc<Streams>,
}

impl Control {
    /// Switches the main port to `mode` and returns the previous mode, once
    /// the new one is in effect. A switch to another mode cuts every open
    /// stream (SSE and WebSocket), as it closes every connection.
    pub(crate) async fn set_mode(&self, mode: FaultMode) -> Result<FaultMode, PartnerError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command { mode, reply })
            .await
            .map_err(|_| PartnerError::Stopped)?;
        let result = answer.await.map_err(|_| PartnerError::Stopped)?;
        if result.as_ref().map_or(true, |previous| *previous != mode) {
            self.streams.cut();
        }
        result
    }
}

/// The receiving end of [`Control`], handed to [`Supervisor::new`].
pub(crate) struct Commands(mpsc::Receiver<Command>);

/// A new control channel; its switches cut the open `streams`.
pub(crate) fn control(streams: Arc<Streams>) -> (Control, Commands) {
    let (commands, receiver) = mpsc::channel(8);
    (Control { commands, streams }, Commands(receiver))
}

/// What the main port currently holds.
enum Active {
    /// Nothing: a failed switch (the port is not ours any more).
    Closed,
    /// Refuse mode: the port bound, never listened on, so that connects
    /// are refused and no other socket is given it ([`listener::hold`]).
    Held(TcpSocket),
    /// A blackhole listener and its own queued connections.
    Blackhole(Blackhole),
    /// An accept loop (normal, reset, hang) and the token that stops it and
    /// its connections.
    Accepting {
        token: CancellationToken,
        task: JoinHandle<()>,
    },
}

impl Active {
    /// Stops the mode; when this returns, the port is closed.
    async fn stop(self) {
        match self {
            Active::Closed => {}
            // Closing a socket that never listened leaves nothing behind.
            Active::Held(socket) => drop(socket),
            // Closes the listener and its own queued connections.
            Active::Blackhole(hole) => drop(hole),
            Active::Accepting { token, task } => {
                token.cancel();
                // The loop returns at once on cancellation; a panic in it
                // has already been logged by the runtime.
                let _ = task.await;
            }
        }
    }
}

/// The task that owns the main port.
pub(crate) struct Supervisor {
    addr: SocketAddr,
    router: Router,
    tracker: TaskTracker,
    root: CancellationToken,
    conns: Conns,
    mode: watch::Sender<FaultMode>,
    active: Active,
    commands: Commands,
}

impl Supervisor {
    /// A supervisor of `addr` (a concrete port) that serves `router` in
    /// normal mode, with nothing open yet.
    pub(crate) fn new(
        addr: SocketAddr,
        router: Router,
        tracker: TaskTracker,
        root: CancellationToken,
        conns: Conns,
        mode: watch::Sender<FaultMode>,
        commands: Commands,
    ) -> Self {
        Self {
            addr,
            router,
            tracker,
            root,
            conns,
            mode,
            active: Active::Closed,
            commands,
        }
    }

    /// Opens the port in `mode` (the mode at start).
    pub(crate) async fn start(&mut self, mode: FaultMode) -> Result<(), PartnerError> {
        self.active = self.open(mode).await?;
        self.mode.send_replace(mode);
        Ok(())
    }

    /// Serves mode switches until the partner stops, then closes the port.
    pub(crate) async fn run(mut self) {
        loop {
            let command = tokio::select! {
                () = self.root.cancelled() => break,
                command = self.commands.0.recv() => command,
            };
            let Some(Command { mode, reply }) = command else {
                break;
            };
            let result = self.switch(mode).await;
            let _ = reply.send(result);
        }
        std::mem::replace(&mut self.active, Active::Closed)
            .stop()
            .await;
    }

    /// Stops the current mode and opens `mode`. On failure the port stays
    /// closed, and the mode reads `refuse`, which is what it is.
    async fn switch(&mut self, mode: FaultMode) -> Result<FaultMode, PartnerError> {
        let previous = *self.mode.borrow();
        if mode == previous {
            return Ok(previous);
        }
        std::mem::replace(&mut self.active, Active::Closed)
            .stop()
            .await;
        match self.open(mode).await {
            Ok(active) => {
                self.active = active;
                self.mode.send_replace(mode);
                Ok(previous)
            }
            Err(err) => {
                self.mode.send_replace(FaultMode::Refuse);
                Err(err)
            }
        }
    }

    async fn open(&self, mode: FaultMode) -> Result<Active, PartnerError> {
        let serve = match mode {
            FaultMode::Refuse => {
                return listener::hold(self.addr)
                    .map(Active::Held)
                    .map_err(|source| PartnerError::Bind {
                        addr: self.addr,
                        purpose: "mode refuse (the port held, not listened on)".to_owned(),
                        source,
                    });
            }
            FaultMode::Blackhole => {
                return listener::blackhole(self.addr).await.map(Active::Blackhole);
            }
            FaultMode::Normal => Serve::Http(self.router.clone()),
            FaultMode::Reset => Serve::Reset,
            FaultMode::Hang => Serve::Hang,
        };
        let socket =
            listener::bind(self.addr, listener::BACKLOG).map_err(|source| PartnerError::Bind {
                addr: self.addr,
                purpose: format!("mode {mode}"),
                source,
            })?;
        let token = self.root.child_token();
        let task = self.tracker.spawn(listener::accept_loop(
            socket,
            serve,
            token.clone(),
            self.tracker.clone(),
            self.conns,
        ));
        Ok(Active::Accepting { token, task })
    }
}
