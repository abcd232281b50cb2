//! One request of a run: what it sends, and what it makes of the answer.
//!
//! Each request is a `GET` of the target (edge's `/checkout`) carrying:
//!
//! - `request-budget-ms`: what is left of the client's budget at the moment
//!   it is sent (the request's own budget: fixed, or drawn per index from
//!   a [`BudgetDistribution`]). The client's deadline is the **intended** send time plus
//!   the budget, so a request the generator sent late carries less (and one
//!   sent after its deadline carries `0`, which edge answers `504`);
//! - `request-criticality: critical` on the requests the plan marks
//!   ([`CriticalitySplit`]), nothing on the others;
//! - `x-request-id`: `{prefix}-{index / id_group}`. With an `id_group` of
//!   1 every request has its own id; with `k`, `k` consecutive requests
//!   share one, which is how the scenarios make the slow partner's
//!   per-id `script` fail a fraction of requests (see
//!   [`scenario`](crate::scenario)).
//!
//! The answer becomes a [`Sample`]: its [`Outcome`], its latency from the
//! intended send time, and its `Server-Timing` value for the budget table.
//! A `2xx` whose JSON body lists `degraded` dependencies is
//! [`Outcome::Degraded`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::budgets::BudgetDistribution;
use crate::criticality::{CRITICAL, CriticalitySplit, REQUEST_CRITICALITY};
use crate::generator::Scheduled;
use crate::run::class_of;
use crate::target::{LoopbackUrl, loopback_builder, loopback_client};

/// The budget header sent with every request.
pub const REQUEST_BUDGET_MS: &str = "request-budget-ms";

/// The request id header.
pub const X_REQUEST_ID: &str = "x-request-id";

/// The ledger header read from every answer.
pub const SERVER_TIMING: &str = "server-timing";

/// The longest a client may wait for one answer.
pub const MAX_CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the client waits for an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Patience {
    /// This long from the actual send, whatever the budget: a caller with a
    /// generous fixed timeout of its own (the default, 35 s, outlasts the
    /// chain's 30 s fixed timeouts), so `--budget-mode off` shows its full
    /// pile-up. Answers after the budget are still counted, as late.
    Fixed(#[serde(with = "crate::report::millis")] Duration),
    /// Until the client's deadline: the caller hangs up when its budget is
    /// spent, which closes its connection to edge.
    Budget,
}

/// What happened to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A `2xx` with every dependency in it.
    Ok,
    /// A `2xx` that says it lacks an optional dependency.
    Degraded,
    /// Any other status.
    Status(u16),
    /// No answer within the client's patience.
    ClientTimeout,
    /// The connection failed (refused, reset, closed early).
    Transport,
    /// Due while the generator's in-flight cap was reached: never sent.
    NotSent,
}

impl Outcome {
    /// A `2xx`, degraded or not.
    pub fn is_success(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Degraded)
    }
}

/// One request's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Its place in the schedule.
    pub scheduled: Scheduled,
    /// What came of it.
    pub outcome: Outcome,
    /// From the intended send time to the end of the answer's body (or the
    /// error).
    pub latency: Duration,
    /// The budget the client gave it (its deadline is intended + budget).
    pub budget: Duration,
    /// Its class in the report (`critical`, `short-budget`, ...), if the
    /// plan has classes.
    pub class: Option<&'static str>,
    /// The answer's `Server-Timing` fields, joined by `, `.
    pub server_timing: Option<String>,
}

impl Sample {
    /// A request that was never sent.
    pub fn not_sent(scheduled: Scheduled, budget: Duration) -> Self {
        Self {
            scheduled,
            outcome: Outcome::NotSent,
            latency: Duration::ZERO,
            budget,
            class: None,
            server_timing: None,
        }
    }

    /// A success within the client's budget: the unit of goodput.
    pub fn is_good(&self) -> bool {
        self.outcome.is_success() && self.latency <= self.budget
    }
}

/// How requests are sent.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The URL every request goes to.
    pub target: LoopbackUrl,
    /// The client's budget of each request.
    pub budgets: BudgetDistribution,
    /// Which requests carry `request-criticality: critical`.
    pub criticality: Option<CriticalitySplit>,
    /// How long it waits for an answer.
    pub patience: Patience,
    /// The start of every `x-request-id`.
    pub id_prefix: String,
    /// Consecutive requests sharing one `x-request-id` (at least 1).
    pub id_group: u64,
    /// Never reuse a connection: each request opens its own (no idle
    /// connection is kept in the pool).
    pub fresh_connections: bool,
}

