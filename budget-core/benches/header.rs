//! The header codec's hot paths: decoding at ingress, encoding on every
//! outbound attempt. Goal: at most 50 ns each (see BENCHMARKS.md).

use std::hint::black_box;
use std::time::Duration;

use budget_core::header::{self, INBOUND};
use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue};

/// Headers a browser or HTTP client typically sends besides the budget.
const ORDINARY: [(&str, &str); 10] = [
    ("host", "checkout.internal:8080"),
    ("user-agent", "Mozilla/5.0 (X11; Linux x86_64)"),
    ("accept", "application/json"),
    ("accept-encoding", "gzip, br"),
    ("accept-language", "en-GB,en;q=0.9"),
    ("content-type", "application/json"),
    ("content-length", "512"),
    ("x-request-id", "3f1c9a6e-8d2b-4c55-9e0a-7b6f2d41c8e3"),
    (
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ),
    ("authorization", "Bearer y235.wef315yfh138vh31hv93hv8h3v"),
];

fn decode(c: &mut Criterion) {
    let mut one = HeaderMap::new();
    one.insert(header::REQUEST_BUDGET_MS, HeaderValue::from_static("1500"));

    let mut all_six = HeaderMap::new();
    for (name, value) in INBOUND
        .iter()
        .zip(["1500", "900m", "2000", "1800", "1700", "1600"])
    {
        all_six.insert(name.clone(), HeaderValue::from_static(value));
    }

    let mut realistic = HeaderMap::new();
    for (name, value) in ORDINARY {
        realistic.insert(name, HeaderValue::from_static(value));
    }
    realistic.insert(header::REQUEST_BUDGET_MS, HeaderValue::from_static("1500"));

    let mut group = c.benchmark_group("decode");
    group.bench_function("one header", |b| b.iter(|| header::decode(black_box(&one))));
    group.bench_function("all six present", |b| {
        b.iter(|| header::decode(black_box(&all_six)))
    });
    group.bench_function("one among 10 ordinary headers", |b| {
        b.iter(|| header::decode(black_box(&realistic)))
    });
    group.finish();
}

fn encode(c: &mut Criterion) {
    let d = Duration::from_micros(1_499_999);
    c.bench_function("encode_ms", |b| b.iter(|| header::encode_ms(black_box(d))));
    c.bench_function("encode_grpc_timeout", |b| {
        b.iter(|| header::encode_grpc_timeout(black_box(d)))
    });
}

criterion_group!(benches, decode, encode);
criterion_main!(benches);
