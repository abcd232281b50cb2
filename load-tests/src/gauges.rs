//! The services' own state during a run: checkout's floor and concurrency
//! limit per dependency, read once per second from its `GET /metrics`.
//!
//! Why: with checkout's defaults, the floors are learned from each
//! dependency's latency and the limits adapt to what the partner takes;
//! the load test reports what they were at each second of the run, next
//! to goodput and p99 ([`crate::report::ServiceSeries`]).
//!
//! The services serve the process-wide Prometheus registry at `/metrics`
//! (`service_kit::router`), in the text format. Two gauges are read, both
//! labelled `dependency`:
//!
//! - [`FLOOR_GAUGE`] (`budget_floor_seconds`): the floor in force when a
//!   call to the dependency starts, set on every call (learned, or fixed);
//! - [`LIMIT_GAUGE`] (`budget_concurrency_limit`): the concurrency
//!   limit, set when the dependency's client is built and each time the
//!   adaptive limit changes.
//!
//! Every other line is ignored, and so is a line that does not parse (a
//! value that is not a finite number, no `dependency` label, a broken
//! label set): a scrape never fails for one bad line.
//!
//! The registry is per process, and every chain this process starts
//! writes to it: a gauge keeps the value an earlier run left until it is
//! set again. Both are set again before a run's first request (the floor
//! when the client is built and on every call, the limit when the client
//! is built and on each change), so a run that starts after its chain is
//! up reads only its own values, a limit that never changes included. The
//! run samples only in budget mode (naive and peer mode do not set these
//! gauges, and would only show stale ones).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use budget_core::telemetry::semconv::{METRIC_CONCURRENCY_LIMIT, METRIC_FLOOR_SECONDS};
use tokio::time::Instant;

use crate::target::LoopbackUrl;

/// The floor gauge, seconds.
pub const FLOOR_GAUGE: &str = METRIC_FLOOR_SECONDS;

/// The adaptive concurrency limit gauge.
pub const LIMIT_GAUGE: &str = METRIC_CONCURRENCY_LIMIT;

/// The label naming the dependency.
const DEPENDENCY: &str = "dependency";

/// How long one scrape may take; a slower one is a missing sample (the
/// next second's tick does not wait for it).
pub const SCRAPE_TIMEOUT: Duration = Duration::from_millis(900);

/// One scrape's gauges, by dependency name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gauges {
    /// [`FLOOR_GAUGE`], seconds.
    pub floor_seconds: BTreeMap<String, f64>,
    /// [`LIMIT_GAUGE`].
    pub concurrency_limit: BTreeMap<String, f64>,
}

/// The two gauges of a Prometheus text exposition, by their `dependency`
/// label; every other line is skipped.
///
/// ```
/// use load_tests::gauges::parse_gauges;
///
/// let g = parse_gauges("# TYPE budget_floor_seconds gauge\n\
///     budget_floor_seconds{dependency=\"pricing\"} 0.551\n\
///     budget_concurrency_limit{dependency=\"pricing\"} 12\n\
///     budget_retries_total{dependency=\"pricing\"} 3\n");
/// assert_eq!(g.floor_seconds["pricing"], 0.551);
/// assert_eq!(g.concurrency_limit["pricing"], 12.0);
/// assert_eq!(g.floor_seconds.len(), 1);
/// ```
pub fn parse_gauges(text: &str) -> Gauges {
    let mut gauges = Gauges::default();
    for line in text.lines() {
        let Some((name, dependency, value)) = parse_line(line) else {
            continue;
        };
        let into = if name == FLOOR_GAUGE {
            &mut gauges.floor_seconds
        } else if name == LIMIT_GAUGE {
            &mut gauges.concurrency_limit
        } else {
            continue;
        };
        into.insert(dependency, value);
    }
    gauges
}

/// `name{labels} value [timestamp]`: the name, the `dependency` label and
/// the value, when all three are there and the value is finite.
fn parse_line(line: &str) -> Option<(&str, String, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let brace = line.find('{')?;
    let name = line[..brace].trim_end();
    if name != FLOOR_GAUGE && name != LIMIT_GAUGE {
        return None;
    }
    let (labels, rest) = parse_labels(&line[brace + 1..])?;
    let dependency = labels.into_iter().find(|(k, _)| k == DEPENDENCY)?.1;
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    value.is_finite().then_some((name, dependency, value))
}

/// The labels after a `{`, up to its `}`, and what follows; `None` when
/// they do not parse. Values are quoted, with `\\`, `\"` and `\n` escapes.
fn parse_labels(mut text: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('}') {
            return Some((labels, rest));
        }
        let eq = text.find('=')?;
        let key = text[..eq].trim().to_owned();
        if key.is_empty() {
            return None;
        }
        let mut chars = text[eq + 1..].trim_start().char_indices();
        let start = text.len() - text[eq + 1..].trim_start().len();
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.push((key, value));
        text = text[start + end + 1..].trim_start();
        if let Some(rest) = text.strip_prefix(',') {
            text = rest;
        } else if !text.starts_with('}') {
            return None;
        }
    }
}

/// One scrape of `metrics` (a `/metrics` URL): its gauges, or `None` when
/// it failed or took longer than [`SCRAPE_TIMEOUT`].
///
/// ```no_run
/// # async fn demo() {
/// use load_tests::target::{LoopbackUrl, loopback_client};
///
/// let http = loopback_client(std::time::Duration::from_secs(5)).unwrap();
/// let url = LoopbackUrl::parse("http://127.0.0.1:8081/metrics").unwrap();
/// if let Some(g) = load_tests::gauges::scrape(&http, &url).await {
///     println!("pricing's floor: {:?} s", g.floor_seconds.get("pricing"));
/// }
/// # }
/// ```
pub async fn scrape(http: &reqwest::Client, metrics: &LoopbackUrl) -> Option<Gauges> {
    let text = tokio::time::timeout(SCRAPE_TIMEOUT, async {
        http.get(metrics.url().clone())
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    })
    .await
    .ok()?
    .ok()?;
    Some(parse_gauges(&text))
}

