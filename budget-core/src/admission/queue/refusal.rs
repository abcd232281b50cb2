//! [`Refusal`]: why a waiter of a [`PermitQueue`](super::PermitQueue) got no
//! permit, how long it waited for none, and, when the queue predicted its
//! wait, the [`Prediction`].

use std::fmt;
use std::time::Duration;

/// Why a [`PermitQueue`](super::PermitQueue) refused a waiter.
///
/// # Example
///
/// ```
/// use budget_core::admission::queue::RefusalReason;
/// assert_eq!(RefusalReason::StandingQueue.to_string(), "standing queue");
/// assert_eq!(RefusalReason::PredictedWait.as_str(), "predicted wait");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The waiter's `give_up_at` came (or had come on arrival) before a
    /// permit was free: it could no longer finish.
    Expired,
    /// The queue stands (rule 4 of the [module docs](super)) and the
    /// newcomer's predicted wait was more than the queue lets a newcomer
    /// wait while it stands, or newer waiters overtook a queued one for
    /// longer than that.
    StandingQueue,
    /// The predicted wait does not fit before the waiter's `give_up_at`
    /// (rule 1 of the [module docs](super)): refused at arrival, or as
    /// soon as the prediction stopped fitting.
    PredictedWait,
}

impl RefusalReason {
    /// A short lower-case name, for logs and notes.
    ///
    /// ```
    /// use budget_core::admission::queue::RefusalReason;
    /// assert_eq!(RefusalReason::Expired.as_str(), "expired");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Expired => "expired",
            RefusalReason::StandingQueue => "standing queue",
            RefusalReason::PredictedWait => "predicted wait",
        }
    }
}

impl fmt::Display for RefusalReason {
    /// The same as [`RefusalReason::as_str`].
    ///
    /// ```
    /// use budget_core::admission::queue::RefusalReason;
    /// assert_eq!(format!("{}", RefusalReason::Expired), "expired");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a [`PermitQueue`](super::PermitQueue) predicted of a waiter's wait:
/// the wait, the waiters to be served before it, and how often a permit
/// comes back (the measured hold of a permit over the limit).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::queue::Prediction;
///
/// let p = Prediction::new(Duration::from_millis(2400), 180, Duration::from_micros(13_333));
/// assert_eq!(p.wait(), Duration::from_millis(2400));
/// assert_eq!(p.ahead(), 180);
/// assert_eq!(p.to_string(), "expected wait 2.4s (180 queued, 75/s)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    wait: Duration,
    ahead: usize,
    every: Duration,
}

impl Prediction {
    /// A wait of `wait` behind `ahead` waiters, a permit coming back every
    /// `every`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::Prediction;
    /// let p = Prediction::new(Duration::from_millis(50), 4, Duration::from_millis(10));
    /// assert_eq!(p.per_second(), 100.0);
    /// ```
    pub const fn new(wait: Duration, ahead: usize, every: Duration) -> Self {
        Self { wait, ahead, every }
    }

    /// The predicted wait.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::Prediction;
    /// let p = Prediction::new(Duration::from_millis(50), 4, Duration::from_millis(10));
    /// assert_eq!(p.wait(), Duration::from_millis(50));
    /// ```
    pub const fn wait(&self) -> Duration {
        self.wait
    }

    /// How many waiters were queued to be served before this one.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::Prediction;
    /// let p = Prediction::new(Duration::from_millis(50), 4, Duration::from_millis(10));
    /// assert_eq!(p.ahead(), 4);
    /// ```
    pub const fn ahead(&self) -> usize {
        self.ahead
    }

    /// How many permits come back per second, as measured (0 when none
    /// could be).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::Prediction;
    /// let p = Prediction::new(Duration::ZERO, 0, Duration::from_millis(400));
    /// assert_eq!(p.per_second(), 2.5);
    /// ```
    pub fn per_second(&self) -> f64 {
        let every = self.every.as_secs_f64();
        if every > 0.0 { 1.0 / every } else { 0.0 }
    }
}

impl fmt::Display for Prediction {
    /// `expected wait 2.4s (180 queued, 75/s)`: the wait to the
    /// millisecond, the rate to one decimal below 10 per second.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::Prediction;
    /// let p = Prediction::new(Duration::from_millis(1250), 2, Duration::from_millis(625));
    /// assert_eq!(p.to_string(), "expected wait 1.25s (2 queued, 1.6/s)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected wait {} ({})", Short(self.wait), self.queued())
    }
}

impl Prediction {
    /// The prediction against what a waiter had: for a
    /// [`RefusalReason::StandingQueue`] refusal `standing queue: expected
    /// wait 300ms (12 queued, 40/s), more than a newcomer may wait with
    /// 1.1s left`, else `expected wait 2.4s + floor 60ms > 1.1s left (180
    /// queued, 75/s)`. The one wording of a predicted refusal, for the
    /// client's notes and the server's problems.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Prediction, RefusalReason};
    ///
    /// let p = Prediction::new(Duration::from_millis(2400), 180, Duration::from_micros(13_333));
    /// let (floor, left) = (Duration::from_millis(60), Duration::from_millis(1100));
    /// assert_eq!(
    ///     p.against(RefusalReason::PredictedWait, floor, left).to_string(),
    ///     "expected wait 2.4s + floor 60ms > 1.1s left (180 queued, 75/s)"
    /// );
    /// ```
    pub fn against(
        &self,
        reason: RefusalReason,
        floor: Duration,
        left: Duration,
    ) -> impl fmt::Display + '_ {
        struct Against<'a>(&'a Prediction, RefusalReason, Duration, Duration);
        impl fmt::Display for Against<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let Against(p, reason, floor, left) = self;
                let (wait, queued) = (Short(p.wait), p.queued());
                match reason {
                    RefusalReason::StandingQueue => write!(
                        f,
                        "standing queue: expected wait {wait} ({queued}), \
                         more than a newcomer may wait with {} left",
                        Short(*left)
                    ),
                    _ => write!(
                        f,
                        "expected wait {wait} + floor {} > {} left ({queued})",
                        Short(*floor),
                        Short(*left)
                    ),
                }
            }
        }
        Against(self, reason, floor, left)
    }

    /// `180 queued, 75/s`: the rate to one decimal below 10 per second.
    fn queued(&self) -> impl fmt::Display + '_ {
        struct Queued<'a>(&'a Prediction);
        impl fmt::Display for Queued<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let rate = self.0.per_second();
                if rate < 10.0 {
                    write!(f, "{} queued, {rate:.1}/s", self.0.ahead)
                } else {
                    write!(f, "{} queued, {rate:.0}/s", self.0.ahead)
                }
            }
        }
        Queued(self)
    }
}

