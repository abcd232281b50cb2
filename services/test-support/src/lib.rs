//! What the tests of `checkout`, `edge` and `load-tests` share, written
//! once: a slow partner on a free loopback port ([`partner`]), an outer
//! bound on every test ([`bounded`]), a client with a bounded timeout
//! ([`client`]), the `Server-Timing` ledger of an
//! answer ([`server_timing`], [`single_server_timing`], [`names`]) and a
//! headless Chromium ([`chromium`]).
//!
//! A dev-dependency only: nothing here is part of a service.
//!
//! ```no_run
//! use test_support::{bounded, partner, server_timing};
//!
//! # #[tokio::main] async fn main() {
//! bounded(async {
//!     let partner = partner(slow_partner::FaultMode::Normal).await;
//!     let res = reqwest::get(partner.url("/pricing")).await.unwrap();
//!     println!("{:?}", server_timing(&res));
//! })
//! .await;
//! # }
//! ```

#![deny(missing_docs)]

pub mod chromium;

use std::future::Future;
use std::time::Duration;

use budget_core::ledger::{Metric, parse_server_timing};
use slow_partner::{FaultMode, PartnerConfig, PartnerHandle};

/// No test may take longer than this, whatever goes wrong: 30 s.
///
/// ```
/// assert_eq!(test_support::TEST_BOUND.as_secs(), 30);
/// ```
pub const TEST_BOUND: Duration = Duration::from_secs(30);

/// How long a test partner's in-flight requests get on a mode switch or
/// shutdown: 200 ms, so that a test does not wait on a hanging request.
///
/// ```
/// assert_eq!(test_support::PARTNER_GRACE.as_millis(), 200);
/// ```
pub const PARTNER_GRACE: Duration = Duration::from_millis(200);

/// Runs `test` with [`TEST_BOUND`] as its limit.
///
/// # Panics
///
/// When `test` runs past the bound.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert_eq!(test_support::bounded(async { 7 }).await, 7);
/// # }
/// ```
pub async fn bounded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_BOUND, test)
        .await
        .expect("the test ran past its bound")
}

/// Milliseconds.
///
/// ```
/// assert_eq!(test_support::ms(5), std::time::Duration::from_millis(5));
/// ```
pub fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A slow partner on a free loopback port, in `mode`, with
/// [`PARTNER_GRACE`] as its shutdown grace.
///
/// # Panics
///
/// When the partner cannot start.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let partner = test_support::partner(slow_partner::FaultMode::Normal).await;
/// assert!(partner.url("/pricing").starts_with("http://127.0.0.1:"));
/// # }
/// ```
pub async fn partner(mode: FaultMode) -> PartnerHandle {
    let config = PartnerConfig::new("127.0.0.1:0".parse().expect("an address"))
        .with_mode(mode)
        .with_shutdown_grace(PARTNER_GRACE);
    slow_partner::spawn(config)
        .await
        .expect("the partner starts")
}

/// A client whose every request gives up after 15 s (inside
/// [`TEST_BOUND`], so a test fails with the request's error, not the
/// bound's).
///
/// # Panics
///
/// When the client cannot be built.
///
/// ```
/// let _client = test_support::client();
/// ```
pub fn client() -> reqwest::Client {
    // rustls, whatever reqwest's default: with `--all-features` budget-core's
    // `native-tls` makes native-tls the default, and making such a client
    // loads the system's CA store (tens of milliseconds) inside timed steps.
    reqwest::Client::builder()
        .tls_backend_rustls()
        .timeout(Duration::from_secs(15))
        .build()
        .expect("the test client builds")
}

/// The answer's `Server-Timing` metrics: every field of every
/// `Server-Timing` header, in order.
///
/// # Panics
///
/// When a header value is not visible ASCII.
///
/// ```no_run
/// # async fn demo(res: reqwest::Response) {
/// let metrics = test_support::server_timing(&res);
/// println!("{}", test_support::names(&metrics).join(", "));
/// # }
/// ```
pub fn server_timing(res: &reqwest::Response) -> Vec<Metric> {
    let fields: Vec<&str> = res
        .headers()
        .get_all("server-timing")
        .iter()
        .map(|v| v.to_str().expect("a visible ASCII Server-Timing"))
        .collect();
    parse_server_timing(&fields.join(", "))
}

/// Like [`server_timing`], for an answer that must carry exactly one
/// `Server-Timing` header (every hop's metrics merged into it).
///
/// # Panics
///
/// When the answer has no `Server-Timing` header or more than one.
///
/// ```no_run
/// # async fn demo(res: reqwest::Response) {
/// let metrics = test_support::single_server_timing(&res);
/// assert!(!metrics.is_empty());
/// # }
/// ```
pub fn single_server_timing(res: &reqwest::Response) -> Vec<Metric> {
    let fields: Vec<_> = res.headers().get_all("server-timing").iter().collect();
    assert_eq!(fields.len(), 1, "one header for every hop: {fields:?}");
    server_timing(res)
}

/// The metric names, in order.
///
/// ```
/// let metrics = budget_core::ledger::parse_server_timing("edge;dur=3, checkout;dur=2");
/// assert_eq!(test_support::names(&metrics), ["edge", "checkout"]);
/// ```
pub fn names(metrics: &[Metric]) -> Vec<&str> {
    metrics.iter().map(|m| m.name.as_str()).collect()
}
