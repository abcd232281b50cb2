//! Envoy in the chain, two ways: checkout's sidecar (the
//! [`ChainMode::Envoy`](crate::chain::ChainMode::Envoy) mode) and hops the
//! budget crosses (`--via-envoy`, [`ChainSettings::via_envoy`](crate::chain::ChainSettings::via_envoy)).
//!
//! - **Sidecar**: one Envoy with a listener and a cluster per dependency
//!   (inventory, pricing, recommendations), configured as an experienced
//!   Envoy user would (`services/envoy-sidecar/config/sidecar.yaml`, every
//!   setting commented with the Envoy recommendation it follows); checkout
//!   (naive, fixed timeouts) calls its listeners with the same paths and
//!   queries, and each cluster holds every endpoint the dependency had
//!   (each replica in `replicas`, the blackholed partner where a scenario
//!   blackholes inventory, the middle hop in `deep`).
//! - **Hops**: edge -> Envoy -> checkout -> Envoy -> partner; one Envoy
//!   (`services/envoy-sidecar/config/hop.yaml`, Envoy's default route
//!   timeout of 15 s, every header passed on) in front of each address
//!   checkout or edge calls, so that checkout's own replica choice still
//!   sees every replica.
//!
//! Every Envoy is started with the chain and stopped with it
//! ([`Envoys::shutdown`]; dropped, they are killed).

use std::collections::HashMap;
use std::net::SocketAddr;

use checkout::CheckoutConfig;
use envoy_sidecar::config::{self, Dependency, Hop};
use envoy_sidecar::{EnvoyError, Sidecar};

use crate::chain::ChainError;

/// What the topology is called in a report with `--via-envoy`.
pub const VIA_ENVOY: &str = "via Envoy: edge -> Envoy -> checkout -> Envoy -> partner";

/// The Envoys of one chain.
///
/// ```no_run
/// # async fn demo(chain: &load_tests::chain::Chain) {
/// if let Some(sidecar) = &chain.envoys.sidecar {
///     let sent = sidecar.counter("cluster.pricing.upstream_rq_total").await;
///     println!("pricing through Envoy: {sent:?}");
/// }
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Envoys {
    /// Checkout's sidecar, in the `envoy` mode.
    pub sidecar: Option<Sidecar>,
    /// With `--via-envoy`: each hop and the address it is in front of.
    pub hops: Vec<(SocketAddr, Sidecar)>,
}

impl Envoys {
    /// Starts the sidecar in front of where `checkout`'s three dependencies
    /// point (their URLs, or their `endpoints` when listed), and points
    /// them at its listeners (same paths and queries, no `endpoints`:
    /// Envoy balances).
    pub(crate) async fn start_sidecar(
        &mut self,
        checkout: &mut CheckoutConfig,
    ) -> Result<(), ChainError> {
        let mut deps = Vec::new();
        for (name, url, settings) in dependencies(checkout) {
            let upstreams = match settings.endpoints.take() {
                Some(list) => list
                    .iter()
                    .map(|e| authority(e))
                    .collect::<Result<Vec<_>, _>>()?,
                None => vec![authority(url)?],
            };
            deps.push(Dependency::new(name, upstreams));
        }
        let sidecar = Sidecar::start(&config::sidecar(&deps))
            .await
            .map_err(envoy_error)?;
        for (name, url, _) in dependencies(checkout) {
            *url = rehost(url, sidecar.listener(name))?;
        }
        self.sidecar = Some(sidecar);
        Ok(())
    }

    /// Puts a hop in front of every address `checkout` calls (its URLs and
    /// listed `endpoints`).
    pub(crate) async fn hop_checkouts_calls(
        &mut self,
        checkout: &mut CheckoutConfig,
    ) -> Result<(), ChainError> {
        for (_, url, settings) in dependencies(checkout) {
            *url = self.through_hop(url).await?;
            if let Some(list) = settings.endpoints.as_mut() {
                for endpoint in list {
                    *endpoint = self.through_hop(endpoint).await?;
                }
            }
        }
        Ok(())
    }

    /// `url` with its address swapped for the listener of a hop in front
    /// of it (started when there is none yet).
    pub(crate) async fn through_hop(&mut self, url: &str) -> Result<String, ChainError> {
        let upstream = authority(url)?;
        if let Some((_, hop)) = self.hops.iter().find(|(to, _)| *to == upstream) {
            return rehost(url, hop.listener("hop"));
        }
        let hop = Sidecar::start(&config::hop(&Hop::new([upstream])))
            .await
            .map_err(envoy_error)?;
        let through = rehost(url, hop.listener("hop"))?;
        self.hops.push((upstream, hop));
        Ok(through)
    }

    /// Every Envoy of the chain.
    pub fn all(&self) -> impl Iterator<Item = &Sidecar> {
        self.sidecar
            .iter()
            .chain(self.hops.iter().map(|(_, hop)| hop))
    }

    /// Requests each Envoy sent upstream, summed over its clusters
    /// (`upstream_rq_total`), by its process id.
    pub async fn upstream_requests(&self) -> HashMap<u32, u64> {
        let mut sent = HashMap::new();
        for envoy in self.all() {
            let stats = envoy.stats("cluster.").await;
            let total = stats
                .lines()
                .filter(|l| l.contains(".upstream_rq_total: "))
                .filter_map(|l| l.rsplit_once(": ").and_then(|(_, v)| v.parse::<u64>().ok()))
                .sum();
            sent.insert(envoy.id().unwrap_or_default(), total);
        }
        sent
    }

    /// Stops every Envoy and waits for each to exit.
    pub async fn shutdown(self) {
        for envoy in self
            .sidecar
            .into_iter()
            .chain(self.hops.into_iter().map(|(_, hop)| hop))
        {
            envoy.shutdown().await;
        }
    }
}

/// Checkout's three dependencies: name, URL and settings.
fn dependencies(
    checkout: &mut CheckoutConfig,
) -> [(&'static str, &mut String, &mut checkout::DependencySettings); 3] {
    [
        (
            "inventory",
            &mut checkout.inventory_url,
            &mut checkout.inventory,
        ),
        ("pricing", &mut checkout.pricing_url, &mut checkout.pricing),
        (
            "recommendations",
            &mut checkout.recommendations_url,
            &mut checkout.recommendations,
        ),
    ]
}

fn envoy_error(e: EnvoyError) -> ChainError {
    ChainError::new("envoy", e)
}

fn bad_url(url: &str) -> ChainError {
    ChainError::new(
        "envoy",
        std::io::Error::other(format!("`{url}` is not an http://address:port URL")),
    )
}

/// The `address:port` of an `http://address:port/...` URL.
fn authority(url: &str) -> Result<SocketAddr, ChainError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| bad_url(url))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    rest[..end].parse().map_err(|_| bad_url(url))
}

/// `url` with its address swapped for `to`, the path and query kept.
fn rehost(url: &str, to: SocketAddr) -> Result<String, ChainError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| bad_url(url))?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Ok(format!("http://{to}{}", &rest[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_rehosted_with_its_path_and_query() {
        let to: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let url = "http://127.0.0.1:9000/pricing?delay=45ms&jitter=10ms";
        assert_eq!(authority(url).unwrap(), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            rehost(url, to).unwrap(),
            "http://127.0.0.1:7/pricing?delay=45ms&jitter=10ms"
        );
        assert_eq!(
            rehost("http://127.0.0.1:9000", to).unwrap(),
            "http://127.0.0.1:7"
        );
        assert!(authority("grpc://127.0.0.1:9000/x").is_err());
        assert!(authority("http://localhost:9000/x").is_err());
    }
}
