//! A node's lease on its running tasks (`<prefix>task-node:<node>`), and
//! what follows when it lapsed: other nodes end the node's unfinished tasks
//! `failed` (see `remote`), and the node, once it renews again, adopts every
//! terminal copy it finds and stops that work, so every node answers the
//! same terminal status. The renewal runs on a Redis permit of its own.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::record::TaskRecord;
use super::shared::{Put, SharedTasks};
use super::supervisor::{Shared, Tasks};
use crate::suite::sealing::seal;

impl Tasks {
    /// Reads task `id`'s copy and, when it is terminal, adopts it.
    pub(super) async fn adopt_shared(&self, remote: &SharedTasks, id: &str) {
        match remote.get(id).await {
            Ok(Some((copy, _))) if copy.status.is_terminal() => self.adopt(&copy),
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %id, error = %e, "final task copy not read"),
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

    /// After this node's lease lapsed: adopts every terminal copy of a task
    /// whose work runs here.
    async fn reconcile(&self, remote: &SharedTasks) {
        let ids = self.live().ids();
        for id in ids {
            self.adopt_shared(remote, &id).await;
        }
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
                Ok(Put::Final) => self.adopt_shared(remote, &id).await,
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
        match remote.renew(seal::expiry(lease)).await {
            Ok(held) => {
                wait = lease / 3;
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
        if reconcile {
            tasks.reconcile(&remote).await;
        }
        tasks.touch_copies(&remote, lease).await;
    }
}
