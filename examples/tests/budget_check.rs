//! `budget-check` end to end: the real binary against the real slow partner
//! on loopback ephemeral ports, over the partner's fault shapes (delays,
//! statuses, per-attempt scripts, and the refuse, blackhole, reset and hang
//! modes). Every run of the binary is bounded by [`RUN_LIMIT`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use slow_partner::{FaultMode, PartnerConfig, PartnerHandle};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;
use tokio::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_budget-check");

/// No run of the binary may take longer than this.
const RUN_LIMIT: Duration = Duration::from_secs(15);

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

async fn partner_with(config: PartnerConfig) -> PartnerHandle {
    slow_partner::spawn(config)
        .await
        .expect("the slow partner starts on loopback")
}

async fn partner(mode: FaultMode) -> PartnerHandle {
    partner_with(PartnerConfig::new(loopback()).with_mode(mode)).await
}

/// A finished run of the binary.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// From spawn to exit, process start included.
    wall: Duration,
}

/// One per-URL line: `ok  200  URL  2 attempts  412 ms  note`.
#[derive(Debug)]
struct Line {
    up: bool,
    what: String,
    url: String,
    attempts: u32,
    ms: u64,
    note: String,
}

impl Run {
    fn lines(&self) -> Vec<Line> {
        self.stdout
            .lines()
            .take_while(|l| !l.is_empty())
            .map(|l| {
                let t: Vec<&str> = l.split_whitespace().collect();
                assert!(t.len() >= 7, "not a result line: {l:?}");
                assert!(t[4].starts_with("attempt") && t[6] == "ms", "{l:?}");
                Line {
                    up: match t[0] {
                        "ok" => true,
                        "FAIL" => false,
                        other => panic!("result {other:?} in {l:?}"),
                    },
                    what: t[1].to_owned(),
                    url: t[2].to_owned(),
                    attempts: t[3].parse().expect("attempts"),
                    ms: t[5].parse().expect("ms"),
                    note: t[7..].join(" "),
                }
            })
            .collect()
    }

    /// The summary table's cell for `row` (`ok`, `timeout`, `http 503`,
    /// `failed`, `time`), `None` when the table has no such row.
    fn summary(&self, row: &str) -> Option<String> {
        self.stdout.lines().find_map(|l| {
            let cells: Vec<&str> = l.trim_matches('│').split('┆').map(str::trim).collect();
            match cells.as_slice() {
                [name, value] if *name == row => Some((*value).to_owned()),
                _ => None,
            }
        })
    }

    fn count(&self, row: &str) -> usize {
        self.summary(row)
            .map_or(0, |v| v.parse().unwrap_or_else(|_| panic!("{row}: {v:?}")))
    }

    /// The run's own time from the table's `time` row.
    fn total_ms(&self) -> u64 {
        let time = self.summary("time").expect("a time row");
        time.split_whitespace()
            .next()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or_else(|| panic!("time {time:?}"))
    }

    fn urls(&self) -> Vec<String> {
        self.lines().into_iter().map(|l| l.url).collect()
    }
}

/// The URLs as owned strings, to compare with [`Run::urls`].
fn owned(urls: &[&String]) -> Vec<String> {
    urls.iter().map(|u| (*u).clone()).collect()
}

async fn check(args: &[&str]) -> Run {
    check_with_stdin(args, None).await
}

async fn check_with_stdin(args: &[&str], stdin: Option<&str>) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let start = Instant::now();
    let mut child = cmd.spawn().expect("budget-check starts");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(text.as_bytes())
            .await
            .expect("stdin written");
    }
    let out = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .expect("budget-check ends within RUN_LIMIT")
        .expect("budget-check's output");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        wall: start.elapsed(),
    }
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text).expect("temp file written");
    path
}

