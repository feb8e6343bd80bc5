//! Conformance with what real providers send and what models expect of the
//! tools, through the `corral` binary: refusals, turns cut by `max_tokens`,
//! server-side tool blocks, malformed tool-call arguments, Codex's
//! `apply_patch` semantics, provider limits of user entries, and session
//! logs with a damaged last line.

use crate::support::log::{of_type, session_log};
use crate::support::manifest::Providers;
use crate::support::mock::*;
use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};
use std::process::Output;

const OPENAI_KEY: &str = "sk-conformance-openai";
const ANTHROPIC_KEY: &str = "sk-ant-conformance";
const KEYS: [(&str, &str); 2] = [
    ("TEST_OPENAI_KEY", OPENAI_KEY),
    ("TEST_ANTHROPIC_KEY", ANTHROPIC_KEY),
];

/// A project manifest with both providers pointed at loopback mocks.
fn manifest(openai_port: u16, anthropic_port: u16) -> String {
    Providers {
        max_iterations: 6,
        openai: r#"model = "mock-gpt", stall_timeout_ms = 5000"#,
        anthropic: r#"model = "mock-claude", stall_timeout_ms = 5000"#,
        rest: "",
        ..Providers::mocks(openai_port, anthropic_port)
    }
    .toml()
}

/// `corral run --json` against the mocks; returns the output and its events.
fn run_json(sb: &Sandbox, cli: &Cli, provider: &str, prompt: &str) -> (Output, Vec<Value>) {
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--json", "--provider", provider, prompt],
        &KEYS,
    );
    let events = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (o, events)
}

/// One OpenAI `chat.completion.chunk` as an SSE event.
fn openai_chunk(delta: Value, finish: Value) -> String {
    let chunk = json!({"id": "chatcmpl-C1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4o-2024-08-06", "choices": [{"index": 0, "delta": delta, "logprobs": null,
        "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

/// One Anthropic event.
fn anthropic_event(data: Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().expect("type")
    )
}

fn anthropic_message_start() -> String {
    anthropic_event(
        json!({"type": "message_start", "message": {"id": "msg_c1", "type": "message",
        "role": "assistant", "content": [], "model": "claude-sonnet-4-5", "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 120, "output_tokens": 1}}}),
    )
}

fn anthropic_end(stop_reason: &str) -> String {
    anthropic_event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
        "stop_sequence": null}, "usage": {"output_tokens": 64}}),
    ) + &anthropic_event(json!({"type": "message_stop"}))
}

/// gpt-4o streams a refusal in `delta.refusal` with `content: null`; the
/// run must show it and say the turn was refused, not end with nothing.
#[test]
fn openai_refusal_is_shown_with_a_content_filter_finish() {
    let refusal = "I'm sorry, I can't help with that.";
    let openai = MockServer::start(move |_, _| {
        let mut body = openai_chunk(
            json!({"role": "assistant", "content": null, "refusal": ""}),
            Value::Null,
        );
        for part in ["I'm sorry, ", "I can't help ", "with that."] {
            body += &openai_chunk(json!({"refusal": part}), Value::Null);
        }
        body += &openai_chunk(json!({}), json!("stop"));
        body += "data: [DONE]\n\n";
        Reply::Sse(body.into_bytes())
    });
    let sb = Sandbox::with_manifest(&manifest(openai.port, 9));
    let cli = Cli::new();
    let (o, events) = run_json(&sb, &cli, "openai", "do something bad");
    assert_exit(&o, 0);
    let end = of_type(&events, "request_end");
    assert_eq!(end.len(), 1, "{events:?}");
    assert_eq!(end[0]["finish_reason"], "content_filter");
    assert_eq!(end[0]["message"]["text"], refusal);
    let streamed: String = of_type(&events, "text_delta")
        .iter()
        .map(|e| e["text"].as_str().expect("text"))
        .collect();
    assert_eq!(streamed, refusal);

    // A person running it sees the refusal and why the answer is what it is.
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "do something bad"],
        &KEYS,
    );
    assert_exit(&o, 0);
    assert_eq!(stdout(&o).trim(), refusal);
    has(&stderr(&o), "refused");
}

/// Claude reaches `max_tokens` while writing a tool call's input: the block
/// is left open and the message ends with `stop_reason: "max_tokens"`. The
/// turn is a `length` finish, the cut call is not run, the model is told
/// why, and the loop goes on.
#[test]
fn anthropic_max_tokens_inside_a_tool_call_goes_back_to_the_model() {
    let anthropic = MockServer::start(|n, _| {
        let body = match n {
            0 => {
                anthropic_message_start()
                    + &anthropic_event(json!({"type": "content_block_start", "index": 0,
                        "content_block": {"type": "tool_use", "id": "toolu_cut", "name": "write_file", "input": {}}}))
                    + &anthropic_event(json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"big.txt\", \"content\": \"lorem "}}))
                    + &anthropic_event(json!({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": "ipsum dolor"}}))
                    + &anthropic_end("max_tokens")
            }
            _ => String::from_utf8(anthropic_sse("I will write it in parts.", &[])).expect("utf-8"),
        };
        Reply::Sse(body.into_bytes())
    });
    let sb = Sandbox::with_manifest(&manifest(9, anthropic.port));
    let cli = Cli::new();
    let (o, events) = run_json(&sb, &cli, "anthropic", "write big.txt");
    assert_exit(&o, 0);
    assert!(of_type(&events, "provider_failed").is_empty(), "{events:?}");
    let ends = of_type(&events, "request_end");
    assert_eq!(ends[0]["finish_reason"], "length");
    let outcome = &of_type(&events, "tool_call_end")[0]["outcome"];
    assert_eq!(outcome["is_error"], true);
    let told = outcome["content"].as_str().expect("content");
    assert!(
        told.starts_with("invalid arguments for `write_file`: they are not valid JSON")
            && told.contains("output token limit (max_tokens)"),
        "{told}"
    );
    assert!(!sb.ws().join("big.txt").exists(), "the cut call ran");
    assert_eq!(
        of_type(&events, "stop").last().expect("stop")["reason"],
        "final_answer"
    );

    // The next request is well-formed: the cut call as an empty object,
    // answered by the error.
    let reqs = anthropic.requests();
    assert_eq!(reqs.len(), 2);
    check_anthropic_request(&reqs[1], ANTHROPIC_KEY);
    let messages = reqs[1].body["messages"].as_array().expect("messages");
    let call = messages
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "tool_use")
        .expect("the call");
    assert_eq!(call["input"], json!({}));
    let result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "tool_result")
        .expect("its result");
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"].to_string().contains("output token limit"),
        "{result}"
    );
}

