//! A `genmcp serve` child process for the tests of the command (`cli/tests/`):
//! JSON logs on stderr, read by a thread until its listening line names the
//! address.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Starts `genmcp --log-format json serve <args>` (with `envs`, and
/// `RUST_LOG=genmcp=info` unless given) and waits (20 s at most) for its
/// `genmcp listening` line: the child and that address. Pass `--port 0`.
pub fn spawn_serve(args: &[&str], envs: &[(&str, &str)]) -> (Child, SocketAddr) {
    let (child, addr, _) = spawn_listening(args, envs, false);
    (child, addr)
}

/// [`spawn_serve`] with `--admin 127.0.0.1:0` added: the child, its MCP
/// address and its admin address, both read from its listening lines (no
/// port probed beforehand that another process could take).
pub fn spawn_serve_with_admin(
    args: &[&str],
    envs: &[(&str, &str)],
) -> (Child, SocketAddr, SocketAddr) {
    let mut all = args.to_vec();
    all.extend(["--admin", "127.0.0.1:0"]);
    let (child, addr, admin) = spawn_listening(&all, envs, true);
    (child, addr, admin.expect("the admin listening line"))
}

fn spawn_listening(
    args: &[&str],
    envs: &[(&str, &str)],
    admin: bool,
) -> (Child, SocketAddr, Option<SocketAddr>) {
    let mut command = Command::new(super::genmcp_bin());
    command
        .args(["--log-format", "json", "serve"])
        .args(args)
        .env("RUST_LOG", "genmcp=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("genmcp starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            let addr = || v["fields"]["addr"].as_str().and_then(|a| a.parse().ok());
            match v["fields"]["message"].as_str() {
                Some("genmcp listening") => {
                    let _ = tx.send((false, addr()));
                }
                Some(m) if m.starts_with("admin listening") => {
                    let _ = tx.send((true, addr()));
                }
                _ => {}
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (mut mcp, mut admin_addr): (Option<SocketAddr>, Option<SocketAddr>) = (None, None);
    while mcp.is_none() || (admin && admin_addr.is_none()) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok((is_admin, Some(addr))) = rx.recv_timeout(left) else {
            // Not left running behind a failed test.
            let _ = child.kill();
            let _ = child.wait();
            panic!("genmcp serve never logged its listening line with an address");
        };
        if is_admin {
            admin_addr = Some(addr);
        } else {
            mcp = Some(addr);
        }
    }
    (child, mcp.expect("the listening line"), admin_addr)
}

/// A `genmcp serve` child process, signalled by the tests (`-STOP`,
/// `-CONT`, `-TERM`) and killed when dropped.
pub struct ServeNode {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ServeNode {
    /// `genmcp serve --port 0 <args>` with `envs` (see [`spawn_serve`]).
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> ServeNode {
        let mut all = vec!["--port", "0"];
        all.extend_from_slice(args);
        let (child, addr) = spawn_serve(&all, envs);
        ServeNode { child, addr }
    }

    /// Sends `signal` (`-STOP`, `-CONT`, `-TERM`, ...); after `-STOP`,
    /// returns once every thread of the process is stopped
    /// ([`super::signal_process`]).
    pub fn signal(&self, signal: &str) {
        assert!(
            super::signal_process(self.child.id(), signal),
            "kill {signal}"
        );
    }
}

impl Drop for ServeNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
