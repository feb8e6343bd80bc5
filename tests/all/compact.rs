//! Long sessions: the context budget and compaction, through the real
//! `corral` binary. A replayed session of more than 200 tool-calling turns in
//! a small window compacts again and again, every request fits, and a
//! session killed mid-way resumes to the very same compacted request; mock
//! OpenAI and Anthropic servers show where the window comes from and what the
//! summary request looks like.

use crate::support::cassette::{self, answer_turn, call_turn};
use crate::support::log::{kind, read_events, try_session_logs};
use crate::support::manifest::Providers;
use crate::support::mock::*;
use crate::support::output::{assert_exit, json_events};
use crate::support::text::{has, has_all};
use crate::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Main turns of the replayed session (one tool call each) before the answer.
const TURNS: usize = 210;
/// The window given to the replayed model, in tokens.
const WINDOW: u64 = 12_000;

fn id(i: usize) -> String {
    format!("call_{i:04}")
}

/// A cassette of `TURNS` turns that each read a file, a final answer, and a
/// recorded summary after every turn (the replay plays one per compaction,
/// wherever it falls).
fn long_cassette() -> String {
    let mut turns = Vec::new();
    for i in 0..TURNS {
        let args = json!({"path": format!("f{}.txt", i % 5)});
        turns.push(call_turn(&id(i), "read_file", args));
        let summary = format!(
            "Task: read the five files over and over.\nDecisions: none.\nFiles: f0.txt to f4.txt, read {} times.\nRemaining: keep reading until told to stop.",
            i + 1
        );
        let mut summary = answer_turn(&summary);
        summary["summary"] = json!(true);
        turns.push(summary);
    }
    turns.push(answer_turn("All files read."));
    cassette::text(&turns)
}

