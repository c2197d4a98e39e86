//! A node's lease on its running tasks (`<prefix>task-node:<node>`), and
//! what follows when it lapsed: other nodes end the node's unfinished tasks
//! `failed` (see `remote`), and the node, once it renews again, adopts every
//! terminal copy it finds and stops that work, so every node answers the
//! same terminal status. The renewal runs on a Redis permit of its own.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::record::TaskRecord;
use super::shared::{Put, SharedTasks, unavailable};
use super::supervisor::{Shared, Tasks};
use crate::protocol::McpError;
use crate::pubsub::BusError;
use crate::suite::sealing::seal;

/// What this node knows of its own lease: until when it surely holds it (the
/// last renewal's send time plus the lease), and whether a lapse found by a
/// renewal is still being reconciled. While either is in doubt, an answer
/// about one of this node's own tasks first reads the shared copy (another
/// node may have ended the task `failed` meanwhile).
#[derive(Default)]
pub(super) struct LeaseClock(Mutex<ClockState>);

#[derive(Default)]
struct ClockState {
    until: Option<Instant>,
    /// Lapses found by renewals, and how many of them were reconciled.
    lapses: u64,
    reconciled: u64,
}

impl LeaseClock {
    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A renewal sent at `sent` succeeded (`held`: the lease had not lapsed).
    pub(super) fn renewed(&self, sent: Instant, lease: Duration, held: bool) {
        let mut state = self.state();
        state.until = Some(sent + lease);
        if !held {
            state.lapses += 1;
        }
    }

    /// The lapses found so far.
    fn lapses(&self) -> u64 {
        self.state().lapses
    }

    /// Whether a lapse found by a renewal still waits to be reconciled.
    fn unreconciled(&self) -> bool {
        let state = self.state();
        state.reconciled < state.lapses
    }

    /// Every lapse up to `lapses` was reconciled.
    fn reconciled(&self, lapses: u64) {
        let mut state = self.state();
        state.reconciled = state.reconciled.max(lapses);
    }

    /// Whether the lease may have lapsed unnoticed (this process paused or
    /// cut off from Redis past it) or a lapse is not yet reconciled.
    pub(super) fn in_doubt(&self) -> bool {
        let state = self.state();
        state.reconciled < state.lapses || state.until.is_none_or(|u| Instant::now() >= u)
    }
}

impl Tasks {
    /// Before answering about task `id` of this node: when the lease is in
    /// doubt, adopts a terminal shared copy first, so this node never
    /// answers `working` for a task another node already ended. A copy that
    /// cannot be read then is an error (retry later), never a guess.
    pub(super) async fn check_own(&self, id: &str) -> Result<(), McpError> {
        if let Some(remote) = self.shared.fleet.remote.get()
            && self.shared.fleet.lease.in_doubt()
        {
            return self
                .adopt_shared(remote, id)
                .await
                .map_err(|e| unavailable(&e));
        }
        Ok(())
    }

