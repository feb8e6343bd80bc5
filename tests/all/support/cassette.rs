//! Cassettes for the built-in `replay` provider: the model's turns written
//! out as the events it streams and the response it ends with.

use crate::Sandbox;
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

/// Writes the cassette of `turns` at `rel` in the workspace.
pub fn write(sb: &Sandbox, rel: &str, turns: &[Value]) {
    sb.write(rel, &json!({"version": 1, "turns": turns}).to_string());
}
