//! `GrpcBudgetLayer` on a real tonic channel to a real tonic server (the
//! budget layer in front of the echo of `grpc_support`): the budget of the
//! request the call is made in travels as `grpc-timeout`, a call that
//! cannot fit is not made, one that runs out is `DEADLINE_EXCEEDED` (not
//! tonic's `Cancelled`), every attempt is in the ledger, and an idempotent
//! call is retried on `UNAVAILABLE` after the server's pushback (gRPC,
//! client side).

mod grpc_support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use budget_core::Budget;
use budget_core::context::RequestContext;
use budget_core::grpc::GrpcBudgetLayer;
use budget_core::ledger::{Entry, Ledger};
use bytes::Bytes;
use grpc_support::{Echo, Raw, attempts, serve_echo, serve_relay};
use tokio::time::Instant;
use tonic::Code;
use tower::ServiceBuilder;

/// One unary call of `method` through `layer`, made inside a request with
/// `budget` (reserve 20 ms); the answer and the request's ledger.
async fn call_in_budget(
    addr: std::net::SocketAddr,
    layer: GrpcBudgetLayer,
    method: &'static str,
    budget: Duration,
) -> (Result<Bytes, tonic::Status>, Ledger) {
    let channel = grpc_support::channel(addr).await;
    let channel = ServiceBuilder::new().layer(layer).service(channel);
    let cx = RequestContext::new(Budget::new(budget)).with_reserve(Duration::from_millis(20));
    let (answer, ledger) = unary_in(cx, channel, method, b"").await;
    (answer.map(tonic::Response::into_inner), ledger)
}

/// One unary call of `method` with `message` through `channel`, inside the
/// request `cx`: the answer (its extensions kept) and the request's ledger.
async fn unary_in(
    cx: RequestContext,
    channel: budget_core::grpc::GrpcBudgetService<tonic::transport::Channel>,
    method: &'static str,
    message: &'static [u8],
) -> (Result<tonic::Response<Bytes>, tonic::Status>, Ledger) {
    let ledger = cx.ledger().clone();
    let answer = cx
        .scope(async move {
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready().await.unwrap();
            let path = http::uri::PathAndQuery::from_static(method);
            grpc.unary(tonic::Request::new(Bytes::from_static(message)), path, Raw)
                .await
        })
        .await;
    (answer, ledger)
}

#[tokio::test]
async fn the_request_s_budget_less_the_reserve_is_the_callee_s() {
    let addr = serve_echo(Echo::default()).await;
    let (answer, ledger) = call_in_budget(
        addr,
        GrpcBudgetLayer::new("echo"),
        "/test.Echo/Echo",
        Duration::from_millis(800),
    )
    .await;
    let seen: u128 = std::str::from_utf8(&answer.unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!(seen <= 780 && seen > 500, "the callee's budget: {seen} ms");
    assert_eq!(attempts(&ledger), ["200"]);
}

#[tokio::test]
async fn a_call_below_the_floor_is_not_made() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let layer = GrpcBudgetLayer::new("echo").floor(Duration::from_millis(200));
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Echo", Duration::from_millis(150)).await;
    let status = answer.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(status.message().contains("not made"), "{status:?}");
    assert_eq!(echo.calls.load(Ordering::SeqCst), 0, "no I/O");
    assert!(
        matches!(&ledger.entries()[..], [Entry::Skip { reason, .. }] if reason.contains("< floor 200ms"))
    );
}

#[tokio::test]
async fn a_call_that_runs_out_is_deadline_exceeded_within_the_budget() {
    let addr = serve_echo(Echo::default()).await;
    let start = Instant::now();
    let (answer, ledger) = call_in_budget(
        addr,
        GrpcBudgetLayer::new("echo"),
        "/test.Echo/Hang",
        Duration::from_millis(300),
    )
    .await;
    let status = answer.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        start.elapsed() < Duration::from_millis(300 + 100),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(attempts(&ledger), ["timeout"]);
}

