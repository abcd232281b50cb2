//! A per-path hang switched at run time (`PartnerHandle::set_path_hang`):
//! every request to the path is held without an answer until its caller
//! goes away, the other paths answer as usual, and the calls held at once
//! are counted. A real partner on 127.0.0.1:0 and real reqwest clients.

mod common;

use std::time::Duration;

use common::{bounded, client, config, stats_until};
use reqwest::StatusCode;

#[tokio::test]
async fn a_hanging_path_holds_its_calls_until_the_caller_leaves_and_counts_them() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_workers(Some(1)))
            .await
            .unwrap();
        partner.set_path_hang("/inventory", true).unwrap();
        let short = reqwest::Client::builder()
            .tls_backend_rustls()
            .timeout(Duration::from_millis(400))
            .build()
            .unwrap();
        // Three callers that give up after 400 ms, at once.
        let calls: Vec<_> = (0..3)
            .map(|_| {
                let req = short
                    .get(partner.url("/inventory"))
                    .header("request-budget-ms", "300");
                tokio::spawn(req.send())
            })
            .collect();
        let held = stats_until(&partner, |s| {
            s.hung.get("/inventory").is_some_and(|p| p.in_flight == 3)
        })
        .await;
        assert_eq!(held.hung["/inventory"].in_flight_max, 3, "{held:?}");
        // The other paths answer meanwhile, and a hung call takes no worker.
        let res = client().get(partner.url("/pricing")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(!held.paths.contains_key("/inventory") || held.paths["/inventory"].in_work == 0);
        for c in calls {
            let err = c.await.unwrap().unwrap_err();
            assert!(err.is_timeout(), "no answer ever came: {err}");
        }
        // The callers went away: nothing held, each call abandoned and late
        // (its budget ran out, its work never ended), none answered.
        let after = stats_until(&partner, |s| {
            s.hung.get("/inventory").is_some_and(|p| p.in_flight == 0)
        })
        .await;
        let p = after.hung["/inventory"];
        assert_eq!(
            (p.hanging, p.in_flight, p.in_flight_max, p.calls),
            (true, 0, 3, 3)
        );
        assert_eq!((after.requests, after.abandoned, after.late), (4, 3, 3));
        assert_eq!(after.answered(200), 1, "only /pricing answered");
        assert_eq!(partner.hung("/inventory"), Some(p));

        // The hang ends: the path answers again, and is no more held.
        partner.set_path_hang("/inventory", false).unwrap();
        let res = client()
            .get(partner.url("/inventory"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let p = partner.hung("/inventory").unwrap();
        assert_eq!((p.hanging, p.calls), (false, 3));
        partner.reset_stats();
        assert_eq!(partner.hung("/inventory"), None, "forgotten at the reset");
        assert!(partner.stats().hung.is_empty());
        assert!(partner.set_path_hang("/stats", true).is_err());
        partner.shutdown().await;
    })
    .await;
}
