//! Ready-made servers built on the public API: the notes demo (`genmcp serve`) and
//! the conformance fixture server (`genmcp serve --conformance`).

pub mod demo;
pub mod fixtures;