/// A duration as a person reads it in a note: `60ms` below a second,
/// else seconds to two decimals without trailing zeros (`2.4s`, `1.25s`).
struct Short(Duration);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0.as_millis();
        if millis < 1000 {
            return write!(f, "{millis}ms");
        }
        let hundredths = (millis + 5) / 10;
        let (whole, frac) = (hundredths / 100, hundredths % 100);
        match frac {
            0 => write!(f, "{whole}s"),
            n if n % 10 == 0 => write!(f, "{whole}.{}s", n / 10),
            n => write!(f, "{whole}.{n:02}s"),
        }
    }
}

/// A waiter got no permit: why, how long it had waited, and what the queue
/// predicted of its wait when it refused on a prediction.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::admission::queue::{Refusal, RefusalReason};
///
/// let refusal = Refusal::new(RefusalReason::Expired, Duration::from_millis(5));
/// assert_eq!(refusal.reason(), RefusalReason::Expired);
/// assert_eq!(refusal.waited(), Duration::from_millis(5));
/// assert_eq!(refusal.prediction(), None);
/// assert_eq!(refusal.to_string(), "no permit: expired after 5ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no permit: {reason} after {}{}", humantime::format_duration(*waited), Predicted(prediction))]
pub struct Refusal {
    reason: RefusalReason,
    waited: Duration,
    prediction: Option<Prediction>,
}

/// The `: expected wait …` part of a refusal's message.
struct Predicted<'a>(&'a Option<Prediction>);

impl fmt::Display for Predicted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(prediction) => write!(f, ": {prediction}"),
            None => Ok(()),
        }
    }
}

impl Refusal {
    /// A refusal for `reason` after `waited` in the queue.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::ZERO);
    /// assert_eq!(r.to_string(), "no permit: expired after 0s");
    /// ```
    pub const fn new(reason: RefusalReason, waited: Duration) -> Self {
        Self {
            reason,
            waited,
            prediction: None,
        }
    }

    /// A refusal at arrival for `reason`, on `prediction`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Prediction, Refusal, RefusalReason};
    /// let p = Prediction::new(Duration::from_secs(2), 150, Duration::from_millis(13));
    /// let r = Refusal::predicted(RefusalReason::PredictedWait, p);
    /// assert_eq!(r.waited(), Duration::ZERO);
    /// assert_eq!(
    ///     r.to_string(),
    ///     "no permit: predicted wait after 0s: expected wait 2s (150 queued, 77/s)"
    /// );
    /// ```
    pub const fn predicted(reason: RefusalReason, prediction: Prediction) -> Self {
        Self {
            reason,
            waited: Duration::ZERO,
            prediction: Some(prediction),
        }
    }

    /// The same refusal after `waited` in the queue.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::ZERO).after(Duration::from_millis(7));
    /// assert_eq!(r.waited(), Duration::from_millis(7));
    /// ```
    pub const fn after(self, waited: Duration) -> Self {
        Self { waited, ..self }
    }

    /// Why the waiter was refused.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::ZERO);
    /// assert_eq!(r.reason(), RefusalReason::Expired);
    /// ```
    pub const fn reason(&self) -> RefusalReason {
        self.reason
    }

    /// How long the waiter was queued before the refusal (zero when it was
    /// refused on arrival).
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Refusal, RefusalReason};
    /// let r = Refusal::new(RefusalReason::Expired, Duration::from_millis(30));
    /// assert_eq!(r.waited(), Duration::from_millis(30));
    /// ```
    pub const fn waited(&self) -> Duration {
        self.waited
    }

    /// What the queue predicted of the wait, when it refused on a
    /// prediction.
    ///
    /// ```
    /// use std::time::Duration;
    /// use budget_core::admission::queue::{Prediction, Refusal, RefusalReason};
    /// let p = Prediction::new(Duration::from_secs(1), 9, Duration::from_millis(100));
    /// assert_eq!(Refusal::predicted(RefusalReason::StandingQueue, p).prediction(), Some(p));
    /// ```
    pub const fn prediction(&self) -> Option<Prediction> {
        self.prediction
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations_read_as_a_note_writes_them() {
        for (ms, text) in [
            (0, "0ms"),
            (60, "60ms"),
            (999, "999ms"),
            (1000, "1s"),
            (1100, "1.1s"),
            (1250, "1.25s"),
            (2400, "2.4s"),
            (2996, "3s"),
            (61_000, "61s"),
        ] {
            assert_eq!(Short(Duration::from_millis(ms)).to_string(), text, "{ms}");
        }
    }
}
