//! The budget metrics through a real recorder: a service with the
//! budget layer and budget clients, partners on 127.0.0.1, and the counters
//! and histograms checked in the Prometheus rendering.

mod support;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use budget_core::breaker::BreakerConfig;
use budget_core::client::{BudgetClient, DependencyConfig};
use budget_core::floor::Floor;
use budget_core::retry::RetryBudgetConfig;
use budget_core::server::ServerConfig;
use budget_core::telemetry::semconv::*;
use http::{Request, StatusCode};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use support::{Answer, Partner, constant_retry, ms};
use tower::ServiceExt;

fn dependency(name: &str, url: String) -> DependencyConfig {
    let mut c = DependencyConfig::new(name, url);
    c.retry = constant_retry(2, ms(5));
    c
}

/// `GET /{name}` calls the client of that name and answers its status.
fn route(router: Router, name: &'static str, client: BudgetClient) -> Router {
    router.route(
        &format!("/{name}"),
        get(move || {
            let client = client.clone();
            async move {
                match client.get("").send().await {
                    Ok(res) => res.status(),
                    Err(e) => StatusCode::from_u16(e.problem().status).unwrap(),
                }
            }
        }),
    )
}

async fn get_with_budget(app: &Router, path: &str, budget: &str) -> StatusCode {
    let req = Request::get(path)
        .header("request-budget-ms", budget)
        .body(Body::empty())
        .unwrap();
    app.clone().oneshot(req).await.unwrap().status()
}

/// Runs `body` on a current-thread runtime with a Prometheus recorder of
/// its own installed (no global state shared between tests); `body` gets
/// the recorder's handle to render it.
fn with_recorder<T, F: std::future::Future<Output = T>>(
    body: impl FnOnce(PrometheusHandle) -> F,
) -> T {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || runtime.block_on(body(handle)))
}

/// The line of `rendered` that starts with `prefix`, with its value.
fn value(rendered: &str, prefix: &str) -> Option<f64> {
    rendered
        .lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn every_budget_counter_and_histogram_moves() {
    let (breaker_endpoint, rendered) = with_recorder(|handle| async move {
        let retried = Partner::start(vec![Answer::status(503), Answer::status(200)]).await;
        let failing = Partner::start(vec![Answer::status(503)]).await;
        let stormy = Partner::start(vec![Answer::status(503)]).await;

        let partner = dependency("partner", retried.url("/")).build().unwrap();
        let mut recs = dependency("recs", retried.url("/"));
        recs.floor = Floor::new(ms(5000)).into();
        let mut flaky = dependency("flaky", failing.url("/"));
        flaky.retry.max_attempts = 1;
        let mut breaker = BreakerConfig::default();
        breaker.failure_threshold = 1;
        flaky.breaker = Some(breaker);
        let mut storm = dependency("stormy", stormy.url("/"));
        let mut retry_budget = RetryBudgetConfig::default();
        retry_budget.min_per_sec = 0;
        retry_budget.ratio = 0.0;
        storm.retry_budget = Some(retry_budget);

        let mut app = Router::new();
        app = route(app, "partner", partner);
        app = route(app, "recs", recs.build().unwrap());
        app = route(app, "flaky", flaky.build().unwrap());
        app = route(app, "stormy", storm.build().unwrap());
        let app = app
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(ms(2000)).await;
                }),
            )
            .layer(server_config(ms(20)).layer().unwrap());

        assert_eq!(get_with_budget(&app, "/partner", "2000").await, 200);
        assert_eq!(get_with_budget(&app, "/recs", "1000").await, 504);
        assert_eq!(get_with_budget(&app, "/flaky", "1000").await, 503);
        assert_eq!(get_with_budget(&app, "/stormy", "1000").await, 503);
        assert_eq!(get_with_budget(&app, "/slow", "100").await, 504);
        assert_eq!(get_with_budget(&app, "/partner", "10").await, 504);
        assert_eq!(get_with_budget(&app, "/partner", "1.5").await, 400);
        (
            failing.url("").trim_end_matches('/').to_owned(),
            handle.render(),
        )
    });

    // Server side: one each of shed, expired, malformed; six budgets resolved.
    assert_eq!(value(&rendered, METRIC_SHED_TOTAL), Some(1.0), "{rendered}");
    assert_eq!(value(&rendered, METRIC_EXPIRED_TOTAL), Some(1.0));
    assert_eq!(value(&rendered, METRIC_MALFORMED_TOTAL), Some(1.0));
    assert_eq!(
        value(&rendered, &format!("{METRIC_INGRESS_SECONDS}_count")),
        Some(6.0)
    );
    let ingress = value(&rendered, &format!("{METRIC_INGRESS_SECONDS}_sum")).unwrap();
    assert!((ingress - 5.11).abs() < 1e-9, "{ingress}");

    // Client side, labelled by dependency.
    let dep = |metric: &str, dependency: &str| {
        value(
            &rendered,
            &format!("{metric}{{{LABEL_DEPENDENCY}=\"{dependency}\"}}"),
        )
    };
    assert_eq!(dep(METRIC_RETRIES_TOTAL, "partner"), Some(1.0));
    assert_eq!(dep(METRIC_BELOW_FLOOR_TOTAL, "recs"), Some(1.0));
    assert_eq!(dep(METRIC_RETRY_BUDGET_REFUSALS_TOTAL, "stormy"), Some(1.0));
    assert_eq!(
        dep(METRIC_RETRIES_TOTAL, "stormy"),
        Some(0.0),
        "registered at 0 when the client was built; the retry was refused"
    );
    assert_eq!(
        dep(
            &format!("{METRIC_REMAINING_AT_CALL_SECONDS}_count"),
            "partner"
        ),
        Some(2.0),
        "one sample per attempt"
    );
    let sent = dep(
        &format!("{METRIC_REMAINING_AT_CALL_SECONDS}_sum"),
        "partner",
    )
    .unwrap();
    assert!(sent > 3.8 && sent <= 4.0, "{sent}");
    let transition = format!(
        "{METRIC_BREAKER_TRANSITIONS_TOTAL}{{{LABEL_ENDPOINT}=\"{breaker_endpoint}\",{LABEL_FROM}=\"closed\",{LABEL_TO}=\"open\"}}"
    );
    assert_eq!(value(&rendered, &transition), Some(1.0), "{rendered}");
}

