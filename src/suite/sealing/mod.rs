//! Sealed tokens and what keeps them single-use: the HMAC sealing of cursors
//! and MRTR `requestState`s (`seal`), the key (`secret`, public as
//! `genmcp::suite::secret`), and the record of spent request states (`spent`).
//! Imports only `common`.

pub(crate) mod seal;
pub mod secret;
pub(crate) mod spent;
