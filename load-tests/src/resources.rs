//! What this process holds, read from the runtime and from `/proc`: tokio
//! tasks alive, TCP connections open, resident memory. The soak reads it
//! after every phase to check that nothing a fault started outlives it.
//!
//! Connections are this process's TCP sockets in any state but `LISTEN`:
//! the socket inodes behind `/proc/self/fd`, looked up in
//! `/proc/self/net/tcp` and `tcp6`. Sockets in `TIME_WAIT` have no file
//! descriptor any more and are not counted. Linux only: elsewhere
//! [`Resources::sample`] is an error that says so.
//!
//! ```no_run
//! # #[tokio::main] async fn main() {
//! let now = load_tests::resources::Resources::sample(&tokio::runtime::Handle::current()).unwrap();
//! println!("{} tasks, {} connections, {} KiB resident", now.tasks, now.connections, now.rss_kib);
//! # }
//! ```

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One reading.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    /// Tasks alive on the runtime (`RuntimeMetrics::num_alive_tasks`).
    pub tasks: usize,
    /// TCP connections open in this process (sockets not listening).
    pub connections: usize,
    /// The connections by TCP state (`ESTABLISHED`, `CLOSE_WAIT`, ...).
    pub by_state: BTreeMap<String, usize>,
    /// Resident memory (`VmRSS`), KiB.
    pub rss_kib: u64,
}

/// A `/proc` file that could not be read or understood.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path} (the soak's probes need Linux /proc): {problem}")]
pub struct ProbeError {
    path: String,
    problem: String,
}

impl ProbeError {
    fn new(path: &str, problem: impl ToString) -> Self {
        Self {
            path: path.to_owned(),
            problem: problem.to_string(),
        }
    }
}

impl Resources {
    /// Reads tasks from `runtime`, connections and memory from `/proc`.
    ///
    /// # Errors
    ///
    /// When a `/proc` file cannot be read or parsed.
    pub fn sample(runtime: &tokio::runtime::Handle) -> Result<Self, ProbeError> {
        let inodes = socket_inodes()?;
        let mut by_state = BTreeMap::new();
        for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
            let text = read(table)?;
            for (state, inode) in tcp_table(&text).map_err(|p| ProbeError::new(table, p))? {
                if state != LISTEN && inodes.contains(&inode) {
                    *by_state.entry(state_name(state).to_owned()).or_default() += 1;
                }
            }
        }
        let status = read("/proc/self/status")?;
        Ok(Self {
            tasks: runtime.metrics().num_alive_tasks(),
            connections: by_state.values().sum(),
            by_state,
            rss_kib: vm_rss_kib(&status)
                .ok_or_else(|| ProbeError::new("/proc/self/status", "no VmRSS line"))?,
        })
    }
}

fn read(path: &str) -> Result<String, ProbeError> {
    std::fs::read_to_string(path).map_err(|e| ProbeError::new(path, e))
}

/// The inodes of this process's sockets: `/proc/self/fd/N -> socket:[inode]`.
fn socket_inodes() -> Result<HashSet<u64>, ProbeError> {
    let dir = "/proc/self/fd";
    let entries = std::fs::read_dir(dir).map_err(|e| ProbeError::new(dir, e))?;
    let mut inodes = HashSet::new();
    for entry in entries.flatten() {
        // An fd closed between the listing and the readlink is not ours
        // any more: skip it.
        if let Ok(target) = std::fs::read_link(entry.path())
            && let Some(inode) = socket_inode(&target)
        {
            inodes.insert(inode);
        }
    }
    Ok(inodes)
}

fn socket_inode(target: &Path) -> Option<u64> {
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// `LISTEN` in `/proc/net/tcp`'s `st` column.
const LISTEN: u8 = 0x0A;

/// `(state, inode)` of every row of a `/proc/net/tcp` table.
fn tcp_table(text: &str) -> Result<Vec<(u8, u64)>, String> {
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(state), Some(inode)) = (fields.get(3), fields.get(9)) else {
            return Err(format!("line {}: fewer than 10 columns", n + 1));
        };
        let state = u8::from_str_radix(state, 16)
            .map_err(|e| format!("line {}: state `{state}`: {e}", n + 1))?;
        let inode = inode
            .parse()
            .map_err(|e| format!("line {}: inode `{inode}`: {e}", n + 1))?;
        rows.push((state, inode));
    }
    Ok(rows)
}

