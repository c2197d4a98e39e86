//! Unit tests' real `redis-server`, on a free loopback port.

use std::time::Duration;

/// A real `redis-server` on a free loopback port (its port is `.1`), killed
/// when dropped (`$GENMCP_REDIS_SERVER` or `redis-server` on `PATH`: the
/// test fails without one).
pub(crate) struct RedisChild(std::process::Child, pub(crate) u16);

impl RedisChild {
    /// Starts one and waits until it answers `PING` (10 s at most). A free
    /// port can be taken by another process between the probe and the
    /// server's bind: a server that exits at once is started again on
    /// another port (5 tries).
    pub(crate) fn start() -> RedisChild {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let bin =
                std::env::var("GENMCP_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
            let child = std::process::Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("redis-server starts");
            let mut server = RedisChild(child, port);
            for _ in 0..500 {
                if server.answers_ping() {
                    return server;
                }
                if matches!(server.0.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(
                matches!(server.0.try_wait(), Ok(Some(_))),
                "redis-server on port {port} did not answer PING within 10 s"
            );
        }
        panic!("redis-server did not start on 5 free ports")
    }

    /// Whether the server on its port answers `PING` (not another process
    /// that took the port).
    fn answers_ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", self.1)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let mut reply = [0u8; 7];
        conn.write_all(b"PING\r\n").is_ok()
            && conn.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
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
