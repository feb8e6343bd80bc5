//! Provider plugins (`corral:plugin/provider`): the host-side chat types and
//! the call that asks a provider for the next assistant turn, forwarding its
//! stream events while it runs.

use super::generated::corral::plugin::types as wit_types;
use super::provider_generated::corral::plugin::chat as wit;
use super::{Effect, Kind, Plugin, ToolSpec};
use serde::{Deserialize, Serialize};

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The model's id for the call.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, JSON text.
    pub arguments: String,
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

/// One assistant turn.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// Its text.
    pub text: String,
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

/// A request for the next assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    /// Model id; empty lets the provider use its configured model.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
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

impl From<wit_types::ToolCall> for ToolCall {
    fn from(c: wit_types::ToolCall) -> Self {
        Self {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
        }
    }
}

impl From<&ToolCall> for wit_types::ToolCall {
    fn from(c: &ToolCall) -> Self {
        Self {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        }
    }
}

impl From<wit::Usage> for Usage {
    fn from(u: wit::Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }
    }
}

impl From<super::provider_generated::corral::plugin::stream::Event> for StreamEvent {
    fn from(e: super::provider_generated::corral::plugin::stream::Event) -> Self {
        use super::provider_generated::corral::plugin::stream::Event as E;
        match e {
            E::MessageStarted => StreamEvent::MessageStarted,
            E::TextDelta(text) => StreamEvent::TextDelta { text },
            E::ToolCallDelta(d) => StreamEvent::ToolCallDelta {
                index: d.index,
                id: d.id,
                name: d.name,
                arguments_delta: d.arguments_delta,
            },
            E::ToolCallCompleted(c) => StreamEvent::ToolCallCompleted { call: c.into() },
            E::Usage(u) => StreamEvent::Usage { usage: u.into() },
        }
    }
}

fn to_wit_spec(t: &ToolSpec) -> wit_types::ToolSpec {
    wit_types::ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        input_schema: t.input_schema.to_string(),
        effects: t
            .effects
            .iter()
            .map(|e| match e {
                Effect::Read => wit_types::Effect::Read,
                Effect::Write => wit_types::Effect::Write,
                Effect::Execute => wit_types::Effect::Execute,
                Effect::Network => wit_types::Effect::Network,
            })
            .collect(),
    }
}

fn to_wit_message(m: &Message) -> wit::Message {
    match m {
        Message::System { text } => wit::Message::System(text.clone()),
        Message::User { text } => wit::Message::User(text.clone()),
        Message::Assistant(a) => wit::Message::Assistant(wit::AssistantMessage {
            text: a.text.clone(),
            tool_calls: a
                .tool_calls
                .iter()
                .map(|call| {
                    let mut call = wit_types::ToolCall::from(call);
                    // A call the model left malformed was answered with a
                    // tool error; its text cannot go back as it is, since
                    // APIs and local servers parse it (Anthropic's `input`
                    // is an object, vLLM renders it through its template).
                    if !is_json_object(&call.arguments) {
                        call.arguments = "{}".to_owned();
                    }
                    call
                })
                .collect(),
        }),
        Message::ToolResult(r) => wit::Message::ToolResult(wit::ToolResult {
            call_id: r.call_id.clone(),
            content: r.content.clone(),
            is_error: r.is_error,
        }),
    }
}

/// Whether `text` is a JSON object, as tool-call arguments must be.
fn is_json_object(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object())
}

fn from_wit_error(e: wit::ProviderError) -> ProviderError {
    use wit::ProviderError as E;
    match e {
        E::Auth(message) => ProviderError::Auth { message },
        E::RateLimit(r) => ProviderError::RateLimit {
            message: r.message,
            retry_after_ms: r.retry_after_ms,
        },
        E::ContextLength(message) => ProviderError::ContextLength { message },
        E::Server(message) => ProviderError::Server { message },
        E::Network(message) => ProviderError::Network { message },
        E::Protocol(message) => ProviderError::Protocol { message },
    }
}

/// `e` with its message cut to the output limit.
fn capped(mut e: ProviderError, cap: u64) -> ProviderError {
    let message = match &mut e {
        ProviderError::Auth { message }
        | ProviderError::RateLimit { message, .. }
        | ProviderError::ContextLength { message }
        | ProviderError::Server { message }
        | ProviderError::Network { message }
        | ProviderError::Protocol { message }
        | ProviderError::Plugin { message } => message,
    };
    *message = super::budget::cap_text(std::mem::take(message), cap, "error text");
    e
}

impl Plugin {
    /// Asks this provider plugin for the next assistant turn. Stream events go
    /// to `events` while the call runs. Tool-call arguments in the response
    /// are as the model sent them, which may not be a JSON object.
    pub async fn complete(
        &self,
        request: &ChatRequest,
        events: tokio::sync::mpsc::Sender<StreamEvent>,
    ) -> Result<ChatResponse, ProviderError> {
        let Kind::Provider(pre) = &self.kind else {
            return Err(ProviderError::Plugin {
                message: format!("plugin `{}` is not a provider", self.decl.name),
            });
        };
        let req = wit::ChatRequest {
            model: request.model.clone(),
            messages: request.messages.iter().map(to_wit_message).collect(),
            tools: request.tools.iter().map(to_wit_spec).collect(),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        };
        let pre = pre.clone();
        let result = self
            .run(
                super::effects::CallCaps::Provider,
                Some(events),
                move |store| {
                    Box::pin(async move {
                        let instance = pre.instantiate_async(&mut *store).await?;
                        instance
                            .corral_plugin_provider()
                            .call_complete(&mut *store, &req)
                            .await
                    })
                },
            )
            .await
            .map_err(|e| ProviderError::Plugin {
                message: e.to_string(),
            })?;
        let cap = self.decl.limits.output_kb.saturating_mul(1024);
        let resp = result.map_err(|e| capped(from_wit_error(e), cap))?;
        // Arguments that are not a JSON object are the model's mistake, not
        // the plugin's: the agent answers such a call with a tool error.
        let calls: Vec<ToolCall> = resp
            .message
            .tool_calls
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(ChatResponse {
            message: AssistantMessage {
                text: resp.message.text,
                tool_calls: calls,
            },
            finish_reason: match resp.finish_reason {
                wit::FinishReason::Stop => FinishReason::Stop,
                wit::FinishReason::ToolCalls => FinishReason::ToolCalls,
                wit::FinishReason::Length => FinishReason::Length,
                wit::FinishReason::ContentFilter => FinishReason::ContentFilter,
                wit::FinishReason::Other => FinishReason::Other,
            },
            usage: resp.usage.map(Into::into),
        })
    }

    /// The models this provider offers.
    pub async fn models(&self) -> Result<Vec<String>, ProviderError> {
        let Kind::Provider(pre) = &self.kind else {
            return Err(ProviderError::Plugin {
                message: format!("plugin `{}` is not a provider", self.decl.name),
            });
        };
        let pre = pre.clone();
        let result = self
            .run(super::effects::CallCaps::Provider, None, move |store| {
                Box::pin(async move {
                    let instance = pre.instantiate_async(&mut *store).await?;
                    instance
                        .corral_plugin_provider()
                        .call_models(&mut *store)
                        .await
                })
            })
            .await
            .map_err(|e| ProviderError::Plugin {
                message: e.to_string(),
            })?;
        result.map_err(from_wit_error)
    }
}
