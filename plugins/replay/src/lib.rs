//! The `replay` provider: plays back a cassette, the exact provider responses
//! (stream events and final answers) recorded by `corral run --record FILE`,
//! for offline demos and deterministic tests. The tools the recorded model
//! calls still run for real, in their sandboxes.
//!
//! Config: `cassette` (a workspace-relative path, read through the plugin's
//! `grants.fs`; default: the demo cassette built into the plugin) and
//! `delay_ms` (pause between streamed events, default 0).
//!
//! Each instance is fresh, so the position in the cassette comes from the
//! request: the n-th request of a conversation (counted by the assistant
//! messages already in it) gets the n-th recorded response. A cassette may
//! hold a script per agent (subagents started by `task`), picked by the
//! conversation's first user message.

use corral_sdk::cassette::{
    Call as RecordedCall, Cassette, Event as RecordedEvent, Usage as RecordedUsage,
};
use corral_sdk::provider::{
    AssistantMessage, ChatRequest, ChatResponse, Event, FinishReason, Message, Provider,
    ProviderError, ToolCall, ToolCallDelta, Usage, emit,
};

/// The cassette shown by the README's offline demo.
const DEMO: &str = include_str!("../demo.json");

fn call(c: &RecordedCall) -> ToolCall {
    ToolCall {
        id: c.id.clone(),
        name: c.name.clone(),
        arguments: c.arguments.clone(),
    }
}

fn usage(u: RecordedUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    }
}

fn load() -> Result<Cassette, ProviderError> {
    let text = match corral_sdk::config("cassette") {
        Some(path) => std::fs::read_to_string(&path).map_err(|e| {
            ProviderError::Protocol(format!(
                "cannot read the cassette `{path}`: {e}; it must be inside the replay plugin's grants.fs"
            ))
        })?,
        None => DEMO.to_owned(),
    };
    let cassette = Cassette::parse(&text).map_err(ProviderError::Protocol)?;
    Ok(cassette)
}

fn pause(ms: u64) {
    if ms > 0 {
        #[cfg(target_family = "wasm")]
        wasip2::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
    }
}

/// Plays back recorded responses.
pub struct Replay;

impl Provider for Replay {
    fn models() -> Result<Vec<String>, ProviderError> {
        Ok(vec!["replay".to_owned()])
    }

    fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError> {
        let cassette = load()?;
        let index = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant(_)))
            .count();
        let first = request.messages.iter().find_map(|m| match m {
            Message::User(text) => Some(text.as_str()),
            _ => None,
        });
        let turns = cassette.turns_for(first);
        let turn = turns.get(index).ok_or_else(|| {
            ProviderError::Protocol(format!(
                "the cassette has {} responses for this agent and the conversation asks for response {}",
                turns.len(),
                index + 1
            ))
        })?;
        let delay = corral_sdk::config("delay_ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        for event in &turn.events {
            emit(match event {
                RecordedEvent::MessageStarted => Event::MessageStarted,
                RecordedEvent::TextDelta { text } => Event::TextDelta(text.clone()),
                RecordedEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments_delta,
                } => Event::ToolCallDelta(ToolCallDelta {
                    index: *index,
                    id: id.clone(),
                    name: name.clone(),
                    arguments_delta: arguments_delta.clone(),
                }),
                RecordedEvent::ToolCallCompleted { call: c } => Event::ToolCallCompleted(call(c)),
                RecordedEvent::Usage { usage: u } => Event::Usage(usage(*u)),
            });
            pause(delay);
        }
        let r = &turn.response;
        Ok(ChatResponse {
            message: AssistantMessage {
                text: r.message.text.clone(),
                tool_calls: r.message.tool_calls.iter().map(call).collect(),
            },
            finish_reason: match r.finish_reason.as_str() {
                "stop" => FinishReason::Stop,
                "tool_calls" => FinishReason::ToolCalls,
                "length" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                _ => FinishReason::Other,
            },
            usage: r.usage.map(usage),
        })
    }
}

corral_sdk::provider!(Replay);
