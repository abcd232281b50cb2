//! What the engine's step tests and the HTTP client pass's tests share: a
//! dependency's configuration, a clock, a plan, an HTTP answer, and a fake
//! dependency shaped attempt by attempt, all for tokio's paused clock.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::StatusCode;
use tokio::time::Instant;

use super::attempt::{AttemptError, AttemptSpec, Tried};
use super::{Call, Dependency, Finished, Head, HeaderRules, Plan, Timing, Transport, http_outcome};
use crate::client::DependencyConfig;
use crate::clock::FixedClock;
use crate::clock::WallClock;
use crate::ledger::Ledger;
use crate::outbound::error::CallError;
use crate::retry::Outcome;
use crate::retry::{BackoffConfig, Jitter, RetryConfig, TransportKind};

pub(crate) fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// `pricing`: 3 attempts, 100 ms of backoff doubling to 1 s, no jitter.
pub(crate) fn config() -> DependencyConfig {
    let mut c = DependencyConfig::new("pricing", "http://127.0.0.1:9/pricing");
    c.retry = RetryConfig {
        max_attempts: 3,
        backoff: BackoffConfig {
            initial: ms(100),
            max: ms(1000),
            multiplier: 2.0,
            jitter: Jitter::None,
        },
        ..RetryConfig::default()
    };
    c
}

pub(crate) fn clock() -> FixedClock {
    FixedClock::new(SystemTime::UNIX_EPOCH)
}

/// An answer of `status` with a `{}` body.
pub(crate) fn response(status: u16) -> Tried<http::Response<Bytes>> {
    let mut res = http::Response::new(Bytes::from_static(b"{}"));
    *res.status_mut() = StatusCode::from_u16(status).unwrap();
    Ok(res)
}

/// A plan that may be retried (and hedged), recorded in `ledger`.
pub(crate) fn plan(timing: Timing, ledger: &Ledger) -> Plan {
    Plan::test(timing, ledger, true)
}

/// A fake dependency whose attempt N takes `shape[N].1` and answers
/// `shape[N].0` (0: a connection error); the last entry repeats.
pub(crate) struct Shaped {
    shape: Vec<(u16, Duration)>,
    pub(crate) seen: Mutex<Vec<(Instant, AttemptSpec)>>,
}

impl Shaped {
    pub(crate) fn new(shape: &[(u16, u64)]) -> Self {
        Self {
            shape: shape.iter().map(|(s, t)| (*s, ms(*t))).collect(),
            seen: Mutex::new(Vec::new()),
        }
    }

    pub(crate) async fn attempt(&self, spec: AttemptSpec) -> Tried<http::Response<Bytes>> {
        let i = {
            let mut seen = self.seen.lock().unwrap();
            seen.push((Instant::now(), spec));
            seen.len() - 1
        };
        let (status, took) = self.shape[i.min(self.shape.len() - 1)];
        tokio::time::sleep(took).await;
        if status == 0 {
            return Err(AttemptError::new(TransportKind::Connect, "refused"));
        }
        response(status)
    }

    pub(crate) fn sent(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// When each attempt started, from `origin`, and the budget it was sent.
    pub(crate) fn starts(&self, origin: Instant) -> Vec<(Duration, Option<Duration>)> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(at, spec)| (*at - origin, spec.budget))
            .collect()
    }
}

/// A transport whose attempts are `attempt`'s answers (HTTP answers with
/// a `Bytes` body), for the engine's tests: no socket, tokio's paused
/// clock.
pub(crate) struct Fake<A>(pub(crate) A);

impl<A, F> Transport for Fake<A>
where
    A: Fn(AttemptSpec) -> F + Sync,
    F: std::future::Future<Output = Tried<http::Response<Bytes>>> + Send,
{
    type Answer = http::Response<Bytes>;
    type Error = AttemptError;

    fn send(
        &self,
        spec: AttemptSpec,
        _: &HeaderRules,
    ) -> impl std::future::Future<Output = Tried<http::Response<Bytes>>> + Send {
        (self.0)(spec)
    }

    fn classify(&self, answer: &Self::Answer, clock: &dyn WallClock) -> Outcome {
        http_outcome(answer, clock)
    }

    fn head<'a>(&self, answer: &'a Self::Answer) -> Option<Head<'a>> {
        Some(Head::new(answer.headers(), Some(answer.body())))
    }

    fn classify_error(&self, error: AttemptError) -> AttemptError {
        error
    }
}

/// One call to `dep` by [`Fake`] attempts.
pub(crate) async fn run<A, F>(
    dep: &Dependency,
    clock: &dyn WallClock,
    plan: Plan,
    attempt: A,
) -> Result<Finished<http::Response<Bytes>>, CallError>
where
    A: Fn(AttemptSpec) -> F + Sync,
    F: std::future::Future<Output = Tried<http::Response<Bytes>>> + Send,
{
    let transport = Fake(attempt);
    Call {
        dep,
        clock,
        plan,
        transport: &transport,
    }
    .run()
    .await
}
