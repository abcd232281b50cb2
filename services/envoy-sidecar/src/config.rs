//! The Envoy configs the harness runs, rendered from the YAML templates in
//! `services/envoy-sidecar/config/` (each setting commented there with the
//! Envoy recommendation it follows) with typed parameters.
//!
//! - [`sidecar`]: Envoy as checkout's sidecar, the load tests' `envoy`
//!   peer: a listener and a cluster per dependency.
//! - [`hop`]: Envoy as a hop the budget crosses: one listener, one
//!   upstream, the route timeout a parameter.
//!
//! ```
//! use std::time::Duration;
//! use envoy_sidecar::config::{self, Hop};
//!
//! let yaml = config::hop(&Hop::new(["127.0.0.1:9000".parse().unwrap()])
//!     .route_timeout(Duration::from_millis(1500)));
//! assert!(yaml.contains("timeout: 1.500s"));
//! assert!(yaml.contains("port_value: 9000"));
//! ```

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use crate::{EnvoyError, log};

const HOP: &str = include_str!("../config/hop.yaml");
const SIDECAR: &str = include_str!("../config/sidecar.yaml");
const SIDECAR_LISTENER: &str = include_str!("../config/sidecar-listener.yaml");
const SIDECAR_CLUSTER: &str = include_str!("../config/sidecar-cluster.yaml");

/// Envoy's route timeout when a route sets none.
pub const ENVOY_DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);

/// The protocol Envoy speaks to the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// HTTP/1.1 (the slow partner's HTTP face).
    Http1,
    /// HTTP/2 without TLS (gRPC).
    Http2,
}

/// The parameters of [`hop`].
///
/// ```
/// use std::time::Duration;
/// use envoy_sidecar::config::{self, Hop};
///
/// let grpc = Hop::new(["127.0.0.1:50051".parse().unwrap()])
///     .http2()
///     .route_timeout(Duration::ZERO)
///     .grpc_timeout_header_max(Duration::from_millis(800));
/// let yaml = config::hop(&grpc);
/// assert!(yaml.contains("timeout: 0s") && yaml.contains("grpc_timeout_header_max: 0.800s"));
/// assert!(yaml.contains("http2_protocol_options"));
/// ```
#[derive(Clone, Debug)]
pub struct Hop {
    endpoints: Vec<SocketAddr>,
    route_timeout: Duration,
    protocol: Protocol,
    max_stream_duration: Option<Duration>,
    grpc_timeout_header_max: Option<Duration>,
}

impl Hop {
    /// A hop to `endpoints` over HTTP/1.1 with Envoy's default route
    /// timeout ([`ENVOY_DEFAULT_ROUTE_TIMEOUT`]).
    ///
    /// ```
    /// let hop = envoy_sidecar::config::Hop::new(["127.0.0.1:1".parse().unwrap()]);
    /// assert!(envoy_sidecar::config::hop(&hop).contains("timeout: 15s"));
    /// ```
    pub fn new(endpoints: impl IntoIterator<Item = SocketAddr>) -> Self {
        Hop {
            endpoints: endpoints.into_iter().collect(),
            route_timeout: ENVOY_DEFAULT_ROUTE_TIMEOUT,
            protocol: Protocol::Http1,
            max_stream_duration: None,
            grpc_timeout_header_max: None,
        }
    }

    /// The route timeout; [`Duration::ZERO`] disables it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let hop = envoy_sidecar::config::Hop::new([]).route_timeout(Duration::from_millis(250));
    /// assert!(envoy_sidecar::config::hop(&hop).contains("timeout: 0.250s"));
    /// ```
    pub fn route_timeout(mut self, timeout: Duration) -> Self {
        self.route_timeout = timeout;
        self
    }

    /// HTTP/2 to the upstream (gRPC).
    ///
    /// ```
    /// let hop = envoy_sidecar::config::Hop::new([]).http2();
    /// assert!(envoy_sidecar::config::hop(&hop).contains("http2_protocol_options"));
    /// ```
    pub fn http2(mut self) -> Self {
        self.protocol = Protocol::Http2;
        self
    }

    /// The route's `max_stream_duration.max_stream_duration`: a cap on the
    /// whole stream, applied whatever the request asks.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let hop = envoy_sidecar::config::Hop::new([]).max_stream_duration(Duration::from_secs(1));
    /// assert!(envoy_sidecar::config::hop(&hop).contains("max_stream_duration: 1s"));
    /// ```
    pub fn max_stream_duration(mut self, cap: Duration) -> Self {
        self.max_stream_duration = Some(cap);
        self
    }

    /// The route's `max_stream_duration.grpc_timeout_header_max`: Envoy
    /// takes a gRPC request's `grpc-timeout` as its timeout, capped at
    /// this (zero: uncapped). Unset, Envoy ignores `grpc-timeout`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let hop = envoy_sidecar::config::Hop::new([]).grpc_timeout_header_max(Duration::ZERO);
    /// assert!(envoy_sidecar::config::hop(&hop).contains("grpc_timeout_header_max: 0s"));
    /// ```
    pub fn grpc_timeout_header_max(mut self, cap: Duration) -> Self {
        self.grpc_timeout_header_max = Some(cap);
        self
    }
}

