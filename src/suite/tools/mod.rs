//! Tools: the [`Tool`] trait `tools/call` runs, its descriptor, and
//! [`ToolBuilder`] (hand-written or typed handlers). Schemas, validation and
//! typed arguments live below, in `schemas`.

mod tool;

pub use tool::{FnTool, Tool, ToolBuilder, ToolCall, ToolDescriptor, ToolParts};
