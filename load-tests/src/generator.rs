//! The open-loop generator: requests leave on a schedule fixed in advance,
//! whatever the target does.
//!
//! A closed-loop tool (N users, each sending its next request when the last
//! one answered) slows down with the service it measures: when the service
//! stalls, it stops sending, and the stall hardly shows in its numbers
//! (*coordinated omission*). Real callers do not wait for each other, so a
//! slow dependency piles their requests up; that pile-up is what this crate
//! has to show. Here, as in wrk2 and vegeta:
//!
//! - request `i` is due at a time fixed before the run starts
//!   ([`Schedule`]: `i / rate` for [`Arrivals::Constant`], exponential gaps
//!   for [`Arrivals::Poisson`]), and is sent then, in its own task, whether
//!   or not earlier requests have answered;
//! - its latency is counted from that **intended** send time
//!   ([`Scheduled::intended`]), so time the generator itself lost (a busy
//!   runtime, a timer's millisecond) counts against the target, never for
//!   it; [`RunTotals::max_lag`] says how far behind schedule sending ran;
//! - every run is bounded twice, by a request count and by a duration, and
//!   both have hard caps ([`MAX_RATE`], [`MAX_DURATION`], [`MAX_REQUESTS`]);
//!   requests in flight are capped too ([`LoadSpec::max_in_flight`]): a
//!   request due while the cap is reached is not sent, and counted.
//!
//! Time is tokio's, so the paused clock of a test governs the schedule.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use load_tests::generator::{LoadSpec, run_open_loop};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), load_tests::generator::SpecError> {
//! let spec = LoadSpec::new(100.0, Duration::from_secs(1))?;
//! let mut answered = 0;
//! let totals = run_open_loop(
//!     &spec,
//!     &indicatif::ProgressBar::hidden(),
//!     |scheduled| async move { scheduled.index },
//!     |_scheduled, result| answered += u64::from(result.is_some()),
//! )
//! .await;
//! assert_eq!((totals.sent, answered), (100, 100));
//! # Ok(()) }
//! ```

use std::future::Future;
use std::time::Duration;

use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until};

/// The highest rate accepted, in requests per second.
pub const MAX_RATE: f64 = 5000.0;

/// The longest sending window accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 60);

/// The most requests one run may schedule.
pub const MAX_REQUESTS: u64 = 1_000_000;

/// The most requests that may be in flight at once (each is a loopback
/// connection, two file descriptors when the target runs in-process).
pub const MAX_IN_FLIGHT: usize = 8192;

/// The in-flight cap when none is given.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 4096;

/// How the send times of a run are spread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// One request every `1 / rate` seconds, the first at once.
    #[default]
    Constant,
    /// A Poisson process of the same mean rate: exponential gaps from a
    /// seeded generator, so a run can be repeated exactly.
    Poisson,
    /// Every request of the schedule (rate times duration, or the request
    /// count) due at once, at the start: a burst.
    Burst,
}

/// A load that cannot be run: over a cap, or not a load at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// Zero, negative, NaN or infinite.
    #[error("rate {0}/s is not a positive number")]
    BadRate(f64),
    /// Above [`MAX_RATE`].
    #[error("rate {rate}/s is over the cap of {max}/s")]
    RateOverCap {
        /// What was asked.
        rate: f64,
        /// The cap.
        max: f64,
    },
    /// Zero.
    #[error("duration must be more than zero")]
    ZeroDuration,
    /// Above [`MAX_DURATION`].
    #[error("duration {} is over the cap of {}", humantime::format_duration(*.asked), humantime::format_duration(*.max))]
    DurationOverCap {
        /// What was asked.
        asked: Duration,
        /// The cap.
        max: Duration,
    },
    /// Zero requests, or more than [`MAX_REQUESTS`].
    #[error("request count {asked} is outside 1 to {max}")]
    RequestsOutOfRange {
        /// What was asked.
        asked: u64,
        /// The cap.
        max: u64,
    },
    /// Zero, or more than [`MAX_IN_FLIGHT`].
    #[error("in-flight cap {asked} is outside 1 to {max}")]
    InFlightOutOfRange {
        /// What was asked.
        asked: usize,
        /// The cap.
        max: usize,
    },
}

