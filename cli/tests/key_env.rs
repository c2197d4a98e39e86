//! `genmcp serve` with `GENMCP_KEY`: the key is used, and the variable is gone
//! from the server's environment (`/proc/PID/environ`, what a child process
//! would inherit) once read; without `--bus` the log says spent states are
//! recorded per node; `/metrics` exports the bus's dropped-message counter.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Child,
    mcp: SocketAddr,
    admin: SocketAddr,
    lines: Vec<Value>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with `GENMCP_KEY` set and collects its JSON log lines
/// until both listeners are up.
fn start() -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args([
            "--log-format",
            "json",
            "serve",
            "--port",
            "0",
            "--workers",
            "1",
        ])
        .args(["--admin", "127.0.0.1:0"])
        .env("GENMCP_KEY", "c0ffee".repeat(10) + "abcd")
        .env("RUST_LOG", "genmcp=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("genmcp starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let (mut mcp, mut admin, mut lines) = (None, None, vec![]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while mcp.is_none() || admin.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).expect("the listening lines");
        let addr: Option<SocketAddr> = line["fields"]["addr"].as_str().and_then(|a| a.parse().ok());
        match line["fields"]["message"].as_str() {
            Some("genmcp listening") => mcp = addr,
            Some(m) if m.starts_with("admin listening") => admin = addr,
            _ => {}
        }
        lines.push(line);
    }
    Server {
        child,
        mcp: mcp.expect("mcp"),
        admin: admin.expect("admin"),
        lines,
    }
}

#[test]
#[cfg(target_os = "linux")]
fn genmcp_key_is_gone_from_the_server_environment_once_read() {
    let server = start();
    let discover = common::call(server.mcp, json!(1), "server/discover", json!({}));
    assert_eq!(discover.status, 200, "the server answers over HTTP");

    let environ = std::fs::read(format!("/proc/{}/environ", server.child.id()))
        .expect("the server's /proc/PID/environ");
    let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    assert!(
        !vars.iter().any(|v| v.starts_with(b"GENMCP_KEY=")),
        "GENMCP_KEY is still in the server's environment"
    );
    assert!(
        vars.iter().any(|v| v.starts_with(b"RUST_LOG=")),
        "the rest of the environment is kept"
    );

    let messages: Vec<String> = server
        .lines
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str().map(str::to_owned))
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("sealing key loaded (and removed from the environment)")),
        "the key was used: {messages:#?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("spent requestStates are recorded per node")),
        "a key without --bus says where spent states are recorded: {messages:#?}"
    );
    // The file that carried the key across the re-execution is gone.
    let prefix = format!("genmcp-key-{}-", server.child.id());
    for dir in ["/dev/shm".into(), std::env::temp_dir()] {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            assert!(
                !name.to_string_lossy().starts_with(&prefix),
                "{name:?} left behind"
            );
        }
    }

    let metrics =
        common::Exchange::open_at(server.admin, "GET", "/metrics", &[], b"").into_response();
    let text = String::from_utf8(metrics.body).expect("UTF-8");
    for reason in ["forged", "replayed", "oversized", "malformed", "backlog"] {
        let line = format!("genmcp_bus_messages_dropped_total{{reason=\"{reason}\"}} 0");
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}
