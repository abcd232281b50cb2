//! The HTML report (`--html`, `src/html.rs`) in a real browser: a short
//! real run (the `slow` scenario, budget and naive mode, 20 req/s for 3 s)
//! writes the page; headless Chromium (Debian's `chromium` package)
//! takes a screenshot of it and, with a probe script added, dumps the DOM
//! after the probe counted each chart's dots as the browser laid them out.
//!
//! - **Console**: Chromium runs with `--enable-logging=stderr --v=0`, which
//!   prints every console message of the page (`console.*`, uncaught
//!   errors, refused loads) as a `CONSOLE` line; the page may print none.
//! - **Drawn data**: each chart is a `<figure class="chart"
//!   data-points="N">`; the probe counts the SVG `<circle>`s in it that
//!   have a radius and lie inside the chart's box, and writes the count as
//!   `data-drawn`: it must equal `N`, and `N` must be more than 0.
//! - **No network**: the page has no `src`, `href` (but `#`), `url(`,
//!   `@import` or `<link`, its Content-Security-Policy refuses every load,
//!   and Chromium resolves no host name (`--host-resolver-rules`).
//!
//! The negative check: pages with an uncaught error, a blocked load, a
//! script the policy refuses and a chart without its dots are each caught.
//!
//! Without `chromium` the test installs it (`apt-get install chromium`,
//! as root where apt-get exists, as `.ci/run` does) and otherwise fails,
//! naming what is missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use clap::Parser;
use load_tests::cli::Args;
use load_tests::html::render;
use tokio::process::Command;
use tokio::sync::{Mutex, OnceCell};

/// One browser (or load run) at a time: the machine has 2 cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Whether `chromium` runs here, installed first when it did not.
static CHROMIUM: OnceCell<Result<(), String>> = OnceCell::const_new();

/// The page's Content-Security-Policy, as `src/html.rs` writes it.
const CSP: &str = "content=\"default-src 'none'; style-src 'unsafe-inline'\"";

/// The same policy letting inline scripts run: for the probe only.
const CSP_WITH_SCRIPTS: &str =
    "content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\"";

/// Counts, per chart, the dots the browser laid out inside the chart's
/// SVG box, as `data-drawn` (-1: the SVG itself has no real size).
const PROBE: &str = r#"<script>
(function () {
  document.querySelectorAll('figure.chart').forEach(function (figure) {
    var svg = figure.querySelector('svg');
    var drawn = 0;
    if (svg instanceof SVGSVGElement) {
      var box = svg.getBoundingClientRect();
      figure.querySelectorAll('svg circle').forEach(function (dot) {
        var b = dot.getBoundingClientRect();
        if (dot.r.baseVal.value > 0 && b.width > 0 && b.height > 0 &&
            b.left >= box.left - 1 && b.right <= box.right + 1 &&
            b.top >= box.top - 1 && b.bottom <= box.bottom + 1) {
          drawn += 1;
        }
      });
      if (box.width < 100 || box.height < 50) { drawn = -1; }
    }
    figure.setAttribute('data-drawn', String(drawn));
  });
  document.body.setAttribute('data-probe', 'ran');
})();
</script>
"#;

async fn chromium_or_fail() {
    if let Err(e) = CHROMIUM.get_or_init(test_support::chromium::ensure).await {
        panic!("{e}");
    }
}

/// A fresh directory for one test's files.
fn dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a test directory");
    dir
}

/// What Chromium said and made of one page.
#[derive(Debug)]
struct Browsed {
    /// stdout (the DOM with `--dump-dom`).
    stdout: String,
    /// The page's console messages: the `CONSOLE` lines of the log.
    console: Vec<String>,
}

/// Runs headless Chromium on `page` with `extra` flags, at most 60 s.
async fn chromium(page: &Path, extra: &[&str], profile: &Path) -> Browsed {
    let url = format!("file://{}", page.display());
    let child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-sync",
            "--hide-scrollbars",
            // No host name resolves: nothing leaves this machine.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(&url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("chromium starts");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium ends within 60 s")
        .expect("chromium runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium on {url}: {stderr}");
    Browsed {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_owned)
            .collect(),
    }
}

