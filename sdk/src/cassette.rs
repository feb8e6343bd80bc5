//! The cassette format: a provider's answers as `corral run --record FILE`
//! writes them and the `replay` provider plays them back. This is its one
//! definition; the host converts its own types into these when it records.
//!
//! ```
//! let text = r#"{"version":1,"turns":[{"events":[{"type":"text_delta","text":"hi"}],
//!   "response":{"message":{"text":"hi","tool_calls":[]},"finish_reason":"stop","usage":null}}]}"#;
//! let cassette = corral_sdk::cassette::Cassette::parse(text).unwrap();
//! assert_eq!(cassette.turns[0].response.message.text, "hi");
//! ```

use serde::{Deserialize, Serialize};

/// The format version this SDK reads and writes.
pub const VERSION: u32 = 1;

/// A recorded conversation with a provider: one turn per request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cassette {
    /// The format version ([`VERSION`]).
    pub version: u32,
    /// The provider's answers, in request order.
    pub turns: Vec<Turn>,
    /// Scripts for other agents of the same run (subagents): a request whose
    /// first user message is a script's `prompt` is answered from that
    /// script's turns instead of [`Cassette::turns`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentScript>,
}

/// The answers for one agent, picked by its first user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentScript {
    /// The agent's first user message, exactly.
    pub prompt: String,
    /// Its answers, in request order.
    pub turns: Vec<Turn>,
}

impl Cassette {
    /// A cassette of `turns` in the current format.
    pub fn new(turns: Vec<Turn>) -> Self {
        Self {
            version: VERSION,
            turns,
            agents: Vec::new(),
        }
    }

    /// Reads a cassette, refusing other format versions with a clear message.
    pub fn parse(text: &str) -> Result<Self, String> {
        let cassette: Cassette =
            serde_json::from_str(text).map_err(|e| format!("the cassette is not valid: {e}"))?;
        if cassette.version != VERSION {
            return Err(format!(
                "cassette version {} is not supported (this corral reads version {VERSION})",
                cassette.version
            ));
        }
        Ok(cassette)
    }

    /// The turns that answer an agent whose first user message is
    /// `first_prompt`: its script's, else the main ones.
    pub fn turns_for(&self, first_prompt: Option<&str>) -> &[Turn] {
        first_prompt
            .and_then(|p| self.agents.iter().find(|a| a.prompt == p))
            .map_or(&self.turns, |a| &a.turns)
    }
}

/// The first words of the system message of the request corral sends to
/// summarise the older part of a conversation (compaction); the `replay`
/// provider answers such a request with a [`Turn::summary`] turn.
pub const SUMMARY_REQUEST_MARK: &str =
    "You are summarising the earlier part of a coding agent's conversation";

/// The first words of the message that stands for the summarised part of a
/// compacted conversation.
pub const SUMMARY_MESSAGE_MARK: &str = "[summary of the earlier conversation]";

/// One provider round trip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Whether it answered a summary request (compaction) rather than a turn
    /// of the conversation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary: bool,
    /// The stream events the provider emitted, in order.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Its complete answer.
    pub response: Response,
}

/// A stream event as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The provider started answering.
    MessageStarted,
    /// More text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// More of a tool call.
    ToolCallDelta {
        /// Position in the turn.
        index: u32,
        /// Id, once known.
        id: Option<String>,
        /// Name, once known.
        name: Option<String>,
        /// Argument fragment.
        arguments_delta: String,
    },
    /// A tool call with complete arguments.
    ToolCallCompleted {
        /// The call.
        call: Call,
    },
    /// Token usage.
    Usage {
        /// The usage.
        usage: Usage,
    },
}

/// A tool call as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The model's id for the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, JSON text.
    pub arguments: String,
}

/// Token accounting as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Generated tokens.
    pub output_tokens: u32,
}

/// An assistant turn as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Its text.
    #[serde(default)]
    pub text: String,
    /// Its tool calls.
    #[serde(default)]
    pub tool_calls: Vec<Call>,
}

/// A complete answer as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// What it said and called.
    pub message: Message,
    /// Why it stopped: `stop`, `tool_calls`, `length`, `content_filter` or
    /// `other`.
    pub finish_reason: String,
    /// Tokens used, if reported.
    #[serde(default)]
    pub usage: Option<Usage>,
}
