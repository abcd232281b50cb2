//! The HTML report (`--html report.html`): one self-contained page with
//! everything a run printed and drew, for someone who has not read
//! `BENCHMARKS.md`.
//!
//! The page loads nothing: the CSS is inline, the charts are inline SVG
//! drawn by [`crate::plot::scenario_charts`] (the same plotters code as
//! `--svg`), there is no script and no font file, and a
//! `Content-Security-Policy` meta tag (`default-src 'none'`, inline style
//! only) makes the browser refuse any load or script, should one slip in.
//!
//! What it holds: a short intro (the command, the date, the machine and
//! the chain, as the markdown on stdout says them; what the modes mean;
//! what goodput, late work and the budget table are, after the definitions
//! in [`crate::report`]), then per scenario its table (a column per mode),
//! its charts side by side (goodput and p99 latency per second, a line per
//! mode; the floor in force and the adaptive limit per dependency when a
//! run read them, [`crate::report::ServiceSeries`]) and the budget tables
//! of its modes side by side, as far as the page is wide enough.
//!
//! The tables are the markdown report's own ([`crate::output::markdown`],
//! [`crate::report::scenario_markdown`]), turned into HTML here, so the
//! page and stdout cannot disagree and a row added to the markdown shows
//! on the page too. Every piece of text goes through [`escape`].
//!
//! Each chart is a `<figure class="chart" data-points="N">`: `N` is the
//! number of values it drew, each one dot (an SVG `<circle>`), which a test
//! in a browser counts (`load-tests/tests/html_report.rs`).
//!
//! ```
//! use load_tests::html::escape;
//! assert_eq!(escape("<b>\"a\" & 'b'</b>"), "&lt;b&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/b&gt;");
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use budget_core::clock::{SystemClock, WallClock};

use crate::cli::Invocation;
use crate::output::markdown;
use crate::plot::{PlotError, by_scenario, scenario_charts};
use crate::report::{RunReport, scenario_markdown};

