//! What every kind of item shares, and imports nothing else of the suite:
//! [`BoxFuture`], content blocks and results (`content`: [`Content`],
//! [`CallToolResult`], [`ResourceContents`], [`ToolOutcome`]), the MRTR round a
//! handler returns (`input_required`: [`InputRequired`]) and the descriptor
//! builder tools and prompts share (`describe`: [`Builder`], [`Icon`]).

mod content;
mod describe;
mod input_required;

use std::future::Future;
use std::pin::Pin;

pub use content::{CallToolResult, Content, ResourceContents, ToolOutcome};
pub(crate) use describe::Common;
pub use describe::{Builder, Icon};
pub use input_required::InputRequired;

/// A boxed `Send` future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
