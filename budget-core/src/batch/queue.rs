//! The bounded queue: items waiting, the batch being sent, the batches set
//! aside, all counted against the same bounds.

use std::collections::VecDeque;

use bytes::Bytes;
use http::StatusCode;

use super::config::{Limits, Overflow};
use super::error::{PushError, Pushed};
use super::report::{Batch, SetAside, ShutdownReport, Stats, body_len};

/// The queue and the counters, behind the uploader's mutex.
#[derive(Debug)]
pub(crate) struct Queue {
    limits: Limits,
    overflow: Overflow,
    pending: VecDeque<Bytes>,
    pending_bytes: usize,
    /// The batch being sent (or waiting for its retry).
    current: Option<Batch>,
    set_aside: Vec<SetAside>,
    /// Items and bytes in `current` and `set_aside`.
    held_items: usize,
    held_bytes: usize,
    closed: bool,
    pub(crate) stats: Stats,
}

impl Queue {
    pub(crate) fn new(limits: Limits, overflow: Overflow) -> Self {
        Self {
            limits,
            overflow,
            pending: VecDeque::new(),
            pending_bytes: 0,
            current: None,
            set_aside: Vec::new(),
            held_items: 0,
            held_bytes: 0,
            closed: false,
            stats: Stats::default(),
        }
    }

    fn items(&self) -> usize {
        self.pending.len() + self.held_items
    }

    fn bytes(&self) -> usize {
        self.pending_bytes + self.held_bytes
    }

    fn fits(&self, len: usize) -> bool {
        self.items() < self.limits.queue_items
            && self.bytes().saturating_add(len) <= self.limits.queue_bytes
    }

    /// Queues `item` (one JSON value) under the bounds and the overflow
    /// policy.
    pub(crate) fn push(&mut self, item: Bytes) -> Result<Pushed, PushError> {
        if self.closed {
            return Err(PushError::Closed);
        }
        if item.len() > self.limits.item_bytes {
            self.stats.rejected_pushes += 1;
            return Err(PushError::TooLarge {
                bytes: item.len(),
                max: self.limits.item_bytes,
            });
        }
        let mut dropped = 0;
        while !self.fits(item.len()) {
            match self.overflow {
                Overflow::Reject => {
                    self.stats.rejected_pushes += 1;
                    return Err(PushError::Full {
                        queued_items: self.items(),
                        queued_bytes: self.bytes(),
                    });
                }
                Overflow::DropOldest if !self.pending.is_empty() => {
                    if let Some(old) = self.pending.pop_front() {
                        self.pending_bytes -= old.len();
                        dropped += 1;
                    }
                }
                Overflow::DropOldest | Overflow::DropNewest => {
                    // Nothing droppable left (DropOldest): the new item
                    // goes, and the oldest already dropped stay counted.
                    self.stats.dropped_items += dropped + 1;
                    return Ok(Pushed::Dropped);
                }
            }
        }
        self.stats.dropped_items += dropped;
        self.pending_bytes += item.len();
        self.pending.push_back(item);
        Ok(match usize::try_from(dropped) {
            Ok(0) => Pushed::Queued,
            Ok(n) => Pushed::DroppedOldest(n),
            Err(_) => Pushed::DroppedOldest(usize::MAX),
        })
    }

    /// True when the queued items make a full batch (by items or bytes).
    pub(crate) fn batch_ready(&self) -> bool {
        self.pending.len() >= self.limits.batch_items
            || body_len(self.pending_bytes, self.pending.len()) >= self.limits.batch_bytes
    }

    /// `item_max_bytes`.
    pub(crate) fn item_limit(&self) -> usize {
        self.limits.item_bytes
    }

    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(crate) fn has_current(&self) -> bool {
        self.current.is_some()
    }

