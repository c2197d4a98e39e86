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
    /// More arguments (a cluster node's settings), and its working directory.
    extra: Vec<String>,
    dir: Option<std::path::PathBuf>,
    /// The file its log goes to (removed on drop).
    log: Option<std::path::PathBuf>,
}

/// Why a launch failed: the server exited (its port was taken, say), or it
/// ran without answering.
enum Launch {
    Exited(String),
    Silent(String),
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
    /// A free port can be taken by another process between the probe and
    /// the server's bind: a server that exits at once is tried again on
    /// another port (5 tries).
    pub fn start() -> RedisServer {
        let mut server = RedisServer::unstarted();
        server.start_on_free_ports(|server| {
            server.port = free_port();
        });
        server
    }

    /// A server not started yet, with no port and no settings.
    fn unstarted() -> RedisServer {
        RedisServer {
            child: None,
            port: 0,
            extra: Vec::new(),
            dir: None,
            log: None,
        }
    }

    /// Launches on ports chosen by `choose`, choosing again when the server
    /// exits before answering (its port was taken); panics after 5 tries.
    fn start_on_free_ports(&mut self, mut choose: impl FnMut(&mut RedisServer)) {
        let mut last = String::new();
        for _ in 0..5 {
            choose(self);
            match self.launch() {
                Ok(()) => return,
                Err(Launch::Exited(why)) => last = why,
                Err(Launch::Silent(why)) => panic!("{why}"),
            }
        }
        panic!("redis-server did not start on 5 free ports; the last said: {last}");
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
    /// A server that exits at once (its port, just freed, taken for a
    /// moment by another process's connection) is started again, 20 times
    /// a quarter of a second apart.
    pub fn restart(&mut self) {
        let mut tries = 0;
        loop {
            match self.launch() {
                Ok(()) => return,
                Err(Launch::Exited(why)) if tries >= 20 => panic!("{why}"),
                Err(Launch::Exited(_)) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(Launch::Silent(why)) => panic!("{why}"),
            }
        }
    }

    /// Starts the server on its port and waits for `PING` (10 s at most); its
    /// log (stdout) goes to a file, quoted when it does not come up.
    fn launch(&mut self) -> Result<(), Launch> {
        self.kill();
        if let Some(old) = self.log.take() {
            let _ = std::fs::remove_file(old);
        }
        let bin = binary();
        let log_path = std::env::temp_dir().join(format!(
            "genmcp-redis-{}-{}.log",
            std::process::id(),
            self.port
        ));
        let log = std::fs::File::create(&log_path).expect("a log file for redis-server");
        self.log = Some(log_path.clone());
        let mut command = Command::new(&bin);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        let child = command
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {bin:?} ({e}): these tests need a real redis-server \
                     (apt-get install redis-server, or set GENMCP_REDIS_SERVER)"
                )
            });
        self.child = Some(child);
        let said = || std::fs::read_to_string(&log_path).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self
                .command(&["PING"])
                .is_some_and(|r| r.starts_with("+PONG"))
            {
                return Ok(());
            }
            if super::take_if_exited(&mut self.child) {
                return Err(Launch::Exited(format!(
                    "{bin} on port {} exited: {}",
                    self.port,
                    said()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(Launch::Silent(format!(
            "{bin} did not answer PING on port {} within 10 s: {}",
            self.port,
            said()
        )))
    }

    /// Stops (`SIGSTOP`) or continues (`SIGCONT`) the server: a hung Redis,
    /// whose connections stay open and unanswered.
    pub fn signal(&self, signal: &str) {
        let pid = self
            .child
            .as_ref()
            .map(|c| c.id())
            .expect("a running server");
        assert!(super::signal_process(pid, signal), "kill {signal} {pid}");
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
        // A reply can arrive in several reads (a long `CLUSTER NODES` on a
        // busy machine): read until one whole RESP value is in.
        let mut reply = Vec::new();
        let mut buf = [0u8; 4096];
        while resp_len(&reply).is_none() && reply.len() < 1 << 20 {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buf[..n]);
        }
        (!reply.is_empty()).then(|| String::from_utf8_lossy(&reply).into_owned())
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

/// The length of the one RESP value at the start of `b`, once it is all there.
fn resp_len(b: &[u8]) -> Option<usize> {
    let line_end = b.windows(2).position(|w| w == b"\r\n")?;
    let head = std::str::from_utf8(&b[1..line_end]).ok()?;
    let after = line_end + 2;
    match b.first()? {
        b'+' | b'-' | b':' => Some(after),
        b'$' => {
            let len: i64 = head.parse().ok()?;
            if len < 0 {
                return Some(after);
            }
            let end = after + usize::try_from(len).ok()? + 2;
            (b.len() >= end).then_some(end)
        }
        b'*' => {
            let count: i64 = head.parse().ok()?;
            let mut pos = after;
            for _ in 0..count.max(0) {
                pos += resp_len(&b[pos..])?;
            }
            Some(pos)
        }
        _ => None,
    }
}

fn cli_binary() -> String {
    std::env::var("GENMCP_REDIS_CLI").unwrap_or_else(|_| "redis-cli".into())
}

/// A Redis Cluster of three masters (no replicas) on free loopback ports,
/// created with `redis-cli --cluster create`; every node is killed and its
/// directory removed on drop. A node's slots stay its own across a
/// [`RedisServer::restart`] (its `nodes.conf` is kept). The nodes run with
/// `cluster-require-full-coverage no`: with a master down, the others keep
/// serving their slots.
pub struct RedisCluster {
    /// The masters.
    pub nodes: Vec<RedisServer>,
    dir: std::path::PathBuf,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers, joins them and waits (20 s at
    /// most) until every node reports `cluster_state:ok`.
    pub fn start() -> RedisCluster {
        let dir = std::env::temp_dir().join(format!(
            "genmcp-cluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a directory for the cluster");
        let mut nodes = Vec::new();
        for _ in 0..3 {
            // A cluster node listens on two ports: its own and its cluster
            // bus port, both chosen free (not the default port + 10000,
            // which can be anyone's).
            let mut server = RedisServer::unstarted();
            server.start_on_free_ports(|server| {
                server.port = free_port();
                let node_dir = dir.join(server.port.to_string());
                std::fs::create_dir_all(&node_dir).expect("a directory for a cluster node");
                server.dir = Some(node_dir);
                server.extra = [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &free_port().to_string(),
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "1000",
                    "--cluster-require-full-coverage",
                    "no",
                ]
                .map(String::from)
                .to_vec();
            });
            nodes.push(server);
        }
        let cluster = RedisCluster { nodes, dir };
        let cli = cli_binary();
        let out = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(
                cluster
                    .nodes
                    .iter()
                    .map(|n| format!("127.0.0.1:{}", n.port)),
            )
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {cli:?} ({e}): the cluster tests need redis-cli \
                     (apt-get install redis-tools, or set GENMCP_REDIS_CLI)"
                )
            });
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            cluster.wait_ok(Duration::from_secs(20)),
            "the cluster did not reach cluster_state:ok within 20 s"
        );
        cluster
    }

    /// Whether every running node reports `cluster_state:ok` within `limit`.
    pub fn wait_ok(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            let ok = self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                n.command(&["CLUSTER", "INFO"])
                    .is_some_and(|r| r.contains("cluster_state:ok"))
            });
            if ok {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// `redis+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, asked of the first node).
    pub fn keyslot(&self, key: &str) -> u16 {
        let reply = self.nodes[0]
            .command(&["CLUSTER", "KEYSLOT", key])
            .expect("CLUSTER KEYSLOT answers");
        reply
            .trim()
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}: {reply:?}"))
    }

    /// The index of the master serving `slot` (asked of each node:
    /// `CLUSTER COUNTKEYSINSLOT` works anywhere, so each node's own slots come
    /// from `CLUSTER NODES`' `myself` line).
    pub fn owner(&self, slot: u16) -> usize {
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(nodes) = node.command(&["CLUSTER", "NODES"]) else {
                continue;
            };
            let Some(me) = nodes.lines().find(|l| l.contains("myself")) else {
                continue;
            };
            for range in me.split_whitespace().skip(8) {
                let (lo, hi) = match range.split_once('-') {
                    Some((lo, hi)) => (lo.parse::<u16>(), hi.parse::<u16>()),
                    None => (range.parse::<u16>(), range.parse::<u16>()),
                };
                if let (Ok(lo), Ok(hi)) = (lo, hi)
                    && lo <= slot
                    && slot <= hi
                {
                    return i;
                }
            }
        }
        panic!("no node serves slot {slot}")
    }

    /// The shard channels node `i` has subscribers on (`PUBSUB SHARDCHANNELS`).
    pub fn shard_channels(&self, i: usize) -> Vec<String> {
        let reply = self.nodes[i]
            .command(&["PUBSUB", "SHARDCHANNELS"])
            .unwrap_or_default();
        // *N\r\n$len\r\nname\r\n...: the names are the lines after `$` lines.
        let lines: Vec<&str> = reply.lines().collect();
        lines
            .windows(2)
            .filter(|w| w[0].starts_with('$'))
            .map(|w| w[1].to_owned())
            .collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        if let Some(log) = &self.log {
            let _ = std::fs::remove_file(log);
        }
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
