//! What every tool call produces and where its events go: the types the
//! call's steps, the hooks and the loop share, below all of them.

use crate::protocol::Event;
use std::path::PathBuf;

/// Where the dispatcher's events go: the session log and the front-end.
pub trait Sink: Send {
    /// Records one event.
    fn emit(&mut self, event: Event) -> anyhow::Result<()>;

    /// Saves a long output whole; `None` when there is nowhere to save it.
    fn save_artifact(&self, name: &str, content: &str) -> Option<std::io::Result<PathBuf>>;
}

/// What became of a call, before it is cut for the model.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool ran; `is_error` when it reported a failure itself.
    Output {
        /// Its text.
        content: String,
        /// Whether the tool reported a failure.
        is_error: bool,
        /// Its structured result.
        data: Option<serde_json::Value>,
    },
    /// The call cannot run: unknown tool or invalid arguments.
    Invalid(String),
    /// Refused before running: a protected path, the policy or the user.
    Refused {
        /// Why, for the model.
        message: String,
        /// A deny-and-stop rule matched: the run ends.
        stop: bool,
    },
    /// The tool or its sandbox failed (trap, timeout, limit, tool error).
    Failed(String),
    /// The tool failed and asks the agent to stop.
    Fatal(String),
    /// The user interrupted the call.
    Interrupted,
    /// Not run because an earlier call of the turn stopped the run.
    Skipped(String),
}

impl CallOutcome {
    /// The text a result of this outcome carries back from the tool, if
    /// it ran.
    pub(crate) fn text(&self) -> Option<&str> {
        match self {
            CallOutcome::Output { content, .. } => Some(content),
            CallOutcome::Failed(m) | CallOutcome::Fatal(m) => Some(m),
            _ => None,
        }
    }

    /// The text the model reads and whether it is an error.
    pub(crate) fn into_parts(self) -> (String, bool, Option<serde_json::Value>) {
        match self {
            CallOutcome::Output {
                content,
                is_error,
                data,
            } => (content, is_error, data),
            CallOutcome::Invalid(m) | CallOutcome::Failed(m) => (m, true, None),
            CallOutcome::Refused { message, .. } => (message, true, None),
            CallOutcome::Fatal(m) => (m, true, None),
            CallOutcome::Interrupted => ("interrupted by the user".into(), true, None),
            CallOutcome::Skipped(why) => (format!("not run: {why}"), true, None),
        }
    }
}