    /// The batch to send: the current one (a retry), or a new one of the
    /// oldest queued items under `key()`; `None` when nothing is queued.
    pub(crate) fn current_or_next(&mut self, key: impl FnOnce() -> String) -> Option<&mut Batch> {
        if self.current.is_none() && !self.pending.is_empty() {
            let (mut items, mut bytes) = (Vec::new(), 0usize);
            while let Some(next) = self.pending.front() {
                let grown = body_len(bytes + next.len(), items.len() + 1);
                if items.len() == self.limits.batch_items
                    || (!items.is_empty() && grown > self.limits.batch_bytes)
                {
                    break;
                }
                bytes += next.len();
                if let Some(item) = self.pending.pop_front() {
                    items.push(item);
                }
            }
            self.pending_bytes -= bytes;
            self.held_items += items.len();
            self.held_bytes += bytes;
            self.current = Some(Batch {
                key: key(),
                items,
                sends: 0,
            });
        }
        self.current.as_mut()
    }

    /// Counts a send of the current batch (before it goes: a send cut
    /// short may still have been applied); `false` takes one back (the
    /// breaker refused it, no request was made).
    pub(crate) fn count_send(&mut self, sent: bool) {
        if let Some(batch) = self.current.as_mut() {
            if sent {
                batch.sends += 1;
            } else {
                batch.sends = batch.sends.saturating_sub(1);
            }
        }
    }

    /// The server acknowledged the current batch.
    pub(crate) fn ack(&mut self) {
        if let Some(batch) = self.release_current() {
            self.stats.batches_sent += 1;
            self.stats.items_sent += batch.items.len() as u64;
        }
    }

    /// The server refused the current batch as bad: it is kept aside.
    pub(crate) fn set_aside(&mut self, status: Option<StatusCode>, reason: String) {
        if let Some(batch) = self.current.take() {
            self.stats.set_aside_batches += 1;
            self.stats.set_aside_items += batch.items.len() as u64;
            self.set_aside.push(SetAside {
                batch,
                status,
                reason,
            });
        }
    }

    fn release_current(&mut self) -> Option<Batch> {
        let batch = self.current.take()?;
        self.held_items -= batch.items.len();
        self.held_bytes -= batch.item_bytes();
        Some(batch)
    }

    /// The batches set aside so far, no longer counted in the bounds.
    pub(crate) fn take_set_aside(&mut self) -> Vec<SetAside> {
        let taken = std::mem::take(&mut self.set_aside);
        for s in &taken {
            self.held_items -= s.batch.items.len();
            self.held_bytes -= s.batch.item_bytes();
        }
        taken
    }