/// The hop config (`config/hop.yaml`): listener `hop`, cluster `upstream`.
///
/// ```
/// let yaml = envoy_sidecar::config::hop(&envoy_sidecar::config::Hop::new([]));
/// assert!(yaml.contains("- name: hop"));
/// ```
pub fn hop(hop: &Hop) -> String {
    let mut stream = String::new();
    if hop.max_stream_duration.is_some() || hop.grpc_timeout_header_max.is_some() {
        stream.push_str("                  max_stream_duration:\n");
        let fields = [
            ("max_stream_duration", hop.max_stream_duration),
            ("grpc_timeout_header_max", hop.grpc_timeout_header_max),
        ];
        for (field, value) in fields {
            if let Some(value) = value {
                stream.push_str(&format!(
                    "                    {field}: {}\n",
                    duration(value)
                ));
            }
        }
    }
    render(
        HOP,
        &[
            ("ROUTE_TIMEOUT", &duration(hop.route_timeout)),
            ("MAX_STREAM_DURATION", stream.trim_end()),
            ("UPSTREAM_PROTOCOL", &protocol(hop.protocol)),
            ("ENDPOINTS", &endpoints(&hop.endpoints)),
        ],
    )
}

/// One destination of the [`sidecar`]: its listener's and cluster's name
/// (a plain word: it goes into stat names) and its endpoints.
///
/// ```
/// let pricing = envoy_sidecar::config::Dependency::new("pricing", ["127.0.0.1:9000".parse().unwrap()]);
/// assert!(envoy_sidecar::config::sidecar(&[pricing]).contains("- name: pricing"));
/// ```
#[derive(Clone, Debug)]
pub struct Dependency {
    name: String,
    endpoints: Vec<SocketAddr>,
}

impl Dependency {
    /// `name` at `endpoints` (every replica).
    ///
    /// ```
    /// let two = envoy_sidecar::config::Dependency::new("inventory",
    ///     ["127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap()]);
    /// assert!(envoy_sidecar::config::sidecar(&[two]).contains("port_value: 2"));
    /// ```
    pub fn new(name: impl Into<String>, endpoints: impl IntoIterator<Item = SocketAddr>) -> Self {
        Dependency {
            name: name.into(),
            endpoints: endpoints.into_iter().collect(),
        }
    }
}

/// The sidecar config (`config/sidecar.yaml`): per dependency, a listener
/// and a cluster named after it.
///
/// ```
/// use envoy_sidecar::config::{self, Dependency};
///
/// let at = |port| format!("127.0.0.1:{port}").parse().unwrap();
/// let yaml = config::sidecar(&[Dependency::new("inventory", [at(1)]), Dependency::new("pricing", [at(2)])]);
/// assert_eq!(yaml.matches("lb_policy: LEAST_REQUEST").count(), 2);
/// ```
pub fn sidecar(dependencies: &[Dependency]) -> String {
    let (mut listeners, mut clusters) = (String::new(), String::new());
    for dep in dependencies {
        listeners.push_str(&render(SIDECAR_LISTENER, &[("NAME", &dep.name)]));
        let endpoints = endpoints(&dep.endpoints);
        let cluster = [("NAME", dep.name.as_str()), ("ENDPOINTS", &endpoints)];
        clusters.push_str(&render(SIDECAR_CLUSTER, &cluster));
    }
    render(
        SIDECAR,
        &[
            ("LISTENERS", listeners.trim_end()),
            ("CLUSTERS", clusters.trim_end()),
        ],
    )
}

/// Runs `envoy --mode validate` on `yaml`: Envoy's own check of a config,
/// without binding anything.
///
/// ```no_run
/// # async fn run() -> Result<(), envoy_sidecar::EnvoyError> {
/// envoy_sidecar::config::validate(&envoy_sidecar::config::sidecar(&[])).await?;
/// # Ok(()) }
/// ```
pub async fn validate(yaml: &str) -> Result<(), EnvoyError> {
    let binary = tokio::task::spawn_blocking(crate::binary)
        .await
        .map_err(|e| EnvoyError::Admin(format!("finding the binary panicked: {e}")))??;
    let dir = tempfile::tempdir().map_err(|e| EnvoyError::io("creating a temp dir", e))?;
    let file = dir.path().join("envoy.yaml");
    std::fs::write(&file, yaml).map_err(|e| EnvoyError::io("writing the config", e))?;
    let run = tokio::process::Command::new(&binary)
        .args(["--mode", "validate", "--log-level", "warn", "-c"])
        .arg(&file)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(crate::sidecar::READY_LIMIT, run)
        .await
        .map_err(|_| EnvoyError::Invalid {
            log_tail: "validation took too long".into(),
        })?
        .map_err(|e| EnvoyError::io(format!("running {}", binary.display()), e))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    Err(EnvoyError::Invalid {
        log_tail: log::tail(&text, log::TAIL_LINES),
    })
}

/// `template` with every `${KEY}` replaced by its value.
fn render(template: &str, values: &[(&str, &str)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |text, (key, value)| {
            text.replace(&format!("${{{key}}}"), value)
        })
}

/// A protobuf `Duration` as Envoy's YAML takes it: `0s`, `15s`, `0.250s`.
fn duration(d: Duration) -> String {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    if nanos == 0 {
        format!("{secs}s")
    } else if nanos % 1_000_000 == 0 {
        format!("{secs}.{:03}s", nanos / 1_000_000)
    } else {
        format!("{secs}.{nanos:09}s")
    }
}

fn protocol(protocol: Protocol) -> String {
    let options = match protocol {
        Protocol::Http1 => "http_protocol_options",
        Protocol::Http2 => "http2_protocol_options",
    };
    format!(
        "    typed_extension_protocol_options:\n      \
         envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n        \
         \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        \
         explicit_http_config:\n          {options}: {{}}"
    )
}

fn endpoints(endpoints: &[SocketAddr]) -> String {
    let lines: Vec<String> = endpoints
        .iter()
        .map(|at| {
            format!(
                "        - endpoint: {{ address: {{ socket_address: {{ address: \"{}\", port_value: {} }} }} }}",
                at.ip(),
                at.port()
            )
        })
        .collect();
    lines.join("\n")
}
