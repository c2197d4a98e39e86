//! The server processes a round starts: each a fresh `genmcp` process on a
//! free loopback port, killed when dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::Baseline;

/// Connections one actix-web worker accepts (its default `max_connections`
/// is 25,000), with room to spare: past it the bench gives both servers more
/// workers.
const CONNECTIONS_PER_WORKER: usize = 20_000;

/// Worker threads of both servers for `streams` listens: 2, or enough that
/// actix-web's per-worker connection cap is not what a run measures. Both
/// servers always get the same number.
pub fn workers_for(streams: usize) -> usize {
    streams.div_ceil(CONNECTIONS_PER_WORKER).max(2)
}

/// The environment variable that tells `genmcp bench-baseline` its worker
/// count (the subcommand is internal to the bench).
pub const BASELINE_WORKERS_ENV: &str = "GENMCP_BENCH_WORKERS";

/// A server process started for one measurement, killed when dropped.
pub struct ServerProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// The process id (for reading its resident memory).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `exe args --port P` and waits until it accepts connections.
pub fn start(exe: &Path, args: &[&str], env: &[(&str, String)]) -> std::io::Result<ServerProcess> {
    let port = free_port()?;
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .args(["--port", &port.to_string()])
        .env("RUST_LOG", "error")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = cmd.spawn()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let process = ServerProcess { child, addr };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err(std::io::Error::other(format!("{args:?} did not start")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(process)
}

/// The baseline server of `kind`, with the same workers as genmcp gets.
pub fn baseline(exe: &Path, streams: usize, kind: Baseline) -> std::io::Result<ServerProcess> {
    let workers = workers_for(streams).to_string();
    start(
        exe,
        &["bench-baseline", "--baseline", kind.name()],
        &[(BASELINE_WORKERS_ENV, workers)],
    )
}

/// `genmcp serve` (the notes demo), allowed `streams` listens (plus the
/// warm-up one), with the same workers as the baseline gets.
pub fn genmcp(exe: &Path, streams: usize) -> std::io::Result<ServerProcess> {
    let workers = workers_for(streams).to_string();
    let max = (streams + 16).max(10_000).to_string();
    start(
        exe,
        &["serve", "--workers", &workers, "--max-streams", &max],
        &[],
    )
}