/// The kernel's name of a TCP state (`include/net/tcp_states.h`).
fn state_name(state: u8) -> &'static str {
    match state {
        0x01 => "ESTABLISHED",
        0x02 => "SYN_SENT",
        0x03 => "SYN_RECV",
        0x04 => "FIN_WAIT1",
        0x05 => "FIN_WAIT2",
        0x06 => "TIME_WAIT",
        0x07 => "CLOSE",
        0x08 => "CLOSE_WAIT",
        0x09 => "LAST_ACK",
        0x0A => "LISTEN",
        0x0B => "CLOSING",
        0x0C => "NEW_SYN_RECV",
        _ => "UNKNOWN",
    }
}

fn vm_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Tests that count this process's connections run one at a time.
#[cfg(test)]
pub(crate) static PROCESS_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The kernel's count of connections dropped because a listening
/// socket's accept queue was full (`TcpExt: ListenOverflows` in
/// `/proc/net/netstat`), since boot, for the whole machine (network
/// namespace); `None` where there is no such file. A client whose `SYN`
/// was dropped tries again after TCP's initial retransmission timeout,
/// one second: a burst larger than a listener's backlog (tokio's default
/// is 128) reaches it partly a second late.
///
/// ```no_run
/// if let Some(n) = load_tests::resources::listen_overflows() {
///     println!("{n} connections dropped at a full accept queue since boot");
/// }
/// ```
pub fn listen_overflows() -> Option<u64> {
    parse_netstat(
        &std::fs::read_to_string("/proc/net/netstat").ok()?,
        "TcpExt:",
        "ListenOverflows",
    )
}

/// The value of `field` in the `prefix` lines of a `/proc/net/netstat`
/// text (a line of names, then a line of values).
fn parse_netstat(text: &str, prefix: &str, field: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let names = lines.next()?;
    let values = lines.next()?;
    let at = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(at)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_overflows_are_read_from_the_tcpext_lines() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n\
                    TcpExt: 263 4134 4134\n\
                    IpExt: InNoRoutes ListenOverflows\n\
                    IpExt: 0 9\n";
        assert_eq!(
            parse_netstat(text, "TcpExt:", "ListenOverflows"),
            Some(4134)
        );
        assert_eq!(parse_netstat(text, "TcpExt:", "Nope"), None);
        assert_eq!(parse_netstat("", "TcpExt:", "ListenOverflows"), None);
    }

    #[test]
    fn parses_a_tcp_table_and_a_status_file() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 4243 1 0000000000000000 20 4 30 10 -1
";
        assert_eq!(tcp_table(table).unwrap(), [(0x0A, 4242), (0x01, 4243)]);
        assert!(
            tcp_table("header\n 0: short line\n")
                .unwrap_err()
                .contains("line 2")
        );
        assert_eq!(vm_rss_kib("Name:\tx\nVmRSS:\t  12345 kB\n"), Some(12345));
        assert_eq!(vm_rss_kib("Name:\tx\n"), None);
        assert_eq!(socket_inode(Path::new("socket:[77]")), Some(77));
        assert_eq!(socket_inode(Path::new("pipe:[77]")), None);
    }

    #[tokio::test]
    async fn a_connection_is_counted_while_open_and_not_after() {
        let _alone = PROCESS_WIDE.lock().await;
        let runtime = tokio::runtime::Handle::current();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let before = Resources::sample(&runtime).unwrap();
        assert!(before.rss_kib > 0);
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let open = Resources::sample(&runtime).unwrap();
        assert_eq!(open.connections, before.connections + 2, "{open:?}");
        assert!(open.by_state["ESTABLISHED"] >= 2);
        drop((client, server));
        let after = Resources::sample(&runtime).unwrap();
        assert_eq!(after.connections, before.connections, "{after:?}");
    }
}