/// What one run sends: a rate for a duration, at most a number of
/// requests, spread as [`Arrivals`] says. Every constructor checks the caps.
///
/// ```
/// use std::time::Duration;
/// use load_tests::generator::{LoadSpec, SpecError};
///
/// let spec = LoadSpec::new(128.0, Duration::from_secs(20)).unwrap();
/// assert_eq!(spec.expected_requests(), 2560);
/// assert!(matches!(LoadSpec::new(9000.0, Duration::from_secs(1)), Err(SpecError::RateOverCap { .. })));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadSpec {
    rate: f64,
    #[serde(with = "humantime_str")]
    duration: Duration,
    max_requests: u64,
    arrivals: Arrivals,
    seed: u64,
    max_in_flight: usize,
    /// A ramp's steps; empty: `rate` for the whole `duration`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    steps: Vec<RateStep>,
}

/// One step of a ramp ([`LoadSpec::ramp`]): a rate for a while.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateStep {
    /// Requests per second during the step.
    pub rate: f64,
    /// How long the step lasts.
    #[serde(with = "crate::report::millis")]
    pub duration: Duration,
    /// The rate as a multiple of a reference (the ramp scenario's: the
    /// chain's healthy capacity), for the report.
    pub factor: Option<f64>,
}

impl LoadSpec {
    /// `rate` requests per second for `duration`, constant arrivals, at
    /// most [`MAX_REQUESTS`] and [`DEFAULT_MAX_IN_FLIGHT`] in flight.
    ///
    /// # Errors
    ///
    /// A rate that is not positive or over [`MAX_RATE`]; a zero duration or
    /// one over [`MAX_DURATION`].
    pub fn new(rate: f64, duration: Duration) -> Result<Self, SpecError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(SpecError::BadRate(rate));
        }
        if rate > MAX_RATE {
            return Err(SpecError::RateOverCap {
                rate,
                max: MAX_RATE,
            });
        }
        if duration.is_zero() {
            return Err(SpecError::ZeroDuration);
        }
        if duration > MAX_DURATION {
            return Err(SpecError::DurationOverCap {
                asked: duration,
                max: MAX_DURATION,
            });
        }
        Ok(Self {
            rate,
            duration,
            max_requests: MAX_REQUESTS,
            arrivals: Arrivals::Constant,
            seed: 1,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            steps: Vec::new(),
        })
    }

    /// A ramp: each step's rate for its duration, one after the other
    /// (request `i` of a step with constant arrivals is due at the step's
    /// start plus `i / rate`). [`rate`](Self::rate) is then the mean rate
    /// over the whole ramp, and [`duration`](Self::duration) the sum of
    /// the steps.
    ///
    /// # Errors
    ///
    /// No step, a step's rate or duration as [`LoadSpec::new`] refuses
    /// them, or a total duration over [`MAX_DURATION`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::generator::{LoadSpec, RateStep};
    ///
    /// let step = |rate, ms| RateStep { rate, duration: Duration::from_millis(ms), factor: None };
    /// let spec = LoadSpec::ramp(vec![step(2.0, 1000), step(4.0, 500)]).unwrap();
    /// let offsets: Vec<u64> = spec.schedule().map(|d| d.as_millis() as u64).collect();
    /// assert_eq!(offsets, [0, 500, 1000, 1250]);
    /// assert_eq!(spec.expected_requests(), 4);
    /// ```
    pub fn ramp(steps: Vec<RateStep>) -> Result<Self, SpecError> {
        let total = steps
            .iter()
            .fold(Duration::ZERO, |t, s| t.saturating_add(s.duration));
        Self::new(1.0, total.max(Duration::from_nanos(1)))?.with_steps(steps)
    }

    /// The same settings (count cap, arrivals, in-flight cap) as a ramp of
    /// `steps` (see [`LoadSpec::ramp`]).
    ///
    /// # Errors
    ///
    /// As [`LoadSpec::ramp`].
    pub fn with_steps(mut self, steps: Vec<RateStep>) -> Result<Self, SpecError> {
        let mut total = Duration::ZERO;
        for step in &steps {
            Self::new(step.rate, step.duration)?;
            total = total.saturating_add(step.duration);
        }
        if steps.is_empty() {
            return Err(SpecError::ZeroDuration);
        }
        if total > MAX_DURATION {
            return Err(SpecError::DurationOverCap {
                asked: total,
                max: MAX_DURATION,
            });
        }
        self.duration = total;
        self.steps = steps;
        self.rate = self.expected_requests() as f64 / total.as_secs_f64();
        Ok(self)
    }

    /// The same load at `rate` (a ramp becomes one constant rate).
    ///
    /// # Errors
    ///
    /// A rate [`LoadSpec::new`] refuses.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use load_tests::generator::LoadSpec;
    /// let spec = LoadSpec::new(10.0, Duration::from_secs(2)).unwrap().with_rate(40.0).unwrap();
    /// assert_eq!(spec.expected_requests(), 80);
    /// ```
    pub fn with_rate(mut self, rate: f64) -> Result<Self, SpecError> {
        Self::new(rate, self.duration)?;
        self.rate = rate;
        self.steps.clear();
        Ok(self)
    }

    /// A burst: `n` requests due at once, at the start ([`Arrivals::Burst`]),
    /// in a sending window of one second (so that "per second" figures of
    /// the report are counts of the burst).
    ///
    /// # Errors
    ///
    /// `n` of zero, or over [`MAX_RATE`] (a burst is sent within its one
    /// second).
    ///
    /// ```
    /// use std::time::Duration;
    /// use load_tests::generator::{Arrivals, LoadSpec};
    ///
    /// let spec = LoadSpec::burst(300).unwrap();
    /// assert_eq!((spec.expected_requests(), spec.arrivals()), (300, Arrivals::Burst));
    /// assert!(spec.schedule().all(|offset| offset == Duration::ZERO));
    /// assert_eq!(spec.schedule().count(), 300);
    /// assert!(LoadSpec::burst(0).is_err());
    /// ```
    pub fn burst(n: u64) -> Result<Self, SpecError> {
        let spec = Self::new(n as f64, Duration::from_secs(1))?.with_max_requests(n)?;
        Ok(spec.with_arrivals(Arrivals::Burst, 1))
    }

    /// A ramp's steps; empty for a constant rate.
    pub fn steps(&self) -> &[RateStep] {
        &self.steps
    }

    /// Stops after `n` requests even if the duration is not over.
    ///
    /// # Errors
    ///
    /// `n` of zero or over [`MAX_REQUESTS`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use load_tests::generator::LoadSpec;
    /// let spec = LoadSpec::new(100.0, Duration::from_secs(10)).unwrap().with_max_requests(25).unwrap();
    /// assert_eq!(spec.expected_requests(), 25);
    /// ```
    pub fn with_max_requests(mut self, n: u64) -> Result<Self, SpecError> {
        if n == 0 || n > MAX_REQUESTS {
            return Err(SpecError::RequestsOutOfRange {
                asked: n,
                max: MAX_REQUESTS,
            });
        }
        self.max_requests = n;
        Ok(self)
    }

    /// The arrival process, and the seed of a Poisson one.
    pub fn with_arrivals(mut self, arrivals: Arrivals, seed: u64) -> Self {
        self.arrivals = arrivals;
        self.seed = seed;
        self
    }

    /// At most `n` requests in flight; one due beyond that is not sent.
    ///
    /// # Errors
    ///
    /// `n` of zero or over [`MAX_IN_FLIGHT`].
    pub fn with_max_in_flight(mut self, n: usize) -> Result<Self, SpecError> {
        if n == 0 || n > MAX_IN_FLIGHT {
            return Err(SpecError::InFlightOutOfRange {
                asked: n,
                max: MAX_IN_FLIGHT,
            });
        }
        self.max_in_flight = n;
        Ok(self)
    }

    /// The rate, in requests per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The sending window.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// The arrival process.
    pub fn arrivals(&self) -> Arrivals {
        self.arrivals
    }

    /// The request count cap.
    pub fn max_requests(&self) -> u64 {
        self.max_requests
    }

    /// The in-flight cap.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// How many requests the schedule holds: exact for constant arrivals,
    /// the mean for Poisson ones (both capped by the request count).
    pub fn expected_requests(&self) -> u64 {
        let in_window = if self.steps.is_empty() {
            (self.rate * self.duration.as_secs_f64()).ceil() as u64
        } else {
            self.steps
                .iter()
                .map(|s| (s.rate * s.duration.as_secs_f64()).ceil() as u64)
                .sum()
        };
        in_window.min(self.max_requests)
    }

    /// The send times, as offsets from the start of the run.
    pub fn schedule(&self) -> Schedule {
        let steps = if self.steps.is_empty() {
            vec![(self.rate, self.duration)]
        } else {
            self.steps.iter().map(|s| (s.rate, s.duration)).collect()
        };
        Schedule {
            steps,
            step: 0,
            step_start: Duration::ZERO,
            in_step: 0,
            max_requests: match self.arrivals {
                Arrivals::Burst => self.expected_requests(),
                Arrivals::Constant | Arrivals::Poisson => self.max_requests,
            },
            next: 0,
            at: Duration::ZERO,
            burst: self.arrivals == Arrivals::Burst,
            rng: match self.arrivals {
                Arrivals::Constant | Arrivals::Burst => None,
                Arrivals::Poisson => Some(StdRng::seed_from_u64(self.seed)),
            },
        }
    }
}

