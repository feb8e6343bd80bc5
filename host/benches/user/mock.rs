//! A mock OpenAI Chat Completions server on 127.0.0.1, in the bench
//! process: real HTTP/1.1 over TCP, connections kept alive and answers
//! streamed in chunks as the servers users run do (OpenAI's API, llama.cpp,
//! vLLM, Ollama), in OpenAI's exact SSE wire format (`data: {chunk}\n\n`,
//! usage, `data: [DONE]`), as `tests/all/mock.rs` speaks it, but written as
//! fast as the client reads, and with a timestamp when each request has
//! arrived whole and when its answer has been written.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One request the server answered.
#[derive(Clone)]
pub struct Hit {
    /// The request path.
    pub path: String,
    /// The request body.
    pub body: Arc<Vec<u8>>,
    /// When the whole request had been read.
    pub received: Instant,
    /// When the whole answer had been written, to its last chunk.
    pub answered: Instant,
}

/// What the script answers.
pub enum Reply {
    /// 200 with this SSE body.
    Sse(Arc<Vec<u8>>),
}

type Script = dyn Fn(&str, &[u8]) -> Reply + Send + Sync;

/// A running server.
pub struct Mock {
    /// Its port on 127.0.0.1.
    pub port: u16,
    hits: Arc<(Mutex<Vec<Hit>>, Condvar)>,
    arrived: Arc<(Mutex<Vec<Instant>>, Condvar)>,
}

impl Mock {
    /// Serves `script(path, body)` for every request, until the process ends.
    pub fn start(script: impl Fn(&str, &[u8]) -> Reply + Send + Sync + 'static) -> Self {
        let listener =
            TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("mock bind: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("mock addr: {e}"))
            .port();
        let hits: Arc<(Mutex<Vec<Hit>>, Condvar)> = Arc::default();
        let arrived: Arc<(Mutex<Vec<Instant>>, Condvar)> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        {
            let hits = hits.clone();
            let arrived = arrived.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let hits = hits.clone();
                    let arrived = arrived.clone();
                    let script = script.clone();
                    std::thread::spawn(move || serve(stream, &hits, &arrived, &*script));
                }
            });
        }
        Self {
            port,
            hits,
            arrived,
        }
    }

    /// Forgets every request so far.
    pub fn clear(&self) {
        lock(&self.hits.0).clear();
        lock(&self.arrived.0).clear();
    }

    /// The requests answered since the last [`Mock::clear`], by arrival.
    pub fn hits(&self) -> Vec<Hit> {
        let mut h = lock(&self.hits.0).clone();
        h.sort_by_key(|h| h.received);
        h
    }

    /// When the `n`-th request (from 1) since the last clear had arrived
    /// whole, waiting up to `timeout` for it.
    pub fn wait_arrival(&self, n: usize, timeout: Duration) -> Option<Instant> {
        let (m, cv) = &*self.arrived;
        let g = lock(m);
        let (g, _) = cv
            .wait_timeout_while(g, timeout, |a| a.len() < n)
            .unwrap_or_else(|e| e.into_inner());
        let mut a = g.clone();
        a.sort();
        a.get(n - 1).copied()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Answers the requests of one connection until the client closes it.
fn serve(
    stream: TcpStream,
    hits: &(Mutex<Vec<Hit>>, Condvar),
    arrived: &(Mutex<Vec<Instant>>, Condvar),
    script: &Script,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = stream.set_nodelay(true);
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::with_capacity(256 * 1024, clone);
    let mut out = stream;
    while answer(&mut reader, &mut out, hits, arrived, script) {}
}

/// Reads one request and answers it; `false` when the connection is done.
fn answer(
    reader: &mut BufReader<TcpStream>,
    out: &mut TcpStream,
    hits: &(Mutex<Vec<Hit>>, Condvar),
    arrived: &(Mutex<Vec<Instant>>, Condvar),
    script: &Script,
) -> bool {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return false;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.trim_end().split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("transfer-encoding")
                && v.eq_ignore_ascii_case("chunked")
            {
                chunked = true;
            }
        }
    }
    let body = if chunked {
        read_chunked(reader)
    } else {
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return false;
        }
        Some(body)
    };
    let Some(body) = body else { return false };
    let received = Instant::now();
    if method != "POST" {
        // A model list or any other lookup: not served, so the client falls
        // back to its defaults; only completions count as requests here.
        let body = r#"{"error":{"message":"not found","type":"invalid_request_error"}}"#;
        let head = format!(
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        return out.write_all(format!("{head}{body}").as_bytes()).is_ok();
    }
    {
        let (m, cv) = arrived;
        lock(m).push(received);
        cv.notify_all();
    }
    match script(&path, &body) {
        Reply::Sse(bytes) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
            if out.write_all(head.as_bytes()).is_err() {
                return false;
            }
            let mut framed = Vec::with_capacity(64 * 1024 + 16);
            for piece in bytes.chunks(64 * 1024) {
                framed.clear();
                framed.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                framed.extend_from_slice(piece);
                framed.extend_from_slice(b"\r\n");
                if out.write_all(&framed).is_err() {
                    return false;
                }
            }
            if out.write_all(b"0\r\n\r\n").is_err() {
                return false;
            }
        }
    }
    let _ = out.flush();
    let answered = Instant::now();
    let (m, cv) = hits;
    lock(m).push(Hit {
        path,
        body: Arc::new(body),
        received,
        answered,
    });
    cv.notify_all();
    true
}

fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let n = usize::from_str_radix(size.trim().split(';').next()?.trim(), 16).ok()?;
        if n == 0 {
            let mut end = String::new();
            let _ = reader.read_line(&mut end);
            return Some(body);
        }
        let at = body.len();
        body.resize(at + n, 0);
        reader.read_exact(&mut body[at..]).ok()?;
        let mut crlf = [0u8; 2];
        reader.read_exact(&mut crlf).ok()?;
    }
}

fn chunk(out: &mut String, delta: Value, finish: Value) {
    let c = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
        "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    out.push_str("data: ");
    out.push_str(&c.to_string());
    out.push_str("\n\n");
}

fn finish(out: &mut String, reason: &str) {
    chunk(out, json!({}), json!(reason));
    let usage = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
        "model": "mock", "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}});
    out.push_str(&format!("data: {usage}\n\ndata: [DONE]\n\n"));
}

/// A streamed answer of `words`, one content delta each, then `stop`.
pub fn text(words: &[&str]) -> Arc<Vec<u8>> {
    let mut out = String::new();
    chunk(
        &mut out,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    );
    for w in words {
        chunk(&mut out, json!({"content": w}), Value::Null);
    }
    finish(&mut out, "stop");
    Arc::new(out.into_bytes())
}

/// A streamed answer calling `name` with `args` (arguments in two pieces).
pub fn tool_call(id: &str, name: &str, args: &Value) -> Arc<Vec<u8>> {
    let mut out = String::new();
    chunk(
        &mut out,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    );
    chunk(&mut out, json!({"content": "Checking. "}), Value::Null);
    chunk(
        &mut out,
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
        Value::Null,
    );
    let a = args.to_string();
    let mid = a.len() / 2;
    for part in [&a[..mid], &a[mid..]] {
        chunk(
            &mut out,
            json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
            Value::Null,
        );
    }
    finish(&mut out, "tool_calls");
    Arc::new(out.into_bytes())
}

/// A streamed answer of about `bytes` bytes: content deltas of 1 KiB of text.
pub fn big(bytes: usize) -> Arc<Vec<u8>> {
    let piece = "lorem ipsum dolor sit amet ".repeat(38);
    let mut line = String::new();
    chunk(&mut line, json!({"content": piece}), Value::Null);
    let mut out = String::with_capacity(bytes + 4096);
    chunk(
        &mut out,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    );
    while out.len() < bytes {
        out.push_str(&line);
    }
    finish(&mut out, "stop");
    Arc::new(out.into_bytes())
}
