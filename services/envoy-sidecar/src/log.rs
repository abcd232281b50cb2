//! Envoy's own output, kept in a file beside its config, and the tail of
//! it that an error shows.

use std::path::Path;

/// How many of the last log lines an error shows.
pub(crate) const TAIL_LINES: usize = 20;

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The last [`TAIL_LINES`] of the log file at `path`, or why it could not
/// be read.
pub(crate) fn tail_of(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => tail(&String::from_utf8_lossy(&bytes), TAIL_LINES),
        Err(e) => format!("(no log at {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tail_is_the_last_lines_and_all_of_a_short_text() {
        assert_eq!(super::tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(super::tail("a", 5), "a");
        assert_eq!(super::tail("", 5), "");
    }
}