/// The intended send times of a run, as offsets from its start: every one
/// inside the duration, at most the request count of them.
///
/// ```
/// use std::time::Duration;
/// use load_tests::generator::LoadSpec;
///
/// let offsets: Vec<Duration> = LoadSpec::new(4.0, Duration::from_secs(1)).unwrap().schedule().collect();
/// assert_eq!(offsets, [0, 250, 500, 750].map(Duration::from_millis));
/// ```
#[derive(Debug)]
pub struct Schedule {
    /// (rate, duration) per step; one step for a constant rate.
    steps: Vec<(f64, Duration)>,
    step: usize,
    step_start: Duration,
    in_step: u64,
    max_requests: u64,
    next: u64,
    at: Duration,
    /// Every request at offset zero ([`Arrivals::Burst`]).
    burst: bool,
    rng: Option<StdRng>,
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.next >= self.max_requests {
            return None;
        }
        if self.burst {
            self.next += 1;
            return Some(Duration::ZERO);
        }
        loop {
            let Some(&(rate, length)) = self.steps.get(self.step) else {
                self.max_requests = self.next;
                return None;
            };
            let end = self.step_start.saturating_add(length);
            let offset = match &mut self.rng {
                // Computed from the index in the step, not summed: no
                // drift, exact times.
                None => {
                    self.step_start
                        + Duration::from_nanos((self.in_step as f64 * 1e9 / rate).round() as u64)
                }
                Some(rng) => {
                    // Exponential gap: -ln(U) / rate, with U in (0, 1].
                    let u: f64 = 1.0 - rng.random::<f64>();
                    self.at += Duration::from_secs_f64(-u.ln() / rate);
                    self.at
                }
            };
            if offset >= end {
                // The next step starts at this one's end (a Poisson
                // process is memoryless: its next gap starts there).
                self.step += 1;
                self.step_start = end;
                self.in_step = 0;
                self.at = end;
                continue;
            }
            self.in_step += 1;
            self.next += 1;
            return Some(offset);
        }
    }
}