#[tokio::test]
async fn an_idempotent_call_is_retried_after_the_pushback_and_others_are_not() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let layer = GrpcBudgetLayer::new("echo").idempotent(3);
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Flaky", Duration::from_secs(1)).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(attempts(&ledger), ["grpc-14", "200"]);
    // The server's pushback (20 ms), not the policy's backoff: the wait
    // the ledger shows is the time it took.
    assert!(
        ledger.entries().iter().any(|e| matches!(
            e,
            Entry::Wait { duration, .. }
                if *duration >= Duration::from_millis(20) && *duration < Duration::from_millis(100)
        )),
        "{ledger:?}"
    );
    assert_eq!(echo.calls.load(Ordering::SeqCst), 2);

    let addr = serve_echo(Echo::default()).await;
    let (answer, ledger) = call_in_budget(
        addr,
        GrpcBudgetLayer::new("echo"),
        "/test.Echo/Flaky",
        Duration::from_secs(1),
    )
    .await;
    assert_eq!(answer.unwrap_err().code(), Code::Unavailable);
    assert_eq!(
        attempts(&ledger),
        ["grpc-14"],
        "not idempotent: one attempt"
    );
}

#[tokio::test]
async fn outside_a_request_calls_pass_through() {
    let addr = serve_echo(Echo::default()).await;
    let channel = grpc_support::channel(addr).await;
    let channel = ServiceBuilder::new()
        .layer(GrpcBudgetLayer::new("echo"))
        .service(channel);
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let answer = grpc
        .unary(
            tonic::Request::new(Bytes::new()),
            http::uri::PathAndQuery::from_static("/test.Echo/Echo"),
            Raw,
        )
        .await
        .unwrap()
        .into_inner();
    // No budget came with the call: the server's default (2 s) applied.
    let seen: u128 = std::str::from_utf8(&answer).unwrap().parse().unwrap();
    assert!(seen > 1500, "{seen}");
}

/// With a `default_budget`, a call outside any request spends it: the
/// callee sees it as `grpc-timeout`, and one that hangs is
/// `DEADLINE_EXCEEDED` when it runs out.
#[tokio::test]
async fn outside_a_request_a_default_budget_is_spent() {
    let addr = serve_echo(Echo::default()).await;
    let channel = grpc_support::channel(addr).await;
    let layer = GrpcBudgetLayer::new("echo").default_budget(Duration::from_millis(600));
    let channel = ServiceBuilder::new().layer(layer).service(channel);
    let call = |method: &'static str| {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        async move {
            grpc.ready().await.unwrap();
            grpc.unary(
                tonic::Request::new(Bytes::new()),
                http::uri::PathAndQuery::from_static(method),
                Raw,
            )
            .await
            .map(tonic::Response::into_inner)
        }
    };
    let answer = call("/test.Echo/Echo").await.unwrap();
    let seen: u128 = std::str::from_utf8(&answer).unwrap().parse().unwrap();
    assert!(seen <= 600 && seen > 400, "{seen}");
    let start = Instant::now();
    let status = call("/test.Echo/Hang").await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        start.elapsed() < Duration::from_millis(600 + 200),
        "{:?}",
        start.elapsed()
    );
}

/// grpcio, an outside client, calls the relay with `timeout=1.0`: the relay's
/// handler has at most that budget, and the `grpc-timeout` the echo behind
/// it receives is smaller again (by at least the relay's 20 ms reserve).
#[tokio::test]
async fn the_grpc_timeout_shrinks_hop_by_hop_from_an_outside_client() {
    let echo = serve_echo(Echo::default()).await;
    let relay = serve_relay(echo).await;
    let script = format!(
        r#"
import grpc
ch = grpc.insecure_channel("127.0.0.1:{port}")
ident = lambda b: b
call = ch.unary_unary("/test.Relay/Call", request_serializer=ident, response_deserializer=ident)
print(call(b"", timeout=1.0).decode())
"#,
        port = relay.port()
    );
    let stdout = grpc_support::python(&script).await;
    let (own, sent) = stdout.trim().split_once(' ').expect("two fields");
    let own: u64 = own.parse().unwrap();
    let sent = budget_core::header::parse_grpc_timeout(sent.as_bytes()).expect("a grpc-timeout");
    assert!(own <= 1000 && own > 700, "the relay's budget: {own} ms");
    // `own` is whole milliseconds, truncated: one more covers it.
    assert!(
        sent + Duration::from_millis(20) <= Duration::from_millis(own + 1),
        "the echo's {sent:?} is the relay's {own} ms less the reserve and what it spent"
    );
}

