//! Ready-made servers built on the public API: the notes demo (`genmcp serve`) and
//! the conformance fixture server (`genmcp serve --conformance`).

pub mod bench;
pub mod demo;
mod demo_export;
pub mod fixtures;
pub mod logging;
pub mod node;
pub mod notes;
pub mod shared_spent;
