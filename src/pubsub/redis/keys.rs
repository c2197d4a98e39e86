//! The bus's key set: the keys that authenticate messages between the nodes,
//! derived from the nodes' sealing keys ([`BusKey::derive`]), one current.
//! A node tags what it publishes with the current key's bus key and accepts a
//! message tagged with the bus key of any key of its set, so nodes in the
//! middle of a rolling rotation (different current keys, each set holding
//! both) still hear each other. The set is live: [`BusKeys::set`] (what
//! `genmcp serve` does on `SIGHUP`) applies to the next publish and the next
//! message checked, without reconnecting.

use std::sync::{Arc, RwLock};

use super::wire::BusKey;

/// Most keys of a set (as many as a sealing key set holds); more are ignored.
pub const MAX_BUS_KEYS: usize = 16;

/// The live set of bus keys of one bus: the current key's bus key tags what
/// the node publishes, the bus key of any key of the set is accepted, and
/// [`BusKeys::set`] applies to the next publish and the next message checked.
/// Cheap to clone: every clone is the same set. `{:?}` never shows a key.
///
/// ```
/// use genmcp::pubsub::redis::BusKeys;
/// let keys = BusKeys::new(&[1; 32]);
/// assert_eq!(keys.len(), 1);
/// // A rotation: the new key current, the old one still accepted.
/// keys.set(&[2; 32], [&[1; 32]]);
/// assert_eq!(keys.len(), 2);
/// ```
#[derive(Clone)]
pub struct BusKeys(Arc<RwLock<Arc<[BusKey]>>>);

impl std::fmt::Debug for BusKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BusKeys(*** x{})", self.len())
    }
}

/// The bus keys of `current` then `others`, without repeats, at most
/// [`MAX_BUS_KEYS`].
fn derive_all<'a>(
    current: &[u8; 32],
    others: impl IntoIterator<Item = &'a [u8; 32]>,
) -> Arc<[BusKey]> {
    let mut secrets: Vec<&[u8; 32]> = vec![current];
    for s in others {
        if secrets.len() == MAX_BUS_KEYS {
            tracing::warn!("bus keys: more than {MAX_BUS_KEYS}; the rest are ignored");
            break;
        }
        if !secrets.contains(&s) {
            secrets.push(s);
        }
    }
    secrets.into_iter().map(BusKey::derive).collect()
}

impl BusKeys {
    /// The bus keys of one sealing key, current.
    pub fn new(current: &[u8; 32]) -> Self {
        Self::with_others(current, [])
    }

    /// The bus keys of the sealing key `current` (it tags what this node
    /// publishes) and of `others` (accepted only): a node's whole key set.
    pub fn with_others<'a>(
        current: &[u8; 32],
        others: impl IntoIterator<Item = &'a [u8; 32]>,
    ) -> Self {
        BusKeys(Arc::new(RwLock::new(derive_all(current, others))))
    }

    /// Replaces the set (every clone sees it): the next publish is tagged
    /// with `current`'s bus key, and the next message checked is accepted
    /// under the bus key of `current` or of any of `others`.
    pub fn set<'a>(&self, current: &[u8; 32], others: impl IntoIterator<Item = &'a [u8; 32]>) {
        let next = derive_all(current, others);
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = next;
    }

    /// How many keys (the current one included).
    pub fn len(&self) -> usize {
        self.keys().len()
    }

    /// Always false: a set has its current key.
    pub fn is_empty(&self) -> bool {
        self.keys().is_empty()
    }

    /// The keys now, the current first (never empty).
    pub(crate) fn keys(&self) -> Arc<[BusKey]> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