/// A server tool (web search) streams `input_json_delta`s in a
/// `server_tool_use` block the API runs itself; corral skips such blocks.
#[test]
fn anthropic_server_tool_blocks_are_ignored() {
    let anthropic = MockServer::start(|_, _| {
        let body = anthropic_message_start()
            + &anthropic_event(json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}))
            + &anthropic_event(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"wasmtime"}}))
            + &anthropic_event(json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": " release\"}"}}))
            + &anthropic_event(json!({"type": "content_block_stop", "index": 0}))
            + &anthropic_event(json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}}))
            + &anthropic_event(json!({"type": "content_block_stop", "index": 1}))
            + &anthropic_event(json!({"type": "content_block_start", "index": 2,
                "content_block": {"type": "text", "text": ""}}))
            + &anthropic_event(json!({"type": "content_block_delta", "index": 2,
                "delta": {"type": "text_delta", "text": "Version 48 is out."}}))
            + &anthropic_event(json!({"type": "content_block_stop", "index": 2}))
            + &anthropic_end("end_turn");
        Reply::Sse(body.into_bytes())
    });
    let sb = Sandbox::with_manifest(&manifest(9, anthropic.port));
    let cli = Cli::new();
    let (o, events) = run_json(&sb, &cli, "anthropic", "what is new in wasmtime?");
    assert_exit(&o, 0);
    let end = of_type(&events, "request_end");
    assert_eq!(end[0]["message"]["text"], "Version 48 is out.");
    assert_eq!(end[0]["message"]["tool_calls"], json!([]));
    assert_eq!(end[0]["finish_reason"], "stop");
    assert!(of_type(&events, "tool_call_begin").is_empty());
}

