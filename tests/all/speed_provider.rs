//! The provider path at speed, through the real `corral` binary against a
//! mock OpenAI server on loopback: a long streamed answer arrives whole and
//! in order while deltas that arrive together travel as one event, and a
//! conversation of a 200k-event session passes through the openai plugin
//! within its default 256 MiB memory limit.

use crate::support::log::session_log;
use crate::support::mock::*;
use crate::support::output::json_events;
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};
use std::io::Write as _;

fn manifest(port: u16, extra: &str) -> String {
    format!(
        "[plugins.openai]\nsource = \"builtin:openai\"\n\
         grants.net = [\"http://127.0.0.1:{port}\"]\n\
         config = {{ base_url = \"http://127.0.0.1:{port}/v1\", model = \"big\", stall_timeout_ms = 20000 }}\n\
         {extra}"
    )
}

/// `corral run --provider openai --json PROMPT` against the mock on
/// `port`, which must succeed; its events.
fn openai_run(port: u16, prompt: &str) -> Vec<Value> {
    let sb = Sandbox::with_manifest(&manifest(port, ""));
    let out = Cli::new().run(&sb.ws(), &["run", "--provider", "openai", "--json", prompt]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json_events(&out)
}

/// The text in `field` of each event of type `ty`, in order.
fn strings<'a>(events: &'a [Value], ty: &str, field: &str) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e["type"] == ty)
        .filter_map(|e| e[field].as_str())
        .collect()
}

