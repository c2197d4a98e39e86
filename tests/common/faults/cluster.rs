//! The system under test as processes: Redis (one server, or a cluster with
//! replicas) and N `genmcp serve --bus` nodes sharing one sealing key and one
//! token table. Every process is killed on drop; a killed node starts again
//! on its own port (the proxy's list of nodes stays valid).

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The admin principals of the token table: token `tok-<name>` is
/// principal `<name>`.
pub const PRINCIPALS: [&str; 3] = ["alice", "bob", "carol"];

/// A principal that is not an admin: the demo narrows its streams to
/// `toolsListChanged`, so its 2025 `resources/subscribe` is answered and
/// honours nothing (by design: `UriChanged::Declined`); its sessions still
/// count for the GET stream, unsubscribe and DELETE invariants.
pub const NARROWED: &str = "dave";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// The `genmcp` binary: the suite runs in the command's own tests
/// (`cli/tests/faults.rs`), for which cargo builds it.
fn genmcp_bin() -> &'static str {
    match option_env!("CARGO_BIN_EXE_genmcp") {
        Some(bin) => bin,
        None => panic!("the fault suite runs from cli/tests/"),
    }
}

fn redis_server_bin() -> String {
    std::env::var("GENMCP_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

fn redis_cli_bin() -> String {
    std::env::var("GENMCP_REDIS_CLI").unwrap_or_else(|_| "redis-cli".into())
}

/// Sends `signal` (`-STOP`, `-CONT`, `-KILL`) to process `pid`.
pub fn signal(pid: u32, signal: &str) -> bool {
    crate::common::signal_process(pid, signal)
}

/// One redis-server process, persistent (AOF, fsync on every write) in its
/// own directory, so a restart keeps the fleet's state as an operator's
/// Redis would.
pub struct Redis {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl Redis {
    /// Starts a server in `dir` (created) with `extra` arguments, on a free
    /// port (and, for a cluster node, a free cluster bus port rather than
    /// port + 10000, which can be anyone's). A server that exits at once
    /// (its port was taken since it was probed) is tried again on other
    /// ports, 5 times.
    pub fn start(dir: &Path, extra: &[&str]) -> Redis {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let mut extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
            if extra.iter().any(|a| a == "--cluster-enabled") {
                extra.extend(["--cluster-port".to_string(), free_port().to_string()]);
            }
            let dir = dir.join(format!("redis-{port}"));
            std::fs::create_dir_all(&dir).expect("a directory for redis");
            let mut r = Redis {
                child: None,
                port,
                dir,
                extra,
            };
            match r.launch() {
                Ok(()) => return r,
                Err(Some(why)) => last = why,
                Err(None) => panic!(
                    "redis-server on port {port} did not answer within 10 s: {}",
                    r.log()
                ),
            }
        }
        panic!("redis-server did not start on 5 free ports; the last said: {last}")
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL; every write was already fsynced).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on its port and waits for `PING` (10 s at most).
    /// A server that exits at once (its port, just freed, taken for a
    /// moment by another process's connection) is started again, 20 times
    /// a quarter of a second apart.
    pub fn start_again(&mut self) {
        for tries in 0..=20 {
            match self.launch() {
                Ok(()) => return,
                Err(Some(_)) if tries < 20 => std::thread::sleep(Duration::from_millis(250)),
                Err(_) => break,
            }
        }
        panic!(
            "redis-server on port {} did not come up: {}",
            self.port,
            self.log()
        );
    }

    /// What the server logged (its stdout, kept in its directory).
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    /// Starts the server on its port and waits for `PING` (10 s at most):
    /// `Err(Some(log))` when it exited first, `Err(None)` when it ran
    /// without answering.
    fn launch(&mut self) -> Result<(), Option<String>> {
        self.kill();
        let bin = redis_server_bin();
        let log = std::fs::File::create(self.dir.join("redis.log")).expect("a log file for redis");
        let child = Command::new(&bin)
            .current_dir(&self.dir)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {bin:?} ({e}): the fault suite needs redis-server")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.query(&["PING"]).is_some() {
                return Ok(());
            }
            if crate::common::take_if_exited(&mut self.child) {
                return Err(Some(self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(None)
    }

    /// Runs one command; its reply as text (`None` when Redis did not answer).
    pub fn query(&self, args: &[&str]) -> Option<String> {
        let client = redis::Client::open(self.url()).ok()?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        let _ = con.set_read_timeout(Some(Duration::from_secs(5)));
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let v: redis::Value = cmd.query(&mut con).ok()?;
        Some(value_text(&v))
    }
}

fn value_text(v: &redis::Value) -> String {
    match v {
        redis::Value::Nil => String::new(),
        redis::Value::Int(i) => i.to_string(),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Okay => "OK".into(),
        redis::Value::VerbatimString { text, .. } => text.clone(),
        redis::Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join("\n"),
        other => format!("{other:?}"),
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of three masters, each with one replica, created with
/// `redis-cli --cluster create --cluster-replicas 1`.
pub struct RedisCluster {
    /// The six servers (masters first, as created).
    pub servers: Vec<Redis>,
}

impl RedisCluster {
    /// Starts six cluster-enabled servers in `dir`, joins them and waits
    /// (30 s at most) for `cluster_state:ok` everywhere.
    pub fn start(dir: &Path) -> RedisCluster {
        let servers: Vec<Redis> = (0..6)
            .map(|_| {
                Redis::start(
                    dir,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1000",
                        "--cluster-require-full-coverage",
                        "no",
                    ],
                )
            })
            .collect();
        let out = Command::new(redis_cli_bin())
            .arg("--cluster")
            .arg("create")
            .args(servers.iter().map(|s| format!("127.0.0.1:{}", s.port)))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs (the cluster nemesis needs it)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let c = RedisCluster { servers };
        assert!(
            c.wait_ok(Duration::from_secs(30)),
            "the cluster never reached cluster_state:ok"
        );
        c
    }

    /// Whether every server reports `cluster_state:ok` within `limit`.
    pub fn wait_ok(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.servers.iter().all(|s| {
                s.query(&["CLUSTER", "INFO"])
                    .is_some_and(|r| r.contains("cluster_state:ok"))
            }) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// `redis+cluster://` with every server as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self
            .servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// The indices of the servers that are replicas now.
    pub fn replicas(&self) -> Vec<usize> {
        (0..self.servers.len())
            .filter(|&i| {
                self.servers[i]
                    .query(&["ROLE"])
                    .is_some_and(|r| r.starts_with("slave"))
            })
            .collect()
    }
}

/// How the nodes are started.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// `--task-lease` in seconds.
    pub lease_secs: u64,
    /// `--max-tasks-per-principal`.
    pub max_tasks: usize,
}

/// One `genmcp serve --bus` process.
pub struct Node {
    /// Its index in the fleet.
    pub index: usize,
    child: Option<Child>,
    /// Its address (the same across restarts).
    pub addr: SocketAddr,
    args: Vec<String>,
    log: PathBuf,
}

impl Node {
    fn start(index: usize, args: Vec<String>, log: PathBuf) -> Node {
        let mut n = Node {
            index,
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            args,
            log,
        };
        n.spawn(0);
        n
    }

    fn spawn(&mut self, port: u16) {
        self.spawn_try(port, 0);
    }

    fn spawn_try(&mut self, port: u16, tries: u32) {
        let offset = std::fs::metadata(&self.log).map(|m| m.len()).unwrap_or(0);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the node's log file");
        let err = log.try_clone().expect("the log file again");
        let child = Command::new(genmcp_bin())
            .args(["--log-format", "json", "serve", "--port", &port.to_string()])
            .args(&self.args)
            .env("RUST_LOG", "genmcp=info")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("genmcp starts");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(addr) = listening(&self.log, offset) {
                self.addr = addr;
                return;
            }
            if crate::common::take_if_exited(&mut self.child) {
                // On its own port again (a restart), the port just freed
                // may have been taken for a moment: again, a quarter of a
                // second later. On a port of its own choosing it failed.
                assert!(
                    port != 0 && tries < 20,
                    "node {} exited before listening ({})",
                    self.index,
                    self.log.display()
                );
                std::thread::sleep(Duration::from_millis(250));
                return self.spawn_try(port, tries + 1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "node {} never logged `genmcp listening` ({})",
            self.index,
            self.log.display()
        );
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether it runs (not killed).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL, and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on its port (after [`Node::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        let port = self.addr.port();
        // The port was just freed: a few tries while the kernel lets go of it.
        self.spawn(port);
    }

    /// SIGSTOP / SIGCONT.
    pub fn signal(&self, sig: &str) -> bool {
        self.pid().is_some_and(|p| signal(p, sig))
    }
}

/// The address in the first `genmcp listening` line after `offset` of `log`.
fn listening(log: &Path, offset: u64) -> Option<SocketAddr> {
    let text = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(text.get(offset as usize..)?);
    text.lines().find_map(|l| {
        let v: Value = serde_json::from_str(l).ok()?;
        if v["fields"]["message"] == "genmcp listening" {
            v["fields"]["addr"].as_str()?.parse().ok()
        } else {
            None
        }
    })
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            signal(pid, "-CONT");
        }
        self.kill();
    }
}

/// The Redis side of a fleet.
pub enum Backend {
    /// One server.
    Single(Redis),
    /// A cluster with replicas.
    Cluster(RedisCluster),
}

/// Redis and the nodes.
pub struct Fleet {
    /// The Redis side.
    pub backend: Backend,
    /// The nodes.
    pub nodes: Vec<Node>,
    /// How they were started.
    pub options: NodeOptions,
    /// The run's directory (logs, the key, the token table).
    pub dir: PathBuf,
}

impl Fleet {
    /// `n` nodes on `backend`, files in `dir` (created).
    pub fn start(backend: Backend, n: usize, options: NodeOptions, dir: &Path) -> Fleet {
        std::fs::create_dir_all(dir).expect("the run's directory");
        let key = dir.join("key");
        std::fs::write(&key, "5a".repeat(32)).expect("the key file");
        let tokens = dir.join("tokens");
        let mut table: String = PRINCIPALS
            .iter()
            .map(|p| format!("tok-{p} {p} admin\n"))
            .collect();
        table.push_str(&format!("tok-{NARROWED} {NARROWED}\n"));
        std::fs::write(&tokens, table).expect("the token table");
        let url = match &backend {
            Backend::Single(r) => r.url(),
            Backend::Cluster(c) => c.url(),
        };
        let args: Vec<String> = [
            "--bus",
            &url,
            "--key-file",
            &key.to_string_lossy(),
            "--auth-tokens",
            &tokens.to_string_lossy(),
            "--task-lease",
            &options.lease_secs.to_string(),
            "--max-tasks-per-principal",
            &options.max_tasks.to_string(),
            "--keep-alive",
            "1",
            "--workers",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let nodes = (0..n)
            .map(|i| Node::start(i, args.clone(), dir.join(format!("node-{i}.log"))))
            .collect();
        Fleet {
            backend,
            nodes,
            options,
            dir: dir.to_owned(),
        }
    }

    /// The nodes' addresses.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|n| n.addr).collect()
    }

    /// The lease.
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.options.lease_secs)
    }

    /// Every node running and continued, Redis up: the end of every fault.
    pub fn heal(&mut self) {
        for n in &mut self.nodes {
            if n.running() {
                n.signal("-CONT");
            } else {
                n.restart();
            }
        }
        match &mut self.backend {
            Backend::Single(r) => {
                if r.pid().is_none() {
                    r.start_again();
                } else if let Some(pid) = r.pid() {
                    signal(pid, "-CONT");
                }
                let _ = r.query(&["CLIENT", "UNPAUSE"]);
            }
            Backend::Cluster(c) => {
                for s in &mut c.servers {
                    if s.pid().is_none() {
                        s.start_again();
                    }
                }
                c.wait_ok(Duration::from_secs(30));
            }
        }
    }
}
