//! What lets one client hold 100,000 connections: its sockets spread over
//! many loopback source addresses, and an open-file limit large enough.
//!
//! A client connection to one server address and port is told apart by its
//! source address and port, and one source address has only the ephemeral
//! range (about 28,000 ports on Linux) to give. Every address in
//! `127.0.0.0/8` is the loopback interface, so the client binds each socket to
//! `127.1.x.y` before connecting, [`PER_ADDRESS`] connections to an address,
//! moving on to a fresh address for every block (ports left in `TIME_WAIT` by
//! an earlier round are never needed again).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::net::{TcpSocket, TcpStream};

/// Connections bound to one loopback source address.
pub const PER_ADDRESS: u32 = 10_000;
/// The first source address: 127.1.0.0 + n.
const FIRST: u32 = u32::from_be_bytes([127, 1, 0, 1]);
/// Source addresses used before starting over at [`FIRST`] (127.1.0.1 to
/// 127.255.255.255).
const ADDRESSES: u32 = u32::from_be_bytes([0, 254, 255, 255]);

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The source address of the next loopback connection.
fn next_source() -> Ipv4Addr {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Ipv4Addr::from(FIRST + (n / PER_ADDRESS) % ADDRESSES)
}

/// Connects to `addr`; to an IPv4 loopback address, from the next loopback
/// source address (see the module docs).
pub async fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = match addr {
        SocketAddr::V4(v4) if v4.ip().is_loopback() => {
            let socket = TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((next_source(), 0)))?;
            socket
        }
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    let stream = socket.connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Open files each process needs for `streams` connections: one socket per
/// stream, plus room for the rest (listeners, pipes, files).
pub fn files_needed(streams: usize) -> u64 {
    streams as u64 + 1_024
}

/// Raises this process's open-file limit (`RLIMIT_NOFILE`) to what `streams`
/// connections need; the servers the bench starts inherit it. The hard limit
/// is raised too when the process may (root); otherwise the error says what
/// to run.
pub fn ensure_open_files(streams: usize) -> Result<(), String> {
    use rlimit::Resource;
    let need = files_needed(streams);
    let (soft, hard) = Resource::NOFILE
        .get()
        .map_err(|e| format!("reading the open-file limit: {e}"))?;
    if soft >= need {
        return Ok(());
    }
    if Resource::NOFILE.set(need, hard.max(need)).is_ok() {
        return Ok(());
    }
    Err(format!(
        "{streams} streams need about {need} open files in the client and in each server, \
         and this process may open {soft} (hard limit {hard}). Raise it in this shell, then \
         run the bench again: `ulimit -n {need}` (above the hard limit this needs root, or \
         a `nofile` line in /etc/security/limits.conf; the kernel's ceiling is \
         /proc/sys/fs/nr_open)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_addresses_are_loopback_and_change_every_block() {
        let a = next_source();
        assert!(a.is_loopback());
        let n = NEXT.fetch_add(PER_ADDRESS, Ordering::Relaxed);
        let b = next_source();
        assert!(b.is_loopback());
        assert_ne!(a, b, "after {n} connections");
    }
}