/// grpcio calls the relay with `timeout=0.5` while the hop behind it hangs:
/// `DEADLINE_EXCEEDED` within 0.5 s + 50 ms, never a hung caller.
#[tokio::test]
async fn a_hanging_downstream_is_deadline_exceeded_in_time_for_an_outside_client() {
    let echo = serve_echo(Echo::default()).await;
    let relay = serve_relay(echo).await;
    let script = format!(
        r#"
import grpc, time
ch = grpc.insecure_channel("127.0.0.1:{port}")
ident = lambda b: b
hang = ch.unary_unary("/test.Relay/Hang", request_serializer=ident, response_deserializer=ident)
grpc.channel_ready_future(ch).result(timeout=5)
start = time.monotonic()
try:
    hang(b"", timeout=0.5)
    raise SystemExit("answered")
except grpc.RpcError as e:
    took = time.monotonic() - start
    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.code()
    assert took < 0.55, took
    print(round(took, 3))
"#,
        port = relay.port()
    );
    grpc_support::python(&script).await;
}

#[tokio::test]
async fn an_open_circuit_refuses_calls_without_sending_them() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let mut breaker = budget_core::breaker::BreakerConfig::default();
    breaker.failure_threshold = 2;
    breaker.open_for = Duration::from_secs(30);
    let policy = breaker.build().unwrap();
    let layer = GrpcBudgetLayer::new("echo").breaker(policy);
    for _ in 0..2 {
        let (answer, _) = call_in_budget(
            addr,
            layer.clone(),
            "/test.Echo/Down",
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(answer.unwrap_err().code(), Code::Unavailable);
    }
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Down", Duration::from_secs(1)).await;
    let status = answer.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(status.message().contains("circuit open"), "{status:?}");
    assert!(status.metadata().get("grpc-retry-pushback-ms").is_some());
    assert_eq!(
        echo.calls.load(Ordering::SeqCst),
        2,
        "the third was not sent"
    );
    assert!(
        matches!(&ledger.entries()[..], [Entry::Skip { reason, .. }] if reason == "skipped: circuit open")
    );
}

#[tokio::test]
async fn a_retry_the_retry_budget_cannot_pay_is_not_made() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let mut empty = budget_core::retry::RetryBudgetConfig::default();
    empty.min_per_sec = 0;
    empty.ratio = 0.0;
    let layer = GrpcBudgetLayer::new("echo")
        .idempotent(3)
        .retry_budget(&empty)
        .unwrap();
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Flaky", Duration::from_secs(1)).await;
    assert_eq!(answer.unwrap_err().code(), Code::Unavailable);
    assert_eq!(
        attempts(&ledger),
        ["grpc-14"],
        "idempotent, but no retry budget"
    );
    assert_eq!(echo.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_learned_floor_learns_from_the_answers() {
    let addr = serve_echo(Echo::default()).await;
    let layer = GrpcBudgetLayer::new("echo")
        .floor_config(&budget_core::floor::FloorConfig::auto())
        .unwrap();
    for _ in 0..3 {
        let (answer, ledger) = call_in_budget(
            addr,
            layer.clone(),
            "/test.Echo/Echo",
            Duration::from_secs(1),
        )
        .await;
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(attempts(&ledger), ["200"]);
    }
    // Under the learned floor's minimum (5 ms, net of the 20 ms reserve):
    // not made.
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Echo", Duration::from_millis(22)).await;
    assert_eq!(answer.unwrap_err().code(), Code::DeadlineExceeded);
    assert!(
        matches!(&ledger.entries()[..], [Entry::Skip { reason, .. }] if reason.contains("floor")),
        "{ledger:?}"
    );
}

#[tokio::test]
async fn the_statuses_retried_are_configurable() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let layer = GrpcBudgetLayer::new("echo")
        .idempotent(3)
        .retry_on(&[budget_core::grpc::GrpcCode::Internal]);
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Flaky", Duration::from_secs(1)).await;
    assert_eq!(answer.unwrap_err().code(), Code::Unavailable);
    assert_eq!(
        attempts(&ledger),
        ["grpc-14"],
        "UNAVAILABLE is not on the list"
    );
    assert_eq!(echo.calls.load(Ordering::SeqCst), 1);
}

