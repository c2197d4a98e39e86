//! Prompts: the [`Prompt`] trait `prompts/get` runs, its descriptor and
//! arguments, [`PromptBuilder`], and what a prompt returns (`prompt_result`).
//! Typed arguments come from `schemas`.

mod prompt;
mod prompt_result;

pub(crate) use prompt::check_arguments;
pub use prompt::{
    FnPrompt, GetPromptResult, Prompt, PromptArgument, PromptBuilder, PromptDescriptor, PromptGet,
    PromptMessage, PromptOutcome, PromptParts, Role, prompt_arguments,
};
