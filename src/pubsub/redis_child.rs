//! Unit tests' real `redis-server`, on a free loopback port.

use std::time::Duration;

/// A real `redis-server` on a free loopback port (its port is `.1`), killed
/// when dropped (`$GENMCP_REDIS_SERVER` or `redis-server` on `PATH`: the
/// test fails without one).
pub(crate) struct RedisChild(std::process::Child, pub(crate) u16);

impl RedisChild {
    /// Starts one and waits until it listens.
    pub(crate) fn start() -> RedisChild {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let bin = std::env::var("GENMCP_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let child = std::process::Command::new(bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let up = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "redis-server listens");
        RedisChild(child, port)
    }

    /// Its URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.1)
    }
}

/// Runs `f` to its end on a current-thread runtime (timers and I/O on).
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

impl Drop for RedisChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
