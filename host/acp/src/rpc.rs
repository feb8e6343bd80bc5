//! JSON-RPC 2.0 over stdio as ACP frames it: one message per line.
//!
//! [`Lines`] reads the client's messages, each at most
//! [`MAX_MESSAGE_BYTES`] (a longer line is skipped whole and answered with
//! an error, the connection goes on). [`Peer`] writes: answers,
//! notifications and corral's own requests to the client, whose answers it
//! matches by the id corral gave them — an answer to an id corral never
//! used, or already answered, is dropped.

use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::{mpsc, oneshot};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder as _, LinesCodec, LinesCodecError};

/// The largest message read, as the protocol's TypeScript SDK caps it.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Lines written but not yet taken by the writer: past this, whoever emits
/// waits for the client to read (a client that stops reading slows the
/// session down; it does not grow corral's memory).
const OUTGOING_LINES: usize = 1024;

/// JSON-RPC error codes.
pub mod code {
    /// The line is not JSON.
    pub const PARSE: i64 = -32700;
    /// The message is not a request ACP allows.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const NO_METHOD: i64 = -32601;
    /// The parameters are wrong.
    pub const INVALID_PARAMS: i64 = -32602;
    /// corral failed.
    pub const INTERNAL: i64 = -32603;
    /// No such session.
    pub const NOT_FOUND: i64 = -32002;
}

/// An error answer: its code and the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RpcError {
    /// The JSON-RPC code.
    pub code: i64,
    /// What went wrong and what to do.
    pub message: String,
}

impl RpcError {
    /// An error with `code`.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Wrong parameters.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }
}

/// One message of the client.
#[derive(Debug)]
pub enum Incoming {
    /// A request: answer it with its id.
    Request {
        /// Its id.
        id: Value,
        /// The method.
        method: String,
        /// Its parameters (`null` when absent).
        params: Value,
    },
    /// A notification.
    Notification {
        /// The method.
        method: String,
        /// Its parameters.
        params: Value,
    },
    /// An answer to one of corral's requests.
    Response {
        /// The id corral gave the request.
        id: Value,
        /// The result, or the client's error.
        result: Result<Value, RpcError>,
    },
    /// Not a message ACP allows: answer with this error (id `null` when the
    /// message carries none).
    Invalid {
        /// The message's id, when it has one.
        id: Value,
        /// What is wrong.
        error: RpcError,
    },
}

/// Reads one line as a JSON-RPC message.
pub fn parse(line: &str) -> Incoming {
    let value: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                id: Value::Null,
                error: RpcError::new(code::PARSE, format!("the message is not JSON: {e}")),
            };
        }
    };
    let Value::Object(mut map) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            error: RpcError::new(
                code::INVALID_REQUEST,
                "a message must be one JSON-RPC object (ACP does not use batches)",
            ),
        };
    };
    let id = map.remove("id");
    let valid_id = |id: &Value| id.is_string() || id.is_i64() || id.is_u64();
    match (map.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification {
            method,
            params: map.remove("params").unwrap_or(Value::Null),
        },
        (Some(Value::String(method)), Some(id)) if valid_id(&id) => Incoming::Request {
            id,
            method,
            params: map.remove("params").unwrap_or(Value::Null),
        },
        (None, Some(id)) if valid_id(&id) => {
            let result = match (map.remove("result"), map.remove("error")) {
                (Some(result), None) => Ok(result),
                (None, Some(error)) => Err(RpcError::new(
                    error["code"].as_i64().unwrap_or(code::INTERNAL),
                    error["message"].as_str().unwrap_or_default(),
                )),
                _ => Err(RpcError::new(
                    code::INVALID_REQUEST,
                    "an answer has either a result or an error",
                )),
            };
            Incoming::Response { id, result }
        }
        (_, id) => Incoming::Invalid {
            id: id.filter(valid_id).unwrap_or(Value::Null),
            error: RpcError::new(
                code::INVALID_REQUEST,
                "not a JSON-RPC request, notification or answer: a method must be a string and \
                 an id a string or an integer",
            ),
        },
    }
}

/// The client's messages, line by line.
pub struct Lines<R> {
    input: R,
    codec: LinesCodec,
    buffer: BytesMut,
    ended: bool,
}

/// One read of [`Lines::next`].
pub enum Line {
    /// A line within the cap.
    Text(String),
    /// A line that could not be taken: over the cap, or not UTF-8. It was
    /// skipped; answer with this error.
    Refused(RpcError),
    /// The input ended.
    End,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// Lines of `input`.
    pub fn new(input: R) -> Self {
        Self {
            input,
            codec: LinesCodec::new_with_max_length(MAX_MESSAGE_BYTES),
            buffer: BytesMut::with_capacity(64 << 10),
            ended: false,
        }
    }