/// One chart as the probe left it: its title, `data-points`,
/// `data-drawn`.
#[derive(Debug, PartialEq, Eq)]
struct ChartSeen {
    title: String,
    points: i64,
    drawn: Option<i64>,
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(tag[start..end].to_owned())
}

/// The charts of a page or of its DOM dump.
fn charts(html: &str) -> Vec<ChartSeen> {
    html.match_indices("<figure class=\"chart\"")
        .filter_map(|(i, _)| {
            let tag = &html[i..i + html[i..].find('>')?];
            Some(ChartSeen {
                title: attribute(tag, "data-chart")?,
                points: attribute(tag, "data-points")?.parse().ok()?,
                drawn: attribute(tag, "data-drawn").and_then(|d| d.parse().ok()),
            })
        })
        .collect()
}

/// Loads `html` with the probe added (and the policy letting it run) and
/// returns the charts as the probe counted them and the console lines.
async fn probe(html: &str, dir: &Path, name: &str) -> (Vec<ChartSeen>, Vec<String>) {
    assert!(html.contains(CSP), "the page's policy is in place");
    let probed =
        html.replacen(CSP, CSP_WITH_SCRIPTS, 1)
            .replacen("</body>", &format!("{PROBE}</body>"), 1);
    let path = dir.join(format!("{name}.probe.html"));
    std::fs::write(&path, probed).unwrap();
    let seen = chromium(&path, &["--dump-dom"], &dir.join("profile")).await;
    assert!(
        seen.stdout.contains("data-probe=\"ran\""),
        "the probe ran: {}",
        &seen.stdout[..seen.stdout.len().min(500)]
    );
    (charts(&seen.stdout), seen.console)
}

