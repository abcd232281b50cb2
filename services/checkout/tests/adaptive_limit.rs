//! The adaptive limit, in the style of Envoy's adaptive concurrency tests:
//! against a real partner with a fixed number of workers (the slow
//! partner's `--workers`), a real client with `concurrency = "auto"`
//! converges near that number from latency alone, and keeps the queue on
//! its own side (where it is deadline-aware) instead of the partner's.

mod common;

use std::time::Duration;

use budget_core::Budget;
use budget_core::client::DependencyConfig;
use common::partner_with_workers;
use tokio::time::Instant;

const WORKERS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_limit_settles_near_the_partner_s_workers_from_latency_alone() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let partner = partner_with_workers(WORKERS).await;
        let mut config = DependencyConfig::new("work", partner.url("/work?delay=50ms"));
        config.concurrency = Some("auto".parse().unwrap());
        let client = config.build().unwrap();

        // 40 closed-loop callers for 8 s: ten times the partner's workers.
        let until = Instant::now() + Duration::from_secs(8);
        let callers: Vec<_> = (0..40)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    let (mut ok, mut refused) = (0u32, 0u32);
                    while Instant::now() < until {
                        let call = client.get("").budget(Budget::new(Duration::from_secs(2)));
                        match call.send().await {
                            Ok(res) if res.status() == 200 => ok += 1,
                            _ => {
                                // A refusal at arrival takes no time: a caller
                                // that came straight back would spin without
                                // letting the runtime's timers run.
                                refused += 1;
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                        }
                    }
                    (ok, refused)
                })
            })
            .collect();
        // The limit over the last 3 s, read every 50 ms.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let mut limits = Vec::new();
        while Instant::now() < until {
            limits.push(client.concurrency_limit().unwrap());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (mut ok, mut refused) = (0, 0);
        for caller in callers {
            let (o, r) = caller.await.unwrap();
            ok += o;
            refused += r;
        }
        let mean = limits.iter().sum::<usize>() as f64 / limits.len() as f64;
        let stats = partner.stats();
        let path = &stats.paths["/work"];
        partner.shutdown().await;
        println!(
            "limit mean {mean:.1} (min {}, max {}), partner queued_max {}, in_work_max {}, {ok} answers, {refused} refused",
            limits.iter().min().unwrap(),
            limits.iter().max().unwrap(),
            path.queued_max,
            path.in_work_max,
        );
        // Near the workers: `1.1 W + sqrt(1.1 W)` is 6.5 for 4 (it read
        // 12-13 when the first min-RTT came from calls sent together with
        // seven others, some of which the partner queued first).
        assert!(
            (WORKERS as f64..=2.0 * WORKERS as f64).contains(&mean),
            "the limit settles near the {WORKERS} workers: {mean:.1} ({limits:?})"
        );
        // 8 s of 4 workers at 50 ms is 640 answers at most; the probe and
        // the start-up cost some.
        assert!(ok >= 400, "the partner was kept busy: {ok} answers");
    })
    .await
    .expect("test took over 60 s");
}
