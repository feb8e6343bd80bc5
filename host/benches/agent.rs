//! Agent-loop benchmarks, printed as figures and ratios from one run.
//!
//! `cargo bench -p corral --bench agent`
//!
//! 1. Host overhead per loop iteration with the replay provider: a full
//!    iteration (request, replayed answer, one `glob` call, durable log
//!    writes) against the same provider call and tool call made directly.
//! 2. Time to resume a session log of 25k to 200k events (read + rebuild
//!    the history), to show it grows linearly; target <= 200 ms at 100k.
//! 3. SSE parsing throughput inside the `openai` provider plugin, streaming a
//!    large completion from a loopback server, against the same parser
//!    compiled natively.

mod common;

use common::{load, report};
use corral::agent::{Agent, AgentOptions, replay_history};
use corral::protocol::{Event, ToolOutcome};
use corral::runtime::{
    AssistantMessage, ChatRequest, FinishReason, Message, Runtime, RuntimeOptions, ToolCall,
};
use corral::session::SessionLog;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn or_die<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn main() {
    let rt = or_die(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    );
    let cache = or_die(tempfile::tempdir());
    let runtime = or_die(Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.path().to_path_buf()),
    }));
    loop_overhead(&rt, &runtime);
    resume_scaling();
    sse_throughput(&rt, &runtime);
}

fn loop_overhead(rt: &tokio::runtime::Runtime, runtime: &Runtime) {
    const ITERATIONS: usize = 100;
    let ws = or_die(tempfile::tempdir());
    std::fs::write(ws.path().join("a.rs"), "fn a() {}\n").unwrap_or_else(|e| panic!("{e}"));
    let call = |i: usize| serde_json::json!({"id": format!("c{i}"), "name": "glob", "arguments": "{\"pattern\":\"*.rs\"}"});
    let mut turns: Vec<serde_json::Value> = (0..ITERATIONS)
        .map(|i| serde_json::json!({"events": [{"type": "text_delta", "text": "step "}],
            "response": {"message": {"text": "step ", "tool_calls": [call(i)]}, "finish_reason": "tool_calls", "usage": null}}))
        .collect();
    turns.push(serde_json::json!({"events": [], "response": {"message": {"text": "done", "tool_calls": []}, "finish_reason": "stop", "usage": null}}));
    let cassette = serde_json::json!({"version": 1, "turns": turns});
    or_die(std::fs::write(
        ws.path().join("bench.cassette.json"),
        cassette.to_string(),
    ));
    let plugins = Arc::new(load(
        rt,
        runtime,
        ws.path(),
        "[plugins.replay]\nsource = \"builtin:replay\"\ngrants.fs = [{ path = \".\", access = \"ro\" }]\nconfig = { cassette = \"bench.cassette.json\" }\n",
    ));
    let provider = plugins
        .plugins()
        .iter()
        .find(|p| p.decl().name == "replay")
        .cloned()
        .unwrap_or_else(|| panic!("replay"));
    let data = or_die(tempfile::tempdir());
    let log = or_die(SessionLog::create(data.path()));
    let options = AgentOptions {
        max_iterations: ITERATIONS as u32 + 1,
        cwd: ws.path().to_path_buf(),
        ..AgentOptions::default()
    };
    let mut agent = or_die(Agent::new(
        plugins.clone(),
        provider.clone(),
        options,
        ws.path().to_path_buf(),
        log,
    ));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let drain = rt.spawn(async move { while rx.recv().await.is_some() {} });
    let cancel = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let stop = or_die(rt.block_on(agent.run(Some("go"), &tx, &cancel)));
    let per_iteration = started.elapsed() / (ITERATIONS as u32 + 1);
    drop(tx);
    let _ = rt.block_on(drain);
    assert_eq!(stop, corral::protocol::StopReason::FinalAnswer);

    // The same provider call and tool call, made directly.
    let request = ChatRequest {
        model: String::new(),
        messages: vec![Message::User { text: "go".into() }],
        tools: vec![],
        max_tokens: None,
        temperature: None,
    };
    let provider_call = measure(20, || {
        let (tx, mut rx) = tokio::sync::mpsc::channel(corral::runtime::EVENT_CHANNEL_CAPACITY);
        let drain = rt.spawn(async move { while rx.recv().await.is_some() {} });
        assert!(rt.block_on(provider.complete(&request, tx)).is_ok());
        let _ = rt.block_on(drain);
    });
    let tool_call = measure(20, || {
        assert!(
            rt.block_on(plugins.call("glob", "{\"pattern\":\"*.rs\"}", "b"))
                .is_ok()
        );
    });
    let overhead = per_iteration.saturating_sub(provider_call + tool_call);
    report(&format!(
        "agent loop with the replay provider, {ITERATIONS} tool-calling iterations:"
    ));
    report(&format!("  per iteration          {per_iteration:>10.2?}"));
    report(&format!("  provider call alone    {provider_call:>10.2?}"));
    report(&format!("  glob call alone        {tool_call:>10.2?}"));
    report(&format!(
        "  host overhead          {overhead:>10.2?}  ({:.0}% of an iteration: context, validation, events, fsynced log)",
        100.0 * overhead.as_secs_f64() / per_iteration.as_secs_f64()
    ));
}

fn measure(iters: u32, mut f: impl FnMut()) -> Duration {
    f();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed() / iters
}

