//! The per-request knobs of docs/contract.md §5 on the wire: a real partner on
//! 127.0.0.1:0 and a real reqwest client. Timing bounds are generous: they
//! check "at least the asked delay", never an exact duration.

mod common;

use std::time::Duration;

use common::{bounded, client, partner};
use reqwest::StatusCode;
use slow_partner::{Answer, DRIP_CHUNKS};
use tokio::time::Instant;

#[tokio::test]
async fn delay_holds_the_response_head_at_least_that_long() {
    bounded(async {
        let partner = partner().await;
        let start = Instant::now();
        let response = client()
            .get(partner.url("/inventory?delay=200ms"))
            .send()
            .await
            .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert_eq!(response.status(), StatusCode::OK);
        let answer: Answer = response.json().await.unwrap();
        assert_eq!(answer.delay_ms, 200);
        assert_eq!(answer.path, "/inventory");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn jitter_adds_at_most_its_bound() {
    bounded(async {
        let partner = partner().await;
        for _ in 0..5 {
            let answer: Answer = client()
                .get(partner.url("/p?delay=10ms&jitter=40ms"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert!((10..=50).contains(&answer.delay_ms), "{}", answer.delay_ms);
        }
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_tail_slows_its_share_of_the_requests_and_only_those() {
    bounded(async {
        let partner = partner().await;
        let client = client();
        let calls = (0..200).map(|_| {
            let request = client.get(partner.url("/p?delay=1ms&tail=0.2@30ms"));
            async move {
                let answer: Answer = request.send().await.unwrap().json().await.unwrap();
                answer.delay_ms
            }
        });
        let delays = futures_util::future::join_all(calls).await;
        let slow = delays.iter().filter(|d| **d == 30).count();
        assert_eq!(
            slow + delays.iter().filter(|d| **d == 1).count(),
            200,
            "{delays:?}"
        );
        // 200 draws of 20 %: 40 expected, sd 5.7; outside 10..=80 is a bug.
        assert!((10..=80).contains(&slow), "{slow} of 200 in the tail");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn status_and_retry_after_are_echoed_with_a_json_body() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .get(partner.url("/pricing?status=503&retry_after=2"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "2");
        assert_eq!(response.headers()["content-type"], "application/json");
        let answer: Answer = response.json().await.unwrap();
        assert_eq!(answer.status, 503);

        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        let response = client()
            .get(
                partner
                    .url("/pricing?status=429&retry_after=Wed,%2021%20Oct%202015%2007:28:00%20GMT"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], date, "passed verbatim");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_no_content_status_answers_without_a_body() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .get(partner.url("/p?status=204"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        assert!(response.bytes().await.unwrap().is_empty());
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn script_serves_attempt_n_per_request_id_and_path_and_repeats_the_last() {
    bounded(async {
        let partner = partner().await;
        let client = client();
        let url = partner.url("/pricing?script=503@10ms,200@20ms");
        let get = |id: &'static str, url: String| {
            let client = client.clone();
            async move {
                let response = client
                    .get(url)
                    .header("x-request-id", id)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.headers()["x-request-id"], id, "the id is echoed");
                let status = response.status().as_u16();
                let answer: Answer = response.json().await.unwrap();
                assert_eq!(answer.status, status);
                assert_eq!(answer.request_id.as_deref(), Some(id));
                (status, answer.attempt, answer.delay_ms)
            }
        };
        assert_eq!(get("a", url.clone()).await, (503, 1, 10));
        assert_eq!(get("a", url.clone()).await, (200, 2, 20));
        assert_eq!(
            get("a", url.clone()).await,
            (200, 3, 20),
            "the last entry repeats"
        );
        assert_eq!(
            get("b", url.clone()).await,
            (503, 1, 10),
            "another id starts over"
        );
        let other_path = partner.url("/inventory?script=503@10ms,200@20ms");
        assert_eq!(
            get("a", other_path).await,
            (503, 1, 10),
            "another path starts over"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn without_a_request_id_every_request_is_attempt_one() {
    bounded(async {
        let partner = partner().await;
        for _ in 0..2 {
            let response = client()
                .get(partner.url("/p?script=503,200"))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        }
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn drip_sends_the_whole_body_of_body_bytes_slowly() {
    bounded(async {
        let partner = partner().await;
        let start = Instant::now();
        let response = client()
            .get(partner.url("/slow?drip=20ms&body_bytes=2000"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.bytes().await.unwrap();
        let pauses = u32::try_from(DRIP_CHUNKS - 1).unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(20) * pauses,
            "{:?}",
            start.elapsed()
        );
        assert_eq!(body.len(), 2000);
        let answer: Answer = serde_json::from_slice(&body).unwrap();
        assert_eq!(answer.path, "/slow");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn body_bytes_without_drip_pads_the_answer_to_that_size() {
    bounded(async {
        let partner = partner().await;
        for size in [300usize, 4096, 100_000] {
            let body = client()
                .get(partner.url(&format!("/p?body_bytes={size}")))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            assert_eq!(body.len(), size);
            let answer: Answer = serde_json::from_slice(&body).unwrap();
            assert!(answer.padding.bytes().all(|b| b == b'x'));
            assert!(
                answer.padding.len() > size - 200,
                "the padding makes up the size"
            );
        }
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_malformed_query_is_a_400_problem_naming_the_parameter() {
    bounded(async {
        let partner = partner().await;
        for (query, parameter) in [
            ("delay=abc", "delay"),
            ("status=99", "status"),
            ("script=5x3@", "script"),
            ("drip=1", "drip"),
            ("body_bytes=lots", "body_bytes"),
            ("status=200&status=503", "status"),
        ] {
            let response = client()
                .get(partner.url(&format!("/p?{query}")))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{query}");
            assert_eq!(
                response.headers()["content-type"],
                "application/problem+json"
            );
            let problem: serde_json::Value = response.json().await.unwrap();
            assert_eq!(problem["status"], 400);
            assert_eq!(problem["parameter"], parameter, "{query}");
            let detail = problem["detail"].as_str().unwrap();
            assert!(detail.contains(&format!("`{parameter}`")), "{detail}");
        }
        let stats = partner.stats();
        assert_eq!(
            stats.answered(400),
            6,
            "bad requests are counted, not dropped"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn unknown_query_parameters_are_left_to_the_caller() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .get(partner.url("/pricing?sku=42&status=202"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn any_method_does_the_work() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .post(partner.url("/orders?status=201"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        partner.shutdown().await;
    })
    .await;
}