    /// The next line.
    pub async fn next(&mut self) -> Line {
        loop {
            let decoded = if self.ended {
                self.codec.decode_eof(&mut self.buffer)
            } else {
                self.codec.decode(&mut self.buffer)
            };
            match decoded {
                Ok(Some(line)) => return Line::Text(line),
                Ok(None) if self.ended => return Line::End,
                Ok(None) => {}
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    return Line::Refused(RpcError::new(
                        code::INVALID_REQUEST,
                        format!(
                            "the message is over {} MiB and was skipped; send smaller messages",
                            MAX_MESSAGE_BYTES >> 20
                        ),
                    ));
                }
                Err(LinesCodecError::Io(e)) => {
                    return Line::Refused(RpcError::new(
                        code::PARSE,
                        format!("the message is not UTF-8 text and was skipped: {e}"),
                    ));
                }
            }
            match self.input.read_buf(&mut self.buffer).await {
                Ok(0) | Err(_) => self.ended = true,
                Ok(_) => {}
            }
        }
    }
}

type Waiting = HashMap<u64, oneshot::Sender<Result<Value, RpcError>>>;

/// The writing side of the connection, cloned by every task that answers
/// or notifies.
#[derive(Clone)]
pub struct Peer {
    out: mpsc::Sender<String>,
    waiting: Arc<Mutex<Waiting>>,
    next_id: Arc<AtomicU64>,
}

impl Peer {
    /// A peer whose lines `writer` writes to `output`; the writer ends when
    /// every clone of the peer is gone.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(
        output: W,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (out, rx) = mpsc::channel(OUTGOING_LINES);
        let writer = tokio::spawn(write_lines(output, rx));
        let peer = Self {
            out,
            waiting: Arc::default(),
            next_id: Arc::new(AtomicU64::new(0)),
        };
        (peer, writer)
    }

    async fn send(&self, message: Value) {
        // A closed writer means the client is gone; there is nobody to tell.
        let _ = self.out.send(message.to_string()).await;
    }

    /// Answers request `id` with `result`, or with the error.
    pub async fn answer(&self, id: Value, result: Result<Value, RpcError>) {
        let message = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(e) => json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": e.code, "message": e.message},
            }),
        };
        self.send(message).await;
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Sends a request to the client and waits for its answer (an error
    /// when the connection closes first).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        rx.await.unwrap_or_else(|_| {
            Err(RpcError::new(
                code::INTERNAL,
                "the client closed the connection before it answered",
            ))
        })
    }

    /// Hands the client's answer to the request waiting on `id`; `false`
    /// when no request of corral's waits on it (never sent, or answered).
    pub fn resolve(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let Some(id) = id.as_u64() else {
            return false;
        };
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
        match waiter {
            Some(tx) => tx.send(result).is_ok(),
            None => false,
        }
    }

    /// Ends every request still waiting: the client has gone.
    pub fn close(&self) {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(mut output: W, mut lines: mpsc::Receiver<String>) {
    while let Some(line) = lines.recv().await {
        let mut batch = line;
        batch.push('\n');
        // Whatever else is queued goes out in the same write.
        while batch.len() < 1 << 20 {
            match lines.try_recv() {
                Ok(more) => {
                    batch.push_str(&more);
                    batch.push('\n');
                }
                Err(_) => break,
            }
        }
        if output.write_all(batch.as_bytes()).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_told_apart_and_bad_ones_say_why() {
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#),
            Incoming::Request { method, .. } if method == "initialize"
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","id":3,"result":{"outcome":{"outcome":"cancelled"}}}"#),
            Incoming::Response { result: Ok(_), .. }
        ));
        assert!(matches!(
            parse("[1,2]"),
            Incoming::Invalid { error, .. } if error.code == code::INVALID_REQUEST
        ));
        assert!(matches!(
            parse("{not json"),
            Incoming::Invalid { error, .. } if error.code == code::PARSE
        ));
        assert!(matches!(
            parse(r#"{"id":{"a":1},"method":"x"}"#),
            Incoming::Invalid {
                id: Value::Null,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_refused_and_the_next_one_read() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        input.extend_from_slice(b"\n{\"a\":1}\n\xff\xfe\n{\"b\":2}");
        let mut lines = Lines::new(&input[..]);
        assert!(matches!(lines.next().await, Line::Refused(e) if e.code == code::INVALID_REQUEST));
        assert!(matches!(lines.next().await, Line::Text(t) if t == "{\"a\":1}"));
        assert!(matches!(lines.next().await, Line::Refused(e) if e.code == code::PARSE));
        assert!(matches!(lines.next().await, Line::Text(t) if t == "{\"b\":2}"));
        assert!(matches!(lines.next().await, Line::End));
    }

    #[tokio::test]
    async fn an_answer_reaches_only_the_request_it_names() {
        let (peer, _writer) = Peer::new(tokio::io::sink());
        let asking = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("session/request_permission", json!({})).await })
        };
        while peer.waiting.lock().unwrap().is_empty() {
            tokio::task::yield_now().await;
        }
        assert!(!peer.resolve(&json!(7), Ok(json!("forged"))));
        assert!(!peer.resolve(&json!("0"), Ok(json!("forged"))));
        assert!(peer.resolve(&json!(0), Ok(json!("real"))));
        assert!(!peer.resolve(&json!(0), Ok(json!("again"))));
        assert_eq!(asking.await.unwrap(), Ok(json!("real")));
    }
}
