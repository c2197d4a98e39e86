//! The nemeses: faults injected into the fleet on a schedule drawn from the
//! run's seed, each recorded in the history as a [`Kind::Nemesis`] op from
//! its injection to its healing. They touch only processes and Redis, never
//! the workload.

use std::time::Duration;

use serde_json::json;

use super::cluster::{Backend, Fleet};
use super::history::{Kind, Outcome, Recorder};
use super::rng::Rng;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nemesis {
    /// `CLIENT KILL TYPE pubsub` and `CLIENT KILL TYPE normal` on every Redis
    /// server: every node loses its Redis sessions and reconnects.
    CutConnections,
    /// Redis killed and started again (its state kept: AOF, fsync always).
    RestartRedis,
    /// Redis away for [`OUTAGE`]: longer than a node retries letting go of
    /// a GET stream's holder mark, so the mark must be let go once Redis is
    /// back.
    OutageRedis,
    /// `CLIENT PAUSE <lease + 1 s> ALL`: Redis answers nothing past a lease.
    PauseRedis,
    /// `SIGSTOP` a node past its lease, then `SIGCONT`.
    StopNode,
    /// `SIGKILL` a node, then start it again on its port.
    KillNode,
    /// On a cluster with replicas: `CLUSTER FAILOVER` on a replica.
    Failover,
}

impl Nemesis {
    /// Every nemesis that applies to one Redis server.
    pub const SINGLE: [Nemesis; 6] = [
        Nemesis::CutConnections,
        Nemesis::RestartRedis,
        Nemesis::OutageRedis,
        Nemesis::PauseRedis,
        Nemesis::StopNode,
        Nemesis::KillNode,
    ];

    /// Every nemesis.
    pub const ALL: [Nemesis; 7] = [
        Nemesis::CutConnections,
        Nemesis::RestartRedis,
        Nemesis::OutageRedis,
        Nemesis::PauseRedis,
        Nemesis::StopNode,
        Nemesis::KillNode,
        Nemesis::Failover,
    ];

    /// Its name in the history and the docs.
    pub fn name(self) -> &'static str {
        match self {
            Nemesis::CutConnections => "cut-connections",
            Nemesis::RestartRedis => "restart-redis",
            Nemesis::OutageRedis => "outage-redis",
            Nemesis::PauseRedis => "pause-redis",
            Nemesis::StopNode => "stop-node",
            Nemesis::KillNode => "kill-node",
            Nemesis::Failover => "failover",
        }
    }
}

/// How long [`Nemesis::OutageRedis`] keeps Redis away.
pub const OUTAGE: Duration = Duration::from_secs(17);

/// Injects `nemesis` into `fleet` and heals it again (the call returns
/// healed), recording both in `recorder`.
pub fn inject(nemesis: Nemesis, fleet: &mut Fleet, rng: &mut Rng, recorder: &Recorder) {
    let lease = fleet.lease();
    let past_lease = lease + Duration::from_millis(1500);
    let mut op = recorder.begin("nemesis", Kind::Nemesis, None, "");
    let mut detail = json!({"nemesis": nemesis.name()});
    match nemesis {
        Nemesis::CutConnections => {
            let mut killed = Vec::new();
            for server in servers(fleet) {
                for kind in ["pubsub", "normal"] {
                    killed.push(server.query(&["CLIENT", "KILL", "TYPE", kind]));
                }
            }
            detail["killed"] = json!(killed);
        }
        Nemesis::RestartRedis | Nemesis::OutageRedis => {
            let away = if nemesis == Nemesis::OutageRedis {
                OUTAGE
            } else {
                Duration::from_secs(1)
            };
            match &mut fleet.backend {
                Backend::Single(r) => {
                    r.kill();
                    std::thread::sleep(away);
                    r.start_again();
                }
                Backend::Cluster(c) => {
                    let i = rng.below(c.servers.len());
                    c.servers[i].kill();
                    std::thread::sleep(away);
                    c.servers[i].start_again();
                    detail["server"] = json!(i);
                }
            }
        }
        Nemesis::PauseRedis => {
            let ms = past_lease.as_millis().to_string();
            for server in servers(fleet) {
                detail["paused"] = json!(server.query(&["CLIENT", "PAUSE", &ms, "ALL"]));
            }
            std::thread::sleep(past_lease);
        }
        Nemesis::StopNode => {
            let i = rng.below(fleet.nodes.len());
            op.set_node(Some(i));
            fleet.nodes[i].signal("-STOP");
            std::thread::sleep(past_lease);
            fleet.nodes[i].signal("-CONT");
        }
        Nemesis::KillNode => {
            let i = rng.below(fleet.nodes.len());
            op.set_node(Some(i));
            fleet.nodes[i].kill();
            std::thread::sleep(Duration::from_secs(1));
            fleet.nodes[i].restart();
        }
        Nemesis::Failover => {
            if let Backend::Cluster(c) = &mut fleet.backend {
                let replicas = c.replicas();
                let i = replicas[rng.below(replicas.len())];
                detail["server"] = json!(i);
                detail["reply"] = json!(c.servers[i].query(&["CLUSTER", "FAILOVER"]));
                let promoted = (0..100).any(|_| {
                    std::thread::sleep(Duration::from_millis(100));
                    c.servers[i]
                        .query(&["ROLE"])
                        .is_some_and(|r| r.starts_with("master"))
                });
                detail["promoted"] = json!(promoted);
                c.wait_ok(Duration::from_secs(20));
            }
        }
    }
    op.end(Outcome::Ok, detail);
}

fn servers(fleet: &Fleet) -> Vec<&super::cluster::Redis> {
    match &fleet.backend {
        Backend::Single(r) => vec![r],
        Backend::Cluster(c) => c.servers.iter().collect(),
    }
}