/// One request of the schedule, as its task gets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    /// 0 for the first request of the run.
    pub index: u64,
    /// When it was due: latency is counted from here.
    pub intended: Instant,
    /// When the run started (`intended` of a request due at offset zero).
    pub run_start: Instant,
}

impl Scheduled {
    /// Its due time as an offset from the start of the run.
    pub fn offset(&self) -> Duration {
        self.intended.duration_since(self.run_start)
    }
}

/// What the generator did, apart from what the requests gave.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunTotals {
    /// Requests the schedule held.
    pub scheduled: u64,
    /// Requests sent (their tasks started).
    pub sent: u64,
    /// Requests due while the in-flight cap was reached: not sent.
    pub not_sent: u64,
    /// The furthest behind schedule a request's task was spawned.
    pub max_lag: Duration,
    /// From the start of the run to the last answer.
    pub elapsed: Duration,
}

/// Runs `spec` open-loop: at each intended send time, `send(scheduled)` is
/// spawned as its own task; `record(scheduled, Some(output))` is called
/// with each task's output as it finishes, and `record(scheduled, None)`
/// for a request that was due while [`LoadSpec::max_in_flight`] requests
/// were in flight (not sent). Returns when every request sent has
/// finished, so a run ends by itself when `send`'s futures do (give them a
/// timeout). `progress` advances by one per request recorded.
///
/// `record` runs on the caller's task, between sends: keep it cheap.
///
/// # Panics
///
/// When a `send` task panics, the panic is resumed here.
pub async fn run_open_loop<F, Fut, T, R>(
    spec: &LoadSpec,
    progress: &ProgressBar,
    mut send: F,
    mut record: R,
) -> RunTotals
where
    F: FnMut(Scheduled) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
    R: FnMut(Scheduled, Option<T>),
{
    let run_start = Instant::now();
    let mut totals = RunTotals::default();
    let mut in_flight: JoinSet<(Scheduled, T)> = JoinSet::new();
    let finished = |joined: Result<(Scheduled, T), tokio::task::JoinError>, record: &mut R| {
        match joined {
            Ok((scheduled, output)) => record(scheduled, Some(output)),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only when the set is dropped, which it is not here.
            Err(_) => {}
        }
        progress.inc(1);
    };

    for (index, offset) in spec.schedule().enumerate() {
        let intended = run_start + offset;
        // Collect what finished while waiting for the next send time.
        loop {
            tokio::select! {
                biased;
                () = sleep_until(intended) => break,
                Some(joined) = in_flight.join_next(), if !in_flight.is_empty() => {
                    finished(joined, &mut record);
                }
            }
        }
        let scheduled = Scheduled {
            index: index as u64,
            intended,
            run_start,
        };
        totals.scheduled += 1;
        if in_flight.len() >= spec.max_in_flight {
            totals.not_sent += 1;
            record(scheduled, None);
            progress.inc(1);
            continue;
        }
        totals.max_lag = totals.max_lag.max(Instant::now().duration_since(intended));
        let request = send(scheduled);
        in_flight.spawn(async move { (scheduled, request.await) });
        totals.sent += 1;
    }
    while let Some(joined) = in_flight.join_next().await {
        finished(joined, &mut record);
    }
    totals.elapsed = run_start.elapsed();
    totals
}