    /// Reads task `id`'s copy and, when it is terminal, adopts it.
    pub(super) async fn adopt_shared(
        &self,
        remote: &SharedTasks,
        id: &str,
    ) -> Result<(), BusError> {
        match remote.get(id).await {
            Ok(Some((copy, _))) if copy.status.is_terminal() => {
                self.adopt(&copy);
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "final task copy not read");
                Err(e)
            }
        }
    }

    /// Takes the terminal status of the shared `copy` of a task of this
    /// node (the one exception to "a terminal status never changes": the
    /// shared copy is the fleet's answer, so every node agrees) and stops
    /// the task's work.
    fn adopt(&self, copy: &TaskRecord) {
        let now = seal::now_ms();
        let adopted = self.shared.store.modify(&copy.id, now, &mut |r| {
            if r.status == copy.status || !copy.status.is_terminal() {
                return false;
            }
            r.status = copy.status;
            r.status_message.clone_from(&copy.status_message);
            r.outcome.clone_from(&copy.outcome);
            r.input_requests.clear();
            r.updated_ms = copy.updated_ms;
            r.rev = r.rev.max(copy.rev);
            true
        });
        if adopted.is_none() {
            return;
        }
        tracing::warn!(task = %copy.id, status = copy.status.as_str(), "task ended elsewhere (this node's lease lapsed); adopted, its work stopped");
        // Its watchers hear it; no copy is written (Redis has it).
        let store = &self.shared.store;
        self.shared
            .watchers
            .announce(&copy.id, || store.get(&copy.id, seal::now_ms()));
        self.stop(&copy.id, Duration::ZERO);
    }

    /// After this node's lease lapsed: settles every task whose work runs
    /// here with the fleet. Each unfinished one is written again at a new
    /// revision, which fences off every "lost" copy another node decided on
    /// while the lease was gone (that write carries an older revision, so
    /// Redis refuses it); a terminal copy found instead is adopted. `true`
    /// once every task was settled; otherwise the lapse stays in doubt and
    /// this runs again.
    async fn reconcile(&self, remote: &SharedTasks) -> bool {
        let mut settled = true;
        let ids = self.live().ids();
        for id in ids {
            let now = seal::now_ms();
            let Some(record) = self
                .shared
                .store
                .modify(&id, now, &mut |r| !r.status.is_terminal())
            else {
                // Ended here: its copy is written (or retried) as every end's.
                continue;
            };
            match remote.put(&record).await {
                Ok(Put::Stored) => remote.publish_status(&record),
                Ok(Put::Final | Put::Older | Put::Touched) => {
                    settled &= self.adopt_shared(remote, &id).await.is_ok();
                }
                Err(e) => {
                    tracing::warn!(task = %id, error = %e, "task not settled after the lease lapsed");
                    self.unwritten(&record, &e);
                    settled = false;
                }
            }
        }
        settled
    }

    /// Extends the copies of this node's unfinished tasks that would expire
    /// within `margin` (a task never expires while its work runs).
    async fn touch_copies(&self, remote: &SharedTasks, margin: Duration) {
        let now = seal::now_ms();
        let margin = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        let ids = self.live().ids();
        for id in ids {
            let Some(record) = self.shared.store.get(&id, now) else {
                continue;
            };
            let copy_until = record
                .due_ms()
                .max(record.updated_ms.saturating_add(record.ttl_ms));
            if record.status.is_terminal() || copy_until > now.saturating_add(margin) {
                continue;
            }
            match remote.touch(&record).await {
                Ok(Put::Final) => {
                    let _ = self.adopt_shared(remote, &id).await;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(task = %id, error = %e, "task copy not extended"),
            }
        }
    }
}

/// Renews this node's lease every third of it (a failed renewal is retried
/// after a tenth), on its own permit, for as long as the supervisor lives;
/// nothing else runs in this loop, so no other work can delay a renewal. A
/// renewal that finds the lease lapsed (the process was paused, or Redis
/// unreachable, past the lease) has [`keep_copies`] adopt the terminal
/// copies other nodes wrote meanwhile.
pub(super) async fn renew_lease(remote: SharedTasks, shared: Weak<Shared>, lease: Duration) {
    let lapsed = Arc::new(Notify::new());
    tokio::spawn(keep_copies(
        remote.clone(),
        shared.clone(),
        lease,
        lapsed.clone(),
    ));
    let mut wait = lease / 3;
    loop {
        tokio::time::sleep(wait).await;
        if shared.strong_count() == 0 {
            return;
        }
        let sent = Instant::now();
        match remote.renew(lease).await {
            Ok(held) => {
                wait = lease / 3;
                if let Some(shared) = shared.upgrade() {
                    shared.fleet.lease.renewed(sent, lease, held);
                }
                if !held {
                    tracing::warn!(
                        "task lease had lapsed; adopting how other nodes ended this node's tasks"
                    );
                    // Remembered when the other loop is busy: never lost.
                    lapsed.notify_one();
                }
            }
            Err(e) => {
                wait = lease / 10;
                tracing::warn!(error = %e, "task lease not renewed");
            }
        }
    }
}

/// Every third of the lease extends the copies of long-running tasks, and
/// when the lease was found lapsed adopts the terminal copies of this
/// node's running tasks; for as long as the supervisor lives.
async fn keep_copies(
    remote: SharedTasks,
    shared: Weak<Shared>,
    lease: Duration,
    lapsed: Arc<Notify>,
) {
    loop {
        let reconcile = tokio::select! {
            () = tokio::time::sleep(lease / 3) => false,
            () = lapsed.notified() => true,
        };
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let tasks = Tasks { shared: strong };
        if reconcile || tasks.shared.fleet.lease.unreconciled() {
            let lapses = tasks.shared.fleet.lease.lapses();
            if tasks.reconcile(&remote).await {
                tasks.shared.fleet.lease.reconciled(lapses);
            }
        }
        tasks.touch_copies(&remote, lease).await;
    }
}