/// A layer made from the HTTP client's `DependencyConfig` has its permit
/// queue: with one permit, a second call waits for the first, paid from its
/// budget and shown as `echo-queue` in its ledger.
#[tokio::test]
async fn a_dependency_config_gives_the_layer_the_http_client_s_permit_queue() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let mut config = budget_core::client::DependencyConfig::new("echo", format!("http://{addr}"));
    config.concurrency = Some(1.into());
    let layer = GrpcBudgetLayer::from_config(&config, None).unwrap();
    let ((first, first_ledger), (second, second_ledger)) = tokio::join!(
        call_in_budget(
            addr,
            layer.clone(),
            "/test.Echo/Slow",
            Duration::from_secs(2)
        ),
        call_in_budget(addr, layer, "/test.Echo/Slow", Duration::from_secs(2)),
    );
    assert!(first.is_ok() && second.is_ok(), "{first:?} {second:?}");
    let queued: Vec<Duration> = [first_ledger, second_ledger]
        .iter()
        .flat_map(Ledger::entries)
        .filter_map(|e| match e {
            Entry::Local { name, duration, .. } if name == "echo-queue" => Some(duration),
            _ => None,
        })
        .collect();
    assert_eq!(queued.len(), 1, "one call waited: {queued:?}");
    assert!(queued[0] >= Duration::from_millis(100), "{queued:?}");
    assert_eq!(echo.calls.load(Ordering::SeqCst), 2);
}

/// Without a pushback, an idempotent call waits the retry policy's backoff
/// between attempts (not a fixed 10 ms), every wait in the ledger.
#[tokio::test]
async fn without_a_pushback_a_retry_waits_the_policy_s_backoff() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let layer = GrpcBudgetLayer::new("echo").idempotent(3);
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/Down", Duration::from_secs(3)).await;
    assert_eq!(answer.unwrap_err().code(), Code::Unavailable);
    assert_eq!(attempts(&ledger), ["grpc-14", "grpc-14", "grpc-14"]);
    let waits: Vec<Duration> = ledger
        .entries()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Wait { duration, .. } => Some(duration),
            _ => None,
        })
        .collect();
    assert_eq!(waits.len(), 2, "{ledger:?}");
    // The default backoff: 100 ms, then up to 200 ms, jittered.
    assert!(
        waits.iter().all(|w| *w < Duration::from_millis(400)),
        "{waits:?}"
    );
    assert_eq!(echo.calls.load(Ordering::SeqCst), 3);
}

/// A hedged dependency over gRPC: a first attempt slower than the hedge
/// delay gets a second copy, the first answer wins and the loser is
/// cancelled, both in the ledger as over HTTP.
#[tokio::test]
async fn a_slow_first_attempt_is_hedged_as_over_http() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let mut config = budget_core::client::DependencyConfig::new("echo", format!("http://{addr}"));
    config.retry.max_attempts = 2;
    let mut hedge = budget_core::client::HedgeConfig::after(Duration::from_millis(50));
    hedge.ratio = 1.0;
    config.hedge = Some(hedge);
    let layer = GrpcBudgetLayer::from_config(&config, None).unwrap();
    let start = Instant::now();
    let (answer, ledger) =
        call_in_budget(addr, layer, "/test.Echo/SlowFirst", Duration::from_secs(1)).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert!(
        start.elapsed() < Duration::from_millis(800),
        "{:?}",
        start.elapsed()
    );
    let entries: Vec<(String, String)> = ledger
        .entries()
        .into_iter()
        .filter_map(|e| match e {
            Entry::Attempt {
                dependency,
                outcome,
                ..
            } => Some((dependency, outcome)),
            _ => None,
        })
        .collect();
    assert!(
        entries.contains(&("echo-hedge".into(), "200".into())),
        "{entries:?}"
    );
    assert!(
        entries.contains(&("echo".into(), "cancelled".into())),
        "{entries:?}"
    );
    assert_eq!(echo.calls.load(Ordering::SeqCst), 2);
}

