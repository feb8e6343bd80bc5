//! Cassettes for the built-in `replay` provider: the model's turns written
//! out as the events it streams and the response it ends with.

use crate::Sandbox;
use serde::Serialize;
use serde_json::{Value, json};

/// A recorded turn that calls `tool` with `args` (the call's id is `id`).
pub fn call_turn(id: &str, tool: &str, args: Value) -> Value {
    calls_turn(&[(id, tool, args)])
}

/// A recorded turn that makes all of `calls` (id, tool, arguments) at once,
/// in that order.
pub fn calls_turn(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, tool, args)| json!({"id": id, "name": tool, "arguments": args.to_string()}))
        .collect();
    let events: Vec<Value> = calls
        .iter()
        .map(|c| json!({"type": "tool_call_completed", "call": c}))
        .collect();
    json!({
        "events": events,
        "response": {"message": {"text": "", "tool_calls": calls}, "finish_reason": "tool_calls"}
    })
}

/// A recorded turn that answers `text` in one piece and stops.
pub fn answer_turn(text: &str) -> Value {
    json!({
        "events": [{"type": "text_delta", "text": text}],
        "response": {"message": {"text": text, "tool_calls": []}, "finish_reason": "stop"}
    })
}

/// A slow answer: `n` streamed pieces (the replay plugin pauses between them
/// by its `delay_ms`), then `text` as the message.
pub fn slow_answer_turn(text: &str, n: usize) -> Value {
    let events: Vec<Value> = (0..n)
        .map(|_| json!({"type": "text_delta", "text": "."}))
        .collect();
    json!({
        "events": events,
        "response": {"message": {"text": text, "tool_calls": []}, "finish_reason": "stop"}
    })
}

/// A recorded turn that streams `text` in pieces of `chunk` characters,
/// then makes `calls` (stopping if there are none), and reports usage.
pub fn streamed_turn(text: &str, calls: Vec<Value>, chunk: usize) -> Value {
    let chars: Vec<char> = text.chars().collect();
    let mut events: Vec<Value> = chars
        .chunks(chunk)
        .map(|c| json!({"type": "text_delta", "text": c.iter().collect::<String>()}))
        .collect();
    for call in &calls {
        events.push(json!({"type": "tool_call_completed", "call": call}));
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    json!({
        "events": events,
        "response": {
            "message": {"text": text, "tool_calls": calls},
            "finish_reason": finish,
            "usage": {"input_tokens": 1200, "output_tokens": 40}
        }
    })
}

/// The cassette's text: the main agent's `turns`.
pub fn text<T: Serialize + ?Sized>(turns: &T) -> String {
    json!({"version": 1, "turns": turns}).to_string()
}

/// Writes the cassette of `turns` at `rel` in the workspace.
pub fn write<T: Serialize + ?Sized>(sb: &Sandbox, rel: &str, turns: &T) {
    sb.write(rel, &text(turns));
}

/// Writes the cassette of the main agent's `turns` and the subagents'
/// scripts (`agents`: each a prompt and its turns) at `rel`.
pub fn write_with_agents<T: Serialize + ?Sized, A: Serialize + ?Sized>(
    sb: &Sandbox,
    rel: &str,
    turns: &T,
    agents: &A,
) {
    sb.write(
        rel,
        &json!({"version": 1, "turns": turns, "agents": agents}).to_string(),
    );
}
