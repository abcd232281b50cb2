//! The stale fallback (`on_unavailable = "stale"`) over real sockets on
//! 127.0.0.1: a scripted partner answers well, then fails, hangs or is not
//! called, and a real reqwest client through `BudgetClient` gets the last
//! good answer, flagged with its age and noted in the ledger, or the
//! original outcome when no answer may stand in. Real clock, generous
//! bounds; the age and eviction rules are pinned with a paused clock in the
//! module's unit tests. Every test runs under an outer timeout.

mod stale_common;
mod support;

use std::future::Future;
use std::time::Duration;

use budget_core::breaker::BreakerConfig;
use budget_core::client::CallErrorKind;
use budget_core::ledger::{Entry, Ledger};
use budget_core::{Budget, floor::Floor};
use http::StatusCode;
use stale_common::{GOOD, stale_dep};
use support::{Answer, Partner, ms, refused_addr};
use tokio::time::Instant;

/// Runs a test body under a 20 s outer timeout.
async fn bounded<F: Future<Output = ()>>(body: F) {
    support::bounded_by(20, body).await;
}

/// The age in the ledger's stale note (`stale 153ms`, `stale 2s`).
fn stale_note(ledger: &Ledger) -> Option<Duration> {
    ledger.entries().into_iter().find_map(|e| match e {
        Entry::Stale { age, .. } => Some(age),
        _ => None,
    })
}

#[tokio::test]
async fn a_partner_that_fails_after_a_good_answer_is_answered_stale_with_its_age() {
    bounded(async {
        let partner =
            Partner::start(vec![Answer::status(200).body(GOOD), Answer::status(503)]).await;
        let client = stale_dep(&partner.url("/stock?sku=7")).build().unwrap();
        let first = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!((first.status(), first.stale()), (StatusCode::OK, None));

        tokio::time::sleep(ms(100)).await;
        let ledger = Ledger::new();
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        let age = res.stale().expect("served stale");
        assert!(age >= ms(100) && age < ms(5000), "{age:?}");
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.text(), GOOD);
        assert_eq!(res.attempts(), 2, "both 503 attempts were made first");
        assert_eq!(partner.hits(), 3);
        // The attempts, the wait, then the note, with the same age.
        let timing = ledger.server_timing();
        let note = Entry::stale("inventory", age).to_string();
        assert!(
            timing.starts_with("inventory;dur=") && timing.ends_with(&note),
            "{timing}"
        );
        assert!(
            timing.contains("desc=\"503\", inventory-wait;dur="),
            "{timing}"
        );
        assert_eq!(stale_note(&ledger), Some(age));
    })
    .await;
}

#[tokio::test]
async fn a_partner_that_hangs_is_answered_stale_at_the_budget() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(200).body(GOOD),
            Answer::status(200).after(Duration::from_secs(30)),
        ])
        .await;
        let client = stale_dep(&partner.url("/stock")).build().unwrap();
        client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        let start = Instant::now();
        let res = client
            .get("")
            .budget(Budget::new(ms(400)))
            .send()
            .await
            .unwrap();
        let elapsed = start.elapsed();
        assert!(res.stale().is_some());
        assert_eq!(res.text(), GOOD);
        assert!(
            elapsed >= ms(350) && elapsed < ms(2000),
            "at the budget: {elapsed:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn an_answer_older_than_max_stale_gives_the_original_outcome() {
    bounded(async {
        let partner =
            Partner::start(vec![Answer::status(200).body(GOOD), Answer::status(503)]).await;
        let mut config = stale_dep(&partner.url("/stock"));
        config.max_stale = ms(150);
        let client = config.build().unwrap();
        client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        tokio::time::sleep(ms(300)).await;
        let ledger = Ledger::new();
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(
            (res.status(), res.stale()),
            (StatusCode::SERVICE_UNAVAILABLE, None)
        );
        assert_eq!(stale_note(&ledger), None);
    })
    .await;
}

#[tokio::test]
async fn a_call_refused_below_its_floor_is_answered_stale_without_any_io() {
    bounded(async {
        let partner = Partner::start(vec![Answer::status(200).body(GOOD)]).await;
        let mut config = stale_dep(&partner.url("/stock"));
        config.floor = Floor::new(ms(300)).into();
        let client = config.build().unwrap();
        client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        let ledger = Ledger::new();
        let res = client
            .get("")
            .budget(Budget::new(ms(100)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        assert!(res.stale().is_some());
        assert_eq!(res.attempts(), 0, "the call was not made");
        assert_eq!(partner.hits(), 1);
        let entries = ledger.entries();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(
            matches!(&entries[0], Entry::Skip { reason, .. } if reason.ends_with("< floor 300ms")),
            "{entries:?}"
        );
        assert!(matches!(&entries[1], Entry::Stale { .. }));
    })
    .await;
}

#[tokio::test]
async fn an_open_circuit_and_a_refused_connection_are_answered_stale() {
    bounded(async {
        let partner =
            Partner::start(vec![Answer::status(200).body(GOOD), Answer::status(500)]).await;
        let mut config = stale_dep(&partner.url("/stock"));
        config.retry.max_attempts = 1;
        let mut breaker = BreakerConfig::default();
        breaker.failure_threshold = 1;
        breaker.open_for = Duration::from_secs(30);
        config.breaker = Some(breaker);
        let client = config.build().unwrap();
        client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        // The 500 opens the circuit, and is answered stale itself.
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!(
            (res.status(), res.stale().is_some()),
            (StatusCode::OK, true)
        );
        let ledger = Ledger::new();
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .ledger(ledger.clone())
            .send()
            .await
            .unwrap();
        assert!(res.stale().is_some());
        assert_eq!(partner.hits(), 2, "nothing sent through the open circuit");
        assert!(
            ledger
                .server_timing()
                .starts_with("inventory;desc=\"skipped: circuit open\", inventory;desc=\"stale ")
        );

        // A partner that went away: connect refused on every attempt.
        let addr = refused_addr().await;
        let gone = stale_dep(&format!("http://{addr}/stock")).build().unwrap();
        let err = gone
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::Connect, "nothing kept yet");
    })
    .await;
}

#[tokio::test]
async fn a_non_2xx_is_never_kept_and_a_4xx_is_passed_as_it_is() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(404),
            Answer::status(503),
            Answer::status(200).body(GOOD),
            Answer::status(429),
        ])
        .await;
        let mut config = stale_dep(&partner.url("/stock"));
        config.retry.max_attempts = 1;
        let client = config.build().unwrap();
        let send = || client.get("").budget(Budget::new(ms(2000))).send();
        assert_eq!(send().await.unwrap().status(), StatusCode::NOT_FOUND);
        let res = send().await.unwrap();
        // Nothing good was kept to stand in for the 503.
        assert_eq!(
            (res.status(), res.stale()),
            (StatusCode::SERVICE_UNAVAILABLE, None)
        );
        assert_eq!(send().await.unwrap().stale(), None);
        // A 429 is the dependency's answer, even with a good one kept.
        let res = send().await.unwrap();
        assert_eq!(
            (res.status(), res.stale()),
            (StatusCode::TOO_MANY_REQUESTS, None)
        );
    })
    .await;
}

