//! Looking up a dependency's host name: every address it resolves to is an
//! endpoint (`tokio::net::lookup_host`, the system resolver on tokio's
//! blocking pool).

use std::net::SocketAddr;

/// Why a host name gave no endpoints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot resolve `{host}`: {reason}")]
pub(crate) struct ResolveError {
    host: String,
    reason: String,
}

impl ResolveError {
    /// A dependency with no endpoints to call (its name never resolved).
    pub(crate) fn no_endpoints(dependency: &str) -> Self {
        Self {
            host: dependency.to_owned(),
            reason: "no endpoints".to_owned(),
        }
    }

    /// The lookup did not finish within the call's budget.
    pub(crate) fn timed_out(host: &str) -> Self {
        Self {
            host: host.to_owned(),
            reason: "the lookup did not finish within the budget".to_owned(),
        }
    }
}

/// How a name is looked up: the system resolver, or a test's script.
pub(crate) type Lookup = std::sync::Arc<
    dyn Fn(
            String,
            u16,
        )
            -> futures_util::future::BoxFuture<'static, Result<Vec<SocketAddr>, ResolveError>>
        + Send
        + Sync,
>;

/// The system resolver.
pub(crate) fn system() -> Lookup {
    std::sync::Arc::new(|host, port| Box::pin(async move { lookup(&host, port).await }))
}

impl ResolveError {
    /// A lookup that failed for `reason` (a test resolver's answer).
    #[cfg(test)]
    pub(crate) fn new(host: &str, reason: &str) -> Self {
        Self {
            host: host.to_owned(),
            reason: reason.to_owned(),
        }
    }
}

/// The addresses of `host`, with `port`, in the resolver's order, each
/// once; an error when there are none.
pub(crate) async fn lookup(host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
    let error = |reason: String| ResolveError {
        host: host.to_owned(),
        reason,
    };
    let found = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| error(e.to_string()))?;
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for addr in found {
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    if addrs.is_empty() {
        return Err(error("no addresses".to_owned()));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_literal_address_resolves_to_itself() {
        let addrs = lookup("127.0.0.1", 9000).await.unwrap();
        assert_eq!(addrs, vec!["127.0.0.1:9000".parse().unwrap()]);
    }

    #[tokio::test]
    async fn localhost_resolves_from_the_hosts_file() {
        // No test asks an outside resolver: `localhost` is in /etc/hosts.
        let addrs = lookup("localhost", 9000).await.unwrap();
        assert!(
            addrs
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 9000),
            "{addrs:?}"
        );
    }

    #[test]
    fn the_error_names_the_host_and_the_reason() {
        let err = ResolveError::timed_out("partner");
        assert_eq!(
            err.to_string(),
            "cannot resolve `partner`: the lookup did not finish within the budget"
        );
    }
}
