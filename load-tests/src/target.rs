//! Where load may go: loopback only.
//!
//! A load generator pointed at the wrong host is a denial-of-service tool.
//! Every URL this crate sends to goes through [`LoopbackUrl::parse`], which
//! accepts `http` URLs whose host is a loopback IP literal (`127.0.0.0/8`,
//! `::1`) or `localhost` (pinned to `127.0.0.1`, never resolved), and
//! refuses everything else with an error that says why. The HTTP client is
//! built without proxies and without redirects ([`loopback_client`]), so a
//! proxy setting or a `Location` header cannot take a request elsewhere.
//!
//! ```
//! use load_tests::target::LoopbackUrl;
//!
//! let url = LoopbackUrl::parse("http://localhost:8080/checkout").unwrap();
//! assert_eq!(url.as_str(), "http://127.0.0.1:8080/checkout");
//! let err = LoopbackUrl::parse("http://example.com/checkout").unwrap_err();
//! assert_eq!(err.to_string(), "refusing http://example.com/checkout: host `example.com` is not a loopback address (127.0.0.0/8, ::1 or localhost)");
//! ```

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use reqwest::Url;

/// A URL that is `http` and names a loopback host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopbackUrl(Url);

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refusing {url}: {reason}")]
pub struct NotLoopback {
    url: String,
    reason: String,
}

impl LoopbackUrl {
    /// Parses `text` and checks it is an `http` URL on a loopback host.
    ///
    /// # Errors
    ///
    /// [`NotLoopback`] naming the URL and the reason: not a URL, not
    /// `http`, a user or password in it, a host that is not loopback.
    pub fn parse(text: &str) -> Result<Self, NotLoopback> {
        let refuse = |reason: String| NotLoopback {
            url: text.to_owned(),
            reason,
        };
        let mut url = Url::parse(text).map_err(|e| refuse(format!("not a URL ({e})")))?;
        if url.scheme() != "http" {
            return Err(refuse(format!(
                "scheme `{}` is not http (the targets are plain loopback services)",
                url.scheme()
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("a URL with credentials is not a load target".into()));
        }
        let host = url.host_str().unwrap_or_default().to_owned();
        let loopback = match host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            Ok(ip) => ip.is_loopback(),
            Err(_) if host.eq_ignore_ascii_case("localhost") => {
                // Pinned, not resolved: /etc/hosts could say anything.
                url.set_host(Some("127.0.0.1"))
                    .map_err(|e| refuse(format!("cannot pin localhost ({e})")))?;
                true
            }
            Err(_) => false,
        };
        if !loopback {
            return Err(refuse(format!(
                "host `{host}` is not a loopback address (127.0.0.0/8, ::1 or localhost)"
            )));
        }
        Ok(Self(url))
    }

    /// The URL with `path` (starting with `/`) in place of its path and
    /// query: `http://127.0.0.1:9000` + `/stats`.
    ///
    /// ```
    /// # use load_tests::target::LoopbackUrl;
    /// let u = LoopbackUrl::parse("http://127.0.0.1:9000/x?y=1").unwrap();
    /// assert_eq!(u.with_path("/stats").as_str(), "http://127.0.0.1:9000/stats");
    /// ```
    pub fn with_path(&self, path: &str) -> LoopbackUrl {
        let mut url = self.0.clone();
        url.set_query(None);
        url.set_path(path);
        LoopbackUrl(url)
    }

    /// The URL as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The URL.
    pub fn url(&self) -> &Url {
        &self.0
    }
}

impl fmt::Display for LoopbackUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// An HTTP/1.1 client for loopback targets: no proxy (whatever the
/// environment says), no redirects, a connect timeout of `connect`.
///
/// # Errors
///
/// When reqwest cannot build the client (its TLS backend failed to start).
pub fn loopback_client(connect: Duration) -> Result<reqwest::Client, reqwest::Error> {
    loopback_builder(connect).build()
}

/// The builder of [`loopback_client`], for a caller that sets more.
pub(crate) fn loopback_builder(connect: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .http1_only()
        .connect_timeout(connect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_urls_pass() {
        for ok in [
            "http://127.0.0.1:8080/checkout",
            "http://127.8.9.10/",
            "http://[::1]:9000/stats",
            "http://LOCALHOST:1/",
        ] {
            let url = LoopbackUrl::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert!(!url.as_str().to_ascii_lowercase().contains("localhost"));
        }
        for (bad, why) in [
            ("http://10.0.0.1/", "not a loopback address"),
            ("http://0.0.0.0:8080/", "not a loopback address"),
            ("http://192.168.1.1/", "not a loopback address"),
            ("http://localhost.example.com/", "not a loopback address"),
            ("http://127.0.0.1.nip.io/", "not a loopback address"),
            ("http://[::ffff:10.0.0.1]/", "not a loopback address"),
            ("https://127.0.0.1/", "is not http"),
            ("ftp://127.0.0.1/", "is not http"),
            ("http://user:pw@127.0.0.1/", "credentials"),
            ("127.0.0.1:8080", "not"),
            ("", "not a URL"),
        ] {
            let err = LoopbackUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.starts_with("refusing "), "{err}");
        }
    }
}