#[tokio::test]
async fn only_get_and_head_answers_are_kept_and_served() {
    bounded(async {
        let partner =
            Partner::start(vec![Answer::status(200).body(GOOD), Answer::status(503)]).await;
        let client = stale_dep(&partner.url("/orders")).build().unwrap();
        let post = || {
            client
                .post("")
                .header("idempotency-key", "k-1")
                .body("{}")
                .budget(Budget::new(ms(2000)))
                .send()
        };
        assert_eq!(post().await.unwrap().status(), StatusCode::OK);
        let res = post().await.unwrap();
        assert_eq!(
            (res.status(), res.stale()),
            (StatusCode::SERVICE_UNAVAILABLE, None)
        );
        // The POST's answer was not kept for the GET of the same URL either.
        let res = client
            .get("")
            .budget(Budget::new(ms(2000)))
            .send()
            .await
            .unwrap();
        assert_eq!(
            (res.status(), res.stale()),
            (StatusCode::SERVICE_UNAVAILABLE, None)
        );
    })
    .await;
}

#[tokio::test]
async fn the_bounds_evict_the_oldest_url_and_the_query_is_part_of_the_key() {
    bounded(async {
        let partner = Partner::start(vec![
            Answer::status(200).body("a"),
            Answer::status(200).body("b"),
            Answer::status(200).body("c"),
            Answer::status(503),
        ])
        .await;
        let mut config = stale_dep(&partner.url("/stock"));
        config.retry.max_attempts = 1;
        config.stale_cache.max_entries = 2;
        let client = config.build().unwrap();
        let get = |q: &str| client.get(q).budget(Budget::new(ms(2000))).send();
        for q in ["?sku=1", "?sku=2", "?sku=3"] {
            assert_eq!(get(q).await.unwrap().stale(), None);
        }
        let res = get("?sku=1").await.unwrap();
        assert_eq!(
            (res.status(), res.stale()),
            (StatusCode::SERVICE_UNAVAILABLE, None),
            "evicted"
        );
        assert_eq!(get("?sku=2").await.unwrap().text(), "b");
        assert_eq!(get("?sku=3").await.unwrap().text(), "c");
        assert_eq!(get("?sku=4").await.unwrap().stale(), None, "never kept");

        // By bytes: each answer here is under 100 bytes with its URL and
        // headers (`content-length`, `date`); 130 bytes hold one.
        let partner = Partner::start(vec![
            Answer::status(200).body("a"),
            Answer::status(200).body("b"),
            Answer::status(503),
        ])
        .await;
        let mut config = stale_dep(&partner.url("/stock"));
        config.retry.max_attempts = 1;
        config.stale_cache.max_bytes = 130;
        let client = config.build().unwrap();
        let get = |q: &str| client.get(q).budget(Budget::new(ms(2000))).send();
        get("?sku=1").await.unwrap();
        get("?sku=2").await.unwrap();
        assert_eq!(
            get("?sku=1").await.unwrap().stale(),
            None,
            "evicted by bytes"
        );
        assert_eq!(get("?sku=2").await.unwrap().text(), "b");
    })
    .await;
}

#[cfg(feature = "metrics")]
#[test]
fn a_stale_answer_counts_in_budget_stale_served_total() {
    use budget_core::telemetry::semconv::{LABEL_DEPENDENCY, METRIC_STALE_SERVED_TOTAL};

    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let series = |rendered: &str, dependency: &str| {
        let prefix = format!("{METRIC_STALE_SERVED_TOTAL}{{{LABEL_DEPENDENCY}=\"{dependency}\"}} ");
        rendered
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let (at_start, at_end) = metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let partner =
                Partner::start(vec![Answer::status(200).body(GOOD), Answer::status(503)]).await;
            let mut config = stale_dep(&partner.url("/stock"));
            config.name = "counted".into();
            let client = config.build().unwrap();
            let at_start = handle.render();
            for _ in 0..3 {
                client
                    .get("")
                    .budget(Budget::new(ms(2000)))
                    .send()
                    .await
                    .unwrap();
            }
            (at_start, handle.render())
        })
    });
    assert_eq!(
        series(&at_start, "counted"),
        Some(0.0),
        "registered at 0: {at_start}"
    );
    assert_eq!(series(&at_end, "counted"), Some(2.0), "{at_end}");
}