/// Scrapes `metrics` at the end of each second from `start` (entry `i` at
/// `start + i + 1` s: the state after second `i` of the run, the second
/// the timeline's entry `i` covers), until `done` resolves; then once
/// more, for the second in which it did. A failed scrape is a `None`.
///
/// ```no_run
/// # async fn demo(url: load_tests::target::LoopbackUrl) {
/// let http = load_tests::target::loopback_client(std::time::Duration::from_secs(5)).unwrap();
/// let done = tokio::time::sleep(std::time::Duration::from_secs(3));
/// let samples = load_tests::gauges::sample_per_second(&http, &url,
///     tokio::time::Instant::now(), done).await;
/// assert!(samples.len() >= 3);
/// # }
/// ```
pub async fn sample_per_second(
    http: &reqwest::Client,
    metrics: &LoopbackUrl,
    start: Instant,
    done: impl Future<Output = ()>,
) -> Vec<Option<Gauges>> {
    each_second(start, done, || scrape(http, metrics)).await
}

/// [`sample_per_second`] with any `sample`.
async fn each_second<T, F: Future<Output = T>>(
    start: Instant,
    done: impl Future<Output = ()>,
    mut sample: impl FnMut() -> F,
) -> Vec<T> {
    let mut done = std::pin::pin!(done);
    let mut samples = Vec::new();
    loop {
        let tick = start + Duration::from_secs(samples.len() as u64 + 1);
        let finished = tokio::select! {
            () = tokio::time::sleep_until(tick) => false,
            () = &mut done => true,
        };
        samples.push(sample().await);
        if finished {
            return samples;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"# HELP budget_floor_seconds The floor in force for each dependency.
# TYPE budget_floor_seconds gauge
budget_floor_seconds{dependency="inventory"} 0.0305
budget_floor_seconds{service="checkout",dependency="pricing"} 0.551
budget_floor_seconds{dependency="recommendations",service="checkout"} 1 1712345678000
budget_floor_seconds{dependency="checkout"} 1.9
# TYPE budget_concurrency_limit gauge
budget_concurrency_limit{dependency="pricing"} 17
budget_concurrency_limit { dependency = "inventory" , zone="a\"b,c}" } 9
budget_retries_total{dependency="pricing"} 42
budget_remaining_at_call_ms_bucket{dependency="pricing",le="100"} 7
budget_floor_seconds_other{dependency="pricing"} 5
budget_floor_seconds{dependency="nan"} NaN
budget_floor_seconds{dependency="inf"} +Inf
budget_floor_seconds{dependency="garbage"} twelve
budget_floor_seconds{dependency="unterminated} 1
budget_floor_seconds{dependency="no-value"}
budget_floor_seconds{other="x"} 3
budget_floor_seconds 4
budget_concurrency_limit{dependency="broken" 5
{dependency="pricing"} 1
"#;

    #[test]
    fn the_two_gauges_are_read_by_dependency_and_everything_else_is_skipped() {
        let g = parse_gauges(SAMPLE);
        assert_eq!(
            g.floor_seconds,
            BTreeMap::from([
                ("checkout".to_owned(), 1.9),
                ("inventory".to_owned(), 0.0305),
                ("pricing".to_owned(), 0.551),
                ("recommendations".to_owned(), 1.0),
            ])
        );
        assert_eq!(
            g.concurrency_limit,
            BTreeMap::from([("inventory".to_owned(), 9.0), ("pricing".to_owned(), 17.0)])
        );
    }

    #[test]
    fn nothing_to_read_is_an_empty_scrape_not_a_panic() {
        assert_eq!(parse_gauges(""), Gauges::default());
        assert_eq!(parse_gauges("\u{0}{{{\n}}=\"\n\\\n"), Gauges::default());
        for cut in 0..SAMPLE.len() {
            if SAMPLE.is_char_boundary(cut) {
                let _ = parse_gauges(&SAMPLE[..cut]);
            }
        }
        // A label value's escapes.
        let g = parse_gauges("budget_floor_seconds{dependency=\"a\\\\b\\\"c\\nd\"} 2\n");
        assert_eq!(g.floor_seconds["a\\b\"c\nd"], 2.0);
    }

    #[tokio::test(start_paused = true)]
    async fn one_sample_at_the_end_of_each_second_then_one_when_the_run_ends() {
        let start = Instant::now();
        let samples = each_second(
            start,
            tokio::time::sleep(Duration::from_millis(3500)),
            || async move { start.elapsed() },
        )
        .await;
        // Ticks at 1, 2 and 3 s, and the end at 3.5 s.
        assert_eq!(samples, [1000, 2000, 3000, 3500].map(Duration::from_millis));
        // A slow sample does not shift the ticks: the next one is still due
        // at the next whole second.
        let start = Instant::now();
        let samples = each_second(
            start,
            tokio::time::sleep(Duration::from_millis(2100)),
            || async move {
                let at = start.elapsed();
                tokio::time::sleep(Duration::from_millis(600)).await;
                at
            },
        )
        .await;
        assert_eq!(samples, [1000, 2000, 2600].map(Duration::from_millis));
    }
}
