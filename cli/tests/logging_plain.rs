//! Log lines written to a pipe or a file carry no terminal colour codes: a
//! desktop host's log pane, a journal or `2> genmcp.log` gets plain text.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn text_logs_on_a_pipe_have_no_ansi_escape_codes() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_genmcp"))
        .args(["serve", "--port", "0", "--workers", "1"])
        .env("RUST_LOG", "genmcp=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("genmcp starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    let listening = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains("genmcp listening");
                seen.push(line);
                if done {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(listening, "no listening line within 30 s: {seen:?}");
    for line in &seen {
        assert!(
            !line.contains('\u{1b}'),
            "a log line on a pipe carries an escape code: {line:?}"
        );
    }
}