/// The floor gauge is set when a client is built, with no call
/// needed to read it (a learned one follows its recomputations: the
/// floor's own unit test).
#[test]
fn the_floor_gauge_is_set_when_a_client_is_built() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let gauge = |dep: &str| format!("{METRIC_FLOOR_SECONDS}{{{LABEL_DEPENDENCY}=\"{dep}\"}}");
    let rendered = metrics::with_local_recorder(&recorder, || {
        let mut fixed = DependencyConfig::new("fixed", "http://127.0.0.1:9/f");
        fixed.floor = Floor::new(ms(250)).into();
        let _fixed = fixed.build().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _learned = rt.block_on(async {
            let mut learned = DependencyConfig::new("learned", "http://127.0.0.1:9/l");
            learned.floor = budget_core::floor::FloorConfig::auto();
            learned.build().unwrap()
        });
        handle.render()
    });
    assert_eq!(value(&rendered, &gauge("fixed")), Some(0.25), "{rendered}");
    assert_eq!(
        value(&rendered, &gauge("learned")),
        Some(0.005),
        "cold start: min; {rendered}"
    );
}

#[test]
fn hedges_are_counted_by_result_from_zero() {
    let (before, after) = with_recorder(|handle| async move {
        let partner = Partner::start(vec![
            Answer::status(200).after(ms(2000)),
            Answer::status(200),
        ])
        .await;
        let mut config = dependency("pricing", partner.url("/"));
        let mut hedge = budget_core::client::HedgeConfig::after(ms(50));
        hedge.ratio = 1.0;
        config.hedge = Some(hedge);
        let client = config.build().unwrap();
        let before = handle.render();
        let res = client
            .get("")
            .budget(budget_core::Budget::new(ms(1500)))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        (before, handle.render())
    });
    let series = |result: &str| {
        format!(
            "{METRIC_HEDGES_TOTAL}{{{LABEL_DEPENDENCY}=\"pricing\",{LABEL_RESULT}=\"{result}\"}}"
        )
    };
    let declined = |reason: &str| {
        format!(
            "{METRIC_HEDGES_DECLINED_TOTAL}{{{LABEL_DEPENDENCY}=\"pricing\",{LABEL_REASON}=\"{reason}\"}}"
        )
    };
    assert_eq!(value(&before, &series("won")), Some(0.0), "{before}");
    for reason in ["hedge_budget", "cannot_win"] {
        assert_eq!(value(&before, &declined(reason)), Some(0.0), "{before}");
    }
    assert_eq!(value(&after, &series("won")), Some(1.0), "{after}");
    assert_eq!(value(&after, &series("lost")), Some(0.0), "{after}");
}

#[test]
fn a_dependency_with_replicas_counts_each_endpoint_and_its_load_and_one_endpoint_none() {
    let (urls, rendered) = with_recorder(|handle| async move {
        let a = Partner::start(vec![Answer::status(200).after(ms(2))]).await;
        let b = Partner::start(vec![Answer::status(200).after(ms(2))]).await;
        let urls = [format!("http://{}", a.addr), format!("http://{}", b.addr)];
        let mut replicas = dependency("replicated", a.url("/"));
        replicas.endpoints = urls.to_vec();
        let replicas = replicas.build().unwrap();
        let single = dependency("single", a.url("/")).build().unwrap();
        let mut app = Router::new();
        app = route(app, "replicated", replicas);
        app = route(app, "single", single);
        let app = app.layer(ServerConfig::default().layer().unwrap());
        for _ in 0..20 {
            assert_eq!(get_with_budget(&app, "/replicated", "2000").await, 200);
        }
        assert_eq!(get_with_budget(&app, "/single", "2000").await, 200);
        (urls, handle.render())
    });
    let series = |metric: &str, url: &str| {
        value(
            &rendered,
            &format!("{metric}{{{LABEL_DEPENDENCY}=\"replicated\",{LABEL_ENDPOINT}=\"{url}\"}}"),
        )
    };
    let counts: Vec<f64> = urls
        .iter()
        .map(|u| series(METRIC_ENDPOINT_REQUESTS_TOTAL, u).unwrap_or(0.0))
        .collect();
    assert_eq!(counts.iter().sum::<f64>(), 20.0, "{rendered}");
    for (url, count) in urls.iter().zip(&counts) {
        if *count > 0.0 {
            let load = series(METRIC_ENDPOINT_LOAD_SECONDS, url).unwrap();
            assert!(load > 0.0 && load < 1.0, "{url}: {load}");
        }
    }
    assert!(
        !rendered.contains("dependency=\"single\",endpoint="),
        "one endpoint, no per-endpoint series: {rendered}"
    );
}

/// The server layer's config with a `floor`.
fn server_config(floor: std::time::Duration) -> ServerConfig {
    let mut config = ServerConfig::default();
    config.floor = floor;
    config
}
