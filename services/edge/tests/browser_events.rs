//! A real browser through edge: headless Chromium (Debian's `chromium`)
//! loads a page whose `EventSource` reads the slow partner's `/events`
//! through edge's `GET /events`; the partner is restarted (its server and
//! every task and socket of it dropped, a new one started on the same
//! port) while the stream is open; the browser reconnects on its own,
//! sends `Last-Event-ID`, and the ids it read run on without a gap or a
//! repeat.
//!
//! - **The page's origin**: the page is served by this test's own server
//!   (another port, so another origin); edge grants it CORS through
//!   `cors_origins`, as a deployment would for its web app's origin.
//! - **What the page saw**: the page posts every event id, every `open`
//!   and every `error` (with the `EventSource`'s `readyState`) to the same
//!   server's `/seen`, numbered in the order the page saw them; the test
//!   reads that log, bounded in time, while Chromium runs.
//! - **The restart window**: a browser's `EventSource` reconnects after a
//!   network error or the end of a stream, but gives up for good on a
//!   non-200 answer; the partner's `retry: 300` (its `retry` query
//!   parameter, passed through edge) makes the browser come back after the
//!   new partner is up.
//!
//! Without `chromium` the test installs it (`apt-get install chromium`, as
//! root where apt-get exists) and otherwise fails, naming what is missing.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::{get, post};
use edge::EdgeConfig;
use serde_json::Value;
use slow_partner::{PartnerConfig, PartnerHandle};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// The page: an `EventSource` on edge's `/events`, every event id, `open`
/// and `error` posted to `/seen` in the order seen.
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>events through edge</title></head>
<body><p id="last">none</p><script>
var n = 0;
function seen(kind, id) {
  var entry = { n: n++, kind: kind, id: id, state: source.readyState };
  fetch('/seen', { method: 'POST', headers: { 'content-type': 'application/json' },
                   body: JSON.stringify(entry) });
}
var source = new EventSource('EVENTS_URL');
source.addEventListener('open', function () { seen('open', null); });
source.addEventListener('error', function () { seen('error', null); });
source.addEventListener('tick', function (e) {
  document.getElementById('last').textContent = e.lastEventId;
  seen('tick', e.lastEventId);
});
</script></body></html>
"#;

/// What the page posted, in the order it arrived (not always the order
/// the page saw it: sort by `n`).
type Seen = Arc<Mutex<Vec<Value>>>;

