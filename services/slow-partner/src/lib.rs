//! # slow-partner
//!
//! A chaos HTTP server that plays a partner who ignores budgets: it waits,
//! fails, asks callers to come back later, sends its body slowly, or takes
//! its whole port down in one of five ways; and it counts the work it did
//! that nobody was waiting for any more. For demos, tests and load tests of
//! the budget framework (`docs/contract.md` §5).
//!
//! - **Per request**, the query string shapes the answer: `delay`, `jitter`,
//!   `status`, `retry_after`, `script` (per-attempt plans keyed by
//!   `x-request-id` and path), `drip`, `body_bytes` and `tail` (a share of
//!   the requests slower than the rest). See [`Knobs`].
//! - **Per listener**, a [`FaultMode`]: `normal`, `refuse`, `blackhole`, `reset`,
//!   `hang`; set at start and switched at run time through
//!   [`PartnerHandle::set_mode`] or `PUT /admin/mode` (on the main port, and
//!   on an optional admin listener that stays up whatever the mode).
//! - **Per path**, a finite capacity when configured
//!   ([`PartnerConfig::workers`], [`PartnerConfig::path_workers`]): at most
//!   N requests of a path do their work at once, the others wait in a FIFO
//!   queue, so latency grows with load; and a fault switched at run time
//!   ([`PartnerHandle::set_path_status`] or `PUT /admin/paths/{path}`): every
//!   request to the path answers a status at once; or a hang
//!   ([`PartnerHandle::set_path_hang`]): every request to the path is held
//!   without an answer, the calls held at once counted ([`HungPath`]).
//! - **For the whole partner**, a [`Slowdown`] switched at run time
//!   ([`PartnerHandle::set_slowdown`] or `PUT /admin/slowdown`): a factor,
//!   1 to 100, that multiplies every work request's waits (`delay`,
//!   `jitter`, a script's or a tail's delay, `drip` pauses): one replica
//!   of a service ten times slower than its siblings.
//! - **`GET /stats`** ([`StatsSnapshot`]): requests, answers by status,
//!   `late` work (finished after the budget it arrived with had run out),
//!   per `x-request-id` the budgets each attempt arrived with, and per
//!   limited path its workers, queue and queue waits ([`PathWorkers`]).
//! - **Streams and a batch sink** on routes of their own (no worker,
//!   fault or slowdown): `GET /events` (SSE), `GET /ws` (WebSocket) and
//!   `POST /ingest` (idempotency keys, failing windows), with admin knobs;
//!   documented in docs/binaries.md.
//! - **`GET /metrics`**: the same counts in the Prometheus text format
//!   (`partner_requests_total`, `partner_answers_total{status}`,
//!   `partner_late_total`, the limited paths' workers and queues).
//!
//! The partner reads the budget like any budget-aware service (every inbound
//! header format, the smallest wins) and echoes it as `budget_ms` in its
//! [`Answer`], but never enforces it; a malformed budget header is an unknown
//! budget, not an error.
//!
//! It only listens on the addresses it is given; tests give it loopback.
//! Time comes from tokio's clock only.
//!
//! # Example
//!
//! ```no_run
//! use slow_partner::{Answer, FaultMode, PartnerConfig};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = PartnerConfig::new("127.0.0.1:0".parse()?)
//!     .with_admin_listen("127.0.0.1:0".parse()?);
//! let partner = slow_partner::spawn(config).await?;
//!
//! // A pricing service that fails once, then answers slowly.
//! let url = partner.url("/pricing?script=503@250ms,200@400ms&retry_after=1");
//! let client = reqwest::Client::new();
//! let first = client.get(&url).header("x-request-id", "r-1").header("request-budget-ms", "900").send().await?;
//! assert_eq!(first.status(), 503);
//! let answer: Answer = first.json().await?;
//! assert_eq!((answer.attempt, answer.budget_ms), (1, Some(900)));
//!
//! // The whole port goes dark: connects are refused.
//! partner.set_mode(FaultMode::Refuse).await?;
//! assert!(client.get(&url).send().await.unwrap_err().is_connect());
//!
//! assert_eq!(partner.stats().ids["r-1"].budgets_ms(), vec![Some(900)]);
//! partner.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! # HTTP routes
//!
//! | route | on the main port (normal mode) | on the admin listener |
//! | --- | --- | --- |
//! | `GET /healthz` | `200 ok` | `200 ok` |
//! | `GET /stats` | [`StatsSnapshot`] as JSON | same |
//! | `POST /stats/reset` | zero the counters, `204` | same |
//! | `GET /admin/mode` | `{"mode":"normal"}` | same |
//! | `PUT`/`POST /admin/mode` | switch: `?mode=hang`, or a body `mode=hang`, `{"mode":"hang"}` or `hang`; answers `{"mode":"hang","previous":"normal"}` | same |
//! | `GET /admin/paths` | the overridden paths: `{"paths":{"/pricing":{"status":503}}}` | same |
//! | `GET /admin/paths/{path}` | `{"path":"/pricing","status":503}` (`null`: no override) | same |
//! | `PUT /admin/paths/{path}` | `{"status":503}` (optionally `"retry_after":"1"`) overrides `/{path}`; `{"status":null}` ends it; answers as `GET` | same |
//! | `DELETE /admin/paths/{path}` | ends the override; answers as `GET` | same |
//! | `GET /admin/slowdown` | the factor in force: `{"factor":1}` | same |
//! | `PUT`/`POST /admin/slowdown` | `{"factor":10}` (1 to 100) multiplies every work request's waits from now on; answers `{"factor":10,"previous":1}` | same |
//! | `GET`/`PUT /admin/events` | the knobs of new streams: `{"rate":10,"retry":null,"drop_after":null,"stall":null,"heartbeat":null,"status":null}` | same |
//! | `POST /admin/events/cut` | ends every open SSE and WebSocket stream abruptly; `{"cut":n}` | same |
//! | `GET /admin/streams` | `{"open":n,"opened_total":n,"opens_unix_ms":[...],"events_sent":n}` | same |
//! | `GET`/`PUT /admin/ingest` | the ingest sink's counters; `{"fail_for":"20s","status":503,"retry_after":"2s","mode":"status"}` fails it | same |
//! | `GET /events` | server-sent events `id: N` / `event: tick` / `data: {"id":N}`, resumed after `Last-Event-ID` | `404` |
//! | `GET /ws` | a WebSocket sending `{"id":N}`, resumed after `last_id` | `404` |
//! | `POST /ingest` | a JSON array applied once per `Idempotency-Key` | `404` |
//! | any other path | the work of the query string ([`Knobs`]), answered with an [`Answer`] | `404` |

