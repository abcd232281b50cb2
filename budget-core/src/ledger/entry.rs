//! [`Entry`]: one line of the ledger, and how it is written as a
//! `Server-Timing` metric (a valid token for the name, a valid
//! quoted-string for the description).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::millis::{MillisText, ingress_parts, write_millis};
use super::*;

/// One line of the ledger.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use budget_core::ledger::Entry;
///
/// let e = Entry::attempt("pricing", 2, Duration::from_millis(40), "503");
/// assert_eq!(e.to_string(), "pricing;dur=40;desc=\"503\"");
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Entry {
    /// The budget the request arrived with (after default and clamp).
    Ingress {
        /// The budget.
        #[serde(with = "crate::config::duration")]
        budget: Duration,
    },
    /// One attempt of a downstream call.
    Attempt {
        /// The dependency's name.
        dependency: String,
        /// 1 for the first attempt, 2 for the first retry, ...
        attempt: u32,
        /// How long the attempt took.
        #[serde(with = "crate::config::duration")]
        duration: Duration,
        /// The status code, or the kind of failure (`connect`, `timeout`, ...).
        outcome: String,
    },
    /// A backoff wait before a retry, paid from the budget.
    Wait {
        /// The dependency being waited for.
        dependency: String,
        /// How long the wait was.
        #[serde(with = "crate::config::duration")]
        duration: Duration,
    },
    /// A call that was not made, with the reason.
    Skip {
        /// The dependency that was skipped.
        dependency: String,
        /// Why, e.g. `skipped: 850ms < floor 1000ms`.
        reason: String,
    },
    /// A dependency's answer served from the client's stale cache because
    /// the call was not made or failed (`on_unavailable = "stale"`, see
    /// [`DependencyConfig`][dependency-config] with the
    /// `client` feature): how old the answer was.
    ///
    #[cfg_attr(
        any(feature = "client", feature = "grpc"),
        doc = "[dependency-config]: crate::client::DependencyConfig"
    )]
    #[cfg_attr(
        not(any(feature = "client", feature = "grpc")),
        doc = "[dependency-config]: crate::docs::client"
    )]
    Stale {
        /// The dependency whose old answer was served.
        dependency: String,
        /// The answer's age when it was served.
        #[serde(with = "crate::config::duration")]
        age: Duration,
    },
    /// A local step of the handler (a database query, a computation).
    Local {
        /// The step's name.
        name: String,
        /// How long it took.
        #[serde(with = "crate::config::duration")]
        duration: Duration,
        /// An optional description.
        desc: Option<String>,
    },
}

impl Entry {
    /// The ingress entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::ingress(Duration::from_secs(2)).to_string(), "budget;dur=2000;desc=\"ingress\"");
    /// ```
    pub fn ingress(budget: Duration) -> Self {
        Entry::Ingress { budget }
    }

    /// An attempt entry; `outcome` is a status code or a failure kind.
    /// Successful (2xx) attempts render without a `desc`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::attempt("inv", 1, Duration::from_millis(3), "200").to_string(), "inv;dur=3");
    /// ```
    pub fn attempt(
        dependency: impl Into<String>,
        attempt: u32,
        duration: Duration,
        outcome: impl Into<String>,
    ) -> Self {
        Entry::Attempt {
            dependency: dependency.into(),
            attempt,
            duration,
            outcome: outcome.into(),
        }
    }

    /// A backoff wait entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::wait("pricing", Duration::from_millis(200)).to_string(), "pricing-wait;dur=200");
    /// ```
    pub fn wait(dependency: impl Into<String>, duration: Duration) -> Self {
        Entry::Wait {
            dependency: dependency.into(),
            duration,
        }
    }

    /// A skipped-call entry.
    ///
    /// ```
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::skip("recs", "skipped: circuit open").to_string(), "recs;desc=\"skipped: circuit open\"");
    /// ```
    pub fn skip(dependency: impl Into<String>, reason: impl Into<String>) -> Self {
        Entry::Skip {
            dependency: dependency.into(),
            reason: reason.into(),
        }
    }

    /// A stale-answer entry: `desc` is `stale` and the age, in whole
    /// seconds from 1 s on, in milliseconds below.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::stale("inventory", Duration::from_millis(12_700)).to_string(), "inventory;desc=\"stale 12s\"");
    /// assert_eq!(Entry::stale("inventory", Duration::from_millis(350)).to_string(), "inventory;desc=\"stale 350ms\"");
    /// ```
    pub fn stale(dependency: impl Into<String>, age: Duration) -> Self {
        Entry::Stale {
            dependency: dependency.into(),
            age,
        }
    }

    /// A local step entry.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use budget_core::ledger::Entry;
    /// assert_eq!(Entry::local("db", Duration::from_micros(1500), None).to_string(), "db;dur=1.5");
    /// ```
    pub fn local(name: impl Into<String>, duration: Duration, desc: Option<String>) -> Self {
        Entry::Local {
            name: name.into(),
            duration,
            desc,
        }
    }
}

