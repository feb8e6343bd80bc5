//! Tools as the model and the user see them: what a tool declares it does
//! and how it describes itself.

/// What a tool may do, as it declares it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Reads files or other local state.
    Read,
    /// Creates, changes or deletes files.
    Write,
    /// Runs programs.
    Execute,
    /// Talks to the network.
    Network,
}

impl Effect {
    /// The name on the wire and on screen: `read`, `write`, `execute`, `network`.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Execute => "execute",
            Effect::Network => "network",
        }
    }
}

/// A tool as a plugin describes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    /// Unique tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: serde_json::Value,
    /// Everything it may do.
    pub effects: Vec<Effect>,
    /// What is suspicious about how it describes itself (a very long
    /// description, invisible characters); shown by `tools list`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ToolSpec {
    /// A tool whose only effect is reading runs with read-only directories.
    pub fn is_read_only(&self) -> bool {
        self.effects.iter().all(|e| *e == Effect::Read)
    }
}