#[tokio::test]
async fn healthy_urls_exit_0_with_one_line_each_in_input_order_even_when_earlier_ones_are_slower() {
    let p = partner(FaultMode::Normal).await;
    let urls = [
        p.url("/a?delay=600ms"),
        p.url("/b"),
        p.url("/c?delay=200ms"),
    ];
    let mut args = vec!["--concurrency", "3"];
    args.extend(urls.iter().map(String::as_str));
    let run = check(&args).await;

    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let lines = run.lines();
    assert_eq!(run.urls(), urls, "input order");
    assert!(
        lines
            .iter()
            .all(|l| l.up && l.what == "200" && l.attempts == 1),
        "{lines:?}"
    );
    // The first URL ended last, yet is listed first.
    assert!(lines[0].ms >= 600, "{lines:?}");
    assert!(lines[1].ms < 600 && lines[2].ms < 600, "{lines:?}");
    assert_eq!((run.count("ok"), run.count("failed")), (3, 0));
    // Each check carried its own request id and the run's budget.
    let stats = p.stats();
    assert_eq!(stats.ids.len(), 3);
    for (id, calls) in &stats.ids {
        assert!(id.starts_with("budget-check-"), "{id}");
        let budgets = calls.budgets_ms();
        assert!(
            // The header says what the attempt is waited for: at most the
            // default attempt timeout, 2 s.
            matches!(budgets.as_slice(), [Some(ms)] if *ms > 1_000 && *ms <= 2_000),
            "{id}: {budgets:?}"
        );
    }
}

#[tokio::test]
async fn a_script_503_then_200_succeeds_on_the_retry_and_other_statuses_fail_with_their_code() {
    let p = partner(FaultMode::Normal).await;
    let script = p.url("/s?script=503@0ms,200@0ms");
    let not_found = p.url("/n?status=404");
    let down = p.url("/u?status=503");
    // A deadline of 1 s: the attempt timeout (2 s by default) is capped to
    // it, so each attempt's header says what is left of the deadline.
    let run = check(&[
        "--retries",
        "2",
        "--deadline",
        "1s",
        &script,
        &not_found,
        &down,
    ])
    .await;

    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let lines = run.lines();
    assert_eq!(run.urls(), owned(&[&script, &not_found, &down]));
    assert!(
        lines[0].up && lines[0].what == "200" && lines[0].attempts == 2,
        "{lines:?}"
    );
    // 404 is not retried; 503 is, up to 1 + --retries attempts.
    assert!(
        !lines[1].up && lines[1].what == "404" && lines[1].attempts == 1,
        "{lines:?}"
    );
    assert!(
        !lines[2].up && lines[2].what == "503" && lines[2].attempts == 3,
        "{lines:?}"
    );
    assert_eq!(run.count("ok"), 1);
    assert_eq!(run.count("http 404"), 1);
    assert_eq!(run.count("http 503"), 1);
    assert_eq!(run.count("failed"), 2);
    // The retry went out with the same request id and what was left.
    let stats = p.stats();
    let scripted = stats
        .ids
        .values()
        .find(|id| id.calls.iter().all(|c| c.path == "/s"))
        .expect("the scripted URL's id");
    let budgets = scripted.budgets_ms();
    assert!(
        matches!(budgets.as_slice(), [Some(first), Some(second)] if *first <= 1_000 && second <= first),
        "{budgets:?}"
    );
}