/// Sends the requests of a run. Cheap to clone (one shared connection
/// pool).
#[derive(Clone, Debug)]
pub struct LoadClient {
    http: reqwest::Client,
    config: std::sync::Arc<ClientConfig>,
}

/// Only `degraded` is read from a success's body.
#[derive(Deserialize)]
struct AnswerBody {
    #[serde(default)]
    degraded: Vec<serde_json::Value>,
}

impl LoadClient {
    /// A client for `config` (no proxy, no redirects: see
    /// [`loopback_client`]).
    ///
    /// # Errors
    ///
    /// When reqwest cannot build its client.
    pub fn new(mut config: ClientConfig) -> Result<Self, reqwest::Error> {
        config.id_group = config.id_group.max(1);
        let http = if config.fresh_connections {
            loopback_builder(Duration::from_secs(5))
                .pool_max_idle_per_host(0)
                .build()?
        } else {
            loopback_client(Duration::from_secs(5))?
        };
        Ok(Self {
            http,
            config: std::sync::Arc::new(config),
        })
    }

    /// The client's budget of request `index`.
    pub fn budget(&self, index: u64) -> Duration {
        self.config.budgets.budget(index)
    }

    /// The request `scheduled`, sent now; resolves to its [`Sample`] and
    /// never takes longer than the patience (capped at
    /// [`MAX_CLIENT_TIMEOUT`]).
    pub fn send(&self, scheduled: Scheduled) -> impl Future<Output = Sample> + Send + 'static {
        let http = self.http.clone();
        let config = std::sync::Arc::clone(&self.config);
        async move {
            let budget = config.budgets.budget(scheduled.index);
            let deadline = scheduled.intended + budget;
            let remaining = deadline.saturating_duration_since(Instant::now());
            let timeout = match config.patience {
                Patience::Fixed(d) => d,
                Patience::Budget => remaining,
            }
            .min(MAX_CLIENT_TIMEOUT);
            let id = format!("{}-{}", config.id_prefix, scheduled.index / config.id_group);
            let mut request = http
                .get(config.target.url().clone())
                .header(REQUEST_BUDGET_MS, remaining.as_millis().to_string())
                .header(X_REQUEST_ID, id)
                .timeout(timeout);
            if config
                .criticality
                .is_some_and(|split| split.is_critical(scheduled.index))
            {
                request = request.header(REQUEST_CRITICALITY, CRITICAL);
            }
            let (outcome, server_timing) = match request.send().await {
                Ok(res) => {
                    let status = res.status();
                    let timing = header_values(res.headers(), SERVER_TIMING);
                    match res.bytes().await {
                        Ok(body) => (classify(status, &body), timing),
                        Err(e) => (failure(&e), timing),
                    }
                }
                Err(e) => (failure(&e), None),
            };
            Sample {
                scheduled,
                outcome,
                latency: Instant::now().duration_since(scheduled.intended),
                budget,
                class: class_of(config.criticality, &config.budgets, scheduled.index),
                server_timing,
            }
        }
    }
}

/// The outcome of an answer with `status` and `body`.
///
/// ```
/// use load_tests::client::{classify, Outcome};
/// use reqwest::StatusCode;
///
/// assert_eq!(classify(StatusCode::OK, br#"{"degraded":[]}"#), Outcome::Ok);
/// assert_eq!(classify(StatusCode::OK, br#"{"degraded":[{"dependency":"recommendations"}]}"#), Outcome::Degraded);
/// assert_eq!(classify(StatusCode::GATEWAY_TIMEOUT, b"{}"), Outcome::Status(504));
/// ```
pub fn classify(status: reqwest::StatusCode, body: &[u8]) -> Outcome {
    if !status.is_success() {
        return Outcome::Status(status.as_u16());
    }
    match serde_json::from_slice::<AnswerBody>(body) {
        Ok(answer) if !answer.degraded.is_empty() => Outcome::Degraded,
        _ => Outcome::Ok,
    }
}

fn failure(e: &reqwest::Error) -> Outcome {
    if e.is_timeout() {
        Outcome::ClientTimeout
    } else {
        Outcome::Transport
    }
}

/// Every value of header `name`, joined by `, ` (how several fields of a
/// list header combine).
fn header_values(headers: &reqwest::header::HeaderMap, name: &str) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}