    /// Refuses further pushes.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    /// The counters now.
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            queued_items: self.items(),
            queued_bytes: self.bytes(),
            ..self.stats
        }
    }

    /// Everything still held, for the shutdown report.
    pub(crate) fn drain(&mut self) -> ShutdownReport {
        let stats = self.stats();
        let pending_batch = self.release_current();
        let set_aside = self.take_set_aside();
        let unsent: Vec<Bytes> = self.pending.drain(..).collect();
        self.pending_bytes = 0;
        ShutdownReport {
            stats,
            pending_batch,
            unsent,
            set_aside,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(queue_items: usize, queue_bytes: usize) -> Limits {
        Limits {
            queue_items,
            queue_bytes,
            batch_items: 2,
            batch_bytes: 64,
            item_bytes: 16,
        }
    }

    fn item(n: u32) -> Bytes {
        Bytes::from(n.to_string())
    }

    /// Bound in items, `Overflow::Reject`: the push fails with `Full`
    /// naming what is held, and nothing is dropped.
    #[test]
    fn reject_refuses_past_the_item_bound() {
        let mut q = Queue::new(limits(3, 1000), Overflow::Reject);
        for n in 0..3 {
            assert_eq!(q.push(item(n)).unwrap(), Pushed::Queued);
        }
        match q.push(item(9)) {
            Err(PushError::Full { queued_items, .. }) => assert_eq!(queued_items, 3),
            other => panic!("expected Full, got {other:?}"),
        }
        let s = q.stats();
        assert_eq!(
            (s.queued_items, s.dropped_items, s.rejected_pushes),
            (3, 0, 1)
        );
    }

    /// Bound in bytes: an item that would pass the byte bound is refused
    /// although the item bound has room.
    #[test]
    fn reject_refuses_past_the_byte_bound() {
        let mut q = Queue::new(limits(100, 10), Overflow::Reject);
        q.push(Bytes::from_static(b"\"abcdef\"")).unwrap(); // 8 bytes
        assert!(matches!(
            q.push(Bytes::from_static(b"\"ab\"")),
            Err(PushError::Full {
                queued_bytes: 8,
                ..
            })
        ));
        q.push(Bytes::from_static(b"12")).unwrap(); // exactly 10
        assert_eq!(q.stats().queued_bytes, 10);
    }

    /// `DropOldest` drops the oldest queued items, counts them, and keeps
    /// the newest.
    #[test]
    fn drop_oldest_keeps_the_newest() {
        let mut q = Queue::new(limits(3, 1000), Overflow::DropOldest);
        for n in 0..3 {
            q.push(item(n)).unwrap();
        }
        assert_eq!(q.push(item(3)).unwrap(), Pushed::DroppedOldest(1));
        assert_eq!(q.stats().dropped_items, 1);
        let report = q.drain();
        assert_eq!(report.unsent, vec![item(1), item(2), item(3)]);
    }

    /// `DropOldest` never cuts the batch being sent: with only it held,
    /// the new item is dropped.
    #[test]
    fn drop_oldest_never_cuts_the_current_batch() {
        let mut q = Queue::new(limits(2, 1000), Overflow::DropOldest);
        q.push(item(0)).unwrap();
        q.push(item(1)).unwrap();
        let key = q.current_or_next(|| "k".into()).unwrap().key.clone();
        assert_eq!(key, "k");
        assert_eq!(q.push(item(2)).unwrap(), Pushed::Dropped);
        assert_eq!(
            q.drain().pending_batch.unwrap().items,
            vec![item(0), item(1)]
        );
    }

    /// `DropNewest` keeps what the queue had.
    #[test]
    fn drop_newest_keeps_the_oldest() {
        let mut q = Queue::new(limits(2, 1000), Overflow::DropNewest);
        q.push(item(0)).unwrap();
        q.push(item(1)).unwrap();
        assert_eq!(q.push(item(2)).unwrap(), Pushed::Dropped);
        assert_eq!(q.stats().dropped_items, 1);
        assert_eq!(q.drain().unsent, vec![item(0), item(1)]);
    }

    /// An item over `item_max_bytes` is refused whatever the policy.
    #[test]
    fn an_item_over_its_limit_is_too_large() {
        let mut q = Queue::new(limits(10, 1000), Overflow::DropOldest);
        let big = Bytes::from(vec![b'1'; 17]);
        assert!(matches!(
            q.push(big),
            Err(PushError::TooLarge { bytes: 17, max: 16 })
        ));
    }

    /// A batch takes at most `batch_items` items and `batch_bytes` body
    /// bytes; the set-aside batch stays counted until taken.
    #[test]
    fn batches_respect_their_bounds_and_set_aside_stays_counted() {
        let mut q = Queue::new(limits(10, 1000), Overflow::Reject);
        for n in 0..5 {
            q.push(item(n)).unwrap();
        }
        assert!(q.batch_ready());
        let batch = q.current_or_next(|| "a".into()).unwrap();
        assert_eq!(batch.body(), Bytes::from_static(b"[0,1]"));
        q.set_aside(Some(StatusCode::BAD_REQUEST), "400".into());
        assert_eq!(q.stats().queued_items, 5);
        assert_eq!(q.take_set_aside().len(), 1);
        assert_eq!(q.stats().queued_items, 3);

        let mut q = Queue::new(
            Limits {
                batch_bytes: 7,
                ..limits(10, 1000)
            },
            Overflow::Reject,
        );
        for n in [10, 11, 12] {
            q.push(item(n)).unwrap();
        }
        // "[10,11]" is 7 bytes: a third item would not fit.
        let batch = q.current_or_next(|| "b".into()).unwrap();
        assert_eq!(batch.body(), Bytes::from_static(b"[10,11]"));
        q.close();
        assert!(matches!(q.push(item(1)), Err(PushError::Closed)));
    }
}
