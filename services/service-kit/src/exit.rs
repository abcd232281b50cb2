use std::error::Error as StdError;
use std::process::ExitCode;

use crate::error_chain;

/// The exit code of a usage error: a malformed flag (clap's own code), or a
/// config file or value that cannot be used.
///
/// ```
/// assert_eq!(service_kit::EXIT_USAGE, 2);
/// ```
pub const EXIT_USAGE: u8 = 2;

/// Says `error: ` and `err` with its sources on stderr, and gives the exit
/// code of a usage error, [`EXIT_USAGE`].
///
/// ```
/// use std::process::ExitCode;
///
/// let err = std::io::Error::other("`floor` must be below max_budget");
/// assert_eq!(service_kit::exit_usage(&err), ExitCode::from(2));
/// ```
pub fn exit_usage(err: &(dyn StdError + 'static)) -> ExitCode {
    report(err);
    ExitCode::from(EXIT_USAGE)
}

/// Says `error: ` and `err` with its sources on stderr, and gives
/// [`ExitCode::FAILURE`] (1): the binary could not start or stopped on an
/// error.
///
/// ```
/// use std::process::ExitCode;
///
/// let err = std::io::Error::other("address in use");
/// assert_eq!(service_kit::exit_failure(&err), ExitCode::FAILURE);
/// ```
pub fn exit_failure(err: &(dyn StdError + 'static)) -> ExitCode {
    report(err);
    ExitCode::FAILURE
}

/// One line on stderr: `error: a: b: c`.
fn report(err: &(dyn StdError + 'static)) {
    eprintln!("error: {}", error_chain(err));
}