#![deny(missing_docs)]

mod app;
mod config;
mod error;
mod events;
mod grpc;
mod handle;
mod hangs;
mod ingest;
mod ingest_state;
mod knobs;
mod listener;
mod metrics_text;
mod mode;
mod overrides;
mod slowdown;
mod stats;
mod stream_admin;
mod stream_knobs;
mod streams;
mod supervisor;
mod ticks;
mod work;
mod workers;
mod ws;

pub use config::{DEFAULT_LISTEN, DEFAULT_SHUTDOWN_GRACE, PartnerConfig};
pub use error::{PartnerError, chain as error_chain};
pub use handle::{PartnerHandle, spawn};
pub use hangs::HungPath;
pub use knobs::{
    DRIP_CHUNKS, Knobs, MAX_BODY_BYTES, MAX_DURATION, MAX_SCRIPT_ENTRIES, Plan, QueryError, Reason,
    Script, ScriptEntry, Tail,
};
pub use mode::{BudgetMode, FaultMode, ParseModeError};

/// The old name of [`FaultMode`] (the listener's fault modes).
///
/// ```
/// #[allow(deprecated)]
/// let mode = slow_partner::Mode::Hang;
/// assert_eq!(mode, slow_partner::FaultMode::Hang);
/// ```
#[deprecated(note = "renamed to `FaultMode`")]
pub type Mode = FaultMode;
pub use overrides::{MAX_PATH_OVERRIDES, OverrideError, PathOverride};
pub use slowdown::{MAX_SLOWDOWN, MIN_SLOWDOWN, Slowdown, SlowdownError};
pub use stats::{
    CallRecord, DEFAULT_MAX_TRACKED_IDS, IdStats, MAX_CALLS_PER_ID, MAX_ID_LEN, MAX_PATH_LEN,
    MAX_PATHS_PER_ID, StatsSnapshot,
};
pub use work::{Answer, X_REQUEST_ID};
pub use workers::{MAX_WORKER_POOLS, MAX_WORKERS, PathWorkers, QueueWait, is_reserved_path};