#[tokio::test]
async fn expect_status_decides_what_counts_as_up() {
    let p = partner(FaultMode::Normal).await;
    let ok = p.url("/a");
    let gone = p.url("/n?status=404");
    let run = check(&["--expect-status", "4xx", &ok, &gone]).await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let lines = run.lines();
    assert!(!lines[0].up && lines[0].what == "200", "{lines:?}");
    assert!(lines[1].up && lines[1].what == "404", "{lines:?}");
    assert_eq!((run.count("ok"), run.count("http 200")), (1, 1));

    let run = check(&["--expect-status", "200,404", &ok, &gone]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
}

#[tokio::test]
async fn hang_and_blackhole_time_out_per_attempt_and_the_retry_is_paid_from_the_deadline() {
    let hang = partner(FaultMode::Hang).await;
    let blackhole = partner(FaultMode::Blackhole).await;
    let hung = hang.url("/h");
    let dark = blackhole.url("/b");
    let run = check(&[
        "--attempt-timeout",
        "300ms",
        "--connect-timeout",
        "200ms",
        "--retries",
        "1",
        "--deadline",
        "5s",
        &hung,
        &dark,
    ])
    .await;

    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let lines = run.lines();
    assert_eq!(run.urls(), owned(&[&hung, &dark]));
    // Two attempts of 300 ms (read timeout) and of 200 ms (connect cap),
    // each plus one backoff of at most 50 ms; far inside the 5 s deadline.
    let hung_line = &lines[0];
    assert!(
        !hung_line.up && hung_line.what == "timeout" && hung_line.attempts == 2,
        "{lines:?}"
    );
    assert!((600..1100).contains(&hung_line.ms), "{lines:?}");
    assert!(
        hung_line.note.contains("timed out after 300ms"),
        "{lines:?}"
    );
    let dark_line = &lines[1];
    assert!(
        !dark_line.up && dark_line.what == "timeout" && dark_line.attempts == 2,
        "{lines:?}"
    );
    assert!((400..1000).contains(&dark_line.ms), "{lines:?}");
    assert_eq!(run.count("timeout"), 2);
    assert!(run.total_ms() < 1500, "{}", run.stdout);
}

#[tokio::test]
async fn refused_and_reset_fail_fast_with_their_kind() {
    let refuse = partner(FaultMode::Refuse).await;
    let reset = partner(FaultMode::Reset).await;
    let refused = refuse.url("/r");
    let cut = reset.url("/x");
    let run = check(&["--retries", "2", &refused, &cut]).await;

    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let lines = run.lines();
    assert_eq!(run.urls(), owned(&[&refused, &cut]));
    assert!(
        !lines[0].up && lines[0].what == "refused" && lines[0].attempts == 3,
        "{lines:?}"
    );
    assert!(
        !lines[1].up && lines[1].what == "reset" && lines[1].attempts == 3,
        "{lines:?}"
    );
    // Three attempts and two backoffs (at most 50 + 100 ms): nothing waits
    // for the 2 s attempt timeout.
    assert!(lines.iter().all(|l| l.ms < 1000), "{lines:?}");
    assert_eq!((run.count("refused"), run.count("reset")), (1, 1));
    assert!(run.total_ms() < 1000, "{}", run.stdout);
}

#[tokio::test]
async fn a_deadline_shorter_than_the_work_reports_the_rest_not_checked_and_ends_on_time() {
    let p = partner(FaultMode::Normal).await;
    let urls = [
        p.url("/d1?delay=600ms"),
        p.url("/d2?delay=600ms"),
        p.url("/d3"),
        p.url("/d4"),
    ];
    let mut args = vec!["--deadline", "1s", "--concurrency", "1"];
    args.extend(urls.iter().map(String::as_str));
    let run = check(&args).await;

    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let lines = run.lines();
    assert_eq!(run.urls(), urls);
    assert!(lines[0].up && lines[0].attempts == 1, "{lines:?}");
    // The second check had the 400 ms that were left, and no retry.
    assert!(
        !lines[1].up && lines[1].what == "deadline" && lines[1].attempts == 1,
        "{lines:?}"
    );
    assert!((350..600).contains(&lines[1].ms), "{lines:?}");
    for line in &lines[2..] {
        assert!(
            !line.up && line.what == "deadline" && line.attempts == 0,
            "{lines:?}"
        );
        assert_eq!(line.note, "not checked: deadline");
    }
    assert_eq!((run.count("ok"), run.count("deadline")), (1, 3));
    // The run ends at its deadline, not after the work.
    let total = run.total_ms();
    assert!((1000..1150).contains(&total), "{}", run.stdout);
    // Only a guard against a hang: the on-time end is the run's own total
    // above; the process's start on a loaded machine (2.7 s once in CI)
    // is not the checker's to answer for.
    assert!(run.wall < Duration::from_secs(10), "{:?}", run.wall);
    // The URLs not checked were never sent.
    assert_eq!(p.stats().requests, 2);
}

#[tokio::test]
async fn at_most_concurrency_checks_are_in_flight() {
    let p = partner_with(PartnerConfig::new(loopback()).with_path_workers("/slow", 64)).await;
    let url = p.url("/slow?delay=300ms");
    let five = [url.as_str(); 5];

    let mut args = vec!["--concurrency", "2"];
    args.extend(five);
    let run = check(&args).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    let seen = &p.stats().paths["/slow"];
    assert_eq!((seen.in_work_max, seen.queued_max), (2, 0));
    // Three waves of 300 ms.
    assert!(run.total_ms() >= 900, "{}", run.stdout);

    // The same five with room for all: the partner sees them at once, so
    // the count above is the checker's limit, not the partner's.
    p.reset_stats();
    let mut args = vec!["--concurrency", "5"];
    args.extend(five);
    let run = check(&args).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(p.stats().paths["/slow"].in_work_max, 5);
    assert!(run.total_ms() < 900, "{}", run.stdout);
}

#[tokio::test]
async fn bad_arguments_exit_2_with_a_message_naming_the_problem_and_send_nothing() {
    let p = partner(FaultMode::Normal).await;
    let good = p.url("/a");
    let bad_list = temp_file(
        "budget-check-bad-list.txt",
        &format!("# two good, then a bad one\n{good}\n\ngopher://x/\n"),
    );
    let bad_list = bad_list.to_str().expect("utf-8 path");
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("budget-check-missing.txt");
    let missing = missing.to_str().expect("utf-8 path");
    let cases: &[(&[&str], Option<&str>, &str)] = &[
        (&[], None, "no URLs to check"),
        (
            &["--file", "-"],
            Some("# only comments\n\n"),
            "no URLs to check",
        ),
        (
            &[&good, "ftp://x"],
            None,
            "argument 2: `ftp://x` must be http or https",
        ),
        (
            &[&good, "not a url"],
            None,
            "argument 2: `not a url` is not an absolute URL",
        ),
        (
            &["--file", bad_list],
            None,
            "budget-check-bad-list.txt line 4: `gopher://x/`",
        ),
        (&["--file", missing], None, "cannot read --file"),
        (
            &["--concurrency", "0", &good],
            None,
            "'--concurrency <N>': must be at least 1",
        ),
        (
            &["--deadline", "soon", &good],
            None,
            "'--deadline <DURATION>'",
        ),
        (&["--deadline", "0s", &good], None, "must be more than zero"),
        (
            &["--attempt-timeout", "5s", "--deadline", "1s", &good],
            None,
            "--attempt-timeout 5s is longer than --deadline 1s",
        ),
        (
            &["--retries=-1", &good],
            None,
            "invalid value '-1' for '--retries <N>'",
        ),
        (&["--retries", "101", &good], None, "101 is not in 0..=100"),
        (
            &["--expect-status", "7xx", &good],
            None,
            "`7xx` is not a status",
        ),
    ];
    for (args, stdin, wanted) in cases {
        let run = check_with_stdin(args, *stdin).await;
        assert_eq!(run.code, Some(2), "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(
            run.stderr.starts_with("error: ") && run.stderr.contains(wanted),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(p.stats().requests, 0, "nothing is sent on bad input");
}

#[tokio::test]
async fn urls_come_from_the_arguments_then_the_file_skipping_comments_and_blank_lines() {
    let p = partner(FaultMode::Normal).await;
    let (arg, one, two) = (p.url("/arg"), p.url("/f1"), p.url("/f2"));
    let list = format!("# endpoints\n\n{one}\r\n   # indented comment\n  {two}  \n\n");
    let file = temp_file("budget-check-list.txt", &list);
    let file = file.to_str().expect("utf-8 path");

    let run = check(&[&arg, "--file", file]).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(run.urls(), owned(&[&arg, &one, &two]));

    let run = check_with_stdin(&["--file", "-"], Some(&list)).await;
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    assert_eq!(run.urls(), owned(&[&one, &two]));
    assert_eq!(run.count("ok"), 2);
}
