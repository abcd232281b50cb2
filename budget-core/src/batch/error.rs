//! [`PushError`], [`Pushed`] and [`AlreadyShutDown`].

/// Why a push was refused. The item was not queued: it is still the
/// producer's.
///
/// # Example
///
/// ```
/// use budget_core::batch::PushError;
/// let e = PushError::TooLarge { bytes: 70_000, max: 65_536 };
/// assert_eq!(e.to_string(), "batch item of 70000 bytes is over the 65536-byte limit");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PushError {
    /// The queue is full ([`Overflow::Reject`](super::Overflow::Reject)):
    /// what it holds now.
    #[error("batch queue full ({queued_items} items, {queued_bytes} bytes held)")]
    Full {
        /// Items held (queued, in the batch being sent, set aside).
        queued_items: usize,
        /// Their bytes.
        queued_bytes: usize,
    },
    /// The item's JSON is over `item_max_bytes`: it would never fit a
    /// batch the server accepts.
    #[error("batch item of {bytes} bytes is over the {max}-byte limit")]
    TooLarge {
        /// The item's size.
        bytes: usize,
        /// `item_max_bytes`.
        max: usize,
    },
    /// The item is not JSON (pre-encoded bytes), or did not serialise.
    #[error("batch item is not valid json")]
    Json(#[source] serde_json::Error),
    /// The uploader is shutting down or shut down.
    #[error("batch uploader is shut down")]
    Closed,
}

/// What became of a pushed item.
///
/// # Example
///
/// ```
/// use budget_core::batch::Pushed;
/// assert!(Pushed::Queued.is_queued());
/// assert!(!Pushed::Dropped.is_queued());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pushed {
    /// Queued.
    Queued,
    /// Queued, after dropping this many of the oldest queued items
    /// ([`Overflow::DropOldest`](super::Overflow::DropOldest)).
    DroppedOldest(usize),
    /// Not queued: the queue was full and the policy drops the new item
    /// ([`Overflow::DropNewest`](super::Overflow::DropNewest), or
    /// `DropOldest` with nothing droppable).
    Dropped,
}

impl Pushed {
    /// True when the item is in the queue.
    ///
    /// ```
    /// # use budget_core::batch::Pushed;
    /// assert!(Pushed::DroppedOldest(2).is_queued());
    /// ```
    pub fn is_queued(&self) -> bool {
        !matches!(self, Pushed::Dropped)
    }
}

/// [`Uploader::shutdown`](super::Uploader::shutdown) was already called
/// (by this handle or a clone): its report went to that caller.
///
/// # Example
///
/// ```
/// use budget_core::batch::AlreadyShutDown;
/// assert_eq!(AlreadyShutDown.to_string(), "batch uploader already shut down");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("batch uploader already shut down")]
pub struct AlreadyShutDown;
