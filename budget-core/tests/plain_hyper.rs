//! The budget layer around a plain hyper service, no axum anywhere: the
//! service's own body type (`Full<Bytes>`) comes back out of the layer, on
//! a real loopback socket, read by a real HTTP client (the layer is
//! generic over the body).

use std::convert::Infallible;
use std::time::Duration;

use budget_core::context;
use budget_core::server::ServerConfig;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tower::{Layer, service_fn};

/// Answers with the budget left as its context saw it; `/slow` first
/// sleeps 400 ms.
async fn handler(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path() == "/slow" {
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let left = context::current_budget().map(|b| b.remaining().as_millis());
    Ok(Response::new(Full::new(Bytes::from(format!("{left:?}")))))
}

/// Serves the layered hyper service on a loopback port until the test ends.
async fn serve() -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let layer = ServerConfig::default().layer().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            // The layered service answers `Response<Full<Bytes>>`: the
            // type hyper is given says the body was not re-boxed.
            let svc = layer.layer(service_fn(handler));
            let svc: TowerToHyperService<_> = TowerToHyperService::new(svc);
            tokio::spawn(async move {
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_rustls()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_handler_s_own_body_passes_with_the_ledger() {
    let addr = serve().await;
    let res = client()
        .get(format!("http://{addr}/"))
        .header("request-budget-ms", "1500")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["server-timing"],
        "budget;dur=1500;desc=\"ingress\""
    );
    let body = res.text().await.unwrap();
    let left: u128 = body
        .trim_start_matches("Some(")
        .trim_end_matches(')')
        .parse()
        .unwrap_or_else(|_| panic!("the handler saw a budget: {body}"));
    assert!(left <= 1500 && left > 1000, "{left}");
}

#[tokio::test]
async fn the_layer_s_own_answers_are_problems_in_the_service_s_body_type() {
    let addr = serve().await;
    let res = client()
        .get(format!("http://{addr}/"))
        .header("request-budget-ms", "soon")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert!(res.headers().contains_key("server-timing"));
    let problem: serde_json::Value = res.json().await.unwrap();
    assert_eq!(problem["header"], "request-budget-ms");

    let res = client()
        .get(format!("http://{addr}/slow"))
        .header("request-budget-ms", "100")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 504);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let problem: serde_json::Value = res.json().await.unwrap();
    assert_eq!(problem["status"], 504);
}

/// The same from Python's standard library, an outside client.
#[tokio::test]
async fn an_outside_client_reads_the_same_answers() {
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        panic!("python3 is needed for this test (CI installs it)");
    }
    let addr = serve().await;
    let script = format!(
        r#"
import http.client, json
c = http.client.HTTPConnection("127.0.0.1", {port}, timeout=10)
c.request("GET", "/", headers={{"request-budget-ms": "800"}})
r = c.getresponse(); r.read()
assert r.status == 200, r.status
assert r.getheader("server-timing") == 'budget;dur=800;desc="ingress"', r.getheader("server-timing")
c.request("GET", "/", headers={{"grpc-timeout": "x"}})
r = c.getresponse(); body = json.loads(r.read())
assert r.status == 400 and body["header"] == "grpc-timeout", (r.status, body)
print("ok")
"#,
        port = addr.port()
    );
    let out = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
