//! The real `genmcp` binary as a child process over pipes, as a desktop host
//! launches it: requests on its stdin, every stdout line parsed as JSON (a line
//! that is not JSON fails the test), stderr kept apart.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

/// A bound for one line (never a performance assertion).
const LINE: Duration = Duration::from_secs(10);

/// `genmcp` with piped stdin and stdout.
pub struct Peer {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    pub lines: mpsc::Receiver<Value>,
    /// Everything the child wrote on stderr, once it has exited.
    pub stderr: mpsc::Receiver<String>,
}

impl Peer {
    /// `genmcp serve --stdio`.
    pub fn start() -> Peer {
        Peer::start_with(&["serve", "--stdio"])
    }

    /// `genmcp <args>`.
    pub fn start_with(args: &[&str]) -> Peer {
        let mut child = Command::new(super::genmcp_bin())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("genmcp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().unwrap();
        let (err_tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            let _ = err_tx.send(text);
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            lines,
            stderr,
        }
    }

    /// Writes one message as a line.
    pub fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Writes raw bytes (for malformed and oversized lines).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    /// A 2026-07-28 request (with `_meta`).
    pub fn request(&mut self, id: Value, method: &str, params: Value) {
        self.send(&super::request(id, method, params));
    }

    /// The next stdout line.
    pub fn next(&self) -> Value {
        self.lines.recv_timeout(LINE).expect("a line on stdout")
    }

    /// Whether stdout stays silent for `d`.
    pub fn silent_for(&self, d: Duration) -> bool {
        self.lines.recv_timeout(d).is_err()
    }

    /// Reads lines until one satisfies `f`, returning it and the ones skipped.
    pub fn until(&self, f: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut skipped = Vec::new();
        loop {
            let v = self.next();
            if f(&v) {
                return (v, skipped);
            }
            skipped.push(v);
        }
    }

    /// Closes stdin (EOF).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Sends SIGTERM (the shell's builtin `kill`: no extra package needed).
    pub fn terminate(&self) {
        let term = format!("kill -TERM {}", self.child.id());
        assert!(
            Command::new("sh")
                .args(["-c", &term])
                .status()
                .unwrap()
                .success()
        );
    }

    /// Waits (bounded, 5 s) for the child to exit.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        for _ in 0..100 {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Every stdout line left until the end of stdout (bounded per line).
    pub fn rest(&self) -> Vec<Value> {
        let mut rest = Vec::new();
        while let Ok(v) = self.lines.recv_timeout(LINE) {
            rest.push(v);
        }
        rest
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
