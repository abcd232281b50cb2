//! # load-tests
//!
//! The proof of the project's claim: under a slow partner, generous fixed
//! timeouts pile up waiting work and collapse goodput, while one shared
//! time budget sheds fast and keeps the service useful.
//!
//! An open-loop generator ([`generator`]: constant or Poisson arrivals,
//! latency counted from the intended send time, bounded in count and
//! duration) drives the real chain (`edge -> checkout -> slow partner`,
//! started in this process on loopback by [`chain`]) once per mode,
//! same load: budget mode on, off (generous fixed timeouts), `peer`,
//! with checkout swapped for [`peer::PeerCheckout`], the plain-tower
//! baseline an experienced tower user would write without this project,
//! and `queue`, the same without load shedding (calls wait for the
//! concurrency limit inside their timeout).
//! It reports per run ([`report`]): the
//! outcome of every request, goodput (`2xx` within the client's budget,
//! per second), latency percentiles, the partner's late work, and the
//! budget table aggregated from every answer's `Server-Timing` ledger
//! ([`budget_table`]); as markdown and JSON ([`output`]), an SVG plot ([`plot`]) and one
//! self-contained HTML page with the tables and charts ([`html`]).
//!
//! Beyond the partner shapes, scenarios vary the callers and the chain:
//! `mixed-budgets` gives each request its own budget ([`budgets`]),
//! `criticality` marks 30 % of requests critical at twice the capacity
//! ([`criticality`]), `ramp` steps the offered load from 0.5x to 4x of the
//! capacity ([`generator::LoadSpec::ramp`]), `deep` adds a fourth hop
//! ([`middle`]), `outage` fails `/pricing` for a while ([`outage`]),
//! `spike` triples the load for a moment ([`spike`]), the `burst-*`
//! scenarios send every request at once to a cold chain
//! ([`generator::LoadSpec::burst`]), and `hang` makes `/inventory` stop
//! answering for a while ([`hang`]), and `replicas` serves every
//! dependency from three partners, one of which gets slow, dark and
//! restarted ([`replicas`]), with a fifth peer mode, `p2c`, that balances
//! them with tower's p2c ([`p2c`]).
//! Two scenarios drive an app's clients instead of the chain:
//! `reconnect-storm`, SSE followers cut off by a partner restart
//! ([`storm`]), and `batch-outage`, a batch uploader through an ingest
//! outage ([`batch_outage`], beside the hand-written [`naive_uploader`]).
//! Each scenario is one file of [`scenarios`], registered there in one
//! line; [`scenario`] says what a scenario is and how to add one.
//!
//! ```text
//! cargo run --release -p load-tests -- --scenario slow --json slow.json --svg slow.svg
//! cargo run --release -p load-tests -- --scenario slow --duration 10s --html slow.html
//! cargo run --release -p load-tests -- --target http://127.0.0.1:8080/checkout --rate 50 --duration 10s
//! ```
//!
//! Only loopback targets are accepted ([`target`]); every run stops by
//! itself.
//!
//! The `soak` binary ([`soak`], [`soak_cli`]) keeps one chain under steady
//! load for ten minutes while the partner's fault switches every minute,
//! and checks after each phase that no task, connection or partner call
//! outlives it ([`resources`]), reporting resident memory:
//!
//! ```text
//! cargo run --release -p load-tests --bin soak -- --json soak.json
//! ```
//!
//! # Example: one short run in budget mode
//!
//! ```no_run
//! use std::time::Duration;
//! use load_tests::client::Patience;
//! use load_tests::generator::LoadSpec;
//! use load_tests::run::{LoadPlan, run_scenario};
//! use load_tests::chain::{ChainMode, ChainSettings, Partners};
//! use load_tests::scenarios::healthy::Healthy;
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let plan = LoadPlan::fixed(
//!     LoadSpec::new(20.0, Duration::from_secs(2))?,
//!     Duration::from_secs(2),
//!     Patience::Fixed(Duration::from_secs(35)),
//! );
//! let settings = ChainSettings::default();
//! let partners = Partners::start(&settings).await?;
//! let runs = run_scenario(&Healthy, &settings, &plan,
//!     &[ChainMode::Budget], &partners).await?;
//! println!("{} req/s good", runs[0].goodput_per_s);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod batch_outage;
pub mod budget_table;
pub mod budgets;
pub mod chain;
pub mod cli;
pub mod client;
pub mod criticality;
pub mod envoy;
pub mod gauges;
pub mod generator;
pub mod hang;
pub mod html;
pub mod middle;
pub mod naive_uploader;
pub mod outage;
pub mod output;
pub mod p2c;
pub mod peer;
pub mod plot;
pub mod replicas;
pub mod report;
pub mod resources;
pub mod run;
pub mod scenario;
pub mod scenarios;
pub mod section;
pub mod soak;
pub mod soak_cli;
pub mod spike;
pub mod storm;
pub mod sweep;
pub mod target;
pub mod warm;
pub mod window;
