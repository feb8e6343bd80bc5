//! The errors the runtime's callers see: a plugin that could not be loaded
//! ([`LoadError`]) and a call that produced no output ([`ToolError`]). They
//! sit below every other module, so that the loader, the plugins and the
//! sandbox can all name them without naming each other.

/// A plugin that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// Why a call produced no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum ToolError {
    /// No loaded plugin exports this tool.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The arguments were not valid for the tool.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool failed; the model may try something else.
    #[error("{0}")]
    Failed(String),
    /// The tool failed and asks the agent to stop.
    #[error("fatal: {0}")]
    Fatal(String),
    /// The sandbox ended the call: trap, timeout or limit. The message says which.
    #[error("{0}")]
    Sandbox(String),
}

impl ToolError {
    /// Whether the agent's run should stop.
    pub fn is_fatal(&self) -> bool {
        matches!(self, ToolError::Fatal(_))
    }
}
