//! The harness against the real Envoy binary and a real loopback server.

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{self, Dependency, Hop};
use crate::{EnvoyError, Sidecar};

/// Every test here is bounded.
const LIMIT: Duration = Duration::from_secs(30);

/// A tiny axum server on loopback answering `ok <path>`.
async fn upstream() -> SocketAddr {
    let app = axum::Router::new()
        .fallback(|uri: axum::http::Uri| async move { format!("ok {}", uri.path()) });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// Whether process `pid` is still running (gone or a zombie is not).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

#[tokio::test]
async fn a_hop_answers_through_envoy_and_counts_the_request_and_shutdown_ends_it() {
    tokio::time::timeout(LIMIT, async {
        let envoy = Sidecar::start(&config::hop(&Hop::new([upstream().await])))
            .await
            .unwrap();
        let answer = http()
            .get(format!("http://{}/pricing?x=1", envoy.listener("hop")))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        assert!(
            answer
                .headers()
                .contains_key("x-envoy-upstream-service-time")
        );
        assert_eq!(answer.text().await.unwrap(), "ok /pricing");
        assert_eq!(
            envoy
                .counter("cluster.upstream.upstream_rq_total")
                .await
                .unwrap(),
            1
        );
        assert!(
            envoy
                .stats("cluster.upstream.upstream_rq_")
                .await
                .contains("upstream_rq_200: 1")
        );
        let pid = envoy.id().unwrap();
        envoy.shutdown().await;
        assert!(!running(pid), "envoy {pid} still running after shutdown");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn dropping_the_sidecar_kills_envoy() {
    tokio::time::timeout(LIMIT, async {
        let envoy = Sidecar::start(&config::hop(&Hop::new([upstream().await])))
            .await
            .unwrap();
        let pid = envoy.id().unwrap();
        assert!(running(pid));
        drop(envoy);
        for _ in 0..100 {
            if !running(pid) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("envoy {pid} still running 2 s after its Sidecar was dropped");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_config_envoy_refuses_is_an_error_with_its_log_not_a_hang() {
    let yaml = "static_resources:\n  listeners:\n  - name: broken\n    address: 7\n";
    let err = tokio::time::timeout(LIMIT, Sidecar::start(yaml))
        .await
        .unwrap()
        .unwrap_err();
    let EnvoyError::Exited { log_tail, .. } = &err else {
        panic!("expected Exited, got {err}");
    };
    assert!(log_tail.contains("address"), "{log_tail}");
}

#[tokio::test]
async fn the_sidecar_config_has_a_listener_per_dependency_and_balances_over_replicas() {
    tokio::time::timeout(LIMIT, async {
        let (a, b, c) = (upstream().await, upstream().await, upstream().await);
        let deps = [
            Dependency::new("inventory", [a, b]),
            Dependency::new("pricing", [c]),
            Dependency::new("recommendations", [c]),
        ];
        let envoy = Sidecar::start(&config::sidecar(&deps)).await.unwrap();
        for _ in 0..4 {
            let url = format!("http://{}/inventory", envoy.listener("inventory"));
            assert_eq!(
                http().get(url).send().await.unwrap().text().await.unwrap(),
                "ok /inventory"
            );
        }
        let url = format!("http://{}/pricing", envoy.listener("pricing"));
        assert_eq!(http().get(url).send().await.unwrap().status(), 200);
        assert_eq!(
            envoy
                .counter("cluster.inventory.upstream_rq_total")
                .await
                .unwrap(),
            4
        );
        assert_eq!(
            envoy
                .counter("cluster.pricing.upstream_rq_total")
                .await
                .unwrap(),
            1
        );
        assert_eq!(
            envoy
                .counter("cluster.inventory.membership_total")
                .await
                .unwrap(),
            2
        );
        assert!(envoy.try_listener("nope").is_err());
        envoy.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn every_template_passes_envoys_own_validation() {
    let at: SocketAddr = "127.0.0.1:9000".parse().unwrap();
    let deps =
        ["inventory", "pricing", "recommendations"].map(|name| Dependency::new(name, [at, at]));
    let configs = [
        config::sidecar(&deps),
        config::hop(&Hop::new([at])),
        config::hop(&Hop::new([at]).route_timeout(Duration::ZERO)),
        config::hop(
            &Hop::new([at])
                .http2()
                .route_timeout(Duration::from_millis(1500))
                .max_stream_duration(Duration::from_secs(2))
                .grpc_timeout_header_max(Duration::from_millis(800)),
        ),
    ];
    for yaml in configs {
        assert!(!yaml.contains("${"), "unrendered parameter in:\n{yaml}");
        let checked = tokio::time::timeout(LIMIT, config::validate(&yaml))
            .await
            .unwrap();
        assert!(checked.is_ok(), "{checked:?} for:\n{yaml}");
    }
    let refused = config::validate("admin: 7\n").await.unwrap_err();
    assert!(matches!(refused, EnvoyError::Invalid { .. }), "{refused}");
}

/// A tiny axum server on loopback answering with the request's version
/// and the timeout headers it got.
async fn header_echo() -> SocketAddr {
    let app = axum::Router::new().fallback(|req: axum::extract::Request| async move {
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        format!(
            "{:?} grpc-timeout={} expected={}",
            req.version(),
            header("grpc-timeout"),
            header("x-envoy-expected-rq-timeout-ms")
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test]
async fn a_grpc_hop_speaks_h2_upstream_and_caps_grpc_timeout_at_its_maximum() {
    tokio::time::timeout(LIMIT, async {
        let hop = Hop::new([header_echo().await])
            .http2()
            .route_timeout(Duration::ZERO)
            .grpc_timeout_header_max(Duration::from_millis(800));
        let envoy = Sidecar::start(&config::hop(&hop)).await.unwrap();
        let h2 = reqwest::Client::builder()
            .no_proxy()
            .http2_prior_knowledge()
            .build()
            .unwrap();
        let answer = h2
            .post(format!(
                "http://{}/budget.partner.v1.Partner/Call",
                envoy.listener("hop")
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-timeout", "5S")
            .send()
            .await
            .unwrap();
        let seen = answer.text().await.unwrap();
        // Envoy takes the smaller of the request's and its maximum and
        // rewrites `grpc-timeout` to it; for gRPC it sends no
        // `x-envoy-expected-rq-timeout-ms`.
        assert_eq!(seen, "HTTP/2.0 grpc-timeout=800m expected=-");
        envoy.shutdown().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn an_http_hop_tells_the_upstream_its_route_timeout() {
    tokio::time::timeout(LIMIT, async {
        let hop = Hop::new([header_echo().await]).route_timeout(Duration::from_millis(1500));
        let envoy = Sidecar::start(&config::hop(&hop)).await.unwrap();
        let url = format!("http://{}/pricing", envoy.listener("hop"));
        let seen = http().get(url).send().await.unwrap().text().await.unwrap();
        assert_eq!(seen, "HTTP/1.1 grpc-timeout=- expected=1500");
        envoy.shutdown().await;
    })
    .await
    .unwrap();
}
