//! Building a request for a long session, with and without compaction
//! state, printed as figures and a ratio from one run.
//!
//! `cargo bench -p corral --bench compact`
//!
//! A session log of 10,000 events (2,500 tool-calling turns, results of a
//! few hundred bytes) is replayed into the projection the model sees, and
//! the request is built from it: the messages and tool schemas, their size
//! for the budget estimate, and the prompt hash. Once without compaction
//! (the whole history goes out) and once with a compaction every 100 turns
//! (a summary and the last ten turns go out): the host's work per request,
//! what `resume` does before its first request.

use corral_core::agent::{replay_history, request_bytes};
use corral_core::log::Record;
use corral_protocol::{
    AssistantMessage, ChatRequest, Event, FinishReason, Message, ToolCall, ToolOutcome, ToolSpec,
};
use sha2::{Digest, Sha256};
use std::time::{Duration, Instant};

const EVENTS: usize = 10_000;
/// Turns between compactions, and turns a compaction keeps.
const EVERY: usize = 100;
const KEEP: usize = 10;

fn main() {
    let plain = session(false);
    let compacted = session(true);
    assert_eq!(plain.len(), EVENTS);
    let tools = tools();
    println!(
        "build a request for a {EVENTS}-event session (replay the log, messages + tools, size, hash):"
    );
    let (t_plain, n_plain, b_plain) = build(&plain, &tools);
    let (t_comp, n_comp, b_comp) = build(&compacted, &tools);
    println!(
        "  without compaction  {:>8.2} ms  {n_plain:>5} messages  {:>6.1} KiB",
        ms(t_plain),
        b_plain as f64 / 1024.0
    );
    println!(
        "  with compaction     {:>8.2} ms  {n_comp:>5} messages  {:>6.1} KiB  ({} compactions in the log)",
        ms(t_comp),
        b_comp as f64 / 1024.0,
        compacted.len() - EVENTS
    );
    println!(
        "  with / without = {:.3}",
        t_comp.as_secs_f64() / t_plain.as_secs_f64()
    );
    // The request alone, from a projection already replayed (each
    // iteration of a live session).
    let (h_plain, _, _) = replay_history(&plain);
    let (h_comp, _, _) = replay_history(&compacted);
    let r_plain = measure(20, || request(&h_plain, &tools));
    let r_comp = measure(20, || request(&h_comp, &tools));
    println!("  per iteration, from the projection in memory:");
    println!("    without compaction  {:>8.3} ms", ms(r_plain));
    println!("    with compaction     {:>8.3} ms", ms(r_comp));
    println!(
        "    with / without = {:.3}",
        r_comp.as_secs_f64() / r_plain.as_secs_f64()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn measure(iters: u32, mut f: impl FnMut() -> usize) -> Duration {
    std::hint::black_box(f());
    let t = Instant::now();
    for _ in 0..iters {
        std::hint::black_box(f());
    }
    t.elapsed() / iters
}

/// Replays `records` and builds the request; the time per run, the
/// messages and the bytes.
fn build(records: &[Record], tools: &[ToolSpec]) -> (Duration, usize, usize) {
    let mut out = (0, 0);
    let took = measure(10, || {
        let (history, _, open) = replay_history(records);
        assert!(open.is_empty());
        let bytes = request(&history, tools);
        out = (history.len() + 1, bytes);
        bytes
    });
    (took, out.0, out.1)
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
