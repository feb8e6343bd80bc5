//! The conversation as every part of corral sees it: messages, tool calls,
//! requests and answers of a provider, and its stream events. Plain serde
//! data; providers convert from and to their wire formats.

use super::ToolSpec;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// corral's id for the call, unique in the session (`c-1`, `c-2`, …;
    /// `mcp-1` for an MCP client's call): approvals, labels, touched-file
    /// records, events and the log are keyed by it, never by an id from
    /// outside, so two calls can never share one.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, JSON text.
    pub arguments: String,
    /// The id the model gave the call, when it is the one the provider gets
    /// back (it was unique and not empty in its response). `None` when the
    /// model's id was empty or repeated, so [`ToolCall::id`] goes back in its
    /// place and the history stays paired, and in logs older than the field,
    /// whose ids are the model's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_id: Option<String>,
}

impl ToolCall {
    /// The id the provider gets back for this call: the model's own when it
    /// could be kept, else corral's.
    pub fn wire_id(&self) -> &str {
        self.model_id.as_deref().unwrap_or(&self.id)
    }
}

/// The answer to one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call it answers.
    pub call_id: String,
    /// What the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
}

/// Text held once and shared: cloning it copies a pointer, not the text.
/// It reads as a `str`; JSON sees a plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SharedText(Arc<String>);

impl SharedText {
    /// The text as an owned `String`: copied only if it is shared.
    pub fn into_string(self) -> String {
        Arc::unwrap_or_clone(self.0)
    }
}

impl std::ops::Deref for SharedText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> Self {
        Self(Arc::new(text))
    }
}

impl From<&str> for SharedText {
    fn from(text: &str) -> Self {
        Self(Arc::new(text.to_owned()))
    }
}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        self.0.as_str() == other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_str() == *other
    }
}

impl PartialEq<String> for SharedText {
    fn eq(&self, other: &String) -> bool {
        *self.0 == *other
    }
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Its text, shared: a long answer is megabytes, and the history, the
    /// session log and the front-end all hold the same one.
    pub text: SharedText,
    /// Its tool calls.
    pub tool_calls: Vec<ToolCall>,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Instructions.
    System {
        /// The text.
        text: String,
    },
    /// The user's words.
    User {
        /// The text.
        text: String,
    },
    /// An assistant turn.
    Assistant(AssistantMessage),
    /// A tool result.
    ToolResult(ToolResult),
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A final answer.
    Stop,
    /// It wants tool results.
    ToolCalls,
    /// It hit the token limit.
    Length,
    /// Content was filtered.
    ContentFilter,
    /// Anything else.
    Other,
}

/// Token accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u32,
    /// Generated tokens.
    pub output_tokens: u32,
}

/// What a provider knows of one model (its `models()` answer, with the
/// manifest's `[agent.models."ID"]` override applied by the host).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model id.
    pub id: String,
    /// Tokens of one request, prompt and answer together, when known.
    pub context_window: Option<u32>,
    /// The most tokens of one answer, when known.
    pub max_output_tokens: Option<u32>,
    /// Whether it takes images.
    pub accepts_images: bool,
}

/// A request for the next assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// Model id; empty lets the provider use its configured model.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call. Shared: a turn offers the same list in
    /// every request, and a provider may keep what it made of it.
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// Generated-token bound.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
}

/// A complete assistant turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// What it said and called.
    pub message: AssistantMessage,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Tokens used, if reported.
    pub usage: Option<Usage>,
}

/// Why a provider request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProviderError {
    /// Missing or wrong credentials.
    #[error("authentication failed: {message}")]
    Auth {
        /// The provider's message.
        message: String,
    },
    /// Rate limited even after retries.
    #[error("rate limited: {message}")]
    RateLimit {
        /// The provider's message.
        message: String,
        /// How long the provider asked to wait.
        retry_after_ms: Option<u64>,
    },
    /// The conversation no longer fits the model's context.
    #[error("context length exceeded: {message}")]
    ContextLength {
        /// The provider's message.
        message: String,
    },
    /// The provider failed.
    #[error("provider server error: {message}")]
    Server {
        /// The provider's message.
        message: String,
    },
    /// The connection failed, dropped or stalled.
    #[error("network error: {message}")]
    Network {
        /// What happened.
        message: String,
    },
    /// The provider's answer could not be understood.
    #[error("protocol error: {message}")]
    Protocol {
        /// What was wrong.
        message: String,
    },
    /// The provider plugin itself failed (trap, timeout, limit).
    #[error("provider plugin failed: {message}")]
    Plugin {
        /// What the sandbox reported.
        message: String,
    },
}

/// A streaming event from a provider, forwarded to the UI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
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
        call: ToolCall,
    },
    /// Token usage.
    Usage {
        /// The usage.
        usage: Usage,
    },
}

#[cfg(test)]
mod tests {
    use super::{AssistantMessage, SharedText};

    #[test]
    fn shared_text_is_a_plain_json_string_and_clones_share_it() {
        let message = AssistantMessage {
            text: "héllo \"world\"\n".into(),
            tool_calls: Vec::new(),
        };
        let json = serde_json::to_string(&message).expect("serialises");
        assert_eq!(json, r#"{"text":"héllo \"world\"\n","tool_calls":[]}"#);
        let back: AssistantMessage = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, message);
        assert_eq!(back.text, "héllo \"world\"\n");
        let copy = message.text.clone();
        assert!(std::ptr::eq(copy.as_ptr(), message.text.as_ptr()));
        assert_eq!(SharedText::default(), "");
        assert_eq!(copy.into_string(), "héllo \"world\"\n");
    }
}
