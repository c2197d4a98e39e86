//! `genmcp bench --mode tasks`: what a finished task costs the server in
//! resident memory while its record is kept (its TTL, an hour by default).
//!
//! Each round starts a fresh `genmcp serve --conformance` and drives it over
//! [`IN_FLIGHT`] keep-alive loopback connections ([`Session`], one source
//! address, so one principal): each connection calls `quick_task` (always a
//! task, done after about a millisecond, its result the 8-digit `text` it was
//! given), then polls `tasks/get` until the task is `completed` and checks the
//! inlined result, then starts the next. So at most [`IN_FLIGHT`] tasks are
//! unfinished at once (the per-principal bound is 1,000) and every task the
//! report counts was seen finished with its own result.
//!
//! [`WARM_UP`] tasks first (buffers, worker threads, allocator arenas), then
//! the server's resident memory (`VmRSS`) is read as the idle baseline; then
//! N tasks on the same connections; once all are finished, the resident
//! memory again. The report gives both, their ratio, and the difference per
//! task; then about 100 of the N tasks, evenly spaced, are read again with
//! `tasks/get` to show their records are still kept. The server is started with
//! `--max-retained-tasks` above warm-up + N, so the run never hits the bound.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::load::{Session, tasks_meta};
use super::measure::resident_kib_of;
use super::report::median;
use super::servers;

/// The conformance fixture every task runs.
pub const TASK_TOOL: &str = "quick_task";
/// Tasks unfinished at once (one per connection).
pub const IN_FLIGHT: usize = 32;
/// Tasks created and finished before the idle baseline is read.
pub const WARM_UP: usize = 1_000;
/// Finished tasks per round when `--tasks` is not given.
pub const DEFAULT_TASKS: usize = 100_000;
/// Tasks read again after the run, at most.
const READ_BACK: usize = 100;
/// The longest one task may take to finish.
const FINISH_TIMEOUT: Duration = Duration::from_secs(60);

fn io_err(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::other(msg.into())
}

/// What the tasks mode runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TasksConfig {
    /// Finished tasks per round (default 100,000).
    pub tasks: usize,
    /// Rounds, each on a fresh server (default 3).
    pub rounds: usize,
    /// Threads of the client (default: half the cores, 1 to 4).
    pub client_threads: usize,
}

impl TasksConfig {
    /// `tasks` tasks per round, 3 rounds, the default client threads.
    pub fn new(tasks: usize) -> TasksConfig {
        let defaults = super::BenchConfig::default();
        TasksConfig {
            tasks: tasks.max(1),
            rounds: defaults.rounds,
            client_threads: defaults.client_threads,
        }
    }
}

/// One round's measurement.
#[derive(Clone, Copy, Debug, Default)]
pub struct TasksSample {
    /// Server resident memory after the warm-up, KiB.
    pub idle_kib: u64,
    /// Server resident memory once the N tasks finished, KiB.
    pub with_tasks_kib: u64,
    /// Tasks seen `completed` with their own result.
    pub completed: usize,
    /// Tasks read again after the second memory reading.
    pub read_back: usize,
    /// Of those, still `completed` with their result.
    pub still_kept: usize,
    /// Creating and finishing the N tasks.
    pub elapsed: Duration,
}

impl TasksSample {
    /// Resident bytes added per finished task.
    pub fn bytes_per_task(&self) -> f64 {
        if self.completed == 0 {
            return 0.0;
        }
        self.with_tasks_kib.saturating_sub(self.idle_kib) as f64 * 1024.0 / self.completed as f64
    }

    /// Resident memory with the tasks over the idle baseline.
    pub fn ratio(&self) -> f64 {
        self.with_tasks_kib as f64 / self.idle_kib.max(1) as f64
    }
}

/// Calls `quick_task` with `text`; the new task's id.
async fn create(s: &mut Session, text: &str) -> std::io::Result<String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"_meta": tasks_meta(), "name": TASK_TOOL, "arguments": {"text": text}}});
    let (status, answer) = s.call(&body, "tools/call", Some(TASK_TOOL)).await?;
    let result = &answer["result"];
    match result["taskId"].as_str() {
        Some(id) if status == 200 && result["resultType"] == "task" => Ok(id.to_owned()),
        _ => Err(io_err(format!(
            "{TASK_TOOL} did not answer a task (HTTP {status}): {answer}"
        ))),
    }
}

/// `tasks/get` of `id`: its `result` object.
async fn get(s: &mut Session, id: &str) -> std::io::Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
        "params": {"_meta": tasks_meta(), "taskId": id}});
    let (status, mut answer) = s.call(&body, "tasks/get", Some(id)).await?;
    if status != 200 || answer.get("result").is_none() {
        return Err(io_err(format!("tasks/get (HTTP {status}): {answer}")));
    }
    Ok(answer["result"].take())
}

/// Whether `task` (a `tasks/get` result) is `completed` with `text`.
fn completed_with(task: &Value, text: &str) -> bool {
    task["status"] == "completed" && task["result"]["content"][0]["text"] == text
}

/// Polls `tasks/get` until task `id` is finished; fails unless it completed
/// with `text`.
async fn finish(s: &mut Session, id: &str, text: &str) -> std::io::Result<()> {
    let deadline = Instant::now() + FINISH_TIMEOUT;
    loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let task = get(s, id).await?;
        if completed_with(&task, text) {
            return Ok(());
        }
        if task["status"] != "working" {
            return Err(io_err(format!("task {id} ended otherwise: {task}")));
        }
        if Instant::now() > deadline {
            return Err(io_err(format!("task {id} still working after 60 s")));
        }
    }
}

/// Task `i`'s text: 8 digits.
fn text_of(i: usize) -> String {
    format!("{i:08}")
}