/// Arguments that are not JSON are the model's slip: the call gets a tool
/// error the model reads, the other calls of the turn run, and the loop
/// goes on to an answer.
#[test]
fn malformed_tool_arguments_go_back_to_the_model() {
    let openai = MockServer::start(|n, _| {
        let body = match n {
            0 => {
                let mut body =
                    openai_chunk(json!({"role": "assistant", "content": null}), Value::Null);
                body += &openai_chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_bad", "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\": hello.txt}"}}]}),
                    Value::Null,
                );
                body += &openai_chunk(
                    json!({"tool_calls": [{"index": 1, "id": "call_good", "type": "function",
                        "function": {"name": "read_file", "arguments": "{\"path\": \"hello.txt\"}"}}]}),
                    Value::Null,
                );
                body += &openai_chunk(json!({}), json!("tool_calls"));
                body + "data: [DONE]\n\n"
            }
            _ => String::from_utf8(openai_sse("Read it on the second try.", &[])).expect("utf-8"),
        };
        Reply::Sse(body.into_bytes())
    });
    let sb = Sandbox::with_manifest(&manifest(openai.port, 9));
    let cli = Cli::new();
    let (o, events) = run_json(&sb, &cli, "openai", "read hello.txt");
    assert_exit(&o, 0);
    assert!(of_type(&events, "provider_failed").is_empty(), "{events:?}");
    let reqs = openai.requests();
    assert_eq!(reqs.len(), 2);
    // Well-formed for the API: every call an object, every call answered.
    check_openai_request(&reqs[1], OPENAI_KEY);
    let bad = openai_tool_result(&reqs[1], "call_bad");
    assert!(
        bad.starts_with("invalid arguments for `read_file`: they are not valid JSON")
            && bad.contains("Send the call again"),
        "{bad}"
    );
    has(
        &openai_tool_result(&reqs[1], "call_good"),
        "hello from the workspace",
    );
    // The log keeps what the model really sent.
    let begin = of_type(&events, "tool_call_begin");
    assert_eq!(begin[0]["call"]["arguments"], "{\"path\": hello.txt}");
}

fn apply_patch(cli: &Cli, sb: &Sandbox, patch: &str) -> Output {
    let args = json!({ "patch": patch }).to_string();
    cli.run(&sb.ws(), &["tool", "call", "apply_patch", "--args", &args])
}

/// Codex writes `*** Add File` whether or not the file exists, and `***
/// Move to` replaces its destination; models trained on it count on both.
#[test]
fn apply_patch_add_and_move_replace_existing_files() {
    let sb = Sandbox::new();
    sb.write("notes.txt", "old notes\n");
    sb.write("src/old.rs", "fn f() {}\n");
    sb.write("src/new.rs", "fn stale() {}\n");
    let cli = Cli::new();
    let o = apply_patch(
        &cli,
        &sb,
        "*** Begin Patch\n*** Add File: notes.txt\n+new notes\n\
         *** Update File: src/old.rs\n*** Move to: src/new.rs\n@@\n-fn f() {}\n+fn g() {}\n\
         *** End Patch",
    );
    assert_exit(&o, 0);
    assert_eq!(
        stdout(&o).trim(),
        "Success. Updated the following files:\nM notes.txt\nR src/old.rs -> src/new.rs"
    );
    let read = |p: &str| std::fs::read_to_string(sb.ws().join(p)).expect(p);
    assert_eq!(read("notes.txt"), "new notes\n");
    assert_eq!(read("src/new.rs"), "fn g() {}\n");
    assert!(!sb.ws().join("src/old.rs").exists());
}

/// All or nothing includes directories: a patch that fails while writing
/// leaves none of the directories it created, and one that would make the
/// same path a directory and a file is refused before it writes anything.
#[test]
fn a_failed_apply_patch_leaves_no_directories() {
    let (sb, cli) = workspace_and_cli();

    // The filesystem refuses the name only once the directories exist.
    let long = "n".repeat(300);
    let o = apply_patch(
        &cli,
        &sb,
        &format!("*** Begin Patch\n*** Add File: fresh/deeper/{long}.txt\n+x\n*** End Patch"),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    has(&stderr(&o), "directories it had created removed");
    assert!(!sb.ws().join("fresh").exists(), "{}", stderr(&o));

    // `d` cannot be both the directory of `d/f` and a file.
    let o = apply_patch(
        &cli,
        &sb,
        "*** Begin Patch\n*** Add File: d/f\n+x\n*** Add File: d\n+y\n*** End Patch",
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stderr(&o)
            .contains("cannot write `d`: it is a directory, which this patch needs for `d/f`"),
        "{}",
        stderr(&o)
    );
    assert!(!sb.ws().join("d").exists(), "{}", stderr(&o));
    let left: Vec<_> = std::fs::read_dir(sb.ws())
        .expect("ws")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["hello.txt"]);
}