/// In fixed mode (a service with its budget mode off) the layer sends no
/// `grpc-timeout`, even outside a request, and enforces the fixed timeout
/// itself: a hanging call is `DEADLINE_EXCEEDED` at that timeout.
#[tokio::test]
async fn fixed_mode_sends_no_grpc_timeout_and_times_out_locally() {
    let addr = serve_echo(Echo::default()).await;
    let mut config = budget_core::client::DependencyConfig::new("echo", format!("http://{addr}"));
    config.mode = budget_core::client::TimeoutMode::Fixed;
    config.fixed_timeout = Duration::from_millis(200);
    let layer = GrpcBudgetLayer::from_config(&config, None).unwrap();
    let channel = grpc_support::channel(addr).await;
    let mut grpc = tonic::client::Grpc::new(ServiceBuilder::new().layer(layer).service(channel));
    grpc.ready().await.unwrap();
    let sent = grpc
        .unary(
            tonic::Request::new(Bytes::new()),
            http::uri::PathAndQuery::from_static("/test.Echo/Timeout"),
            Raw,
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(&sent[..], b"none", "no grpc-timeout in fixed mode");
    grpc.ready().await.unwrap();
    let start = Instant::now();
    let status = grpc
        .unary(
            tonic::Request::new(Bytes::new()),
            http::uri::PathAndQuery::from_static("/test.Echo/Hang"),
            Raw,
        )
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(2),
        "{took:?}"
    );
}

/// A gRPC call's attempts are metered as the HTTP client's, under the same
/// names, their series marked `rpc_system="grpc"` and their outcome the
/// gRPC status.
#[tokio::test]
async fn grpc_attempts_are_metered_under_the_http_client_s_names() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // This test binary's only recorder; the other tests do not read one.
    metrics::set_global_recorder(recorder).unwrap();
    let addr = serve_echo(Echo::default()).await;
    let layer = GrpcBudgetLayer::new("echo-metrics").idempotent(2);
    let (answer, _) = call_in_budget(addr, layer, "/test.Echo/Flaky", Duration::from_secs(1)).await;
    assert!(answer.is_ok(), "{answer:?}");
    let rendered = handle.render();
    for outcome in ["grpc-14", "200"] {
        let series = format!(
            "http_client_request_duration_seconds_count{{dependency=\"echo-metrics\",http_request_method=\"POST\",outcome=\"{outcome}\",rpc_system=\"grpc\"}} 1"
        );
        assert!(rendered.contains(&series), "{series} in\n{rendered}");
    }
    assert!(
        rendered.contains("budget_retries_total{dependency=\"echo-metrics\"} 1"),
        "{rendered}"
    );
}

/// [`unary_in`] a request with a 1 s budget.
async fn call_keeping_extensions(
    channel: budget_core::grpc::GrpcBudgetService<tonic::transport::Channel>,
    method: &'static str,
    message: &'static [u8],
) -> (Result<tonic::Response<Bytes>, tonic::Status>, Ledger) {
    let cx = RequestContext::new(Budget::new(Duration::from_secs(1)));
    unary_in(cx, channel, method, message).await
}

/// Whether the ledger says an answer was served stale.
fn noted_stale(ledger: &Ledger) -> bool {
    ledger
        .entries()
        .iter()
        .any(|e| matches!(e, Entry::Stale { .. }))
}

/// The [`Stale`](budget_core::grpc::Stale) mark of an answer, if the
/// layer served it from its stale cache.
fn stale_of(answer: &tonic::Response<Bytes>) -> Option<budget_core::grpc::Stale> {
    answer
        .extensions()
        .get::<budget_core::grpc::Stale>()
        .copied()
}

