//! A task's status and the one rule for changing it.

use serde::{Deserialize, Serialize};

/// Where a task is in its life (`Task.status` on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client to answer `inputRequests` (`tasks/update`).
    InputRequired,
    /// Finished with a tool result (also a result with `isError: true`).
    Completed,
    /// Finished with a JSON-RPC error.
    Failed,
    /// Cancelled by `tasks/cancel` before it finished.
    Cancelled,
}

impl TaskStatus {
    /// Whether the status is final: a terminal status never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The wire name (`working`, `input_required`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// Whether a task may go from `from` to `to`: working ↔ input_required, either
/// of them → any terminal status; a terminal status absorbs (so the first
/// terminal status wins: a late completion never overwrites `cancelled`, a
/// cancel never overwrites a result). Staying in the same non-terminal status
/// is allowed (a new status message, a new input request).
pub fn allows(from: TaskStatus, to: TaskStatus) -> bool {
    use TaskStatus::*;
    match (from, to) {
        (Completed | Failed | Cancelled, _) => false,
        (Working | InputRequired, Working | InputRequired) => true,
        (Working | InputRequired, Completed | Failed | Cancelled) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::TaskStatus::*;
    use super::*;

    #[test]
    fn only_legal_transitions_are_allowed_and_terminal_states_absorb() {
        let all = [Working, InputRequired, Completed, Failed, Cancelled];
        for to in all {
            assert!(allows(Working, to), "working -> {to:?}");
            assert!(allows(InputRequired, to), "input_required -> {to:?}");
        }
        for from in [Completed, Failed, Cancelled] {
            for to in all {
                assert!(!allows(from, to), "{from:?} -> {to:?}");
            }
        }
        assert_eq!(
            serde_json::to_value(InputRequired).unwrap(),
            serde_json::json!("input_required")
        );
    }
}
