//! The whole-listener fault modes of docs/contract.md §5, seen by a real
//! reqwest client on loopback: each mode produces its own kind of failure,
//! and switching modes (through the handle, the admin listener or the main
//! port) rebinds the same port and leaves nothing behind.

mod common;

use std::time::Duration;

use common::{bounded, client, config, partner, stats_until};
use reqwest::StatusCode;
use slow_partner::{FaultMode, PartnerHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// "Quickly": far below any timeout in these tests, far above scheduling
/// noise.
const QUICK: Duration = Duration::from_secs(2);

async fn get_ok(partner: &PartnerHandle) {
    let response = client().get(partner.url("/p")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

async fn admin_switch(partner: &PartnerHandle, mode: &str) -> serde_json::Value {
    let response = client()
        .put(
            partner
                .admin_url(&format!("/admin/mode?mode={mode}"))
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

#[tokio::test]
async fn refuse_makes_connects_fail_at_once() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Refuse))
            .await
            .unwrap();
        assert_eq!(partner.mode(), FaultMode::Refuse);
        assert_ne!(
            partner.addr().port(),
            0,
            "the port is known even when refusing"
        );
        let start = Instant::now();
        let err = client().get(partner.url("/p")).send().await.unwrap_err();
        assert!(err.is_connect(), "{err:?}");
        assert!(start.elapsed() < QUICK);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn blackhole_makes_connects_time_out() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Blackhole))
            .await
            .unwrap();
        let client = reqwest::Client::builder()
            .tls_backend_rustls()
            .connect_timeout(Duration::from_millis(300))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let start = Instant::now();
        let err = client.get(partner.url("/p")).send().await.unwrap_err();
        let took = start.elapsed();
        assert!(err.is_connect() || err.is_timeout(), "{err:?}");
        assert!(
            err.is_timeout(),
            "a connect *timeout*, not a refusal: {err:?}"
        );
        assert!(took >= Duration::from_millis(250), "{took:?}");
        assert!(
            took < Duration::from_secs(5),
            "the connect timeout fired: {took:?}"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn hang_connects_then_never_answers() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Hang))
            .await
            .unwrap();
        let client = reqwest::Client::builder()
            .tls_backend_rustls()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let start = Instant::now();
        let err = client.get(partner.url("/p")).send().await.unwrap_err();
        assert!(err.is_timeout(), "{err:?}");
        assert!(!err.is_connect(), "the connect succeeded: {err:?}");
        assert!(start.elapsed() >= Duration::from_millis(250));

        // The same with a raw socket: the handshake completes, nothing comes back.
        let mut raw = TcpStream::connect(partner.addr()).await.unwrap();
        raw.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_millis(200), raw.read(&mut buf)).await;
        assert!(read.is_err(), "no answer: {read:?}");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn reset_fails_at_once_and_not_as_a_timeout() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Reset))
            .await
            .unwrap();
        let start = Instant::now();
        let err = client().get(partner.url("/p")).send().await.unwrap_err();
        assert!(!err.is_timeout(), "{err:?}");
        assert!(start.elapsed() < QUICK);

        let mut raw = TcpStream::connect(partner.addr()).await.unwrap();
        raw.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(QUICK, raw.read(&mut buf))
            .await
            .unwrap();
        let err = read.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err:?}");
        partner.shutdown().await;
    })
    .await;
}