/// The README's local-server example replaces the built-in `openai` entry
/// without a `limits` table; it keeps the built-in provider's budget rather
/// than the 30 s of a tool call, and so does any entry with that source.
#[test]
fn a_user_entry_for_a_builtin_provider_keeps_provider_limits() {
    let sb = Sandbox::with_manifest(
        r#"
[agent]
provider = "openai"
model = "qwen2.5-coder:7b"

[plugins.openai]
source = "builtin:openai"
grants.net = ["http://127.0.0.1:11434"]
config = { base_url = "http://127.0.0.1:11434/v1" }

[plugins.lab]
source = "builtin:anthropic"
grants.net = ["http://127.0.0.1:8080"]
limits = { memory_mb = 512 }

[plugins.quick]
source = "builtin:openai"
grants.net = ["http://127.0.0.1:8081"]
limits = { timeout_ms = 5000 }
"#,
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["plugins", "list", "--json"]);
    assert_exit(&o, 0);
    let list: Vec<Value> = serde_json::from_str(&stdout(&o)).expect("JSON");
    let limits = |name: &str| {
        list.iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {list:?}"))["limits"]
            .clone()
    };
    let builtin = {
        let sb = Sandbox::new();
        let o = cli.run(&sb.ws(), &["plugins", "list", "--json"]);
        let list: Vec<Value> = serde_json::from_str(&stdout(&o)).expect("JSON");
        list.into_iter()
            .find(|p| p["name"] == "openai")
            .expect("built-in openai")["limits"]
            .clone()
    };
    assert_eq!(builtin["timeout_ms"], 600_000);
    assert_eq!(limits("openai"), builtin);
    assert_eq!(limits("lab")["timeout_ms"], 600_000);
    assert_eq!(limits("lab")["memory_mb"], 512);
    assert_eq!(limits("quick")["timeout_ms"], 5000);
    // Tools keep the tool budget.
    assert_eq!(limits("fs")["timeout_ms"], 30_000);
}

/// A log whose last line is damaged but ends in a newline: `show` reads
/// around it, `resume` cuts it before appending, and the log stays
/// readable afterwards.
#[test]
fn a_damaged_last_log_line_is_cut_before_resume_appends() {
    let openai =
        MockServer::start(|n, _| Reply::Sse(openai_sse(&format!("Answer number {}.", n + 1), &[])));
    let sb = Sandbox::with_manifest(&manifest(openai.port, 9));
    let cli = Cli::new();
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "first"], &KEYS);
    assert_exit(&o, 0);
    let log = session_log(&cli);
    let id = log
        .file_stem()
        .expect("id")
        .to_str()
        .expect("utf-8")
        .to_owned();
    let records = corral_core::session::read(&log).expect("log").len();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");
        f.write_all(b"{\"seq\":999,\"ts_ms\":1,\"event\":{\"type\":\"sto\n")
            .expect("damage");
    }
    let o = cli.run(&sb.ws(), &["show", &id]);
    assert_exit(&o, 0);
    has(&stdout(&o), "Answer number 1.");

    let o = cli.run_env(&sb.ws(), &["resume", &id, "-p", "second"], &KEYS);
    assert_exit(&o, 0);
    has(&stdout(&o), "Answer number 2.");

    let o = cli.run(&sb.ws(), &["show", &id]);
    assert_exit(&o, 0);
    assert!(
        stdout(&o).contains("> second") && stdout(&o).contains("Answer number 2."),
        "{}",
        stdout(&o)
    );
    let after = corral_core::session::read(&log).expect("readable after resume");
    let seqs: Vec<u64> = after.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=after.len() as u64).collect::<Vec<_>>());
    assert!(after.len() > records);
    assert!(
        !std::fs::read_to_string(&log)
            .expect("log")
            .contains("\"seq\":999"),
        "the damaged line is gone"
    );
}
