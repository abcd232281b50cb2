//! [`error_chain`]: an error and its `source()` chain as one line, the one
//! way this crate and the services write an error into a log line, a
//! problem body or a message on stderr.

use std::error::Error as StdError;

/// `err`'s message and every source's, joined by `: `, for one-line
/// messages (`a: b: c`).
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
        out.push_str(": ");
        out.push_str(&source.to_string());
        next = source.source();
    }
    out
}
