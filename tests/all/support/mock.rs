//! Mock LLM servers on loopback that speak the providers' exact wire formats:
//! real HTTP/1.1 over TCP, SSE bodies written in small pieces (cut inside
//! UTF-8 sequences and JSON), and every captured request checked for the
//! conversation invariants.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Captured {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Captured {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the server answers.
pub enum Reply {
    /// 200 with an SSE body, written piece by piece.
    Sse(Vec<u8>),
    /// 200 with an SSE body cut after this many bytes (connection closed).
    SseCut(Vec<u8>, usize),
    /// 200 with an SSE body written in pieces of this many bytes, without
    /// pauses: a fast model, or a network that delivers many events per read.
    SseFast(Vec<u8>, usize),
    /// Any status with headers and a JSON body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// Accept the request and never answer (until the test ends).
    Hang,
    /// 200 with an SSE body of which this many bytes are written, then
    /// the connection held open without a word more: a model mid-answer.
    SseStall(Vec<u8>, usize),
    /// 200 with an SSE body of which this many bytes are written, then,
    /// after this pause, the rest: a model that starts answering and
    /// thinks before it names a call.
    SsePaused(Vec<u8>, usize, Duration),
}

pub struct MockServer {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<Captured>>>,
}

/// Bytes per TCP write: small and odd, so pieces end mid-character and mid-JSON.
const PIECE: usize = 7;