/// Width and height from a PNG's header, checking its signature.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.len() > 24 && png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR",
        "a PNG"
    );
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&png[16..20]), be(&png[20..24]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_of_a_real_run_loads_in_chromium_with_no_console_message_and_every_chart_drawn()
 {
    let _one = ONE_AT_A_TIME.lock().await;
    chromium_or_fail().await;
    let dir = dir("html-report");
    let page_path = dir.join("report.html");

    // A short real run: the slow partner, budget and naive mode.
    let run = Command::new(env!("CARGO_BIN_EXE_load-tests"))
        .args([
            "--scenario",
            "slow",
            "--modes",
            "both",
            "--rate",
            "20",
            "--duration",
            "3s",
            "--no-progress",
            "--html",
        ])
        .arg(&page_path)
        .kill_on_drop(true)
        .output();
    let run = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the run stops by itself")
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let html = std::fs::read_to_string(&page_path).expect("--html wrote the page");

    // The page says what stdout says: the goodput row's cells, as bold.
    let goodput = stdout
        .lines()
        .find(|l| l.starts_with("| **goodput**"))
        .expect("a goodput row on stdout");
    for cell in goodput
        .split('|')
        .skip(2)
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        let value = cell.trim_matches('*');
        assert!(
            html.contains(&format!("<td><strong>{value}</strong></td>")),
            "goodput {value} in the page"
        );
    }
    for words in [
        "budget mode",
        "naive mode",
        "goodput",
        "late work",
        "budget table",
        "Budget table, budget mode",
        "Budget table, naive mode",
        "Date: ",
    ] {
        assert!(html.contains(words), "the page says {words:?}");
    }
    // The two budget tables side by side, one card each.
    assert_eq!(html.matches("<div class=\"side-by-side\">").count(), 1);
    assert_eq!(html.matches("<div class=\"card\">").count(), 2);
    // Loads nothing: no reference to anything outside the page.
    for reference in ["src=", "url(", "@import", "<link", "<script", "<iframe"] {
        assert!(!html.contains(reference), "the page has {reference:?}");
    }
    assert_eq!(
        html.matches("href=\"").count(),
        html.matches("href=\"#").count(),
        "only links within the page"
    );
    let written = charts(&html);
    assert_eq!(
        written.iter().map(|c| c.title.as_str()).collect::<Vec<_>>(),
        [
            "goodput per second",
            "p99 latency per second",
            "floor in force per dependency",
            "adaptive concurrency limit per dependency"
        ],
        "the charts of a budget-mode run"
    );

    // The screenshot of the page as it is.
    let png_path = dir.join("report.png");
    let shot = chromium(
        &page_path,
        &[
            &format!("--screenshot={}", png_path.display()),
            "--window-size=1280,2400",
        ],
        &dir.join("profile"),
    )
    .await;
    assert_eq!(shot.console, Vec::<String>::new(), "console messages");
    let png = std::fs::read(&png_path).expect("the screenshot");
    assert_eq!(png_size(&png), (1280, 2400));
    // An empty white page of that size is a few kB; text and charts are
    // far more.
    assert!(png.len() > 100_000, "a screenshot of {} bytes", png.len());

    // Every chart drew its dots inside its box, and no console message.
    let (seen, console) = probe(&html, &dir, "report").await;
    assert_eq!(console, Vec::<String>::new(), "console messages");
    assert_eq!(seen.len(), written.len());
    for chart in &seen {
        assert!(chart.points > 0, "{chart:?}");
        assert_eq!(chart.drawn, Some(chart.points), "{chart:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_check_catches_an_uncaught_error_a_blocked_load_a_refused_script_and_an_empty_chart()
 {
    let _one = ONE_AT_A_TIME.lock().await;
    chromium_or_fail().await;
    let dir = dir("html-report-negative");
    // The page the report makes of no run: its head, its policy, its
    // intro; the broken pieces go in before `</main>`.
    let invocation = Args::try_parse_from(["load-tests", "--scenario", "slow"])
        .unwrap()
        .invocation()
        .unwrap();
    let base = render(&invocation, "load-tests", &[], SystemTime::UNIX_EPOCH).unwrap();
    let with = |piece: &str| base.replacen("</main>", &format!("{piece}</main>"), 1);
    let svg = |dot: &str| {
        format!(
            "<svg width=\"640\" height=\"320\" viewBox=\"0 0 640 320\" xmlns=\"http://www.w3.org/2000/svg\">\
             <polyline fill=\"none\" stroke=\"#000\" points=\"10,10 600,300\"/>{dot}</svg>"
        )
    };

    // The clean page: no console message.
    let (_, console) = probe(&base, &dir, "clean").await;
    assert_eq!(console, Vec::<String>::new());

    // An uncaught error.
    let (_, console) = probe(&with("<script>notDefined();</script>"), &dir, "error").await;
    assert!(
        console
            .iter()
            .any(|l| l.contains("Uncaught ReferenceError: notDefined is not defined")),
        "{console:?}"
    );

    // A load from the network: refused by the policy, and said.
    let (_, console) = probe(
        &with("<img alt=\"\" src=\"http://example.invalid/x.png\">"),
        &dir,
        "load",
    )
    .await;
    assert!(
        console
            .iter()
            .any(|l| l.contains("example.invalid") && l.contains("Content Security Policy")),
        "{console:?}"
    );

    // A script in the page as it is (no probe): refused by the policy.
    let path = dir.join("script.html");
    std::fs::write(&path, with("<script>document.title = 'x';</script>")).unwrap();
    let seen = chromium(&path, &["--dump-dom"], &dir.join("profile")).await;
    assert!(
        seen.console
            .iter()
            .any(|l| l.contains("inline script") && l.contains("Content Security Policy")),
        "{:?}",
        seen.console
    );

    // A chart with its dot, one whose dots are missing, and one whose dot
    // has no radius: only the first counts as drawn.
    let figure = |title: &str, dot: &str| {
        format!(
            "<figure class=\"chart\" data-chart=\"{title}\" data-points=\"1\">{}</figure>",
            svg(dot)
        )
    };
    let page = with(&format!(
        "{}{}{}",
        figure("drawn", "<circle cx=\"300\" cy=\"150\" r=\"2\"/>"),
        figure("empty", ""),
        figure("no radius", "<circle cx=\"300\" cy=\"150\" r=\"0\"/>"),
    ));
    let (seen, console) = probe(&page, &dir, "charts").await;
    assert_eq!(console, Vec::<String>::new());
    let drawn: Vec<(&str, Option<i64>)> =
        seen.iter().map(|c| (c.title.as_str(), c.drawn)).collect();
    assert_eq!(
        drawn,
        [
            ("drawn", Some(1)),
            ("empty", Some(0)),
            ("no radius", Some(0))
        ]
    );
}
