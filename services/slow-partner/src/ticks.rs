//! The schedule of one stream, shared by SSE and WebSocket: an event at
//! once, then one per `1/rate`; after the first event the `stall` (the
//! second event comes when it ends); after
//! `drop_after` events the end; heartbeats while idle; and the cut.
//!
//! Ids are a pure function of position: the stream's first id, then one
//! more per event, so a stream resumed after id K on another process
//! continues at K+1. The id after `u64::MAX` does not exist: the stream
//! ends cleanly after sending it.

use std::time::Duration;

use tokio::time::{Instant, sleep, sleep_until};

use crate::knobs::MAX_DURATION;
use crate::stream_knobs::{Stall, StreamDefaults};
use crate::streams::OpenStream;

/// What a stream does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// Send the event with this id.
    Event(u64),
    /// Send a heartbeat (SSE: a comment line).
    Heartbeat,
    /// End the stream cleanly (`drop_after` reached, or the ids ran out).
    End,
    /// End the stream abruptly: cut, or the partner stops.
    Cut,
}

/// One stream's schedule.
#[derive(Debug)]
pub(crate) struct Ticks {
    period: Duration,
    next_id: Option<u64>,
    sent: u64,
    drop_after: Option<u64>,
    stall: Option<Stall>,
    heartbeat: Option<Duration>,
    next_at: Instant,
    last_write: Instant,
    open: OpenStream,
}

impl Ticks {
    /// The schedule of a stream with knobs `base` whose first event has
    /// id `first_id`, starting now.
    pub(crate) fn new(base: &StreamDefaults, first_id: u64, open: OpenStream) -> Self {
        let now = Instant::now();
        let period = Duration::try_from_secs_f64(1.0 / base.rate)
            .unwrap_or(MAX_DURATION)
            .min(MAX_DURATION);
        Self {
            period,
            next_id: Some(first_id),
            sent: 0,
            drop_after: base.drop_after,
            stall: base.stall,
            heartbeat: base.heartbeat,
            next_at: now,
            last_write: now,
            open,
        }
    }

    /// The stream's registration (for a WebSocket to watch the cut while
    /// it reads).
    pub(crate) fn open(&self) -> &OpenStream {
        &self.open
    }

    /// Waits for the next thing to do.
    pub(crate) async fn next(&mut self) -> Tick {
        let Some(id) = self.next_id else {
            return Tick::End;
        };
        if self.drop_after.is_some_and(|n| self.sent >= n) {
            return Tick::End;
        }
        if self.sent == 1
            && let Some(stall) = self.stall.take()
            && self.stalled(stall).await.is_err()
        {
            return Tick::Cut;
        }
        let heartbeat_at = self
            .heartbeat
            .and_then(|every| self.last_write.checked_add(every))
            .filter(|at| *at < self.next_at);
        let wake = heartbeat_at.unwrap_or(self.next_at);
        tokio::select! {
            biased;
            () = self.open.cut() => return Tick::Cut,
            () = sleep_until(wake) => {}
        }
        self.last_write = Instant::now();
        if heartbeat_at.is_some() {
            return Tick::Heartbeat;
        }
        self.next_id = id.checked_add(1);
        self.sent = self.sent.saturating_add(1);
        self.next_at = self
            .next_at
            .checked_add(self.period)
            .unwrap_or(self.last_write + MAX_DURATION);
        self.open.sent();
        Tick::Event(id)
    }

    /// Sends nothing for the stall; `Err` when cut meanwhile. The events
    /// after it continue from now.
    async fn stalled(&mut self, stall: Stall) -> Result<(), ()> {
        match stall {
            Stall::Forever => {
                self.open.cut().await;
                return Err(());
            }
            Stall::For(d) => tokio::select! {
                biased;
                () = self.open.cut() => return Err(()),
                () = sleep(d) => {}
            },
        }
        let now = Instant::now();
        self.next_at = now;
        self.last_write = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::streams::Streams;

    fn ticks(base: StreamDefaults, first: u64) -> (Arc<Streams>, Ticks) {
        let streams = Arc::new(Streams::new(CancellationToken::new()));
        let open = streams.open();
        (streams, Ticks::new(&base, first, open))
    }

    #[tokio::test(start_paused = true)]
    async fn events_come_at_the_rate_with_consecutive_ids() {
        let base = StreamDefaults {
            rate: 4.0,
            drop_after: Some(3),
            ..StreamDefaults::default()
        };
        let (streams, mut ticks) = ticks(base, 7);
        let start = Instant::now();
        assert_eq!(ticks.next().await, Tick::Event(7));
        assert_eq!(ticks.next().await, Tick::Event(8));
        assert_eq!(ticks.next().await, Tick::Event(9));
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        assert_eq!(ticks.next().await, Tick::End);
        assert_eq!(streams.snapshot().events_sent, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_holds_the_second_event_and_heartbeats_fill_idle_time() {
        let base = StreamDefaults {
            rate: 1.0,
            stall: Some(Stall::For(Duration::from_secs(5))),
            heartbeat: Some(Duration::from_millis(400)),
            ..StreamDefaults::default()
        };
        let (_streams, mut ticks) = ticks(base, 1);
        let start = Instant::now();
        assert_eq!(ticks.next().await, Tick::Event(1));
        assert_eq!(ticks.next().await, Tick::Event(2));
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(5),
            "the stall replaces the gap"
        );
        assert_eq!(ticks.next().await, Tick::Heartbeat);
        assert_eq!(start.elapsed(), Duration::from_millis(5400));
        assert_eq!(ticks.next().await, Tick::Heartbeat);
        assert_eq!(ticks.next().await, Tick::Event(3));
        assert_eq!(start.elapsed(), Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_ends_a_stream_stalled_forever() {
        let base = StreamDefaults {
            stall: Some(Stall::Forever),
            ..StreamDefaults::default()
        };
        let (streams, mut ticks) = ticks(base, 5);
        assert_eq!(ticks.next().await, Tick::Event(5));
        let cutter = Arc::clone(&streams);
        tokio::spawn(async move {
            sleep(Duration::from_secs(60)).await;
            cutter.cut();
        });
        assert_eq!(ticks.next().await, Tick::Cut);
    }

    #[tokio::test]
    async fn the_stream_ends_after_the_last_id() {
        let (_streams, mut ticks) = ticks(StreamDefaults::default(), u64::MAX);
        assert_eq!(ticks.next().await, Tick::Event(u64::MAX));
        assert_eq!(ticks.next().await, Tick::End);
    }
}
