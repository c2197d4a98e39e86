//! The demo's notes: in this process's memory, or (with a Redis bus) in
//! Redis, so every node of a fleet reads and changes the same notes.
//!
//! In Redis the notes are one hash, `<prefix>{notes}` (URI → text), and a
//! counter, `<prefix>{notes}:next`; adding checks the bound and takes the next
//! id in one script, so two nodes never hand out the same URI. The hash tag
//! `{notes}` puts both keys in one slot, so the script also runs on a Redis
//! Cluster (`redis+cluster://`), where a script's keys must share a slot.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use genmcp::protocol::McpError;
use genmcp::pubsub::{BusError, RedisOnce};

/// The hash of the notes (under the bus's prefix); its hash tag is
/// [`NEXT`]'s, so both live in one Redis Cluster slot.
const HASH: &str = "{notes}";
/// The counter of note ids.
const NEXT: &str = "{notes}:next";

/// Most notes kept; adding past it is refused.
pub const MAX_NOTES: usize = 100_000;
/// Longest note text, in bytes; longer is refused.
pub const MAX_NOTE_BYTES: usize = 64 * 1024;

/// The notes store (cheap to clone): [`Notes::default`] in memory,
/// [`Notes::shared`] in Redis.
#[derive(Clone)]
pub struct Notes {
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    Memory {
        notes: Arc<Mutex<BTreeMap<String, String>>>,
        next: Arc<AtomicU64>,
    },
    Redis(RedisOnce),
}

impl Default for Notes {
    fn default() -> Self {
        Notes {
            backend: Backend::Memory {
                notes: Arc::default(),
                next: Arc::default(),
            },
        }
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.backend {
            Backend::Memory { .. } => "memory",
            Backend::Redis(_) => "redis",
        };
        f.debug_struct("Notes").field("store", &kind).finish()
    }
}

/// A store failure as the client sees it: stable, without the Redis address.
fn unavailable(e: &BusError) -> McpError {
    tracing::warn!(error = %e, "notes store unavailable");
    McpError::internal("Internal error: the notes store is unavailable; retry later")
}

fn check_text(text: &str) -> Result<(), McpError> {
    if text.len() > MAX_NOTE_BYTES {
        return Err(McpError::invalid_params(format!(
            "Invalid params: a note holds at most {MAX_NOTE_BYTES} bytes"
        )));
    }
    Ok(())
}

fn full() -> McpError {
    McpError::invalid_params(format!(
        "Invalid params: the store holds at most {MAX_NOTES} notes; delete one first"
    ))
}

/// The numeric id of a note URI, for ordering (`note://10` after `note://9`).
fn order(uri: &str) -> (u64, String) {
    let id = uri
        .strip_prefix("note://")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    (id, uri.to_owned())
}

impl Notes {
    /// Notes kept in Redis through `keys` (a Redis bus's [`genmcp::pubsub::Bus::once`]).
    pub fn shared(keys: RedisOnce) -> Self {
        Notes {
            backend: Backend::Redis(keys),
        }
    }

    /// Stores a note, returning its URI.
    pub async fn add(&self, text: &str) -> Result<String, McpError> {
        check_text(text)?;
        match &self.backend {
            Backend::Memory { notes, next } => {
                let mut notes = lock(notes);
                if notes.len() >= MAX_NOTES {
                    return Err(full());
                }
                let id = next.fetch_add(1, Ordering::Relaxed) + 1;
                let uri = format!("note://{id}");
                notes.insert(uri.clone(), text.to_owned());
                Ok(uri)
            }
            Backend::Redis(keys) => {
                const ADD: &str = r#"
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[2]) then return -1 end
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'note://' .. id, ARGV[1])
return id
"#;
                let mut cmd = ::redis::cmd("EVAL");
                cmd.arg(ADD)
                    .arg(2)
                    .arg(keys.key(HASH))
                    .arg(keys.key(NEXT))
                    .arg(text)
                    .arg(MAX_NOTES);
                let id: i64 = keys.query(cmd).await.map_err(|e| unavailable(&e))?;
                if id < 0 {
                    return Err(full());
                }
                Ok(format!("note://{id}"))
            }
        }
    }

    /// Replaces a note's text; false if there is no such note.
    pub async fn update(&self, uri: &str, text: &str) -> Result<bool, McpError> {
        check_text(text)?;
        match &self.backend {
            Backend::Memory { notes, .. } => Ok(match lock(notes).get_mut(uri) {
                Some(t) => {
                    text.clone_into(t);
                    true
                }
                None => false,
            }),
            Backend::Redis(keys) => {
                const UPDATE: &str = r#"
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"#;
                let mut cmd = ::redis::cmd("EVAL");
                cmd.arg(UPDATE)
                    .arg(1)
                    .arg(keys.key(HASH))
                    .arg(uri)
                    .arg(text);
                let done: i64 = keys.query(cmd).await.map_err(|e| unavailable(&e))?;
                Ok(done == 1)
            }
        }
    }

    /// Deletes a note; false if there is no such note.
    pub async fn delete(&self, uri: &str) -> Result<bool, McpError> {
        match &self.backend {
            Backend::Memory { notes, .. } => Ok(lock(notes).remove(uri).is_some()),
            Backend::Redis(keys) => {
                let mut cmd = ::redis::cmd("HDEL");
                cmd.arg(keys.key(HASH)).arg(uri);
                let n: i64 = keys.query(cmd).await.map_err(|e| unavailable(&e))?;
                Ok(n == 1)
            }
        }
    }

    /// The text of the note at `uri`.
    pub async fn get(&self, uri: &str) -> Result<Option<String>, McpError> {
        match &self.backend {
            Backend::Memory { notes, .. } => Ok(lock(notes).get(uri).cloned()),
            Backend::Redis(keys) => {
                let mut cmd = ::redis::cmd("HGET");
                cmd.arg(keys.key(HASH)).arg(uri);
                keys.query(cmd).await.map_err(|e| unavailable(&e))
            }
        }
    }

    /// Every note, by URI, in the order they were added.
    pub async fn all(&self) -> Result<Vec<(String, String)>, McpError> {
        let mut all: Vec<(String, String)> = match &self.backend {
            Backend::Memory { notes, .. } => lock(notes)
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            Backend::Redis(keys) => {
                let mut cmd = ::redis::cmd("HGETALL");
                cmd.arg(keys.key(HASH));
                keys.query(cmd).await.map_err(|e| unavailable(&e))?
            }
        };
        all.sort_by_cached_key(|(uri, _)| order(uri));
        Ok(all)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
