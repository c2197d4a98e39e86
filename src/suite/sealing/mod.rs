//! Sealed tokens and what keeps them single-use: the HMAC sealing of cursors
//! and MRTR `requestState`s (`seal`), the key (`secret`, public as
//! `genmcp::suite::secret`), the key set that rotates it (`keys`, public as
//! `genmcp::suite::KeySet`), the record of spent request states (`spent`), and the one the nodes of a
//! Redis bus share (`shared_spent`, public as `genmcp::suite::shared_spent`, with
//! the `redis` feature).
//! Imports only `common`.

// Talks to Redis: gated with the `redis` feature as a whole.
#[cfg(feature = "redis")]
mod bus_keys;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod fleet_keys;
pub mod keys;
pub(crate) mod seal;
pub mod secret;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod shared_spent;
pub(crate) mod spent;