impl fmt::Display for Entry {
    /// Renders the entry as one `Server-Timing` metric.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        self.render(&mut out);
        f.write_str(&out)
    }
}

impl Entry {
    /// Appends the entry as one `Server-Timing` metric to `out`.
    pub(super) fn render(&self, out: &mut String) {
        match self {
            Entry::Ingress { budget } => {
                let millis = MillisText::new(*budget);
                for part in ingress_parts(millis.as_bytes()) {
                    // ASCII throughout: the constants and the digits.
                    out.push_str(std::str::from_utf8(part).unwrap_or_default());
                }
            }
            Entry::Attempt {
                dependency,
                duration,
                outcome,
                ..
            } => {
                let ok = outcome.len() == 3 && outcome.starts_with('2');
                let desc = (!ok).then_some(outcome.as_str());
                write_metric(out, dependency, "", Some(*duration), desc)
            }
            Entry::Wait {
                dependency,
                duration,
            } => write_metric(out, dependency, WAIT_SUFFIX, Some(*duration), None),
            Entry::Skip { dependency, reason } => {
                write_metric(out, dependency, "", None, Some(reason))
            }
            Entry::Stale { dependency, age } => {
                write_metric(out, dependency, "", None, Some(&stale_note(*age)))
            }
            Entry::Local {
                name,
                duration,
                desc,
            } => write_metric(out, name, "", Some(*duration), desc.as_deref()),
        }
    }
}

/// Writes `name[suffix][;dur=ms][;desc="..."]`, keeping `name` a valid token
/// and `desc` a valid quoted-string. Text that needs no mending is copied
/// whole (the common case, on every response).
fn write_metric(
    out: &mut String,
    name: &str,
    suffix: &str,
    dur: Option<Duration>,
    desc: Option<&str>,
) {
    if name.is_empty() {
        out.push('_');
    }
    for part in [name, suffix] {
        if part.bytes().all(is_tchar_byte) {
            out.push_str(part);
        } else {
            out.extend(part.chars().map(|c| if is_tchar(c) { c } else { '_' }));
        }
    }
    if let Some(d) = dur {
        out.push_str(";dur=");
        write_millis(out, d);
    }
    if let Some(desc) = desc {
        out.push_str(";desc=\"");
        let plain = |b: u8| b == b'\t' || ((b' '..=b'~').contains(&b) && b != b'"' && b != b'\\');
        if desc.bytes().all(plain) {
            out.push_str(desc);
        } else {
            for c in desc.chars() {
                match c {
                    '"' | '\\' => {
                        out.push('\\');
                        out.push(c);
                    }
                    // Header values are visible ASCII, space and tab only.
                    c if c == '\t' || (' '..='~').contains(&c) => out.push(c),
                    _ => out.push('?'),
                }
            }
        }
        out.push('"');
    }
}

/// The note of a stale answer `age` old, as its ledger entry's `desc`
/// says it (and a caller that marks its answer degraded): `stale` and the
/// age, in whole seconds from 1 s on, in milliseconds below.
///
/// ```
/// # use std::time::Duration;
/// use budget_core::ledger::stale_note;
/// assert_eq!(stale_note(Duration::from_millis(12_700)), "stale 12s");
/// assert_eq!(stale_note(Duration::from_millis(350)), "stale 350ms");
/// ```
pub fn stale_note(age: Duration) -> String {
    if age.as_secs() == 0 {
        format!("stale {}ms", age.as_millis())
    } else {
        format!("stale {}s", age.as_secs())
    }
}

/// RFC 9110's `tchar`, for a `char`: the one rule for a token, here and in
/// a dependency's name (which becomes a `Server-Timing` metric name).
pub(crate) fn is_tchar(c: char) -> bool {
    u8::try_from(c).is_ok_and(is_tchar_byte)
}

/// RFC 9110's `tchar`.
fn is_tchar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}
