//! One run: start the fleet and the proxy, run the workload while the
//! nemeses strike on their schedule, heal, read every task on every node,
//! close what is still open, check the history, write it down.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::checker::{self, Params, Violation};
use super::cluster::{Backend, Fleet, NodeOptions, Redis, RedisCluster};
use super::history::{History, Kind, Recorder};
use super::nemesis::{self, Nemesis};
use super::proxy::Proxy;
use super::rng::Rng;
use super::workload::{self, Ctx};

/// What to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// A name for the run's directory.
    pub name: &'static str,
    /// The seed of every random choice.
    pub seed: u64,
    /// `genmcp` nodes.
    pub nodes: usize,
    /// A Redis Cluster with replicas instead of one server.
    pub cluster: bool,
    /// The nemeses of one round (shuffled per round).
    pub nemeses: Vec<Nemesis>,
    /// Rounds at least; with `minutes`, rounds continue until they passed.
    pub rounds: usize,
    /// The long form: keep going this long.
    pub minutes: Option<u64>,
    /// The node flags.
    pub options: NodeOptions,
}

/// What a run found.
pub struct Report {
    /// The history.
    pub history: History,
    /// The violations, each with its ops.
    pub violations: Vec<Violation>,
    /// The summary lines (ops by kind and outcome, nemeses, violations).
    pub summary: Vec<String>,
    /// Where the history, the summary and the node logs are.
    pub dir: PathBuf,
}

/// The seed: `$GENMCP_FAULTS_SEED` if set, else `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("GENMCP_FAULTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The long form's minutes: `$GENMCP_FAULTS_MINUTES` if set.
pub fn minutes() -> Option<u64> {
    std::env::var("GENMCP_FAULTS_MINUTES")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|m| *m > 0)
}

/// The nemeses to run: `$GENMCP_FAULTS_NEMESES` (names separated by commas,
/// `none` for a calm run) if set, else `default`. Unknown names are an error.
pub fn nemeses(default: &[Nemesis]) -> Vec<Nemesis> {
    let Ok(list) = std::env::var("GENMCP_FAULTS_NEMESES") else {
        return default.to_vec();
    };
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty() && *n != "none")
        .map(|n| {
            Nemesis::ALL
                .into_iter()
                .find(|k| k.name() == n)
                .unwrap_or_else(|| panic!("GENMCP_FAULTS_NEMESES: no nemesis {n:?}"))
        })
        .filter(|n| default.contains(n))
        .collect()
}

/// Stops the workers and closes their streams when dropped.
struct StopOnDrop(Ctx);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
        self.0.close_streams();
    }
}

/// Runs `plan`.
pub fn run(plan: &Plan) -> Report {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("faults")
        .join(format!("{}-{}", plan.name, plan.seed));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the run's directory");
    let backend = if plan.cluster {
        Backend::Cluster(RedisCluster::start(&dir))
    } else {
        Backend::Single(Redis::start(&dir, &[]))
    };
    let mut fleet = Fleet::start(backend, plan.nodes, plan.options.clone(), &dir);
    let proxy = Proxy::start(fleet.addrs());
    let rec = Recorder::new();
    let ctx = Ctx::new(rec.clone(), fleet.addrs(), proxy.handle());
    // The workers stop however this function ends (a panic included).
    let _stop = StopOnDrop(ctx.clone());
    let rng = Rng::new(plan.seed);
    let mut workers = Vec::new();
    for (i, principal) in ["alice", "bob"].into_iter().enumerate() {
        let (c, r) = (ctx.clone(), rng.fork(10 + i as u64));
        workers.push(std::thread::spawn(move || {
            workload::task_worker(c, principal, r)
        }));
    }
    if !plan.cluster {
        let (c, r) = (ctx.clone(), rng.fork(20));
        workers.push(std::thread::spawn(move || {
            workload::session_worker(c, "carol", r)
        }));
        let (c, r) = (ctx.clone(), rng.fork(21));
        workers.push(std::thread::spawn(move || {
            workload::session_worker(c, super::cluster::NARROWED, r)
        }));
    }
    let (c, r) = (ctx.clone(), rng.fork(50));
    workers.push(std::thread::spawn(move || {
        workload::race_worker(c, "carol", r)
    }));
    let (c, r) = (ctx.clone(), rng.fork(40));
    workers.push(std::thread::spawn(move || workload::reader(c, r)));
    let (c, r) = (ctx.clone(), rng.fork(30));
    workers.push(std::thread::spawn(move || {
        workload::listen_worker(c, "alice", r)
    }));

    // The schedule: a calm start, then rounds of every nemesis in a random
    // order, each followed by a calm gap.
    let mut schedule = rng.fork(1);
    let started = Instant::now();
    let until = plan.minutes.map(|m| started + Duration::from_secs(m * 60));
    std::thread::sleep(Duration::from_secs(4));
    let mut round = 0;
    while round < plan.rounds || until.is_some_and(|u| Instant::now() < u) {
        let mut order = plan.nemeses.clone();
        schedule.shuffle(&mut order);
        if order.is_empty() {
            // A calm round: the workload alone.
            std::thread::sleep(Duration::from_secs(30));
        }
        for n in order {
            nemesis::inject(n, &mut fleet, &mut schedule, &rec);
            std::thread::sleep(Duration::from_millis(4000 + schedule.below(2000) as u64));
        }
        round += 1;
    }

    // A calm tail: what a fault broke for good shows after it.
    std::thread::sleep(Duration::from_secs(10));
    // Stop the workload, heal, let leases and reconnects settle.
    ctx.stop.store(true, Ordering::SeqCst);
    for w in workers {
        let _ = w.join();
    }
    fleet.heal();
    std::thread::sleep(fleet.lease() * 2 + Duration::from_secs(4));
    ctx.close_streams();
    // Every task read on every node.
    let snapshot = rec.snapshot();
    let mut tasks: Vec<(String, String)> = snapshot
        .of(Kind::CreateTask)
        .filter_map(|o| o.task.clone().map(|t| (t, o.principal.clone())))
        .collect();
    tasks.sort();
    tasks.dedup();
    for (task, principal) in &tasks {
        workload::read_everywhere(&ctx, "final", principal, task, Kind::FinalGet);
    }
    let history = rec.snapshot();
    drop(proxy);
    drop(fleet);

    let params = Params {
        lease_ms: plan.options.lease_secs * 1000,
        max_tasks: plan.options.max_tasks,
        narrowed: vec![super::cluster::NARROWED.to_owned()],
        ..Params::default()
    };
    let violations = checker::check(&history, &params);
    let mut summary = vec![format!(
        "faults {}: seed {}, {} nodes, {} rounds, {:.0} s",
        plan.name,
        plan.seed,
        plan.nodes,
        round,
        started.elapsed().as_secs_f64()
    )];
    summary.extend(history.summary());
    let mut by_invariant: std::collections::BTreeMap<&str, usize> = Default::default();
    for v in &violations {
        *by_invariant.entry(v.invariant).or_default() += 1;
    }
    summary.push(format!(
        "violations: {}{}",
        violations.len(),
        by_invariant
            .iter()
            .map(|(k, n)| format!(", {k} {n}"))
            .collect::<String>()
    ));
    let _ = std::fs::write(dir.join("history.jsonl"), history.to_jsonl());
    let report: String = summary
        .iter()
        .cloned()
        .chain(violations.iter().map(|v| v.to_string()))
        .map(|l| l + "\n")
        .collect();
    let _ = std::fs::write(dir.join("summary.txt"), report);
    Report {
        history,
        violations,
        summary,
        dir,
    }
}
