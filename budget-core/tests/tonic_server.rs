//! The budget layer on a tonic server (`Server::builder().layer(..)`), called
//! by a tonic client whose `Request::set_timeout` sends `grpc-timeout`: the
//! handler sees the budget, and what the layer refuses or cuts short comes
//! back to the client as a `tonic::Status` (gRPC, server side).

mod grpc_support;

use std::time::Duration;

use bytes::Bytes;
use grpc_support::{call, send, serve};
use tokio::time::Instant;
use tonic::Code;

#[tokio::test]
async fn the_handler_sees_the_callers_timeout_as_its_budget() {
    let addr = serve().await;
    let left: u128 = std::str::from_utf8(
        &call(addr, "/test.Echo/Echo", Duration::from_secs(2))
            .await
            .unwrap(),
    )
    .unwrap()
    .parse()
    .unwrap();
    assert!(left > 1500 && left <= 2000, "{left}");
}

#[tokio::test]
async fn below_the_floor_is_deadline_exceeded_from_the_server() {
    let addr = serve().await;
    let status = call(addr, "/test.Echo/Echo", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(
        status.message().contains("floor"),
        "the layer's message: {status:?}"
    );
    assert!(
        status.metadata().get("server-timing").is_some(),
        "the ledger travels"
    );
}

/// The server cuts a hanging handler at the deadline: sent as
/// `request-budget-ms` here, because with `grpc-timeout` the tonic client
/// gives up on its own at the same instant (and reports `Cancelled`,
/// "Timeout expired", not the server's status).
#[tokio::test]
async fn a_hanging_handler_is_cut_at_the_deadline() {
    let addr = serve().await;
    let start = Instant::now();
    let mut req = tonic::Request::new(Bytes::new());
    req.metadata_mut()
        .insert("request-budget-ms", "300".parse().unwrap());
    let status = send(addr, "/test.Echo/Hang", req).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        status.message().contains("ran out"),
        "the layer's message: {status:?}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(300 + 200),
        "{:?}",
        start.elapsed()
    );

    let start = Instant::now();
    let status = call(addr, "/test.Echo/Hang", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(300 + 200),
        "{:?}",
        start.elapsed()
    );
}