/// The page's server: `GET /` the page, `POST /seen` the log.
async fn page_server(events_url: String, seen: Seen) -> SocketAddr {
    let page = PAGE.replace("EVENTS_URL", &events_url);
    let app = Router::new()
        .route("/", get(move || async move { Html(page) }))
        .route(
            "/seen",
            post(
                |State(seen): State<Seen>, axum::Json(entry): axum::Json<Value>| async move {
                    seen.lock().unwrap().push(entry);
                },
            ),
        )
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A partner running on a runtime of its own, in a thread of its own:
/// stopping it drops the runtime, so every task and socket of that
/// partner goes at once, as when its process ends.
struct PartnerProcess {
    handle: PartnerHandle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PartnerProcess {
    /// Starts a partner on `listen` (port 0: a free one) with an admin port.
    async fn start(listen: SocketAddr) -> Self {
        let (started_tx, started) = oneshot::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime for the partner");
            runtime.block_on(async move {
                let config = PartnerConfig::new(listen)
                    .with_admin_listen("127.0.0.1:0".parse().unwrap())
                    .with_shutdown_grace(Duration::from_millis(100));
                let handle = slow_partner::spawn(config).await;
                let _ = started_tx.send(handle);
                let _ = stopped.await;
            });
            // Dropping the runtime drops every task of the partner:
            // listeners and open connections close.
            runtime.shutdown_timeout(Duration::from_millis(100));
        });
        let handle = started
            .await
            .expect("the partner's thread runs")
            .expect("the partner starts");
        Self {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Ends this partner as its process ending would: everything at once.
    async fn kill(mut self) -> SocketAddr {
        let addr = self.handle.addr();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            tokio::task::spawn_blocking(move || thread.join())
                .await
                .unwrap()
                .expect("the partner's thread ends");
        }
        addr
    }
}

/// Whether `program args` runs and succeeds.
async fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

/// `chromium` runs, or is installed from Debian (as root, with apt-get),
/// or the reason it cannot be.
async fn ensure_chromium() -> Result<(), String> {
    if succeeds("chromium", &["--version"]).await {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .await
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if !root || !succeeds("apt-get", &["--version"]).await {
        return Err(
            "headless Chromium is needed: `chromium` (Debian's `chromium` package) is \
                    not installed, and it cannot be installed here (that needs apt-get, as root)"
                .to_owned(),
        );
    }
    let mut said = String::new();
    for update_first in [false, true] {
        if update_first {
            let _ = succeeds("apt-get", &["update", "-q"]).await;
        }
        let out = Command::new("apt-get")
            .args(["install", "-y", "-q", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .await;
        match out {
            Ok(out) if out.status.success() => break,
            Ok(out) => said = String::from_utf8_lossy(&out.stderr).into_owned(),
            Err(e) => said = e.to_string(),
        }
    }
    if succeeds("chromium", &["--version"]).await {
        Ok(())
    } else {
        Err(format!(
            "headless Chromium is needed: `chromium` is not installed, and \
             `apt-get install -y chromium` did not install it: {}",
            said.trim()
        ))
    }
}

/// A fresh directory for this test's files.
fn dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a test directory");
    dir
}

/// Headless Chromium on `url`, its log in `dir/chromium.log`; it runs
/// until killed (dropping it kills it).
fn chromium(url: &str, dir: &Path) -> Child {
    let log = std::fs::File::create(dir.join("chromium.log")).unwrap();
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-extensions",
            "--disable-sync",
            // No host name resolves (127.0.0.1 is left alone: a rule for
            // every host maps it too): the page reaches only loopback.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("chromium starts")
}

/// What the page saw so far, in the order it saw it.
fn page_log(seen: &Seen) -> Vec<Value> {
    let mut log = seen.lock().unwrap().clone();
    log.sort_by_key(|e| e["n"].as_u64());
    log
}

/// The event ids the page read, in order.
fn ids(log: &[Value]) -> Vec<u64> {
    log.iter()
        .filter(|e| e["kind"] == "tick")
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

fn opens(log: &[Value]) -> usize {
    log.iter().filter(|e| e["kind"] == "open").count()
}

/// Waits (polling, at most `within`) until `done` holds for the page's
/// log; fails naming `what`, the log and Chromium's log otherwise, or at
/// once when the `EventSource` gave up (`readyState` 2, closed).
async fn wait_for(
    seen: &Seen,
    dir: &Path,
    what: &str,
    within: Duration,
    done: impl Fn(&[Value]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let log = page_log(seen);
        if done(&log) {
            return;
        }
        let gave_up = log.iter().any(|e| e["kind"] == "error" && e["state"] == 2);
        if gave_up || tokio::time::Instant::now() >= deadline {
            let chromium = std::fs::read_to_string(dir.join("chromium.log")).unwrap_or_default();
            let tail: Vec<&str> = chromium.lines().rev().take(20).collect();
            panic!(
                "{what}: {} (the page's log: {log:?}; chromium's last lines: {tail:?})",
                if gave_up {
                    "the EventSource gave up"
                } else {
                    "not in time"
                }
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromiums_event_source_resumes_through_edge_across_a_partner_restart_without_a_gap() {
    if let Err(e) = ensure_chromium().await {
        panic!("{e}");
    }
    let dir = dir("browser-events");
    let partner = PartnerProcess::start("127.0.0.1:0".parse().unwrap()).await;
    let partner_url = partner.handle.url("/events");

    // Edge's port first: the page names it; then the page's server, whose
    // origin edge grants.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let edge_port = listener.local_addr().unwrap();
    drop(listener);
    let seen: Seen = Arc::default();
    let events_url = format!("http://{edge_port}/events?rate=20&retry=300ms");
    let page_addr = page_server(events_url, Arc::clone(&seen)).await;

    let mut config = EdgeConfig::new(edge_port, "http://127.0.0.1:9");
    config.events_url = partner_url;
    config.cors_origins = vec![format!("http://{page_addr}")];
    let (_, _edge) = edge::spawn(&config, std::future::pending())
        .await
        .expect("edge starts");

    let mut browser = chromium(&format!("http://{page_addr}/"), &dir);
    wait_for(
        &seen,
        &dir,
        "10 events before the restart",
        Duration::from_secs(30),
        |log| ids(log).len() >= 10,
    )
    .await;

    // The restart: the old partner and its sockets go at once; a new
    // process of it takes the same port.
    let addr = partner.kill().await;
    let before = ids(&page_log(&seen)).last().copied().unwrap();
    let partner = PartnerProcess::start(addr).await;

    wait_for(
        &seen,
        &dir,
        "10 events after the restart",
        Duration::from_secs(30),
        |log| opens(log) >= 2 && ids(log).last().is_some_and(|&last| last >= before + 10),
    )
    .await;
    browser.kill().await.expect("chromium is stopped");

    let log = page_log(&seen);
    let got = ids(&log);
    let expected: Vec<u64> = (1..=got.len() as u64).collect();
    assert_eq!(
        got, expected,
        "contiguous ids, none lost, none twice: {log:?}"
    );
    assert!(opens(&log) >= 2, "the browser reconnected: {log:?}");
    // The reconnect reached the new partner, through edge.
    let streams: Value = test_support::client()
        .get(partner.handle.admin_url("/admin/streams").unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(streams["opened_total"].as_u64() >= Some(1), "{streams}");
    partner.kill().await;
}
