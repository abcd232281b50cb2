//! Wait when the wait fits, refuse at once when it does not
//! (docs/contract.md §2 rule 11), from outside: checkout with its default
//! configuration (adaptive limits, deadline-aware permit queues) in front
//! of a real slow partner with 8 workers per path and 50 ms on every path
//! (160 requests a second), and bursts of requests sent at once by real
//! reqwest clients on loopback.

mod common;

use std::time::Duration;

use budget_core::problem::Problem;
use common::*;
use slow_partner::PartnerHandle;
use tokio::time::Instant;

const WORKERS: usize = 8;

/// The partner (kept alive by the caller) and checkout's URL in front of
/// it, every path at 50 ms.
async fn chain() -> (PartnerHandle, String) {
    let partner = partner_with_workers(WORKERS).await;
    let delay = "?delay=50ms";
    let url = start(&config(&partner, delay, delay, delay)).await;
    (partner, url)
}

/// What one request of a burst came back with, and how long it took.
struct Answer {
    status: u16,
    took: Duration,
    detail: Option<String>,
}

/// `n` requests to `url` at once, each with `budget_ms`.
async fn burst(client: &reqwest::Client, url: &str, n: usize, budget_ms: u64) -> Vec<Answer> {
    let start = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let req = client
                .get(url)
                .header("request-budget-ms", budget_ms.to_string());
            tokio::spawn(async move {
                let res = req.send().await.unwrap();
                let status = res.status().as_u16();
                let took = start.elapsed();
                let detail = if status == 200 {
                    None
                } else {
                    res.json::<Problem>().await.ok().map(|p| p.detail)
                };
                Answer {
                    status,
                    took,
                    detail,
                }
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

/// A cold chain, 200 requests at once with 10 s each: the queue for
/// inventory stands about 1.3 s without emptying, and every request is
/// answered `200` (the queue of the previous release refused all but a
/// handful after 100 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_the_budgets_cover_is_answered_in_full() {
    bounded(async {
        let (_partner, url) = chain().await;
        let answers = burst(&client(), &url, 200, 10_000).await;
        let refused: Vec<_> = answers.iter().filter(|a| a.status != 200).collect();
        assert!(
            refused.is_empty(),
            "{} refused, the first: {} {:?}",
            refused.len(),
            refused[0].status,
            refused[0].detail
        );
        let slowest = answers.iter().map(|a| a.took).max().unwrap();
        assert!(slowest < Duration::from_secs(10), "{slowest:?}");
    })
    .await;
}

/// A warm chain (the queues have measured how long a call holds its
/// permit), 200 requests at once with 600 ms each: the chain answers
/// about 160 a second, so some are answered and the rest are refused at
/// arrival with the prediction in the problem, long before their deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_the_budgets_cover_in_part_is_refused_fast_with_the_prediction() {
    bounded(async {
        let (_partner, url) = chain().await;
        let client = client();
        for _ in 0..3 {
            let warm = burst(&client, &url, 16, 10_000).await;
            assert!(warm.iter().all(|a| a.status == 200));
        }
        let answers = burst(&client, &url, 200, 600).await;
        let served = answers.iter().filter(|a| a.status == 200).count();
        let mut refused: Vec<_> = answers.iter().filter(|a| a.status != 200).collect();
        assert!(served >= 20, "{served} served");
        assert!(refused.len() >= 50, "{} refused", refused.len());
        for answer in &refused {
            assert_eq!(answer.status, 504);
        }
        let predicted = refused
            .iter()
            .filter(|a| {
                a.detail
                    .as_deref()
                    .is_some_and(|d| d.contains("expected wait"))
            })
            .count();
        assert!(
            predicted * 2 >= refused.len(),
            "{predicted} of {} refused on a prediction: {:?}",
            refused.len(),
            refused[0].detail
        );
        refused.sort_by_key(|a| a.took);
        let p50 = refused[refused.len() / 2].took;
        assert!(
            p50 < ms(300),
            "refusals' p50 {p50:?}, their deadline 600 ms"
        );
    })
    .await;
}
