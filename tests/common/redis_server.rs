//! A real `redis-server` for the tests that need one: its own process on a free
//! loopback port, no persistence, killed on drop. The binary is
//! `$GENMCP_REDIS_SERVER` or `redis-server` on `PATH`. A test that needs Redis
//! FAILS (panics) when it cannot be started: it is never skipped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running redis-server.
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

fn binary() -> String {
    std::env::var("GENMCP_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers `PING`.
    pub fn start() -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: free_port(),
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// (Re)starts the server on its port and waits for `PING` (10 s at most).
    pub fn restart(&mut self) {
        self.kill();
        let bin = binary();
        let child = Command::new(&bin)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {bin:?} ({e}): these tests need a real redis-server \
                     (apt-get install redis-server, or set GENMCP_REDIS_SERVER)"
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self
                .command(&["PING"])
                .is_some_and(|r| r.starts_with("+PONG"))
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{bin} did not answer PING on port {} within 10 s",
            self.port
        );
    }

    /// Sends one command (RESP array of bulk strings) and returns the raw reply.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let mut cmd = format!("*{}\r\n", args.len());
        for a in args {
            cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(cmd.as_bytes()).ok()?;
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).ok()?;
        (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// How many client connections the server has, not counting this query's.
    pub fn clients(&self) -> usize {
        self.command(&["CLIENT", "LIST"])
            .map(|r| r.matches("id=").count().saturating_sub(1))
            .unwrap_or(0)
    }

    /// How many subscription connections listen on `channel` (`PUBSUB NUMSUB`).
    pub fn subscribers(&self, channel: &str) -> usize {
        // *2\r\n$len\r\nchannel\r\n:N\r\n
        self.command(&["PUBSUB", "NUMSUB", channel])
            .and_then(|r| {
                r.lines()
                    .find_map(|l| l.strip_prefix(':'))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `f` to completion on a fresh current-thread runtime (for the bus's
/// async constructor in synchronous tests).
pub fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

/// A bus configuration for tests: channels under `prefix`, quick
/// reconnection, and frequent keep-alives (a keep-alive that fails would end
/// the streams, so a broken one shows at once).
pub fn bus_config(url: &str, prefix: &str) -> genmcp::pubsub::RedisBusConfig {
    let mut c = genmcp::pubsub::RedisBusConfig::new(url).prefix(prefix);
    c.reconnect_max = std::time::Duration::from_millis(200);
    c.ping_interval = std::time::Duration::from_millis(50);
    c
}

/// A connected Redis bus of [`bus_config`].
pub fn redis_bus<M>(url: &str, prefix: &str) -> genmcp::pubsub::Bus<M>
where
    M: Clone + Send + serde::Serialize + serde::de::DeserializeOwned + 'static,
{
    block_on(genmcp::pubsub::Bus::redis(bus_config(url, prefix))).expect("the bus connects")
}
