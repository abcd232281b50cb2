//! Checkout in front of a pricing partner that stops answering (the slow
//! partner's `hang` mode: it accepts and never replies), called one
//! request at a time, two a second, with budgets of 1.9 to 2.1 s: the
//! breaker's silence rule (`budget_core::breaker`, "A dependency that stops
//! answering") with checkout's default breaker (20 failures or 3 silent
//! attempts, open for 1 s), over real sockets on loopback.

mod common;

use std::time::Duration;

use budget_core::problem::Problem;
use common::*;
use slow_partner::FaultMode;
use tokio::time::Instant;

/// What one request to checkout came back with.
struct Answer {
    status: u16,
    took: Duration,
    pricing_note: Option<String>,
}

/// Sends request `i` (budget 1.9 to 2.1 s), then waits out the rest of its
/// half second, so that requests go one at a time, at most two a second.
async fn send(client: &reqwest::Client, url: &str, i: u64) -> Answer {
    let budget = 1900 + (i * 73) % 201;
    let start = Instant::now();
    let res = client
        .get(url)
        .header("request-budget-ms", budget.to_string())
        .send()
        .await
        .unwrap();
    let took = start.elapsed();
    let status = res.status().as_u16();
    let pricing_note = server_timing(&res)
        .into_iter()
        .find(|m| m.name == "pricing")
        .and_then(|m| m.desc);
    if status == 503 {
        assert!(res.headers().contains_key("retry-after"), "a 503 says when");
        let problem: Problem = res.json().await.unwrap();
        assert_eq!(problem.type_uri, "urn:budget:problem:circuit-open");
    }
    tokio::time::sleep(ms(500).saturating_sub(took)).await;
    Answer {
        status,
        took,
        pricing_note,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pricing_that_stops_answering_is_refused_at_once_after_three_timeouts_and_called_again_when_back()
 {
    bounded(async {
        let others = partner(FaultMode::Normal).await;
        let pricing = partner(FaultMode::Normal).await;
        let mut config = config(&others, "", "", "");
        config.pricing_url = pricing.url("/pricing?delay=50ms");
        let url = start(&config).await;
        let client = client();
        let mut i = 0;
        let mut next = || {
            i += 1;
            i
        };

        // The breaker learns that pricing answers in about 50 ms.
        for _ in 0..3 {
            assert_eq!(send(&client, &url, next()).await.status, 200);
        }

        pricing.set_mode(FaultMode::Hang).await.unwrap();
        let hang = Instant::now();
        // Three calls wait out their budgets: pricing's attempt is a
        // timeout (or, on a loaded machine, checkout's own deadline comes
        // first and drops it unheard), checkout answers 504.
        for _ in 0..3 {
            let answer = send(&client, &url, next()).await;
            assert_eq!(answer.status, 504);
            assert!(answer.took >= ms(1800), "{:?}", answer.took);
            let note = answer.pricing_note.as_deref();
            assert!(matches!(note, Some("timeout") | None), "{note:?}");
        }
        // Then every call is refused at once, but for the one probe at a
        // time, which gets pricing's silence limit (4 x 50 ms or so, at
        // least 250 ms), not its budget.
        let mut failures: Vec<Duration> = Vec::new();
        let mut refused = 0;
        while hang.elapsed() < ms(8000) {
            let answer = send(&client, &url, next()).await;
            failures.push(answer.took);
            match answer.status {
                503 => {
                    refused += 1;
                    assert!(answer.took < ms(50), "refused at once: {:?}", answer.took);
                    let note = answer.pricing_note.unwrap();
                    assert!(
                        note.starts_with("skipped: circuit open (no answer for "),
                        "{note}"
                    );
                }
                504 => assert!(answer.took < ms(1000), "a probe: {:?}", answer.took),
                other => panic!("pricing still hangs: {other}"),
            }
        }
        failures.sort_unstable();
        let p50 = failures[failures.len() / 2];
        assert!(p50 <= ms(50), "p50 of the failures {p50:?}: {failures:?}");
        assert!(
            refused * 2 > failures.len(),
            "{refused} of {}",
            failures.len()
        );

        // Pricing answers again: a call succeeds within about 2 s.
        pricing.set_mode(FaultMode::Normal).await.unwrap();
        let back = Instant::now();
        loop {
            let answer = send(&client, &url, next()).await;
            if answer.status == 200 {
                break;
            }
            assert!(back.elapsed() < ms(2500), "not called again in time");
        }
        assert!(back.elapsed() <= ms(2500), "{:?}", back.elapsed());
    })
    .await;
}