/// A log with `n` events shaped like a real session (prompt, assistant turns
/// with a tool call, results of a few hundred bytes).
fn write_log(dir: &Path, n: usize) -> std::path::PathBuf {
    let mut log = or_die(SessionLog::create(dir));
    let path = log.path().to_path_buf();
    let content = "x".repeat(300);
    let mut i = 0;
    while i < n {
        let call = ToolCall {
            id: format!("c{i}"),
            name: "read_file".into(),
            arguments: "{\"path\":\"src/main.rs\"}".into(),
            model_id: None,
        };
        let events = [
            Event::RequestEnd {
                message: AssistantMessage {
                    text: "Reading the file to see what it does.".into(),
                    tool_calls: vec![call.clone()],
                },
                finish_reason: FinishReason::ToolCalls,
                usage: None,
            },
            Event::ToolCallBegin { call },
            Event::ToolCallEnd {
                call_id: format!("c{i}"),
                name: "read_file".into(),
                outcome: ToolOutcome {
                    content: content.clone(),
                    is_error: false,
                    data: None,
                    truncated_from: None,
                    artifact: None,
                    labels: Vec::new(),
                },
                duration_ms: 3,
            },
        ];
        for e in events {
            or_die(log.append(&e, false));
            i += 1;
        }
    }
    path
}

fn resume_scaling() {
    report("resume (read the log, rebuild the history):");
    let dir = or_die(tempfile::tempdir());
    let mut per_k = Vec::new();
    for n in [25_000usize, 50_000, 100_000, 200_000] {
        let path = write_log(dir.path(), n);
        let bytes = or_die(std::fs::metadata(&path)).len();
        let took = measure(3, || {
            let (_log, records) = or_die(SessionLog::open(&path));
            let (history, _, open) = replay_history(&records);
            assert!(history.len() >= n / 3 && open.is_empty());
        });
        per_k.push(took.as_secs_f64() * 1000.0 / (n as f64 / 1000.0));
        report(&format!(
            "  {n:>7} events ({:>5.1} MiB)  {:>8.1} ms  ({:.3} ms per 1k events){}",
            bytes as f64 / (1 << 20) as f64,
            took.as_secs_f64() * 1000.0,
            per_k.last().copied().unwrap_or_default(),
            if n == 100_000 {
                "   target <= 200 ms"
            } else {
                ""
            }
        ));
    }
    report(&format!(
        "  cost per event at 200k / at 25k = {:.2} (1.0 is linear)",
        per_k[3] / per_k[0]
    ));
}

/// A loopback server answering every request with `body` as an SSE stream.
fn serve(body: Arc<Vec<u8>>) -> u16 {
    let listener = or_die(std::net::TcpListener::bind("127.0.0.1:0"));
    let port = or_die(listener.local_addr()).port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut s) = stream else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                // Drain the request body (its length is in the headers).
                let head = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                let at = seen
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .map_or(0, |p| p + 4);
                let mut have = seen.len() - at;
                while have < len {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => have += n,
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n");
                for piece in body.chunks(16 * 1024) {
                    if s.write_all(piece).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn sse_throughput(rt: &tokio::runtime::Runtime, runtime: &Runtime) {
    // ~24 MiB of chat-completion chunks carrying 1 KiB of text each.
    let text = "lorem ipsum dolor sit amet ".repeat(38);
    let mut body = String::new();
    let chunk = serde_json::json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    let line = format!("data: {chunk}\n\n");
    while body.len() < 24 << 20 {
        body.push_str(&line);
    }
    body.push_str("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    let bytes = body.len();
    let port = serve(Arc::new(body.clone().into_bytes()));
    let ws = or_die(tempfile::tempdir());
    let plugins = load(
        rt,
        runtime,
        ws.path(),
        &format!(
            "[plugins.openai]\nsource = \"builtin:openai\"\ngrants.net = [\"http://127.0.0.1:{port}\"]\n\
             config = {{ base_url = \"http://127.0.0.1:{port}/v1\", model = \"m\" }}\nlimits = {{ timeout_ms = 120000, memory_mb = 1024 }}\n"
        ),
    );
    let provider = plugins
        .plugins()
        .iter()
        .find(|p| p.decl().name == "openai")
        .cloned()
        .unwrap_or_else(|| panic!("openai"));
    let request = ChatRequest {
        model: "m".into(),
        messages: vec![Message::User { text: "go".into() }],
        tools: vec![],
        max_tokens: None,
        temperature: None,
    };
    let sandboxed = measure(3, || {
        let (tx, mut rx) = tokio::sync::mpsc::channel(corral::runtime::EVENT_CHANNEL_CAPACITY);
        let drain = rt.spawn(async move { while rx.recv().await.is_some() {} });
        let out = rt.block_on(provider.complete(&request, tx));
        let _ = rt.block_on(drain);
        match out {
            Ok(r) => assert!(
                r.message.text.len() > 20 << 20,
                "{} bytes of text",
                r.message.text.len()
            ),
            Err(e) => panic!("the openai plugin failed: {e}"),
        }
    });
    let native = measure(3, || {
        let mut parser = corral_sdk::sse::Parser::new();
        let mut n = 0usize;
        for piece in body.as_bytes().chunks(16 * 1024) {
            parser.feed(piece, &mut |_| n += 1);
        }
        assert!(n > 1000);
    });
    let mb = bytes as f64 / 1e6;
    report(&format!(
        "SSE through the openai plugin ({mb:.1} MB of chat-completion chunks over loopback):"
    ));
    report(&format!(
        "  in the sandbox (HTTP + SSE + JSON + events)  {:>8.1?}  {:>7.1} MB/s   target >= 100 MB/s",
        sandboxed,
        mb / sandboxed.as_secs_f64()
    ));
    report(&format!(
        "  native SSE parser alone                       {:>8.1?}  {:>7.1} MB/s",
        native,
        mb / native.as_secs_f64()
    ));
}
