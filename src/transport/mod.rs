//! Transports: bytes in, validated requests to the suite and runtime, frames out.

mod dispatch;
pub mod http;
pub mod stdio;
