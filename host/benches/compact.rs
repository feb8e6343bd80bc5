//! Building a request for a long session, with and without compaction
//! state, measured with divan.
//!
//! `cargo bench -p corral --bench compact`
//!
//! A session log of 10,000 events (2,500 tool-calling turns, results of a
//! few hundred bytes) is replayed into the projection the model sees, and
//! the request is built from it: the messages and tool schemas, their size
//! for the budget estimate, and the prompt hash. Once without compaction
//! (the whole history goes out) and once with a compaction every 100 turns
//! (a summary and the last ten turns go out): `replay_and_request` is what
//! `resume` does before its first request, `request` what each iteration of
//! a live session does from the projection in memory. The goal: the
//! compacted rows well under the whole ones.

use corral_core::agent::{replay_history, request_bytes};
use corral_core::log::Record;
use corral_protocol::{
    AssistantMessage, ChatRequest, Event, FinishReason, Message, ToolCall, ToolOutcome, ToolSpec,
};
use divan::Bencher;
use sha2::{Digest, Sha256};

const EVENTS: usize = 10_000;
/// Turns between compactions, and turns a compaction keeps.
const EVERY: usize = 100;
const KEEP: usize = 10;

/// The two logs: the whole history, and one compacted every [`EVERY`] turns.
const LOGS: [&str; 2] = ["whole", "compacted"];

fn main() {
    divan::main();
}

/// The log `which` names, checked.
fn log(which: &str) -> Vec<Record> {
    let records = session(which == "compacted");
    assert!(records.len() >= EVENTS);
    records
}

/// Replays the log into the projection and builds the request from it.
#[divan::bench(args = LOGS, sample_count = 30)]
fn replay_and_request(bencher: Bencher, which: &str) {
    let records = log(which);
    let tools = tools();
    bencher.bench_local(|| {
        let (history, _, open) = replay_history(&records);
        assert!(open.is_empty());
        request(&history, &tools)
    });
}

/// Builds the request from the projection already in memory.
#[divan::bench(args = LOGS, sample_count = 30)]
fn request_from_projection(bencher: Bencher, which: &str) {
    let (history, _, _) = replay_history(&log(which));
    let tools = tools();
    bencher.bench_local(|| request(&history, &tools));
}

/// The request for `history`: built, sized and hashed as the loop does.
fn request(history: &[Message], tools: &[ToolSpec]) -> usize {
    let mut messages = Vec::with_capacity(history.len() + 1);
    messages.push(Message::System {
        text: "You are corral, a coding agent. ".repeat(40),
    });
    messages.extend(history.iter().cloned());
    let request = ChatRequest {
        model: "m".into(),
        messages,
        tools: tools.into(),
        max_tokens: None,
        temperature: None,
    };
    let bytes = request_bytes(&request);
    let hash = Sha256::digest(serde_json::to_vec(&request).unwrap_or_default());
    std::hint::black_box(hash);
    bytes
}

fn tools() -> Vec<ToolSpec> {
    (0..12)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "name": format!("tool_{i}"),
                "description": "Reads or changes something in the workspace. ".repeat(4),
                "input_schema": {"type": "object", "properties": {
                    "path": {"type": "string", "description": "A path in the workspace."},
                    "offset": {"type": "integer"}, "limit": {"type": "integer"}},
                    "required": ["path"]},
                "effects": ["read"]
            }))
            .unwrap_or_else(|e| panic!("{e}"))
        })
        .collect()
}

/// A session of `EVENTS` events shaped like a real one; with `compact`,
/// a compaction every [`EVERY`] turns that keeps the last [`KEEP`].
fn session(compact: bool) -> Vec<Record> {
    let mut events = vec![Event::UserMessage {
        text: "Read every file and fix what is wrong.".into(),
    }];
    // Messages in the projection: the prompt (or summary), then two a turn.
    let mut projection = 1;
    let mut turn = 0;
    while events.len() + 4 <= EVENTS {
        let call = ToolCall {
            id: format!("call_{turn}"),
            name: "tool_1".into(),
            arguments: format!("{{\"path\":\"src/file_{turn}.rs\"}}"),
            model_id: None,
        };
        events.push(Event::RequestBegin {
            iteration: 1,
            prompt_hash: "0".repeat(64),
            messages: projection + 1,
        });
        events.push(Event::RequestEnd {
            message: AssistantMessage {
                text: "Reading the next file.".into(),
                tool_calls: vec![call.clone()],
            },
            finish_reason: FinishReason::ToolCalls,
            usage: None,
        });
        events.push(Event::ToolCallBegin { call: call.clone() });
        events.push(Event::ToolCallEnd {
            call_id: call.id,
            name: call.name,
            outcome: ToolOutcome {
                content: format!("fn f{turn}() {{}}\n").repeat(20),
                is_error: false,
                data: None,
                truncated_from: None,
                artifact: None,
                labels: Vec::new(),
            },
            duration_ms: 1,
        });
        projection += 2;
        turn += 1;
        if compact && turn % EVERY == 0 {
            let replaced = projection - 2 * KEEP;
            events.push(Event::Compacted {
                summary: "Task: read every file.\nFiles: src/file_*.rs.\nRemaining: the rest."
                    .into(),
                replaced,
                kept: 2 * KEEP,
                trigger: corral_protocol::CompactTrigger::Auto,
                tokens_before: 0,
                tokens_after: 0,
            });
            projection = 1 + 2 * KEEP;
        }
    }
    while events.len() < EVENTS + usize::from(compact) * (turn / EVERY) {
        events.push(Event::TurnBegin { turn: 1 });
    }
    corral_core::log::numbered(events)
}
