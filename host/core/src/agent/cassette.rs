//! Recording provider answers as a cassette (`corral run --record FILE`) in
//! the format the `replay` provider reads, defined once in
//! [`corral_sdk::cassette`].

use crate::protocol::{ChatResponse, FinishReason, StreamEvent, ToolCall, Usage};
use corral_sdk::cassette::{self, Cassette};
use std::path::Path;

fn call(c: &ToolCall) -> cassette::Call {
    cassette::Call {
        id: c.id.clone(),
        name: c.name.clone(),
        arguments: c.arguments.clone(),
    }
}

fn usage(u: Usage) -> cassette::Usage {
    cassette::Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    }
}

fn event(e: &StreamEvent) -> cassette::Event {
    match e {
        StreamEvent::MessageStarted => cassette::Event::MessageStarted,
        StreamEvent::TextDelta { text } => cassette::Event::TextDelta { text: text.clone() },
        StreamEvent::ToolCallDelta {
            index,
            id,
            name,
            arguments_delta,
        } => cassette::Event::ToolCallDelta {
            index: *index,
            id: id.clone(),
            name: name.clone(),
            arguments_delta: arguments_delta.clone(),
        },
        StreamEvent::ToolCallCompleted { call: c } => {
            cassette::Event::ToolCallCompleted { call: call(c) }
        }
        StreamEvent::Usage { usage: u } => cassette::Event::Usage { usage: usage(*u) },
    }
}

fn finish_reason(f: FinishReason) -> &'static str {
    match f {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other => "other",
    }
}

/// One provider round trip as a cassette turn.
pub fn turn(events: &[StreamEvent], response: &ChatResponse) -> cassette::Turn {
    cassette::Turn {
        summary: false,
        events: events.iter().map(event).collect(),
        response: cassette::Response {
            message: cassette::Message {
                text: response.message.text.to_string(),
                tool_calls: response.message.tool_calls.iter().map(call).collect(),
            },
            finish_reason: finish_reason(response.finish_reason).to_owned(),
            usage: response.usage.map(usage),
        },
    }
}

/// Writes `turns` to `file` as a cassette.
pub fn write(file: &Path, turns: &[cassette::Turn]) -> std::io::Result<()> {
    let doc = Cassette::new(turns.to_vec());
    std::fs::write(
        file,
        serde_json::to_vec_pretty(&doc).map_err(std::io::Error::other)?,
    )
}
