//! Transports: bytes in, validated requests to the suite and runtime, frames out.

pub mod admin;
mod dispatch;
pub mod http;
pub mod stdio;