fn project(delay_ms: u64) -> String {
    format!(
        "[agent]\nmodel = \"replay\"\nmax_iterations = 400\ncompact_at = 0.8\n\n\
         [agent.models.\"replay\"]\ncontext_window = {WINDOW}\n\n\
         [plugins.search]\nenabled = false\n[plugins.shell]\nenabled = false\n[plugins.git]\nenabled = false\n\n\
         [plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
         config = {{ cassette = \"long.cassette.json\", delay_ms = {delay_ms} }}\n"
    )
}

#[test]
fn a_long_session_compacts_fits_its_window_and_resumes_to_the_same_request() {
    let sb = Sandbox::new();
    for f in 0..5 {
        sb.write(
            &format!("f{f}.txt"),
            &format!("file {f}: {}\n", "lorem ipsum ".repeat(120)),
        );
    }
    sb.write("long.cassette.json", &long_cassette());
    sb.write(".gitignore", "*.cassette.json\n");
    sb.write("corral.toml", &project(40));
    let cli = Cli::new();

    // Run slowly until a compaction is logged and a request is in flight,
    // then kill the process.
    let mut child = cli
        .command(&sb.ws(), &["run", "--provider", "replay", "Read the files"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(120);
    let log = loop {
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
        let Some(log) = try_session_logs(&cli).into_iter().next() else {
            continue;
        };
        let Ok(records) = corral_core::session::read(&log) else {
            continue;
        };
        let ev: Vec<Value> = records
            .iter()
            .map(|r| serde_json::to_value(&r.event).expect("event"))
            .collect();
        let compacted = ev.iter().any(|e| kind(e) == "compacted");
        if compacted && ev.last().is_some_and(|e| kind(e) == "request_begin") {
            break Some(log);
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    let log = log.expect("no compaction within 120 s");
    let before = read_events(&log);
    let last = before.last().expect("events");
    assert_eq!(
        kind(last),
        "request_begin",
        "the kill came after the request"
    );
    let hash_at_kill = last["prompt_hash"].as_str().expect("hash").to_owned();

    // Resume (fast now) to the end.
    sb.write("corral.toml", &project(0));
    let session = log
        .file_stem()
        .expect("id")
        .to_str()
        .expect("utf-8")
        .to_owned();
    let o = cli.run(&sb.ws(), &["resume", &session]);
    let out = crate::support::output::ok_stdout(&o, "the resumed run");
    has(&out, "All files read.");

    let all = read_events(&log);
    assert_eq!(
        &all[..before.len()],
        &before[..],
        "the log before the kill is kept"
    );
    // The resumed session rebuilt the compacted projection: its first request
    // is the one that was in flight.
    let resumed = all
        .iter()
        .position(|e| kind(e) == "session_resumed")
        .expect("resumed");
    let first = all[resumed..]
        .iter()
        .find(|e| kind(e) == "request_begin")
        .expect("a request after resume");
    assert_eq!(first["prompt_hash"], hash_at_kill.as_str());

    // The whole session: every tool-calling turn ran, compactions happened
    // again and again, and the final answer came.
    let calls = all.iter().filter(|e| kind(e) == "tool_call_end").count();
    assert!(calls >= 200, "{calls} tool calls");
    let compactions: Vec<&Value> = all.iter().filter(|e| kind(e) == "compacted").collect();
    assert!(compactions.len() >= 2, "{} compactions", compactions.len());
    for c in &compactions {
        assert_eq!(c["trigger"], "auto");
        assert!(
            c["tokens_after"].as_u64() < c["tokens_before"].as_u64(),
            "{c}"
        );
        assert!(c["summary"].as_str().expect("summary").starts_with("Task:"));
    }
    assert_eq!(all.last().map(kind), Some("stop"));
    assert_eq!(all.last().expect("stop")["reason"], "final_answer");

    // Every request fit the window; the history itself did not.
    let sizes: Vec<&Value> = all.iter().filter(|e| kind(e) == "context").collect();
    let requests = all.iter().filter(|e| kind(e) == "request_begin").count();
    assert_eq!(sizes.len(), requests);
    let bytes_sent: u64 = all
        .iter()
        .filter(|e| kind(e) == "tool_call_end")
        .map(|e| e["outcome"]["content"].as_str().expect("content").len() as u64)
        .sum();
    assert!(
        bytes_sent as f64 / corral_core::agent::BYTES_PER_TOKEN > WINDOW as f64 * 5.0,
        "the tool outputs alone ({bytes_sent} bytes) are many windows"
    );
    for s in &sizes {
        assert_eq!(s["window"], WINDOW);
        let tokens = s["tokens"].as_u64().expect("tokens");
        let bytes = s["bytes"].as_u64().expect("bytes");
        assert!(tokens <= WINDOW, "{s}");
        // The logged estimate is the bytes over the uncalibrated ratio (the
        // replay reports no usage).
        assert_eq!(
            tokens,
            (bytes as f64 / corral_core::agent::BYTES_PER_TOKEN).ceil() as u64
        );
    }

    // `show` prints the summaries; `corral compact` compacts on demand.
    let o = cli.run(&sb.ws(), &["show", &session]);
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    has(&shown, "-- compacted (auto)");
    let o = cli.run(&sb.ws(), &["compact", &session]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    has(&out, "messages summarised");
    let last = read_events(&log)
        .into_iter()
        .rfind(|e| kind(e) == "compacted")
        .expect("compacted");
    assert_eq!(last["trigger"], "manual");
}

const OPENAI_KEY: &str = "sk-test-openai-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-test-9876543210";
const KEYS: [(&str, &str); 2] = [
    ("TEST_OPENAI_KEY", OPENAI_KEY),
    ("TEST_ANTHROPIC_KEY", ANTHROPIC_KEY),
];

/// Both providers against the mocks; `openai` and `anthropic` are extra
/// config entries, `extra` more manifest.
fn mock_manifest(port: u16, openai: &str, anthropic: &str, extra: &str) -> String {
    Providers {
        openai_port: port,
        anthropic_port: port,
        max_iterations: 8,
        openai: &format!("stall_timeout_ms = 2000, {openai}"),
        anthropic: &format!("stall_timeout_ms = 2000, {anthropic}"),
        rest: "",
        extra,
    }
    .toml()
}

fn windows(o: &std::process::Output) -> Vec<Value> {
    json_events(o)
        .into_iter()
        .filter(|e| kind(e) == "context")
        .map(|e| e["window"].clone())
        .collect()
}

#[test]
fn the_window_comes_from_the_table_the_models_endpoint_or_the_manifest() {
    let server = MockServer::start(|_, req| {
        if req.method == "GET" {
            Reply::Status(
                200,
                vec![("content-type", "application/json".into())],
                json!({"object": "list", "data": [
                    {"id": "local-model", "object": "model", "max_model_len": 50_000},
                    {"id": "gpt-4.1", "object": "model"}
                ]})
                .to_string(),
            )
        } else {
            Reply::Sse(openai_sse("ok", &[]))
        }
    });
    let (sb, cli) = workspace_and_cli();
    let run = |openai: &str, extra: &str| {
        sb.write(
            "corral.toml",
            &mock_manifest(server.port, openai, "", extra),
        );
        let o = cli.run_env(
            &sb.ws(),
            &["run", "--provider", "openai", "--json", "hi"],
            &KEYS,
        );
        assert_exit(&o, 0);
        o
    };
    let gets = || {
        server
            .requests()
            .iter()
            .filter(|r| r.method == "GET")
            .count()
    };

    // The plugin's table, without asking the server.
    let o = run("model = \"gpt-4.1\"", "");
    assert_eq!(windows(&o), vec![json!(1_047_576)]);
    assert_eq!(gets(), 0);

    // The server's model list, where it reports a context length.
    let o = run("model = \"local-model\", models_endpoint = \"true\"", "");
    assert_eq!(windows(&o), vec![json!(50_000)]);
    assert_eq!(gets(), 1);
    let get = server
        .requests()
        .into_iter()
        .find(|r| r.method == "GET")
        .expect("get");
    assert_eq!(get.path, "/v1/models");
    assert_eq!(
        get.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );

    // The manifest's override wins over both.
    let o = run(
        "model = \"local-model\", models_endpoint = \"true\"",
        "[agent.models.\"local-model\"]\ncontext_window = 30000\n",
    );
    assert_eq!(windows(&o), vec![json!(30_000)]);
    let o = run(
        "model = \"gpt-4.1\"",
        "[agent.models.\"gpt-4.1\"]\ncontext_window = 20000\n",
    );
    assert_eq!(windows(&o), vec![json!(20_000)]);

    // A model nobody knows gets the default window, said once, so its
    // requests stay bounded by compaction.
    let o = run("model = \"mystery\"", "");
    assert_eq!(windows(&o), vec![json!(corral_core::agent::DEFAULT_WINDOW)]);
    let assumed: Vec<Value> = json_events(&o)
        .into_iter()
        .filter(|e| kind(e) == "window_assumed")
        .collect();
    assert_eq!(
        assumed,
        vec![
            json!({"type": "window_assumed", "model": "mystery", "window": corral_core::agent::DEFAULT_WINDOW})
        ]
    );
}

/// A user message's text, whether the API got a string or text blocks.
fn user_text(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[test]
fn the_summary_request_has_its_documented_shape() {
    let script = |posts: usize| -> Reply {
        match posts {
            0 => Reply::Sse(anthropic_sse(
                "",
                &[("toolu_1", "read_file", json!({"path": "small.txt"}))],
            )),
            1 => Reply::Sse(anthropic_sse(
                "",
                &[
                    ("toolu_2", "read_file", json!({"path": "big.txt"})),
                    ("toolu_3", "read_file", json!({"path": "big.txt"})),
                ],
            )),
            2 => Reply::Sse(anthropic_sse(
                "Task: read two files.\nDecisions: none.\nFiles: small.txt.\nRemaining: answer.",
                &[],
            )),
            _ => Reply::Sse(anthropic_sse("Done.", &[])),
        }
    };
    let server = MockServer::start(move |_, req| {
        // Which turn a request is, by what it carries.
        let n = req.body["messages"].as_array().map_or(0, Vec::len);
        let summary = req.body["system"]
            .as_str()
            .is_some_and(|s| s.starts_with(corral_sdk::cassette::SUMMARY_REQUEST_MARK));
        let compacted = req.body["messages"][0]["content"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| {
                req.body["messages"][0]["content"][0]["text"]
                    .as_str()
                    .map(str::to_owned)
            })
            .is_some_and(|t| t.starts_with(corral_sdk::cassette::SUMMARY_MESSAGE_MARK));
        if summary {
            script(2)
        } else if compacted {
            script(3)
        } else if n == 1 {
            script(0)
        } else if n == 3 {
            script(1)
        } else {
            script(3)
        }
    });
    let sb = Sandbox::new();
    sb.write("small.txt", "a small file\n");
    sb.write("big.txt", &"a big file line\n".repeat(20_000));
    let cli = Cli::new();
    let run = |window: u64| {
        sb.write(
            "corral.toml",
            &mock_manifest(
                server.port,
                "",
                "model = \"mock-claude\"",
                &format!("[agent.models.\"mock-claude\"]\ncontext_window = {window}\n"),
            ),
        );
        let o = cli.run_env(
            &sb.ws(),
            &["run", "--provider", "anthropic", "--json", "Read the files"],
            &KEYS,
        );
        assert_exit(&o, 0);
        o
    };
    // A first run in a wide window measures the fixed part of a request
    // (system prompt and tool schemas); the second gets a window in which the
    // two large outputs pass the threshold, and the summary still fits.
    let o = run(10_000_000);
    let first = json_events(&o)
        .into_iter()
        .find(|e| kind(e) == "context")
        .expect("context");
    let base = first["tokens"].as_u64().expect("tokens");
    let before = server.requests().len();
    let window = base * 16 / 10;
    let o = run(window);
    let ev = json_events(&o);
    let compacted = ev
        .iter()
        .find(|e| kind(e) == "compacted")
        .unwrap_or_else(|| panic!("no compaction: {ev:?}"));
    assert_eq!(compacted["trigger"], "auto");
    assert_eq!(compacted["replaced"], 3, "the prompt and the first turn");
    for e in ev.iter().filter(|e| kind(e) == "context") {
        assert!(e["tokens"].as_u64().expect("tokens") <= window, "{e}");
    }

    let reqs: Vec<Captured> = server.requests()[before..].to_vec();
    assert_eq!(reqs.len(), 4, "three turns and one summary request");
    // The summary request: the summary prompt as system, one user message
    // holding the older part as a transcript, no tools, a bounded answer.
    let s = &reqs[2].body;
    assert_eq!(s["system"], corral_core::agent::SUMMARY_PROMPT);
    assert!(s.get("tools").is_none(), "{s}");
    let max = s["max_tokens"].as_u64().expect("max_tokens");
    assert!(max <= window / 4 && max <= 4096, "{max}");
    let messages = s["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["role"], "user");
    let transcript = user_text(&messages[0]);
    assert!(
        transcript.starts_with("Summarise this conversation:\n\n[user]\nRead the files\n"),
        "{transcript}"
    );
    has_all(
        &transcript,
        &[
            "[tool call toolu_1 read_file]",
            "[tool result toolu_1]\n",
            "a small file",
        ],
    );
    assert!(
        !transcript.contains("toolu_2"),
        "the kept turn is not summarised"
    );

    // The next request: the summary, then the kept turn whole.
    let next = &reqs[3].body;
    check_anthropic_request(&reqs[3], ANTHROPIC_KEY);
    let messages = next["messages"].as_array().expect("messages");
    let summary = user_text(&messages[0]);
    assert!(
        summary.starts_with(corral_sdk::cassette::SUMMARY_MESSAGE_MARK),
        "{summary}"
    );
    assert!(summary.ends_with("Remaining: answer."), "{summary}");
    assert_eq!(messages[1]["role"], "assistant");
    let ids: Vec<&str> = messages[1]["content"]
        .as_array()
        .expect("blocks")
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    assert_eq!(ids, vec!["toolu_2", "toolu_3"]);
    // Each large output was cut by the budget, and says how to read on.
    let results = messages[2]["content"].as_array().expect("results");
    for r in results {
        let text = r["content"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| user_text(r));
        has(&text, "read_output {\"call_id\": \"c-");
        assert!(text.len() < 32 * 1024, "{}", text.len());
    }
}

#[test]
fn a_context_length_error_compacts_once_and_retries() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let turns = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = turns.clone();
    let server = MockServer::start(move |_, req| {
        let summary = req.body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with(corral_sdk::cassette::SUMMARY_REQUEST_MARK));
        if summary {
            return Reply::Sse(openai_sse("Task: read notes.txt.\nRemaining: answer.", &[]));
        }
        match counter.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::Sse(openai_sse(
                "",
                &[("call_1", "read_file", json!({"path": "hello.txt"}))],
            )),
            1 => Reply::Sse(openai_sse(
                "",
                &[("call_2", "read_file", json!({"path": "hello.txt"}))],
            )),
            2 => Reply::Status(
                400,
                vec![("content-type", "application/json".into())],
                json!({"error": {"message": "This model's maximum context length is 8192 tokens.",
                    "type": "invalid_request_error", "code": "context_length_exceeded"}})
                .to_string(),
            ),
            _ => Reply::Sse(openai_sse("Done after compacting.", &[])),
        }
    });
    let sb = Sandbox::with_manifest(&mock_manifest(server.port, "model = \"gpt-4.1\"", "", ""));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--json", "Read hello.txt"],
        &KEYS,
    );
    assert_exit(&o, 0);
    let ev = json_events(&o);
    let kinds: Vec<&str> = ev.iter().map(kind).collect();
    let failed = kinds
        .iter()
        .position(|k| *k == "provider_failed")
        .expect("failed");
    let compacted = kinds
        .iter()
        .position(|k| *k == "compacted")
        .expect("compacted");
    assert!(failed < compacted, "{kinds:?}");
    assert_eq!(ev[compacted]["trigger"], "context_length");
    assert_eq!(ev.last().expect("result")["stop_reason"], "final_answer");
    // The retry sent the summary and the kept turn.
    let reqs = server.requests();
    let retry = &reqs.last().expect("retry").body;
    check_openai_request(reqs.last().expect("retry"), OPENAI_KEY);
    assert!(
        retry["messages"][1]["content"]
            .as_str()
            .is_some_and(|t| t.starts_with(corral_sdk::cassette::SUMMARY_MESSAGE_MARK)),
        "{retry}"
    );
    assert_eq!(retry["messages"][2]["tool_calls"][0]["id"], "call_2");
}
