//! Transports: bytes in, validated requests to the suite and runtime, frames out.

pub mod http;
