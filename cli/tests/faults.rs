//! The fleet under faults, in the manner of Jepsen (docs/faults.md): three
//! `genmcp serve --bus` nodes on one Redis, a workload of tasks, 2025
//! sessions through a per-request round-robin proxy and 2026 listens, the
//! nemeses striking one round each (cut Redis connections, restart Redis,
//! pause Redis past the lease, stop a node past its lease, kill a node), and
//! a checker over the recorded history: no promise may break. A second test
//! runs a Redis Cluster with replicas through a master failover.
//!
//! The short form (one round) is part of `cargo test`;
//! `scripts/faults.sh --minutes N` runs the long form (`GENMCP_FAULTS_MINUTES`).
//! `GENMCP_FAULTS_SEED` replays a schedule; `GENMCP_FAULTS_NEMESES` (names
//! separated by commas, or `none`) runs only some nemeses. The history of each run is
//! written to `target/tmp/faults/<name>-<seed>/history.jsonl`, beside
//! `summary.txt` and the nodes' logs.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/faults/mod.rs"]
mod faults;

use std::sync::Mutex;

use faults::cluster::NodeOptions;
use faults::nemesis::Nemesis;
use faults::run::{self, Plan, Report};

/// The two runs share the machine's two cores: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn options() -> NodeOptions {
    NodeOptions {
        lease_secs: 2,
        max_tasks: 4,
    }
}

fn judge(report: &Report) {
    for line in &report.summary {
        println!("{line}");
    }
    for v in &report.violations {
        println!("{v}");
    }
    println!(
        "FAULTS SUMMARY: {} ops, {} violations; history in {}",
        report.history.ops.len(),
        report.violations.len(),
        report.dir.display()
    );
    assert!(
        report.violations.is_empty(),
        "{} violations (history: {}):\n{}",
        report.violations.len(),
        report.dir.join("history.jsonl").display(),
        report
            .violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_fleet_keeps_every_promise_through_every_fault_of_one_redis_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let report = run::run(&Plan {
        name: "single",
        seed: run::seed(28),
        nodes: 3,
        cluster: false,
        nemeses: run::nemeses(&Nemesis::SINGLE),
        rounds: 1,
        minutes: run::minutes(),
        options: options(),
    });
    judge(&report);
}

#[test]
fn the_fleet_keeps_every_promise_through_a_cluster_master_failover() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let report = run::run(&Plan {
        name: "cluster",
        seed: run::seed(28),
        nodes: 2,
        cluster: true,
        nemeses: run::nemeses(&[Nemesis::Failover, Nemesis::Failover]),
        rounds: 1,
        // The long form gives the cluster a fifth of the single server's time.
        minutes: run::minutes().map(|m| (m / 5).max(1)),
        options: options(),
    });
    judge(&report);
}
