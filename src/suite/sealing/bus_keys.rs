//! The bus keys of a sealing key set: what authenticates the Redis bus's
//! messages follows the key set, so a rotation rotates the bus key too.

use crate::pubsub::redis::BusKeys;

use super::keys::KeySet;

impl KeySet {
    /// The bus's key set derived from this one: the current key's bus key
    /// tags what the node publishes, every key's is accepted (for
    /// [`crate::pubsub::RedisBusConfig::keys`]).
    pub fn bus_keys(&self) -> BusKeys {
        BusKeys::with_others(&self.current_key(), self.all().skip(1))
    }

    /// Makes `bus` follow this set (after a reload, as `genmcp serve` does on
    /// `SIGHUP`): applies to the bus's next publish and next check.
    pub fn update_bus_keys(&self, bus: &BusKeys) {
        bus.set(&self.current_key(), self.all().skip(1));
    }
}