/// With `on_unavailable = "stale"`, the last `OK` answer to the same
/// method and message stands in for a call that is answered `UNAVAILABLE`
/// or cannot be made (a real refused connection), marked `Stale`, in the
/// ledger and counted; another message gets nothing kept.
#[tokio::test]
async fn the_stale_fallback_serves_the_last_ok_answer_to_the_same_question() {
    let echo = Echo::default();
    let addr = serve_echo(echo.clone()).await;
    let config: budget_core::client::DependencyConfig = toml::from_str(&format!(
        "name = \"echo\"\nurl = \"http://{addr}\"\non_unavailable = \"stale\"\nmax_stale = \"30s\""
    ))
    .unwrap();
    let layer = GrpcBudgetLayer::from_config(&config, None).unwrap();
    let channel = ServiceBuilder::new()
        .layer(layer.clone())
        .service(grpc_support::channel(addr).await);
    // Answered: kept, and given as it came.
    let (first, ledger) = call_keeping_extensions(channel.clone(), "/test.Echo/Once", b"7").await;
    let first = first.unwrap();
    assert!(stale_of(&first).is_none());
    assert_eq!(attempts(&ledger), ["200"]);
    let kept = first.into_inner();
    // Down now: the same question gets the kept answer, marked stale.
    let (second, ledger) = call_keeping_extensions(channel.clone(), "/test.Echo/Once", b"7").await;
    let second = second.unwrap();
    let stale = stale_of(&second);
    assert!(
        stale.is_some_and(|s| s.age() < Duration::from_secs(1)),
        "{stale:?}"
    );
    assert_eq!(second.into_inner(), kept);
    // After the retries of the default policy (3 attempts).
    assert_eq!(attempts(&ledger), ["grpc-14", "grpc-14", "grpc-14"]);
    assert!(noted_stale(&ledger), "{ledger:?}");
    // Another question was never answered: UNAVAILABLE is passed up.
    let (other, _) = call_keeping_extensions(channel, "/test.Echo/Once", b"8").await;
    assert_eq!(other.unwrap_err().code(), Code::Unavailable);
    // A connection refused (a port bound and never listened on) is served
    // from the same layer's cache.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let dead = held.local_addr().unwrap();
    let channel = ServiceBuilder::new().layer(layer).service(
        tonic::transport::Channel::from_shared(format!("http://{dead}"))
            .unwrap()
            .connect_lazy(),
    );
    let (refused, ledger) = call_keeping_extensions(channel, "/test.Echo/Once", b"7").await;
    let refused = refused.unwrap();
    assert!(stale_of(&refused).is_some());
    assert_eq!(refused.into_inner(), kept);
    assert!(noted_stale(&ledger), "{ledger:?}");
    assert_eq!(
        echo.calls.load(Ordering::SeqCst),
        7,
        "the refused call reached no echo"
    );
}

/// As over HTTP: the caller's `traceparent` goes on with a gRPC call made
/// in its request (with no span of ours exported, as here), so that a
/// trace passes through a hop that does not export.
#[tokio::test]
async fn the_caller_s_trace_context_is_passed_on_over_grpc() {
    let addr = serve_echo(Echo::default()).await;
    let channel = || async {
        ServiceBuilder::new()
            .layer(GrpcBudgetLayer::new("echo"))
            .service(grpc_support::channel(addr).await)
    };
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut inbound = http::HeaderMap::new();
    inbound.insert("traceparent", caller.parse().unwrap());
    let cx = RequestContext::new(Budget::new(Duration::from_secs(1))).with_inbound_trace(&inbound);
    let (answer, _) = unary_in(cx, channel().await, "/test.Echo/Trace", b"").await;
    assert_eq!(answer.unwrap().into_inner(), caller);
    // No trace came with the request: none is made up.
    let (answer, _) = call_keeping_extensions(channel().await, "/test.Echo/Trace", b"").await;
    assert_eq!(answer.unwrap().into_inner(), "none");
}