/// Refusing is not letting go of the port: it stays bound (not listened
/// on), so that no other socket is given it (a server of another test that
/// binds port 0 could otherwise get it and answer in the partner's place).
/// A socket that asks for the port is told it is in use; after the switch
/// back to normal the partner serves on it again.
#[tokio::test]
async fn refuse_holds_the_port_so_no_other_socket_is_given_it() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Refuse))
            .await
            .unwrap();
        let other = tokio::net::TcpSocket::new_v4().unwrap();
        other.set_reuseaddr(false).unwrap();
        let err = other.bind(partner.addr()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err:?}");
        let err = client().get(partner.url("/p")).send().await.unwrap_err();
        assert!(err.is_connect(), "{err:?}");

        partner.set_mode(FaultMode::Normal).await.unwrap();
        get_ok(&partner).await;
        // And again after a switch from normal.
        partner.set_mode(FaultMode::Refuse).await.unwrap();
        let other = tokio::net::TcpSocket::new_v4().unwrap();
        other.set_reuseaddr(false).unwrap();
        assert!(other.bind(partner.addr()).is_err());
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn refuse_then_normal_through_the_admin_listener_serves_again() {
    bounded(async {
        let partner = partner().await;
        get_ok(&partner).await;

        let switched = admin_switch(&partner, "refuse").await;
        assert_eq!(
            switched,
            serde_json::json!({"mode": "refuse", "previous": "normal"})
        );
        let err = client().get(partner.url("/p")).send().await.unwrap_err();
        assert!(err.is_connect(), "{err:?}");

        let mode: serde_json::Value = client()
            .get(partner.admin_url("/admin/mode").unwrap())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(mode["mode"], "refuse");

        admin_switch(&partner, "normal").await;
        get_ok(&partner).await;
        assert_eq!(partner.mode(), FaultMode::Normal);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_admin_endpoint_on_the_main_port_switches_the_main_port() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .post(partner.url("/admin/mode"))
            .body("mode=reset")
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "the switching request is answered"
        );
        assert_eq!(partner.mode(), FaultMode::Reset);
        let err = client().get(partner.url("/p")).send().await.unwrap_err();
        assert!(!err.is_timeout(), "{err:?}");

        // Back through the admin listener, with a JSON body.
        let response = client()
            .put(partner.admin_url("/admin/mode").unwrap())
            .body(r#"{"mode":"normal"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        get_ok(&partner).await;
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_unknown_mode_is_a_400_naming_mode() {
    bounded(async {
        let partner = partner().await;
        let response = client()
            .put(partner.admin_url("/admin/mode?mode=sleep").unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let problem: serde_json::Value = response.json().await.unwrap();
        assert_eq!(problem["parameter"], "mode");
        assert_eq!(partner.mode(), FaultMode::Normal, "nothing changed");
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn every_switch_rebinds_the_same_port() {
    bounded(async {
        let partner = partner().await;
        let addr = partner.addr();
        for mode in [
            FaultMode::Blackhole,
            FaultMode::Normal,
            FaultMode::Hang,
            FaultMode::Reset,
            FaultMode::Refuse,
            FaultMode::Blackhole,
            FaultMode::Hang,
            FaultMode::Refuse,
            FaultMode::Normal,
        ] {
            let previous = partner.mode();
            assert_eq!(partner.set_mode(mode).await.unwrap(), previous);
            assert_eq!(partner.mode(), mode);
            assert_eq!(partner.addr(), addr);
        }
        get_ok(&partner).await;
        assert_eq!(
            partner.set_mode(FaultMode::Normal).await.unwrap(),
            FaultMode::Normal,
            "a no-op"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn leaving_hang_closes_the_held_connections() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Hang))
            .await
            .unwrap();
        let mut held = TcpStream::connect(partner.addr()).await.unwrap();
        held.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;

        partner.set_mode(FaultMode::Normal).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(QUICK, held.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "closed, not held: {read:?}"
        );
        get_ok(&partner).await;
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn leaving_normal_closes_kept_alive_connections_too() {
    bounded(async {
        let partner = partner().await;
        let client = client();
        let response = client.get(partner.url("/p")).send().await.unwrap();
        response.bytes().await.unwrap(); // the connection goes back to the pool

        partner.set_mode(FaultMode::Refuse).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Refused, or (had the client not yet seen the close) an incomplete
        // message on the stale connection; never an answer.
        let result = client.get(partner.url("/p")).send().await;
        assert!(
            result.is_err(),
            "not served on a pooled connection: {result:?}"
        );
        assert_eq!(partner.stats().requests, 1);
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_request_in_flight_finishes_when_the_mode_switches() {
    bounded(async {
        let partner = partner().await;
        let url = partner.url("/p?delay=200ms");
        let in_flight = tokio::spawn(async move { client().get(url).send().await });
        // The handler has the request (not just the kernel's accept queue).
        let stats = stats_until(&partner, |s| s.requests == 1).await;
        assert_eq!(stats.requests, 1);
        partner.set_mode(FaultMode::Refuse).await.unwrap();
        let response = in_flight.await.unwrap().unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "served within the shutdown grace"
        );
        partner.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn shutdown_returns_promptly_and_closes_the_port() {
    bounded(async {
        let partner = slow_partner::spawn(config().with_mode(FaultMode::Hang))
            .await
            .unwrap();
        let addr = partner.addr();
        let _held = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let start = Instant::now();
        partner.shutdown().await;
        assert!(start.elapsed() < QUICK, "{:?}", start.elapsed());
        let err = TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    })
    .await;
}

#[tokio::test]
async fn shutdown_closes_the_admin_listener_too() {
    bounded(async {
        let partner = partner().await;
        let admin = partner.admin_url("/admin/mode?mode=hang").unwrap();
        partner.shutdown().await;
        let err = client().put(admin).send().await.unwrap_err();
        assert!(err.is_connect(), "the admin listener is gone too: {err:?}");
    })
    .await;
}

#[tokio::test]
async fn a_taken_port_is_a_bind_error_not_a_panic() {
    bounded(async {
        let first = partner().await;
        let err = slow_partner::spawn(slow_partner::PartnerConfig::new(first.addr()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, slow_partner::PartnerError::Bind { .. }),
            "{err:?}"
        );
        assert!(
            slow_partner::error_chain(&err)
                .starts_with(&format!("cannot listen on {}", first.addr()))
        );
        first.shutdown().await;
    })
    .await;
}
