//! [`ExpectStatus`]: which answers count as "up" (`--expect-status 2xx,301`).

use std::fmt;
use std::str::FromStr;

use http::StatusCode;

/// The statuses that count as up: a comma-separated list of codes (`204`)
/// and classes (`2xx`, any case), `2xx` by default.
///
/// # Example
///
/// ```
/// use budget_examples::check::ExpectStatus;
/// use http::StatusCode;
///
/// let expect: ExpectStatus = "2xx, 301".parse().unwrap();
/// assert!(expect.matches(StatusCode::NO_CONTENT));
/// assert!(expect.matches(StatusCode::MOVED_PERMANENTLY));
/// assert!(!expect.matches(StatusCode::FOUND));
/// assert_eq!(expect.to_string(), "2xx,301");
/// assert!("7xx".parse::<ExpectStatus>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectStatus {
    patterns: Vec<Pattern>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// `2xx`: the hundreds digit.
    Class(u16),
    /// `204`.
    Code(u16),
}

impl ExpectStatus {
    /// True when `status` is one of the expected ones.
    ///
    /// ```
    /// # use budget_examples::check::ExpectStatus;
    /// assert!(ExpectStatus::default().matches(http::StatusCode::OK));
    /// assert!(!ExpectStatus::default().matches(http::StatusCode::NOT_FOUND));
    /// ```
    pub fn matches(&self, status: StatusCode) -> bool {
        let code = status.as_u16();
        self.patterns.iter().any(|p| match *p {
            Pattern::Class(hundreds) => code / 100 == hundreds,
            Pattern::Code(c) => code == c,
        })
    }
}

impl Default for ExpectStatus {
    /// `2xx`.
    fn default() -> Self {
        Self {
            patterns: vec![Pattern::Class(2)],
        }
    }
}

impl fmt::Display for ExpectStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.patterns.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match p {
                Pattern::Class(hundreds) => write!(f, "{hundreds}xx")?,
                Pattern::Code(code) => write!(f, "{code}")?,
            }
        }
        Ok(())
    }
}

/// An `--expect-status` list that does not parse: names the entry.
///
/// ```
/// use budget_examples::check::ExpectStatus;
/// let err = "200,abc".parse::<ExpectStatus>().unwrap_err();
/// assert_eq!(err.to_string(), "`abc` is not a status (100-599) or a class (1xx-5xx)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{entry}` is not a status (100-599) or a class (1xx-5xx)")]
pub struct ParseExpectError {
    entry: String,
}

impl FromStr for ExpectStatus {
    type Err = ParseExpectError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let patterns = s
            .split(',')
            .map(|entry| {
                let entry = entry.trim();
                parse_pattern(entry).ok_or_else(|| ParseExpectError {
                    entry: entry.to_owned(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { patterns })
    }
}

fn parse_pattern(entry: &str) -> Option<Pattern> {
    let bytes = entry.as_bytes();
    match bytes {
        [d @ b'1'..=b'5', x, y]
            if x.eq_ignore_ascii_case(&b'x') && y.eq_ignore_ascii_case(&b'x') =>
        {
            Some(Pattern::Class(u16::from(d - b'0')))
        }
        [b'0'..=b'9', b'0'..=b'9', b'0'..=b'9'] => {
            let code: u16 = entry.parse().ok()?;
            (100..=599).contains(&code).then_some(Pattern::Code(code))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_classes_parse_and_anything_else_is_named() {
        let e: ExpectStatus = "200,3XX , 404".parse().unwrap();
        assert_eq!(e.to_string(), "200,3xx,404");
        assert!(e.matches(StatusCode::TEMPORARY_REDIRECT));
        assert!(!e.matches(StatusCode::CREATED));
        for bad in [
            "", "2x", "6xx", "0xx", "099", "600", "+20", "2000", "20 0", "200,,201", "٢٠٠",
        ] {
            assert!(bad.parse::<ExpectStatus>().is_err(), "{bad:?}");
        }
    }
}
