//! What the core and a UI say to each other: plain serde data, no logic.
//! Submissions go in; events come out, grouped as Begin/Delta/End. The
//! session log stores the same events (all but the deltas).

use crate::runtime::{AssistantMessage, FinishReason, ProviderError, ToolCall, Usage};
use serde::{Deserialize, Serialize};

/// Why a run stopped. Every stop is recorded with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave a final answer.
    FinalAnswer,
    /// The iteration limit was reached before a final answer.
    MaxIterations,
    /// The provider failed (after its own retries).
    ProviderError,
    /// A tool failed in a way that stops the run.
    FatalToolError,
    /// The user interrupted the run.
    Interrupted,
    /// The conversation no longer fits the model's context.
    ContextExhausted,
    /// A deny rule that stops the run matched a call.
    PermissionDenied,
}

impl StopReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::FinalAnswer => "final_answer",
            StopReason::MaxIterations => "max_iterations",
            StopReason::ProviderError => "provider_error",
            StopReason::FatalToolError => "fatal_tool_error",
            StopReason::Interrupted => "interrupted",
            StopReason::ContextExhausted => "context_exhausted",
            StopReason::PermissionDenied => "permission_denied",
        }
    }
}

/// What a tool call produced, as the model saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// The text the model read (possibly cut).
    pub content: String,
    /// Whether it is an error.
    pub is_error: bool,
    /// The whole output's size in bytes, when it was cut for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated_from: Option<usize>,
    /// Where the whole output was saved, when it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
}

/// An event from the core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A session was created.
    SessionStarted {
        /// Its id.
        session_id: String,
        /// The workspace root.
        workspace: String,
        /// The provider plugin.
        provider: String,
        /// The model, empty for the provider's default.
        model: String,
    },
    /// An existing session was reopened.
    SessionResumed {
        /// Its id.
        session_id: String,
        /// Tool calls that had no result in the log and were closed as interrupted.
        closed_calls: Vec<String>,
    },
    /// A prompt starts a turn.
    TurnBegin {
        /// Turn number, from 1.
        turn: u32,
    },
    /// The user's prompt.
    UserMessage {
        /// The text.
        text: String,
    },
    /// A request went to the provider.
    RequestBegin {
        /// Iteration within the turn, from 1.
        iteration: u32,
        /// SHA-256 of the rendered request (system prompt, history, tools).
        prompt_hash: String,
        /// Messages in the request.
        messages: usize,
    },
    /// Streamed assistant text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A streamed fragment of a tool call.
    ToolCallDelta {
        /// Position in the turn.
        index: u32,
        /// Name, once known.
        name: Option<String>,
        /// Argument fragment.
        arguments_delta: String,
    },
    /// The assistant's complete turn.
    RequestEnd {
        /// What it said and called.
        message: AssistantMessage,
        /// Why it stopped.
        finish_reason: FinishReason,
        /// Tokens used.
        usage: Option<Usage>,
    },
    /// The permission policy decided a call (every decision is logged).
    Permission {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// `allow`, `deny`, or for calls that asked: `approved`, `approved_for_session`, `refused`.
        decision: String,
        /// The rule or mode that decided, and who answered.
        reason: String,
    },
    /// A tool call starts.
    ToolCallBegin {
        /// The call.
        call: ToolCall,
    },
    /// A tool call ended.
    ToolCallEnd {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the model reads.
        outcome: ToolOutcome,
        /// Wall time of the call.
        duration_ms: u64,
    },
    /// The provider failed.
    ProviderFailed {
        /// The error.
        error: ProviderError,
    },
    /// The run stopped.
    Stop {
        /// Why.
        reason: StopReason,
        /// Details for the user.
        message: Option<String>,
    },
}

impl Event {
    /// Whether the session log keeps this event (deltas are for the UI only).
    pub fn is_logged(&self) -> bool {
        !matches!(self, Event::TextDelta { .. } | Event::ToolCallDelta { .. })
    }

    /// Whether the log must be on disk before going on: tool results and turn
    /// boundaries.
    pub fn is_durable(&self) -> bool {
        matches!(
            self,
            Event::ToolCallEnd { .. }
                | Event::Permission { .. }
                | Event::RequestEnd { .. }
                | Event::UserMessage { .. }
                | Event::Stop { .. }
                | Event::SessionStarted { .. }
                | Event::SessionResumed { .. }
        )
    }
}
