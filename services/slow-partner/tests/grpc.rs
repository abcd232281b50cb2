//! The partner's gRPC face (`budget.partner.v1.Partner/Call`) on its main
//! port: a tonic client (generated from the same proto) and Python's grpcio
//! (hand-encoded protobuf, no generated code) see the same knobs as over
//! HTTP, the budget read from `grpc-timeout`, and an error status as its
//! gRPC status.

mod common;

use std::time::Duration;

use common::{bounded, partner};
use partner_grpc::CallRequest;
use partner_grpc::partner_client::PartnerClient;
use slow_partner::Answer;
use tokio::time::Instant;
use tonic::Code;

async fn client(addr: std::net::SocketAddr) -> PartnerClient<tonic::transport::Channel> {
    PartnerClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

fn request(path: &str, query: &str, timeout: Duration) -> tonic::Request<CallRequest> {
    let mut req = tonic::Request::new(CallRequest {
        path: path.into(),
        query: query.into(),
    });
    req.set_timeout(timeout);
    req
}

#[tokio::test]
async fn a_call_plays_the_knobs_and_reads_the_budget_from_grpc_timeout() {
    bounded(async {
        let partner = partner().await;
        let mut client = client(partner.addr()).await;
        let start = Instant::now();
        let reply = client
            .call(request("/inventory", "delay=150ms", Duration::from_secs(2)))
            .await
            .unwrap()
            .into_inner();
        assert!(start.elapsed() >= Duration::from_millis(150));
        let answer: Answer = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(answer.path, "/inventory");
        assert_eq!(answer.budget_header.as_deref(), Some("grpc-timeout"));
        assert!(
            answer.budget_ms.is_some_and(|ms| ms > 1900 && ms <= 2000),
            "{answer:?}"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_error_status_is_the_layer_s_grpc_status_with_the_pushback() {
    bounded(async {
        let partner = partner().await;
        let mut client = client(partner.addr()).await;
        let status = client
            .call(request(
                "/pricing",
                "status=503&retry_after=2",
                Duration::from_secs(2),
            ))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            status.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "2000"
        );
        let status = client
            .call(request("/pricing", "status=500", Duration::from_secs(2)))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Internal);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn grpcio_calls_the_partner_with_hand_encoded_protobuf() {
    bounded(async {
        let partner = partner().await;
        let script = format!(
            r#"
import grpc, json
def field(n, text):
    b = text.encode()
    return bytes([n << 3 | 2, len(b)]) + b
ch = grpc.insecure_channel("127.0.0.1:{port}")
call = ch.unary_unary("/budget.partner.v1.Partner/Call", request_serializer=lambda b: b, response_deserializer=lambda b: b)
reply = call(field(1, "/inventory") + field(2, "delay=5ms"), timeout=1.0)
assert reply[0] == 0x0a, reply[:4]
body = reply[2:] if reply[1] < 0x80 else reply[3:]
answer = json.loads(body)
assert answer["budget_header"] == "grpc-timeout" and answer["path"] == "/inventory", answer
try:
    call(field(1, "/inventory") + field(2, "delay=2s"), timeout=0.3)
    raise SystemExit("a 2 s call answered in 0.3 s")
except grpc.RpcError as e:
    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.code()
print("ok")
"#,
            port = partner.addr().port()
        );
        common::python(&script).await;
        partner.shutdown().await;
    })
    .await;
}
