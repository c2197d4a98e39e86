//! The sealing key set of `genmcp serve`: installed in the suite at start and
//! re-read from `--key-file` on `SIGHUP` (tokens sealed from then on use the
//! new current key; tokens naming any key of the new set open; the bus's
//! messages are tagged with the new current key's bus key and accepted under
//! any key of the new set). A file that cannot be read or parsed leaves the
//! set in use unchanged (logged). Without a key file, `SIGHUP` is logged and
//! ignored.

use std::path::PathBuf;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use genmcp::pubsub::RedisOnce;
use genmcp::pubsub::redis::BusKeys;
use genmcp::suite::{FleetKeys, KeySet, SealingKeys};

/// The fleet check of this node's key ids (with `--bus` and configured keys),
/// set once the suite exists; `/readyz`'s "keys" check reads it.
#[derive(Clone, Default)]
pub(crate) struct FleetSlot(Arc<OnceLock<FleetKeys>>);

impl FleetSlot {
    /// Whether the key set is in step with the fleet's (true before the
    /// first check; see [`FleetKeys::in_step`]).
    pub(crate) fn in_step(&self) -> bool {
        self.0.get().is_none_or(FleetKeys::in_step)
    }

    /// Publishes and checks the key ids once now (a disagreement is logged
    /// at start), then every `every` (`--key-check-every`, default 10 s).
    pub(crate) async fn start(&self, once: Option<RedisOnce>, live: SealingKeys, every: Duration) {
        let Some(once) = once else { return };
        let fleet = FleetKeys::new(once, live).every(every);
        if let Err(e) = fleet.check().await {
            tracing::warn!(error = %e, "the fleet's key ids could not be checked at start");
        }
        drop(fleet.spawn());
        let _ = self.0.set(fleet);
    }
}

/// Puts `keys` in the suite's live set, and when they came from a file that
/// stays (`--key-file`, not the one-shot hand-over of `GENMCP_KEY`), re-reads
/// it on every `SIGHUP`, into the suite's set and the bus's (`bus`, the bus
/// keys of `keys` the bus was started with).
pub(crate) fn install(
    live: SealingKeys,
    keys: Option<KeySet>,
    reload_from: Option<PathBuf>,
    bus: Option<BusKeys>,
) {
    if let Some(keys) = keys {
        live.replace(keys);
    }
    match reload_from {
        Some(path) => reload_on_hangup(live, path, bus),
        None => ignore_hangup(),
    }
}

/// Without a key file to re-read, `SIGHUP` is logged and ignored (its
/// default action would end the process).
#[cfg(unix)]
fn ignore_hangup() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        return;
    };
    actix_rt::spawn(async move {
        while hangups.recv().await.is_some() {
            tracing::warn!("SIGHUP: no key file to re-read (--key-file); ignored");
        }
    });
}

#[cfg(not(unix))]
fn ignore_hangup() {}

#[cfg(unix)]
fn reload_on_hangup(live: SealingKeys, path: PathBuf, bus: Option<BusKeys>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP: the key file is read only at start");
            return;
        }
    };
    actix_rt::spawn(async move {
        while hangups.recv().await.is_some() {
            let read = {
                let path = path.clone();
                tokio::task::spawn_blocking(move || KeySet::load_file(&path)).await
            };
            match read {
                Ok(Ok(keys)) => {
                    let ids = keys.ids();
                    let current = keys.current_id().to_owned();
                    if let Some(bus) = &bus {
                        keys.update_bus_keys(bus);
                    }
                    let old = live.replace(keys);
                    tracing::info!(file = %path.display(), current = %current, keys = ?ids,
                        previous = %old.current_id(), bus = bus.is_some(),
                        "SIGHUP: sealing keys re-read (and the bus's)");
                }
                Ok(Err(e)) => tracing::error!(file = %path.display(), error = %e,
                    "SIGHUP: the key file is not usable; the keys in use are unchanged"),
                Err(e) => tracing::error!(error = %e, "SIGHUP: reading the key file failed"),
            }
        }
    });
}

#[cfg(not(unix))]
fn reload_on_hangup(_live: SealingKeys, _path: PathBuf, _bus: Option<BusKeys>) {}
