//! [`error_chain`]: an error and its `source()` chain as one line, the one
//! way this crate and the services write an error into a log line, a
//! problem body or a message on stderr.

use std::error::Error as StdError;

/// `err`'s message and every source's, joined by `: `, for one-line
/// messages (`a: b: c`). A source whose message the line already ends
/// with (an error that says its cause's text itself) is not repeated.
///
/// # Example
///
/// ```
/// use std::error::Error;
/// use std::fmt;
///
/// #[derive(Debug)]
/// struct Outer(std::io::Error);
/// impl fmt::Display for Outer {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("cannot read the config")
///     }
/// }
/// impl Error for Outer {
///     fn source(&self) -> Option<&(dyn Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let err = Outer(std::io::Error::other("disk on fire"));
/// assert_eq!(budget_core::error_chain(&err), "cannot read the config: disk on fire");
/// ```
pub fn error_chain(err: &(dyn StdError + 'static)) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(source) = next {
        let text = source.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = source.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct Says(&'static str, Option<std::io::Error>);
    impl fmt::Display for Says {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl StdError for Says {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_ref().map(|e| e as _)
        }
    }

    #[test]
    fn a_cause_the_message_already_ends_with_is_said_once() {
        let cause = || Some(std::io::Error::other("850ms < floor 1000ms"));
        let repeats = Says("call not made: 850ms < floor 1000ms", cause());
        assert_eq!(error_chain(&repeats), "call not made: 850ms < floor 1000ms");
        let wraps = Says("call not made", cause());
        assert_eq!(error_chain(&wraps), "call not made: 850ms < floor 1000ms");
    }
}