/// A connection working through shared task numbers until `end`; gives the
/// session back with the ids of the tasks whose number is a multiple of
/// `keep_every`.
async fn worker(
    mut s: Session,
    next: Arc<AtomicUsize>,
    end: usize,
    keep_every: usize,
) -> std::io::Result<(Session, Vec<(String, usize)>)> {
    let mut kept = Vec::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= end {
            return Ok((s, kept));
        }
        let text = text_of(i);
        let id = create(&mut s, &text).await?;
        finish(&mut s, &id, &text).await?;
        if i.is_multiple_of(keep_every) {
            kept.push((id, i));
        }
    }
}

/// Runs tasks `from..end` over `sessions`, each finished before its
/// connection starts the next; the sessions and the kept ids.
async fn phase(
    sessions: Vec<Session>,
    from: usize,
    end: usize,
    keep_every: usize,
) -> std::io::Result<(Vec<Session>, Vec<(String, usize)>)> {
    let next = Arc::new(AtomicUsize::new(from));
    let workers: Vec<_> = sessions
        .into_iter()
        .map(|s| tokio::spawn(worker(s, next.clone(), end, keep_every)))
        .collect();
    let mut back = Vec::with_capacity(workers.len());
    let mut kept = Vec::new();
    for w in workers {
        let (s, ids) = w.await.map_err(io_err_join)??;
        back.push(s);
        kept.extend(ids);
    }
    Ok((back, kept))
}

fn io_err_join(e: tokio::task::JoinError) -> std::io::Error {
    io_err(format!("a client task failed: {e}"))
}

/// Measures the server at `addr` (process `pid`) once.
pub fn measure(cfg: &TasksConfig, addr: SocketAddr, pid: u32) -> std::io::Result<TasksSample> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.client_threads.max(1))
        .enable_all()
        .build()?;
    let pid = pid.to_string();
    rt.block_on(async {
        let mut sessions = Vec::with_capacity(IN_FLIGHT);
        for _ in 0..IN_FLIGHT {
            sessions.push(Session::open(addr, "/mcp").await?);
        }
        let (sessions, _) = phase(sessions, 0, WARM_UP, usize::MAX).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle_kib = resident_kib_of(&pid);
        let start = Instant::now();
        let end = WARM_UP + cfg.tasks;
        let keep_every = cfg.tasks.div_ceil(READ_BACK).max(1);
        let (mut sessions, kept) = phase(sessions, WARM_UP, end, keep_every).await?;
        let elapsed = start.elapsed();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let with_tasks_kib = resident_kib_of(&pid);
        let s = sessions
            .first_mut()
            .ok_or_else(|| io_err("no connection"))?;
        let mut still_kept = 0;
        for (id, i) in &kept {
            if completed_with(&get(s, id).await?, &text_of(*i)) {
                still_kept += 1;
            }
        }
        Ok(TasksSample {
            idle_kib,
            with_tasks_kib,
            completed: cfg.tasks,
            read_back: kept.len(),
            still_kept,
            elapsed,
        })
    })
}

/// Runs `cfg.rounds` rounds, each on a fresh `genmcp serve --conformance`
/// started from `exe`.
pub fn run(exe: &Path, cfg: &TasksConfig) -> std::io::Result<Vec<TasksSample>> {
    let retained = (WARM_UP + cfg.tasks + 1_024).to_string();
    (0..cfg.rounds)
        .map(|i| {
            let server = servers::start(
                exe,
                &[
                    "serve",
                    "--conformance",
                    "--workers",
                    "2",
                    "--max-retained-tasks",
                    &retained,
                ],
                &[],
            )?;
            let s = measure(cfg, server.addr, server.pid())?;
            eprintln!(
                "round {}/{}: idle {} KiB, with {} finished tasks {} KiB, {:.0} bytes/task",
                i + 1,
                cfg.rounds,
                s.idle_kib,
                s.completed,
                s.with_tasks_kib,
                s.bytes_per_task()
            );
            Ok(s)
        })
        .collect()
}

/// The report: one row per round and the median bytes per task.
pub fn table(cfg: &TasksConfig, samples: &[TasksSample]) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "genmcp bench --mode tasks: {} finished `{TASK_TOOL}` tasks per round \
         (8-digit text results, {IN_FLIGHT} in flight, after {WARM_UP} warm-up tasks), \
         `genmcp serve --conformance`, {} round(s)\n\
         round | idle RSS KiB | RSS with the tasks KiB | with/idle | delta KiB | bytes per task \
         | completed | still kept | tasks/s\n",
        cfg.tasks,
        samples.len()
    );
    for (i, s) in samples.iter().enumerate() {
        let _ = writeln!(
            out,
            "{} | {} | {} | {:.2} | {} | {:.0} | {}/{} | {}/{} | {:.0}",
            i + 1,
            s.idle_kib,
            s.with_tasks_kib,
            s.ratio(),
            s.with_tasks_kib.saturating_sub(s.idle_kib),
            s.bytes_per_task(),
            s.completed,
            cfg.tasks,
            s.still_kept,
            s.read_back,
            s.completed as f64 / s.elapsed.as_secs_f64().max(1e-9),
        );
    }
    let per_task: Vec<f64> = samples.iter().map(TasksSample::bytes_per_task).collect();
    if let Some(m) = median(per_task) {
        let _ = writeln!(out, "median bytes per finished task: {m:.0}");
    }
    out
}

/// `genmcp bench --mode tasks`: runs and prints the report; `exe` is the
/// `genmcp` binary to start servers from.
pub fn cli(cfg: &TasksConfig, exe: &Path) -> ExitCode {
    match run(exe, cfg) {
        Ok(samples) => {
            print!("{}", table(cfg, &samples));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}
