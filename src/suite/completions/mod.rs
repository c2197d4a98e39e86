//! Argument completion (`completion/complete`): the [`Completer`] the catalog
//! holds, for prompt arguments and resource template variables.

mod completion;

pub(crate) use completion::parse_request;
pub use completion::{
    Completer, Completion, CompletionRef, CompletionRequest, Completions, FnCompleter, MAX_VALUES,
    completer_fn,
};
