//! `healthcheck [URL]`: the probe of the `FROM scratch` images, which have no
//! curl. It sends `GET` to a plain-`http` URL (default
//! `http://127.0.0.1:8080/healthz`) and exits 0 when the answer's status is
//! 2xx, 1 otherwise, within 2 s whatever the peer does. Standard library only,
//! so that it links statically like the service binaries.
//!
//! `healthcheck tcp HOST:PORT`: exits 0 when a TCP connection to HOST:PORT is
//! accepted within 2 s, for a peer that speaks no HTTP (PostgreSQL).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8080/healthz".to_owned());
    if url == "tcp" {
        let Some(authority) = args.next() else {
            eprintln!("healthcheck: tcp needs HOST:PORT");
            return ExitCode::FAILURE;
        };
        return match connect(&authority) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("healthcheck: tcp {authority}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match probe(&url) {
        Ok(status) if (200..300).contains(&status) => ExitCode::SUCCESS,
        Ok(status) => {
            eprintln!("healthcheck: {url} answered {status}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("healthcheck: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The status code of `GET url`.
fn probe(url: &str) -> Result<u16, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// URLs are supported")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let with_port = if authority
        .rsplit(':')
        .next()
        .is_some_and(|p| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let mut stream = connect(&with_port)?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nUser-Agent: healthcheck\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    // The status line is all we need: `HTTP/1.1 200 OK`.
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < 12 {
        match stream.read(&mut head[len..]).map_err(|e| e.to_string())? {
            0 => break,
            n => len += n,
        }
    }
    let line = String::from_utf8_lossy(&head[..len]);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {line:?}"))
}

/// A TCP connection to `host:port` (the first address it resolves to),
/// accepted within [`TIMEOUT`].
fn connect(host_port: &str) -> Result<TcpStream, String> {
    let addr: SocketAddr = host_port
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host_port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host_port} resolves to no address"))?;
    TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| e.to_string())
}
