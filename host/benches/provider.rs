//! A long conversation through the `openai` provider plugin, in process:
//! the time from `complete` until a loopback server has read the whole
//! request body, for the conversations of 100k- and 200k-event sessions
//! (the shape of `agent`'s resume bench: an assistant tool call and a
//! 300-byte result per three events), under the default 256 MiB limit.
//!
//! `cargo bench -p corral --bench provider`

mod common;

use common::{load, report};
use corral_protocol::{AssistantMessage, ChatRequest, Message, ToolCall, ToolResult};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::or_die;

/// When the server last finished reading a request body, and its size.
type Seen = Arc<Mutex<Option<(Instant, usize)>>>;

/// A loopback server that reads each request whole, notes when, and
/// answers a one-word stream.
fn serve(seen: Seen) -> u16 {
    let listener = or_die(std::net::TcpListener::bind("127.0.0.1:0"));
    let port = or_die(listener.local_addr()).port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 20];
                let mut head = Vec::new();
                let at = loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                    if let Some(p) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                };
                let text = String::from_utf8_lossy(&head[..at]).to_ascii_lowercase();
                let len: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                let mut have = head.len() - at;
                while have < len {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => have += n,
                    }
                }
                if let Ok(mut seen) = seen.lock() {
                    *seen = Some((Instant::now(), len));
                }
                let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
                let _ = s.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
                    )
                    .as_bytes(),
                );
            });
        }
    });
    port
}

/// The conversation of a session of `events` events.
fn conversation(events: usize) -> ChatRequest {
    let content = "x".repeat(300);
    let mut messages = vec![
        Message::System {
            text: "You are corral.".into(),
        },
        Message::User { text: "hi".into() },
    ];
    for i in 0..events / 3 {
        messages.push(Message::Assistant(AssistantMessage {
            text: "Reading the file to see what it does.".into(),
            tool_calls: vec![ToolCall {
                id: format!("c{i}"),
                name: "read_file".into(),
                arguments: "{\"path\":\"src/main.rs\"}".into(),
                model_id: None,
            }],
        }));
        messages.push(Message::ToolResult(ToolResult {
            call_id: format!("c{i}"),
            content: content.clone(),
            is_error: false,
        }));
    }
    messages.push(Message::User {
        text: "next".into(),
    });
    ChatRequest {
        model: "m".into(),
        messages,
        tools: Vec::new().into(),
        max_tokens: None,
        temperature: None,
    }
}

fn main() {
    let (rt, _cache, runtime) = common::engine();
    let seen: Seen = Arc::default();
    let port = serve(seen.clone());
    let ws = or_die(tempfile::tempdir());
    let plugins = load(
        &rt,
        &runtime,
        ws.path(),
        &format!(
            "[plugins.openai]\nsource = \"builtin:openai\"\ngrants.net = [\"http://127.0.0.1:{port}\"]\n\
             config = {{ base_url = \"http://127.0.0.1:{port}/v1\", model = \"m\" }}\n"
        ),
    );
    let provider = plugins
        .plugins()
        .iter()
        .find(|p| p.decl().name == "openai")
        .cloned()
        .unwrap_or_else(|| panic!("openai"));
    report("a session's conversation through the openai plugin (default 256 MiB limit):");
    for events in [100_000, 200_000] {
        let request = conversation(events);
        let mut samples: Vec<(Duration, Duration, usize)> = (0..5)
            .map(|_| {
                let (tx, mut rx) =
                    tokio::sync::mpsc::channel(corral_runtime::EVENT_CHANNEL_CAPACITY);
                let drain = rt.spawn(async move { while rx.recv().await.is_some() {} });
                let start = Instant::now();
                let out = rt.block_on(provider.complete(&request, tx));
                let whole = start.elapsed();
                let _ = rt.block_on(drain);
                if let Err(e) = out {
                    panic!("{events} events: the openai plugin failed: {e}");
                }
                let (at, len) = seen
                    .lock()
                    .ok()
                    .and_then(|s| *s)
                    .unwrap_or_else(|| panic!("the server saw no request"));
                (at.duration_since(start), whole, len)
            })
            .collect();
        samples.sort();
        let (reached, whole, len) = samples[samples.len() / 2];
        report(&format!(
            "  {events:>7} events ({:>5.1} MB body)  reached the server {:>8.1?}  whole call {:>8.1?}",
            len as f64 / 1e6,
            reached,
            whole
        ));
    }
}