/// Why the page could not be made or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HtmlError {
    /// A chart could not be drawn.
    #[error(transparent)]
    Chart(#[from] PlotError),
    /// The file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, for HTML text and
/// attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes the page of `reports` to `path`, dated now.
///
/// # Errors
///
/// When a chart cannot be drawn or the file cannot be written.
pub fn write_html(
    path: &Path,
    invocation: &Invocation,
    command: &str,
    reports: &[RunReport],
) -> Result<(), HtmlError> {
    let page = render(invocation, command, reports, SystemClock.now())?;
    std::fs::write(path, page).map_err(|source| HtmlError::Write {
        path: path.to_owned(),
        source,
    })
}

/// The page of `reports`, dated `at`.
///
/// # Errors
///
/// When a chart cannot be drawn.
///
/// ```
/// use std::time::SystemTime;
/// use clap::Parser;
/// use load_tests::cli::Args;
/// use load_tests::html::render;
///
/// let invocation = Args::try_parse_from(["load-tests", "--scenario", "slow"]).unwrap().invocation().unwrap();
/// let page = render(&invocation, "load-tests --scenario slow", &[], SystemTime::UNIX_EPOCH).unwrap();
/// assert!(page.starts_with("<!DOCTYPE html>"));
/// assert!(page.contains("1970-01-01T00:00:00Z"));
/// assert!(page.contains("No run finished"));
/// ```
pub fn render(
    invocation: &Invocation,
    command: &str,
    reports: &[RunReport],
    at: SystemTime,
) -> Result<String, HtmlError> {
    let groups = by_scenario(reports);
    let mut out = String::new();
    out.push_str(HEAD);
    out.push_str(
        "<header>\n<h1>Load tests: one shared time budget against generous timeouts</h1>\n",
    );
    // The markdown's setup without its title: the command, the machine,
    // the chain.
    for block in blocks(&markdown(invocation, command, &[])) {
        if let Block::Paragraph(text) = block {
            let _ = writeln!(out, "<p class=\"setup\">{}</p>", inline(&text));
        }
    }
    let _ = writeln!(
        out,
        "<p class=\"setup\">Date: {}</p>\n</header>",
        escape(&humantime::format_rfc3339_seconds(at).to_string())
    );
    out.push_str(INTRO);
    // The modes this run has, in run order.
    let mut modes: Vec<&str> = Vec::new();
    for r in reports {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    for mode in modes {
        let _ = writeln!(
            out,
            "<dt class=\"mode-{}\">{} mode</dt>\n<dd>{}</dd>",
            anchor_part(mode),
            escape(mode),
            mode_help(mode)
        );
    }
    out.push_str(DEFINITIONS);
    if groups.is_empty() {
        out.push_str("<p>No run finished, so there is nothing to show.</p>\n");
    } else {
        out.push_str("<nav><h2>Scenarios</h2>\n<ul>\n");
        for (scenario, group) in &groups {
            let description = group.first().map_or("", |r| r.description.as_str());
            let _ = writeln!(
                out,
                "<li><a href=\"#{}\">{}</a>: {}</li>",
                anchor(scenario),
                escape(scenario),
                escape(description)
            );
        }
        out.push_str("</ul>\n</nav>\n");
    }
    for (scenario, group) in &groups {
        section(&mut out, scenario, group)?;
    }
    out.push_str("</main>\n</body>\n</html>\n");
    Ok(out)
}

/// One scenario: its heading and setup, its table, its charts, then what
/// else its markdown holds (a ramp's steps) and the budget tables of its
/// modes side by side.
fn section(out: &mut String, scenario: &str, group: &[&RunReport]) -> Result<(), HtmlError> {
    let owned: Vec<RunReport> = group.iter().map(|r| (*r).clone()).collect();
    let mut blocks = blocks(&scenario_markdown(&owned)).into_iter().peekable();
    let _ = writeln!(out, "<section id=\"{}\">", anchor(scenario));
    // The heading and the setup line, up to the first table.
    while let Some(block) = blocks.next_if(|b| !matches!(b, Block::Table { .. })) {
        write_block(out, &block, "");
    }
    if let Some(table) = blocks.next() {
        out.push_str("<div class=\"wide\">\n");
        write_block(out, &table, "scenario");
        out.push_str("</div>\n");
    }
    let budget = group.first().map_or(0, |r| r.budget_ms);
    // A scenario without a request load has no per-second series to chart.
    let request_load = crate::scenarios::find(scenario).is_none_or(|s| s.get().request_load());
    let charts = if request_load {
        scenario_charts(group)?
    } else {
        Vec::new()
    };
    out.push_str("<div class=\"charts\">\n");
    for chart in charts {
        let _ = writeln!(
            out,
            "<figure class=\"chart\" data-chart=\"{}\" data-points=\"{}\">\n<figcaption><strong>{}</strong>: {}</figcaption>\n<ul class=\"legend\">",
            escape(&chart.title),
            chart.points,
            escape(&chart.title),
            escape(&chart_help(&chart.title, budget)),
        );
        for (label, css_colour) in &chart.legend {
            let _ = write!(
                out,
                "<li><span style=\"background: {}\"></span>{}</li>",
                escape(css_colour),
                escape(label)
            );
        }
        let _ = writeln!(out, "</ul>\n{}</figure>", chart.svg);
    }
    out.push_str("</div>\n");
    // The rest: "Budget table, ..." paragraphs start a card with the block
    // after them; consecutive cards sit side by side where they fit.
    let mut in_row = false;
    while let Some(block) = blocks.next() {
        let card = matches!(&block, Block::Paragraph(t) if t.starts_with("Budget table"));
        if card && !in_row {
            out.push_str("<div class=\"side-by-side\">\n");
            in_row = true;
        } else if !card && in_row {
            out.push_str("</div>\n");
            in_row = false;
        }
        if card {
            out.push_str("<div class=\"card\">\n");
            write_block(out, &block, "");
            if let Some(next) = blocks.next_if(|b| match b {
                Block::Table { .. } => true,
                Block::Paragraph(t) => !t.starts_with("Budget table"),
                Block::Heading(..) => false,
            }) {
                write_block(out, &next, "budget");
            }
            out.push_str("</div>\n");
        } else {
            write_block(out, &block, "");
        }
    }
    if in_row {
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
    Ok(())
}

/// What a chart shows, in plain words, under its title.
fn chart_help(title: &str, budget_ms: u64) -> String {
    match title {
        "goodput per second" => "for each second of the run (by the time a request was due to be sent), how many of that \
             second's requests came back 2xx within their budget, one line per mode; grey: how many were sent \
             (the offered load). Higher is better; a mode's line on the grey one means every request was useful."
            .to_owned(),
        "p99 latency per second" => format!(
            "the time within which 99 % of that second's requests got their answer (or gave up), one line per \
             mode, log scale. Lower is better; the dashed line is the client's budget, {budget_ms} ms: an \
             answer above it arrived after the caller stopped waiting for it."
        ),
        "floor in force per dependency" => "budget mode only: checkout does not call a dependency when less than this \
             is left of the budget, and answers at once instead. Learned from the dependency's own recent latency, \
             or fixed where configured; read from checkout's /metrics at the end of each second."
            .to_owned(),
        "adaptive concurrency limit per dependency" => "budget mode only: how many calls checkout lets be in flight to \
             each dependency at once. It rises while the dependency answers about as fast as when idle and falls \
             when answers slow down or fail; read from checkout's /metrics at the end of each second."
            .to_owned(),
        _ => String::new(),
    }
}

/// What a mode does, in plain words, as HTML (the modes of
/// [`crate::chain::ChainMode`]; `load-tests/README.md` has them all).
fn mode_help(mode: &str) -> String {
    match mode {
        "budget" => "Every hop passes on what is left of the caller's budget; a call that cannot finish in \
             what is left is not made, retries are paid from the same budget, and an answer comes by the \
             deadline: a fast, honest <code>504</code> when nothing better fits."
            .to_owned(),
        "naive" => "Budget mode off: nothing is passed on, and every hop waits for its dependencies with \
             generous fixed timeouts (30 s), as many services do. Work goes on long after the caller \
             stopped waiting."
            .to_owned(),
        "peer" => "Edge in budget mode, and checkout replaced by what an experienced tower user would write \
             without this project: per dependency a load shedder, a fixed concurrency limit and a 2 s \
             timeout, pricing retried up to 3 times, no budget passed on."
            .to_owned(),
        "queue" => "As <code>peer</code>, without the load shedder: a call beyond the concurrency limit \
             waits for a permit, first come, first served, and the 2 s timeout covers the wait and the \
             call, as a tower user writes who does not shed."
            .to_owned(),
        "p2c" => "As <code>peer</code>, with each dependency balanced over its replicas by tower's \
             power-of-two-choices balancer over peak-EWMA latency (per replica a concurrency limit; \
             a small buffer in front, then the load shedder and the 2 s timeout)."
            .to_owned(),
        "envoy" => "Edge in budget mode, and checkout in budget mode off (fixed timeouts, its own fixed \
             retries) calling each dependency through an Envoy sidecar configured as an experienced Envoy \
             user would: a 2 s route timeout, 1 s per try, up to two retries under a retry budget, \
             adaptive concurrency, outlier detection, circuit breakers, least-request balancing over the \
             replicas. No budget passed on."
            .to_owned(),
        "target" => "A running edge given with <code>--target</code>: whatever it is configured to do.".to_owned(),
        other => format!(
            "The <code>{}</code> mode: see <code>load-tests/README.md</code>.",
            escape(other)
        ),
    }
}

/// `text` as a piece of an `id` or class: letters, digits and `-`.
fn anchor_part(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// An `id` for a scenario's section.
fn anchor(scenario: &str) -> String {
    format!("scenario-{}", anchor_part(scenario))
}

/// A piece of the markdown report.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Block {
    /// `#`s (how many) and the heading's text.
    Heading(usize, String),
    /// Lines up to a blank line, joined by spaces.
    Paragraph(String),
    /// A pipe table: the header row and the body rows, cells unescaped.
    Table {
        /// The first row.
        header: Vec<String>,
        /// The rows after the `|---|` line.
        rows: Vec<Vec<String>>,
    },
}

/// The blocks of markdown as the report writes it: ATX headings, pipe
/// tables (the first row the header, then a `|---|` line), paragraphs.
/// Anything else reads as a paragraph, so no text is lost.
fn blocks(md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let mut table: Vec<Vec<String>> = Vec::new();
    let flush = |out: &mut Vec<Block>, paragraph: &mut Vec<&str>, table: &mut Vec<Vec<String>>| {
        if !paragraph.is_empty() {
            out.push(Block::Paragraph(paragraph.join(" ")));
            paragraph.clear();
        }
        if !table.is_empty() {
            let mut rows = std::mem::take(table).into_iter();
            let header = rows.next().unwrap_or_default();
            out.push(Block::Table {
                header,
                rows: rows.collect(),
            });
        }
    };
    for line in md.lines() {
        let line = line.trim_end();
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if line.is_empty() {
            flush(&mut out, &mut paragraph, &mut table);
        } else if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            flush(&mut out, &mut paragraph, &mut table);
            out.push(Block::Heading(hashes, line[hashes..].trim().to_owned()));
        } else if line.starts_with('|') && paragraph.is_empty() {
            let cells = cells(line);
            let rule = cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')));
            if !(rule && table.len() == 1) {
                table.push(cells);
            }
        } else {
            if !table.is_empty() {
                flush(&mut out, &mut paragraph, &mut table);
            }
            paragraph.push(line.trim());
        }
    }
    flush(&mut out, &mut paragraph, &mut table);
    out
}

/// The cells of a pipe-table row: split at `|` not escaped by `\`, the
/// outer pipes dropped, each trimmed, `\|` read as `|`.
fn cells(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '|' => cells.push(std::mem::take(&mut cell)),
            c => cell.push(c),
        }
    }
    cells.push(cell);
    // The text before the first pipe and after the last one.
    if cells.first().is_some_and(|c| c.trim().is_empty()) {
        cells.remove(0);
    }
    if cells.last().is_some_and(|c| c.trim().is_empty()) {
        cells.pop();
    }
    cells.into_iter().map(|c| c.trim().to_owned()).collect()
}

