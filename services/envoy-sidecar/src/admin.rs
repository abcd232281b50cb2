//! The few questions the harness asks Envoy's admin interface.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::EnvoyError;

/// A bound on every admin request.
const ADMIN_LIMIT: Duration = Duration::from_secs(2);

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .no_proxy()
            .timeout(ADMIN_LIMIT)
            .build()
            .unwrap_or_default()
    })
}

async fn get(admin: SocketAddr, path_and_query: &str) -> Result<String, EnvoyError> {
    let url = format!("http://{admin}{path_and_query}");
    let failed = |e: reqwest::Error| EnvoyError::Admin(format!("GET {url}: {e}"));
    let answer = client().get(&url).send().await.map_err(failed)?;
    let status = answer.status();
    let body = answer.text().await.map_err(failed)?;
    if !status.is_success() {
        return Err(EnvoyError::Admin(format!("GET {url}: {status}: {body}")));
    }
    Ok(body)
}

/// POSTs to an admin endpoint (`/quitquitquit`).
pub(crate) async fn post(admin: SocketAddr, path: &str) -> Result<(), EnvoyError> {
    let url = format!("http://{admin}{path}");
    client()
        .post(&url)
        .send()
        .await
        .map(drop)
        .map_err(|e| EnvoyError::Admin(format!("POST {url}: {e}")))
}

/// Whether `/ready` says LIVE.
pub(crate) async fn is_live(admin: SocketAddr) -> bool {
    get(admin, "/ready")
        .await
        .is_ok_and(|body| body.trim() == "LIVE")
}

/// Every listener's bound address, by name (`/listeners?format=json`).
pub(crate) async fn listeners(
    admin: SocketAddr,
) -> Result<HashMap<String, SocketAddr>, EnvoyError> {
    let body = get(admin, "/listeners?format=json").await?;
    parse_listeners(&body)
}

fn parse_listeners(body: &str) -> Result<HashMap<String, SocketAddr>, EnvoyError> {
    let bad = |why: &str| EnvoyError::Admin(format!("/listeners: {why}: {body}"));
    let json: Value = serde_json::from_str(body).map_err(|e| bad(&e.to_string()))?;
    let statuses = json["listener_statuses"]
        .as_array()
        .ok_or_else(|| bad("no listener_statuses"))?;
    statuses
        .iter()
        .map(|listener| {
            let socket = &listener["local_address"]["socket_address"];
            let name = listener["name"]
                .as_str()
                .ok_or_else(|| bad("a listener without a name"))?;
            let ip = socket["address"].as_str().and_then(|a| a.parse().ok());
            let port = socket["port_value"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok());
            match (ip, port) {
                (Some(ip), Some(port)) => Ok((name.to_owned(), SocketAddr::new(ip, port))),
                _ => Err(bad(&format!("listener `{name}` has no socket address"))),
            }
        })
        .collect()
}

/// `/stats` lines whose names start with `prefix`.
pub(crate) async fn stats(admin: SocketAddr, prefix: &str) -> Result<String, EnvoyError> {
    get(admin, &format!("/stats?filter={}", filter(prefix, false))).await
}

/// The value of the stat named exactly `name`.
pub(crate) async fn counter(admin: SocketAddr, name: &str) -> Result<u64, EnvoyError> {
    let text = get(admin, &format!("/stats?filter={}", filter(name, true))).await?;
    stat_value(&text, name)
        .ok_or_else(|| EnvoyError::Admin(format!("no stat `{name}` (got {text:?})")))
}

fn stat_value(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter_map(|line| line.split_once(": "))
        .find(|(stat, _)| *stat == name)
        .and_then(|(_, value)| value.trim().parse().ok())
}

/// `^text` (`$` after it when `whole`) as a regex matching it literally,
/// URL-encoded: Envoy's `filter` is a regex.
fn filter(text: &str, whole: bool) -> String {
    let mut regex = String::from("^");
    for c in text.chars() {
        if r".^$|?*+()[]{}\".contains(c) {
            regex.push('\\');
        }
        regex.push(c);
    }
    if whole {
        regex.push('$');
    }
    url::form_urlencoded::byte_serialize(regex.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_are_read_by_name_and_a_bad_answer_is_an_error() {
        let body = r#"{"listener_statuses":[{"name":"hop","local_address":
            {"socket_address":{"address":"127.0.0.1","port_value":4321}}}]}"#;
        let listeners = parse_listeners(body).unwrap();
        assert_eq!(listeners["hop"], "127.0.0.1:4321".parse().unwrap());
        assert!(parse_listeners("{}").is_err());
        assert!(parse_listeners(r#"{"listener_statuses":[{"name":"x"}]}"#).is_err());
    }

    #[test]
    fn a_stat_is_read_by_its_exact_name() {
        let text = "cluster.a.upstream_rq_total: 7\ncluster.a.upstream_rq_total_x: 9\n";
        assert_eq!(stat_value(text, "cluster.a.upstream_rq_total"), Some(7));
        assert_eq!(stat_value(text, "cluster.a.nope"), None);
    }

    #[test]
    fn dots_are_escaped_for_the_regex_filter() {
        assert_eq!(filter("cluster.up_1", false), "%5Ecluster%5C.up_1");
        assert_eq!(filter("a", true), "%5Ea%24");
    }
}