impl MockServer {
    /// Serves `script(n, request)` for the n-th request (from 0).
    pub fn start(script: impl Fn(usize, &Captured) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let requests: Arc<Mutex<Vec<Captured>>> = Arc::default();
        let captured = requests.clone();
        let script = Arc::new(script);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(stream) = stream else { continue };
                let captured = captured.clone();
                let script = script.clone();
                std::thread::spawn(move || serve(stream, &captured, &*script));
            }
        });
        Self { port, requests }
    }

    pub fn requests(&self) -> Vec<Captured> {
        self.requests.lock().expect("lock").clone()
    }

    /// Waits until `n` requests came, failing the test after `limit`.
    pub fn wait_requests(&self, n: usize, limit: std::time::Duration) {
        let start = std::time::Instant::now();
        while self.requests().len() < n {
            assert!(
                start.elapsed() < limit,
                "the model got {} requests, not {n}",
                self.requests().len()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn serve(
    stream: TcpStream,
    captured: &Mutex<Vec<Captured>>,
    script: &(dyn Fn(usize, &Captured) -> Reply + Send + Sync),
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0u8; length];
    let _ = reader.read_exact(&mut body);
    let request = Captured {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let n = {
        let mut all = captured.lock().expect("lock");
        all.push(request.clone());
        all.len() - 1
    };
    let mut out = stream;
    match script(n, &request) {
        Reply::Sse(bytes) => write_sse(&mut out, &bytes, bytes.len()),
        Reply::SseCut(bytes, at) => write_sse(&mut out, &bytes, at),
        Reply::SseFast(bytes, piece) => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            if out.write_all(head.as_bytes()).is_ok() {
                for part in bytes.chunks(piece.max(1)) {
                    if out.write_all(part).is_err() {
                        break;
                    }
                }
            }
        }
        Reply::Status(code, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(body.as_bytes());
        }
        Reply::Hang => std::thread::sleep(Duration::from_secs(600)),
        Reply::SseStall(bytes, at) => {
            write_sse(&mut out, &bytes, at);
            std::thread::sleep(Duration::from_secs(600));
        }
        Reply::SsePaused(bytes, at, pause) => {
            let at = at.min(bytes.len());
            write_sse(&mut out, &bytes, at);
            std::thread::sleep(pause);
            write_pieces(&mut out, &bytes[at..]);
        }
    }
}

fn write_sse(out: &mut TcpStream, bytes: &[u8], upto: usize) {
    let _ = out.set_nodelay(true);
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    if out.write_all(head.as_bytes()).is_err() {
        return;
    }
    write_pieces(out, &bytes[..upto.min(bytes.len())]);
}

/// `bytes` in small pieces, each flushed, with a short pause after each.
fn write_pieces(out: &mut TcpStream, bytes: &[u8]) {
    for piece in bytes.chunks(PIECE) {
        if out.write_all(piece).is_err() {
            return;
        }
        let _ = out.flush();
        std::thread::sleep(Duration::from_micros(200));
    }
}

// ---- OpenAI Chat Completions ----

/// A tool call for the script: (id, name, arguments JSON).
pub type Call = (&'static str, &'static str, Value);

/// The SSE body of a streamed chat completion: text deltas word by word, tool
/// calls in fragments (id and name first, arguments in pieces), usage, [DONE].
pub fn openai_sse(text: &str, calls: &[Call]) -> Vec<u8> {
    let mut out = String::new();
    let mut chunk = |delta: Value, finish: Value| {
        let c = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "mock",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        out.push_str(&format!("data: {c}\n\n"));
    };
    chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    for word in text.split_inclusive(' ') {
        chunk(json!({"content": word}), Value::Null);
    }
    for (i, (id, name, args)) in calls.iter().enumerate() {
        chunk(
            json!({"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        );
        let a = args.to_string();
        let mid = a.len() / 2;
        for part in [&a[..mid], &a[mid..]] {
            chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                Value::Null,
            );
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunk(json!({}), json!(finish));
    out.push_str(&format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
    ));
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

/// What an OpenAI request told the model about tool call `id`, without the
/// `Error: ` mark the openai plugin puts on failed results.
pub fn openai_tool_result(req: &Captured, id: &str) -> String {
    let messages = req.body["messages"].as_array().expect("messages");
    let content = messages
        .iter()
        .find(|m| m["tool_call_id"] == id)
        .expect("result")["content"]
        .as_str()
        .expect("content");
    // The openai plugin marks failed results for the model.
    content
        .strip_prefix("Error: ")
        .unwrap_or(content)
        .to_owned()
}

/// Fails the test unless the `n`th request (from 0) that `mock` served
/// told the model `want` as the result of call `id` ([`openai_tool_result`]).
#[track_caller]
pub fn assert_sent(mock: &MockServer, n: usize, id: &str, want: &str) {
    assert_eq!(openai_tool_result(&mock.requests()[n], id), want);
}

/// Checks an OpenAI request: tools declared, and every assistant tool call
/// answered by exactly one `tool` message before the next turn.
pub fn check_openai_request(req: &Captured, key: &str) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {key}").as_str()),
        "{:?}",
        req.headers
    );
    assert_eq!(req.body["stream"], true);
    let tools = req.body["tools"].as_array().expect("tools");
    assert!(
        tools.iter().any(|t| t["function"]["name"] == "read_file"),
        "{tools:?}"
    );
    assert!(
        tools
            .iter()
            .all(|t| t["function"]["parameters"]["type"] == "object")
    );
    let messages = req.body["messages"].as_array().expect("messages");
    assert_eq!(messages[0]["role"], "system");
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        match m["role"].as_str() {
            Some("tool") => {
                let id = m["tool_call_id"].as_str().expect("tool_call_id").to_owned();
                let pos = open.iter().position(|o| *o == id).unwrap_or_else(|| {
                    panic!(
                        "result for unknown or answered call {id} in:\n{}",
                        outline(messages)
                    )
                });
                open.remove(pos);
            }
            Some(_) => {
                assert!(open.is_empty(), "calls without results: {open:?}");
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    open.push(call["id"].as_str().expect("id").to_owned());
                    let args: Value =
                        serde_json::from_str(call["function"]["arguments"].as_str().expect("args"))
                            .expect("args JSON");
                    assert!(args.is_object());
                }
            }
            None => panic!("message without role: {m}"),
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

/// A request's messages, one line each: the role and the call ids it
/// opens or answers (what a pairing failure needs to be read).
fn outline(messages: &[Value]) -> String {
    let mut out = String::new();
    for m in messages {
        let ids: Vec<&str> = m["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["id"].as_str())
            .chain(m["tool_call_id"].as_str())
            .collect();
        out.push_str(&format!(
            "  {} {ids:?}\n",
            m["role"].as_str().unwrap_or("?")
        ));
    }
    out
}

// ---- Anthropic Messages ----

/// The SSE body of a streamed message: a text block, then one tool_use block
/// per call with `input_json_delta` fragments.
pub fn anthropic_sse(text: &str, calls: &[Call]) -> Vec<u8> {
    let mut out = String::new();
    let mut ev =
        |name: &str, data: Value| out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "mock", "stop_reason": null, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    ev(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    ev("ping", json!({"type": "ping"}));
    for word in text.split_inclusive(' ') {
        ev(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}),
        );
    }
    ev(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    for (i, (id, name, args)) in calls.iter().enumerate() {
        let index = i + 1;
        ev(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        );
        let a = args.to_string();
        let mid = a.len() / 2;
        for part in [&a[..mid], &a[mid..]] {
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
            );
        }
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 20}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    out.into_bytes()
}

/// Checks an Anthropic request: tools declared, system at the top, and every
/// `tool_use` answered by exactly one `tool_result` in the next user message.
pub fn check_anthropic_request(req: &Captured, key: &str) {
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some(key), "{:?}", req.headers);
    assert!(req.header("anthropic-version").is_some());
    assert_eq!(req.body["stream"], true);
    assert!(
        req.body["system"]
            .as_str()
            .is_some_and(|s| s.contains("corral"))
    );
    let tools = req.body["tools"].as_array().expect("tools");
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "read_file" && t["input_schema"]["type"] == "object")
    );
    let messages = req.body["messages"].as_array().expect("messages");
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            other => panic!("content {other}"),
        };
        match m["role"].as_str() {
            Some("user") => {
                for b in &blocks {
                    if b["type"] == "tool_result" {
                        let id = b["tool_use_id"].as_str().expect("tool_use_id").to_owned();
                        let pos = open
                            .iter()
                            .position(|o| *o == id)
                            .unwrap_or_else(|| panic!("result for unknown call {id}"));
                        open.remove(pos);
                    }
                }
                assert!(open.is_empty(), "calls without results: {open:?}");
            }
            Some("assistant") => {
                assert!(open.is_empty(), "calls without results: {open:?}");
                for b in blocks.iter().filter(|b| b["type"] == "tool_use") {
                    open.push(b["id"].as_str().expect("id").to_owned());
                    assert!(b["input"].is_object());
                }
            }
            other => panic!("role {other:?}"),
        }
    }
    assert!(open.is_empty(), "calls without results: {open:?}");
}

/// A model's call `id` to `write_file` that writes `content` at `path`.
pub fn write_call(id: &'static str, path: &str, content: &str) -> Call {
    (
        id,
        "write_file",
        serde_json::json!({"path": path, "content": content}),
    )
}

/// A model's call `id` to `read_file` of `path`.
pub fn read_call(id: &'static str, path: &str) -> Call {
    (id, "read_file", serde_json::json!({"path": path}))
}

/// A model's call `id` to `run_command` with the shell line `command`.
pub fn command_call(id: &'static str, command: &str) -> Call {
    (id, "run_command", serde_json::json!({"command": command}))
}

/// A model's call `id` to `run_command` with the words `argv`, no shell.
pub fn argv_call(id: &'static str, argv: &[&str]) -> Call {
    (id, "run_command", serde_json::json!({"argv": argv}))
}