/// A line of markdown text as HTML: escaped, `` `code` `` and `**bold**`
/// kept as such.
fn inline(text: &str) -> String {
    let mut out = String::new();
    let mut strong = false;
    let mut rest = text;
    while let Some(i) = rest.find(['`', '*']) {
        out.push_str(&escape(&rest[..i]));
        rest = &rest[i..];
        if let Some(code) = rest.strip_prefix('`')
            && let Some(end) = code.find('`')
        {
            let _ = write!(out, "<code>{}</code>", escape(&code[..end]));
            rest = &code[end + 1..];
        } else if let Some(after) = rest.strip_prefix("**") {
            out.push_str(if strong { "</strong>" } else { "<strong>" });
            strong = !strong;
            rest = after;
        } else {
            out.push_str(&escape(&rest[..1]));
            rest = &rest[1..];
        }
    }
    out.push_str(&escape(rest));
    if strong {
        out.push_str("</strong>");
    }
    out
}

/// Writes one block; a table gets `class`.
fn write_block(out: &mut String, block: &Block, class: &str) {
    match block {
        // The markdown's `###` scenario headings are the page's `h2`.
        Block::Heading(level, text) => {
            let level = level.saturating_sub(1).clamp(2, 6);
            let _ = writeln!(out, "<h{level}>{}</h{level}>", inline(text));
        }
        Block::Paragraph(text) => {
            let _ = writeln!(out, "<p>{}</p>", inline(text));
        }
        Block::Table { header, rows } => {
            let _ = writeln!(out, "<table class=\"{}\">\n<thead><tr>", escape(class));
            for cell in header {
                let _ = write!(out, "<th>{}</th>", inline(cell));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for row in rows {
                out.push_str("<tr>");
                for cell in row {
                    let _ = write!(out, "<td>{}</td>", inline(cell));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table>\n");
        }
    }
}

/// The page's head and style: system fonts, no file loaded.
const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Load tests: one shared time budget against generous timeouts</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 0 auto; max-width: 1280px; padding: 0 16px 32px; line-height: 1.4; }
h1 { font-size: 1.6em; margin: 16px 0 8px; }
h2 { font-size: 1.3em; margin: 28px 0 8px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin: 16px 0 6px; }
p.setup { margin: 2px 0; color: #444; font-size: 0.92em; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.9em; background: #f3f3f3; padding: 0 3px; border-radius: 3px; word-break: break-word; }
.intro { background: #f7f9fc; border: 1px solid #dde4ee; border-radius: 6px; padding: 4px 16px; margin: 12px 0; }
.intro dt { font-weight: 600; margin-top: 6px; }
.intro dd { margin: 0 0 0 18px; }
.mode-budget { color: rgb(31,119,180); } .mode-naive { color: rgb(214,39,40); } .mode-peer { color: rgb(148,103,189); } .mode-p2c { color: rgb(23,190,207); }
table { border-collapse: collapse; font-size: 0.85em; margin: 6px 0 12px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; white-space: normal; }
table.budget td:last-child { text-align: left; white-space: normal; }
thead th { background: #f0f0f0; }
tbody tr:nth-child(even) { background: #fafafa; }
.wide { overflow-x: auto; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 12px; }
figure.chart { margin: 0; border: 1px solid #e3e3e3; border-radius: 6px; padding: 8px; background: #fff; }
figure.chart figcaption { font-size: 0.85em; color: #444; margin-bottom: 4px; }
figure.chart svg { width: 100%; height: auto; display: block; }
ul.legend { list-style: none; margin: 0 0 2px; padding: 0; font-size: 0.8em; display: flex; flex-wrap: wrap; gap: 2px 14px; }
ul.legend span { display: inline-block; width: 18px; height: 4px; vertical-align: middle; margin-right: 5px; border-radius: 2px; }
.side-by-side { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.card { overflow-x: auto; flex: 0 1 auto; max-width: 100%; }
.card p { margin: 8px 0 2px; font-weight: 600; }
table.budget { font-size: 0.78em; }
table.budget th, table.budget td { padding: 2px 5px; }
table.budget th:last-child { text-align: left; }
</style>
</head>
<body>
<main>
"#;

/// What the page is and how to read it, in plain words (the definitions
/// of [`crate::report`], the modes of [`crate::scenario`]).
const INTRO: &str = r#"<section class="intro">
<p>Each scenario starts a slow partner (the dependencies inventory, pricing and recommendations), checkout (which calls them) and edge (which calls checkout) in one process on 127.0.0.1, and sends the same load once per mode: requests at fixed send times whatever the answers do (an open loop), each with a time budget (the <code>request-budget-ms</code> header: how long the caller is willing to wait). Only the way the chain handles that budget differs between the columns. (With <code>--target</code>, the load goes to an edge that is already running instead.)</p>
<dl>
"#;

/// The rest of the intro: what the numbers and tables are.
const DEFINITIONS: &str = r#"<dt>goodput</dt>
<dd>Answers that are useful to the caller: <code>2xx</code> that arrived within the budget the client sent, per second. A <code>200</code> after the budget does not count: nobody was waiting for it any more. Higher is better.</dd>
<dt>late work</dt>
<dd>Work done for nobody: the partner's calls that ended after the budget they came with (its own count, only where a budget arrives), and, comparable in every mode, the partner's calls whose answer did not make it back by the client's deadline; on the client's side, answers that came after the request's own budget.</dd>
<dt>budget table</dt>
<dd>Where the time went, read from the <code>Server-Timing</code> header of every answer: a row per step (the budget each hop started with, marked <em>ingress budget</em>; each call to a dependency; waits before a retry; waits for a free slot, <code>-queue</code>), with its duration percentiles, its retries, its skips (calls not made because too little budget was left) and its share of the budget.</dd>
</dl>
<p>Under each scenario's table: its charts, a value per second of the run, then the budget table of each mode, side by side where they fit.</p>
</section>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_the_five_characters_that_matter_in_html() {
        assert_eq!(
            escape("a<b>&\"c\"'d'"),
            "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;"
        );
        assert_eq!(escape("plain -> text"), "plain -&gt; text");
    }

    #[test]
    fn inline_keeps_code_and_bold_and_escapes_the_rest() {
        assert_eq!(
            inline("Command: `load-tests --x '<y>'`"),
            "Command: <code>load-tests --x &#39;&lt;y&gt;&#39;</code>"
        );
        assert_eq!(inline("**128.0**"), "<strong>128.0</strong>");
        assert_eq!(
            inline("**goodput** (2xx), 2 * 3"),
            "<strong>goodput</strong> (2xx), 2 * 3"
        );
        // An unclosed bold is closed, an unpaired backtick is text.
        assert_eq!(inline("**a <b"), "<strong>a &lt;b</strong>");
        assert_eq!(inline("a ` b"), "a ` b");
    }

    #[test]
    fn blocks_read_the_report_s_headings_paragraphs_and_pipe_tables() {
        let md = "### slow: partner 10x slower\n\n20 req/s for 3 s.\n\n\
                  |      | budget mode |\n|------|-------------|\n| 429  |  0 |\n| note | a \\| b |\n\n\
                  Budget table, budget mode (3 answers):\n\n(none)\n";
        assert_eq!(
            blocks(md),
            [
                Block::Heading(3, "slow: partner 10x slower".into()),
                Block::Paragraph("20 req/s for 3 s.".into()),
                Block::Table {
                    header: vec!["".into(), "budget mode".into()],
                    rows: vec![
                        vec!["429".into(), "0".into()],
                        vec!["note".into(), "a | b".into()]
                    ],
                },
                Block::Paragraph("Budget table, budget mode (3 answers):".into()),
                Block::Paragraph("(none)".into()),
            ]
        );
        // A `#` without a space is text; a line right after a table ends
        // it; a pipe inside a paragraph is text.
        assert_eq!(
            blocks("#7 first\n\n| a |\nafter\n| b |"),
            [
                Block::Paragraph("#7 first".into()),
                Block::Table {
                    header: vec!["a".into()],
                    rows: vec![]
                },
                Block::Paragraph("after | b |".into()),
            ]
        );
    }

    #[test]
    fn a_table_cell_with_markup_is_escaped_in_the_page() {
        let mut out = String::new();
        write_block(
            &mut out,
            &Block::Table {
                header: vec!["step".into()],
                rows: vec![vec!["<script>alert(1)</script>".into()]],
            },
            "budget",
        );
        assert!(
            out.contains("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"),
            "{out}"
        );
        assert!(!out.contains("<script>"), "{out}");
    }

    #[test]
    fn every_mode_is_explained_and_an_unknown_one_is_escaped() {
        for mode in ["budget", "naive", "peer", "queue", "p2c", "envoy", "target"] {
            assert!(!mode_help(mode).contains("README"), "{mode}");
        }
        assert_eq!(
            mode_help("<x>"),
            "The <code>&lt;x&gt;</code> mode: see <code>load-tests/README.md</code>."
        );
    }

    #[test]
    fn anchors_are_safe_ids() {
        assert_eq!(anchor("mixed-budgets"), "scenario-mixed-budgets");
        assert_eq!(anchor("a\"b c"), "scenario-a-b-c");
    }

    #[test]
    fn writing_to_a_directory_is_an_error_naming_the_path() {
        use clap::Parser as _;
        let invocation = crate::cli::Args::try_parse_from(["load-tests"])
            .unwrap()
            .invocation()
            .unwrap();
        let dir = std::env::temp_dir();
        let err = write_html(&dir, &invocation, "load-tests", &[]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("cannot write {}: ", dir.display())),
            "{err}"
        );
    }
}