/// Serialises a duration as humantime text (`"20s"`).
mod humantime_str {
    use std::time::Duration;

    pub(crate) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*d))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    /// Runs `spec`; each request takes `took`; returns (index, offset of
    /// its task's start from the run start, intended offset) per request
    /// sent, and the totals.
    async fn drive(spec: &LoadSpec, took: Duration) -> (Vec<(u64, Duration, Duration)>, RunTotals) {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&starts);
        let totals = run_open_loop(
            spec,
            &ProgressBar::hidden(),
            move |s: Scheduled| {
                let seen = Arc::clone(&seen);
                async move {
                    let began = Instant::now().duration_since(s.run_start);
                    seen.lock().unwrap().push((s.index, began, s.offset()));
                    tokio::time::sleep(took).await;
                }
            },
            |_, _| {},
        )
        .await;
        let mut starts = starts.lock().unwrap().clone();
        starts.sort();
        (starts, totals)
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_each_request_starts_exactly_at_its_intended_time() {
        let spec = LoadSpec::new(100.0, Duration::from_secs(1)).unwrap();
        let (starts, totals) = drive(&spec, ms(3)).await;
        assert_eq!(starts.len(), 100);
        for (i, began, intended) in &starts {
            assert_eq!(*intended, ms(10 * i));
            assert_eq!(began, intended, "request {i}");
        }
        assert_eq!(totals.max_lag, Duration::ZERO);
        // The last request is due at 990 ms and takes 3 ms.
        assert_eq!(totals.elapsed, ms(993));
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_slow_answers_do_not_delay_later_sends() {
        // Every request takes 5 s, 50 times the gap: a closed loop of one
        // user would send 1 request in the first second, this sends 100.
        let spec = LoadSpec::new(100.0, Duration::from_secs(1)).unwrap();
        let (starts, totals) = drive(&spec, Duration::from_secs(5)).await;
        assert_eq!(totals.sent, 100);
        assert!(starts.iter().all(|(_, began, intended)| began == intended));
        assert_eq!(totals.elapsed, ms(990) + Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_by_count_stops_at_the_request_count() {
        let spec = LoadSpec::new(1000.0, Duration::from_secs(10))
            .unwrap()
            .with_max_requests(25)
            .unwrap();
        let (starts, totals) = drive(&spec, ms(1)).await;
        assert_eq!((starts.len(), totals.scheduled, totals.sent), (25, 25, 25));
        assert_eq!(starts.last().unwrap().2, ms(24));
        assert_eq!(totals.elapsed, ms(25));
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_by_duration_nothing_is_due_at_or_after_the_end() {
        let spec = LoadSpec::new(3.0, Duration::from_secs(2)).unwrap();
        let offsets: Vec<Duration> = spec.schedule().collect();
        assert_eq!(offsets.len(), 6);
        assert_eq!(offsets[1], Duration::from_nanos(333_333_333));
        assert_eq!(offsets[5], Duration::from_nanos(1_666_666_667));
        let (_, totals) = drive(&spec, ms(1)).await;
        assert_eq!(totals.sent, 6);
    }

    #[tokio::test(start_paused = true)]
    async fn the_in_flight_cap_skips_and_counts_what_it_cannot_send() {
        let spec = LoadSpec::new(100.0, Duration::from_millis(100))
            .unwrap()
            .with_max_in_flight(3)
            .unwrap();
        let mut outcomes = Vec::new();
        let totals = run_open_loop(
            &spec,
            &ProgressBar::hidden(),
            |_| tokio::time::sleep(ms(1000)),
            |s, r: Option<()>| outcomes.push((s.index, r.is_some())),
        )
        .await;
        assert_eq!((totals.scheduled, totals.sent, totals.not_sent), (10, 3, 7));
        assert_eq!(
            outcomes.len(),
            10,
            "every scheduled request is recorded once"
        );
        assert_eq!(outcomes.iter().filter(|(_, sent)| *sent).count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_sends_every_request_at_the_start_and_counts_latency_from_there() {
        let spec = LoadSpec::burst(60).unwrap();
        let (starts, totals) = drive(&spec, ms(150)).await;
        assert_eq!((totals.scheduled, totals.sent), (60, 60));
        assert!(
            starts
                .iter()
                .all(|(_, began, intended)| *began == Duration::ZERO && *intended == Duration::ZERO)
        );
        assert_eq!(totals.elapsed, ms(150));
        // `--arrivals burst` on any load: rate times duration, at once.
        let spec = LoadSpec::new(10.0, Duration::from_secs(2))
            .unwrap()
            .with_arrivals(Arrivals::Burst, 1);
        assert_eq!(spec.schedule().count(), 20);
        // The in-flight cap still holds in a burst.
        let capped = LoadSpec::burst(10).unwrap().with_max_in_flight(4).unwrap();
        let (_, totals) = drive(&capped, ms(10)).await;
        assert_eq!((totals.sent, totals.not_sent), (4, 6));
    }

    #[test]
    fn poisson_arrivals_are_seeded_bounded_and_near_the_rate() {
        let spec = LoadSpec::new(200.0, Duration::from_secs(50))
            .unwrap()
            .with_arrivals(Arrivals::Poisson, 7);
        let a: Vec<Duration> = spec.schedule().collect();
        let b: Vec<Duration> = spec.schedule().collect();
        assert_eq!(a, b, "same seed, same schedule");
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!(a.iter().all(|d| *d < Duration::from_secs(50)));
        let mean = a.len() as f64 / 50.0;
        assert!((190.0..210.0).contains(&mean), "{mean}/s");
        let other: Vec<Duration> = spec
            .clone()
            .with_arrivals(Arrivals::Poisson, 8)
            .schedule()
            .collect();
        assert_ne!(a, other);
    }

    #[test]
    fn a_ramp_sends_each_step_s_rate_for_its_length_back_to_back() {
        let step = |rate, ms| RateStep {
            rate,
            duration: Duration::from_millis(ms),
            factor: None,
        };
        // 0.5x, 1x, 2x, 4x, 1x, 0.5x of 20 req/s, 500 ms each.
        let steps: Vec<RateStep> = [10.0, 20.0, 40.0, 80.0, 20.0, 10.0]
            .into_iter()
            .map(|r| step(r, 500))
            .collect();
        let spec = LoadSpec::ramp(steps).unwrap();
        assert_eq!(spec.duration(), Duration::from_secs(3));
        let offsets: Vec<Duration> = spec.schedule().collect();
        assert_eq!(offsets.len() as u64, spec.expected_requests());
        let per_step: Vec<usize> = (0..6)
            .map(|k| {
                offsets
                    .iter()
                    .filter(|o| o.as_millis() / 500 == k as u128)
                    .count()
            })
            .collect();
        assert_eq!(per_step, [5, 10, 20, 40, 10, 5]);
        // Each step starts on its boundary, exactly.
        assert_eq!(offsets[0], Duration::ZERO);
        assert_eq!(offsets[5], ms(500));
        assert_eq!(offsets[15], ms(1000));
        assert_eq!(offsets[16], ms(1025));
        assert_eq!(*offsets.last().unwrap(), ms(2900));
        assert_eq!(spec.rate(), 30.0);
        assert!(LoadSpec::ramp(Vec::new()).is_err());
        assert!(LoadSpec::ramp(vec![step(6000.0, 10)]).is_err());
        // A Poisson ramp keeps each step's mean.
        let poisson = LoadSpec::ramp(vec![step(100.0, 20_000), step(400.0, 20_000)])
            .unwrap()
            .with_arrivals(Arrivals::Poisson, 3);
        let all: Vec<Duration> = poisson.schedule().collect();
        let first = all.iter().filter(|o| o.as_secs() < 20).count() as f64 / 20.0;
        let second = all.iter().filter(|o| o.as_secs() >= 20).count() as f64 / 20.0;
        assert!((90.0..110.0).contains(&first), "{first}");
        assert!((380.0..420.0).contains(&second), "{second}");
        assert!(all.iter().all(|o| *o < Duration::from_secs(40)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_ramp_runs_open_loop_on_its_schedule() {
        let step = |rate| RateStep {
            rate,
            duration: ms(1000),
            factor: None,
        };
        let spec = LoadSpec::ramp(vec![step(10.0), step(40.0)]).unwrap();
        let (starts, totals) = drive(&spec, ms(3)).await;
        assert_eq!(totals.sent, 50);
        assert!(starts.iter().all(|(_, began, intended)| began == intended));
        assert_eq!(starts[10].2, ms(1000));
        assert_eq!(starts[11].2, ms(1025));
    }

    #[test]
    fn the_caps_refuse_what_is_over_them() {
        let s = Duration::from_secs(1);
        assert!(matches!(
            LoadSpec::new(5000.1, s),
            Err(SpecError::RateOverCap { .. })
        ));
        assert!(LoadSpec::new(5000.0, s).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(LoadSpec::new(bad, s), Err(SpecError::BadRate(_))));
        }
        assert_eq!(
            LoadSpec::new(1.0, Duration::ZERO),
            Err(SpecError::ZeroDuration)
        );
        let err = LoadSpec::new(1.0, MAX_DURATION + s).unwrap_err();
        assert_eq!(err.to_string(), "duration 10m 1s is over the cap of 10m");
        let spec = LoadSpec::new(1.0, s).unwrap();
        assert!(spec.clone().with_max_requests(0).is_err());
        assert!(spec.clone().with_max_requests(MAX_REQUESTS + 1).is_err());
        assert!(spec.clone().with_max_in_flight(0).is_err());
        assert!(spec.with_max_in_flight(MAX_IN_FLIGHT + 1).is_err());
    }
}
