//! JSON Schemas of tools and prompts: compiling and checking a tool's input
//! and output schemas (`schema`; the validator itself is `validator`, with
//! the `schema-validation` feature, or `unvalidated` without it), its
//! `x-mcp-header` annotations (`headers`), and schemas generated from Rust
//! types with typed arguments and results (`typed`). Imports only `common`.

mod headers;
mod schema;
pub(crate) mod typed;
#[cfg(not(feature = "schema-validation"))]
#[path = "unvalidated.rs"]
mod validator;
#[cfg(feature = "schema-validation")]
mod validator;

pub(crate) use schema::{CompiledSchema, input_error_text, lookup};
pub use schema::{MAX_REPORTED_ERRORS, ToolError};
pub use typed::{CallError, NoArgs, input_schema, output_schema};
