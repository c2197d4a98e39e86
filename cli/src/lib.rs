//! # genmcp-cli
//!
//! The programs behind the `genmcp` command, built on the public API of the
//! [`genmcp`] library: the notes demo (`genmcp serve`), the conformance
//! fixture server (`genmcp serve --conformance`), the node setup of a fleet
//! on Redis ([`node`]), log setup ([`logging`]) and the stream benchmark
//! (`genmcp bench`, [`mod@bench`]).
//!
//! A server built on genmcp depends on the `genmcp` crate alone; this crate
//! is the command and what its tests and benchmarks share.
#![forbid(unsafe_code)]
#![allow(clippy::result_large_err)]

pub mod bench;
pub mod demo;
pub mod demo_app;
mod demo_export;
pub mod fixtures;
pub mod logging;
pub mod node;
pub mod notes;