fn chunk(delta: &Value, finish: &Value) -> String {
    let c = json!({"id": "chatcmpl-big", "object": "chat.completion.chunk", "created": 1,
        "model": "big", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// A long answer of many small deltas, with two- to four-byte characters
/// everywhere, written in pieces of an odd size (so that pieces end inside
/// characters, JSON strings and line endings) as fast as the socket takes
/// them: every delta must arrive, in order, and deltas that arrive together
/// must travel as one event instead of one event per token.
#[test]
fn a_long_streamed_answer_arrives_whole_in_order_and_batched() {
    let words: Vec<String> = (0..40_000)
        .map(|i| {
            if i % 25 == 24 {
                format!("w{i}é🦀\n")
            } else {
                format!("w{i}日本 ")
            }
        })
        .collect();
    let text: String = words.concat();
    let mut body = chunk(&json!({"role": "assistant", "content": ""}), &Value::Null);
    for word in &words {
        body.push_str(&chunk(&json!({"content": word}), &Value::Null));
    }
    body.push_str(&chunk(&json!({}), &json!("stop")));
    body.push_str("data: [DONE]\n\n");
    let sse = body.into_bytes();
    let server = MockServer::start(move |_, _| Reply::SseFast(sse.clone(), 4093));
    let events = openai_run(server.port, "go");
    let deltas = strings(&events, "text_delta", "text");
    let streamed: String = deltas.concat();
    assert!(
        streamed == text,
        "the streamed text differs from the answer: {} bytes streamed of {}; first difference at byte {:?}",
        streamed.len(),
        text.len(),
        streamed.bytes().zip(text.bytes()).position(|(a, b)| a != b)
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "request_end")
        .expect("request_end");
    assert_eq!(end["message"]["text"].as_str(), Some(text.as_str()));
    // One event per token was 40,000 events through the host, the agent and
    // the terminal; deltas read together now go as one.
    assert!(
        deltas.len() * 8 <= words.len(),
        "{} text events for {} deltas: deltas that arrived together were not merged",
        deltas.len(),
        words.len()
    );
}

/// A tool call whose arguments stream in thousands of fragments arrives
/// whole, as a few argument events, and runs.
#[test]
fn tool_call_arguments_in_many_fragments_are_merged_and_whole() {
    let args = format!("{{\"path\": {}\"hello.txt\"}}", " ".repeat(30_000));
    let mut first = chunk(&json!({"role": "assistant", "content": ""}), &Value::Null);
    first.push_str(&chunk(
        &json!({"tool_calls": [{"index": 0, "id": "call_big", "type": "function",
            "function": {"name": "read_file", "arguments": ""}}]}),
        &Value::Null,
    ));
    let pieces: Vec<&str> = {
        let mut v = Vec::new();
        let mut rest = args.as_str();
        while !rest.is_empty() {
            let (a, b) = rest.split_at(rest.len().min(10));
            v.push(a);
            rest = b;
        }
        v
    };
    for piece in &pieces {
        first.push_str(&chunk(
            &json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            &Value::Null,
        ));
    }
    first.push_str(&chunk(&json!({}), &json!("tool_calls")));
    first.push_str("data: [DONE]\n\n");
    let first = first.into_bytes();
    let server = MockServer::start(move |n, _| match n {
        0 => Reply::SseFast(first.clone(), 8191),
        _ => Reply::SseFast(openai_sse("It says hello.", &[]), 8191),
    });
    let events = openai_run(server.port, "read hello.txt");
    let fragments = strings(&events, "tool_call_delta", "arguments_delta");
    assert_eq!(fragments.concat(), args);
    assert!(
        fragments.len() * 8 <= pieces.len(),
        "{} argument events for {} fragments",
        fragments.len(),
        pieces.len()
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "the tool ran and the model was asked again"
    );
    let result = openai_tool_result(&requests[1], "call_big");
    has(&result, "hello from the workspace");
}

/// Events of a long session appended to the log at `path`: `n` events in
/// turns of an assistant tool call, its begin and its result of 300 bytes
/// (the shape of host/benches/agent.rs), ending with a final answer.
fn grow_log(path: &std::path::Path, n: u64) {
    let text = std::fs::read_to_string(path).expect("log");
    let last: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("record");
    let mut seq = last["seq"].as_u64().expect("seq");
    let mut file = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .expect("open log"),
    );
    let content = "x".repeat(300);
    let mut i = 0;
    while seq < n {
        let call = format!(
            r#"{{"id":"c{i}","name":"read_file","arguments":"{{\"path\":\"src/main.rs\"}}"}}"#
        );
        let lines = [
            format!(
                r#"{{"type":"request_end","message":{{"text":"Reading the file to see what it does.","tool_calls":[{call}]}},"finish_reason":"tool_calls","usage":null}}"#
            ),
            format!(r#"{{"type":"tool_call_begin","call":{call}}}"#),
            format!(
                r#"{{"type":"tool_call_end","call_id":"c{i}","name":"read_file","outcome":{{"content":"{content}","is_error":false}},"duration_ms":3}}"#
            ),
        ];
        for event in lines {
            seq += 1;
            writeln!(
                file,
                r#"{{"seq":{seq},"ts_ms":1796142217562,"event":{event}}}"#
            )
            .expect("write");
        }
        i += 1;
    }
    seq += 1;
    writeln!(
        file,
        r#"{{"seq":{seq},"ts_ms":1796142217562,"event":{{"type":"request_end","message":{{"text":"Done.","tool_calls":[]}},"finish_reason":"stop","usage":null}}}}"#
    )
    .expect("write");
    file.flush().expect("flush");
}

/// A session of 200,000 events resumed against a model whose window holds
/// all of it (so nothing is compacted): its ~36 MB conversation passes
/// through the openai plugin, under the default 256 MiB memory limit, and
/// reaches the server whole.
#[test]
fn a_200k_event_conversation_passes_through_the_provider_plugin() {
    const EVENTS: u64 = 200_000;
    let server = MockServer::start(|_, _| Reply::SseFast(openai_sse("ok", &[]), 65536));
    let sb = Sandbox::with_manifest(&manifest(
        server.port,
        "[agent.models.\"big\"]\ncontext_window = 4000000000\n",
    ));
    // The log is ~60 MB written at once; on a disk, the resumed run's first
    // fsync would wait for all of it, which a session written as it went
    // never does. Memory keeps the test about the provider.
    let cli = Cli {
        home: tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .expect("home"),
        trust_project: true,
    };
    cli.write_user_manifest(LOOSENING);
    let out = cli.run(&sb.ws(), &["run", "--provider", "openai", "hi"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = session_log(&cli);
    grow_log(&log, EVENTS);

    let out = cli.run(
        &sb.ws(),
        &["resume", "--last", "--provider", "openai", "-p", "next"],
    );
    assert!(
        out.status.success(),
        "the resumed run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one request per run");
    let messages = requests[1].body["messages"]
        .as_array()
        .expect("the second request's messages");
    // Two messages per three events, none compacted away.
    assert!(
        messages.len() as u64 >= EVENTS * 2 / 3,
        "{} messages reached the server",
        messages.len()
    );
    assert_eq!(messages.last().expect("last")["content"], "next");
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let calls: usize = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .map(Vec::len)
        .sum();
    assert_eq!(results, calls, "every call answered once");
}
