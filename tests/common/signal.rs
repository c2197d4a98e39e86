//! Signals to the processes a test runs (nodes, redis-server): a pause
//! counts only once it took effect.

use std::time::{Duration, Instant};

/// Sends `signal` (`-STOP`, `-CONT`, `-KILL`, ...) to process `pid` with
/// `kill`; after `-STOP`, returns only once every thread of it is stopped:
/// `kill` returns once the signal is queued, Linux wakes one thread to take
/// it, and the others run on until that thread is scheduled and stops them
/// all, so on a busy machine a "paused" node could still answer a message
/// sent right after `kill` returned. Whether it was sent (and, for `-STOP`,
/// took effect within 10 s).
pub fn signal_process(pid: u32, signal: &str) -> bool {
    let sent = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    if !sent {
        return false;
    }
    if signal != "-STOP" {
        return true;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if all_threads_stopped(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// Whether every thread of process `pid` is stopped (`T`), per
/// `/proc/<pid>/task/*/stat` (a thread gone meanwhile does not run).
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().all(|thread| {
        std::fs::read_to_string(thread.path().join("stat")).map_or(true, |stat| {
            // The state follows the command name, itself in parentheses.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| matches!(state, "T" | "Z" | "X"))
        })
    })
}
