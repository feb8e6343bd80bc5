//! The stdio framing in front of the MCP service: one JSON-RPC message per
//! line, each line at most [`MAX_REQUEST_BYTES`].
//!
//! rmcp's own stdio transport drops a line over its cap without a word, so
//! a client that sent one waits for an answer forever. Here stdin is read
//! first by [`guard`], which never holds more than the cap of one line:
//! each line within it is parsed there, once, and goes on to the service as
//! a message (or is answered here, below), and a line over it is
//! answered at once with a JSON-RPC `Invalid Request` error, carrying the
//! request's id when its first bytes name one (`null` otherwise), and the
//! server goes on. The service's answers and these errors share stdout
//! whole line by whole line, so they never interleave.
//!
//! rmcp also answers a message it cannot read as MCP with `"Invalid
//! request"` and no id, and some not at all: a batch, an id of `1.5` or
//! `{"a":1}`, a request without a method, one whose `params` is not an
//! object, one holding a lone surrogate escape (`"\ud800"`, not valid JSON).
//! [`read`] reads each line as rmcp would first, and answers one it would
//! refuse here: with its id (`null` only when the id itself is not one MCP
//! allows) and a message that says what was wrong.
//!
//! The server's own requests to the client (an approval's
//! `elicitation/create`) are noted as they go out and crossed off as the
//! client answers. When the client closes its input, each one still open is
//! answered for it with a [`CLIENT_GONE`] error before the service hears of
//! the end, so that the call waiting on it ends and its answer is written
//! before the server exits.

use futures::{SinkExt as _, StreamExt as _};
use rmcp::model::{
    ClientJsonRpcMessage, JsonRpcError, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
};
use serde_json::Value;
use std::collections::HashSet;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// The largest request line, its newline included (rmcp's own stdio cap).
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// How much of an oversized line is kept to find its id in.
const HEAD_KEPT: usize = 64 << 10;

/// What the framing hands the service: each request, read once.
pub type ToService = futures::channel::mpsc::Sender<ClientJsonRpcMessage>;
/// What the service hands the framing to write: each answer, whole.
pub type FromService = futures::channel::mpsc::Receiver<ServerJsonRpcMessage>;

/// Runs the framing: reads requests from `input`, hands the messages of
/// the lines within the cap to the service through `to_service`, and writes
/// the service's answers (`from_service`) and the errors for oversized or
/// unreadable lines to `output`, calling `after_answer` once each of the
/// service's messages is written. Returns when the service's output ends.
pub async fn guard<I, O>(
    input: I,
    output: O,
    to_service: ToService,
    from_service: FromService,
    after_answer: impl FnMut() + Send,
) where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (errors_tx, errors_rx) = mpsc::unbounded_channel();
    let (asked_tx, asked_rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_requests(input, to_service, errors_tx, asked_rx));
    write_answers(output, from_service, errors_rx, asked_tx, after_answer).await;
    reader.abort();
}

/// One line as the bounded reader saw it.
enum Line {
    /// Within the cap; the bytes end with `\n` unless the input ended.
    Whole(Vec<u8>),
    /// Over the cap: its first bytes and its length so far.
    Oversized { head: Vec<u8>, len: usize },
    /// The input ended.
    End,
}

async fn read_line<R: AsyncRead + Unpin>(input: &mut BufReader<R>, max: usize) -> Line {
    let mut line = Vec::new();
    let mut over: Option<(Vec<u8>, usize)> = None;
    loop {
        let (take, done) = {
            let available = match input.fill_buf().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("cannot read the MCP client's requests: {e}");
                    return Line::End;
                }
            };
            if available.is_empty() {
                return match over {
                    Some((head, len)) => Line::Oversized { head, len },
                    None if line.is_empty() => Line::End,
                    None => Line::Whole(line),
                };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            if let Some((_, len)) = over.as_mut() {
                *len += take;
            } else if line.len() + take > max {
                let len = line.len() + take;
                let room = HEAD_KEPT.saturating_sub(line.len()).min(take);
                line.extend_from_slice(&chunk[..room]);
                line.truncate(HEAD_KEPT);
                line.shrink_to_fit();
                over = Some((std::mem::take(&mut line), len));
            } else {
                line.extend_from_slice(chunk);
            }
            (take, newline.is_some())
        };
        input.consume(take);
        if done {
            return match over {
                Some((head, len)) => Line::Oversized { head, len },
                None => Line::Whole(line),
            };
        }
    }
}

async fn read_requests<I>(
    input: I,
    mut to_service: ToService,
    errors: mpsc::UnboundedSender<String>,
    mut asked: mpsc::UnboundedReceiver<RequestId>,
) where
    I: AsyncRead + Unpin,
{
    let mut input = BufReader::with_capacity(64 << 10, input);
    // The server's requests to the client not answered yet: when the client
    // goes, each is answered here, so that the call waiting on it ends.
    let mut waiting: HashSet<RequestId> = HashSet::new();
    loop {
        match read_line(&mut input, MAX_REQUEST_BYTES).await {
            Line::End => break,
            Line::Whole(bytes) => {
                let message = match read(&bytes) {
                    Read::Pass(message) => message,
                    Read::Answer(id, message) => {
                        while let Ok(id) = asked.try_recv() {
                            waiting.insert(id);
                        }
                        waiting.remove(&id);
                        message
                    }
                    Read::Refuse(error) => {
                        if errors.send(error).is_err() {
                            break;
                        }
                        continue;
                    }
                    Read::Drop => continue,
                };
                if to_service.send(*message).await.is_err() {
                    break;
                }
            }
            Line::Oversized { head, len } => {
                let id = leading_id(&head);
                tracing::warn!(
                    bytes = len,
                    id = %crate::terminal::inert_line(&id.to_string()),
                    "a request over the {} MiB limit was refused",
                    MAX_REQUEST_BYTES >> 20
                );
                if errors.send(oversize_error(id, len)).is_err() {
                    break;
                }
            }
        }
    }
    // The client sent its last line. What the server still waits for from
    // it (an approval) will never come: it is answered with an error, so
    // that the call which asked ends, and its answer reaches the client
    // before the server exits.
    while let Ok(id) = asked.try_recv() {
        waiting.insert(id);
    }
    for id in waiting {
        let Ok(gone) = serde_json::from_value(client_gone(id)) else {
            continue;
        };
        if to_service.send(gone).await.is_err() {
            break;
        }
    }
    // Dropping `to_service` tells the service the client is gone.
}

/// The code of the error that stands for the client's answer to one of the
/// server's requests once the client has closed its input.
pub const CLIENT_GONE: i32 = -32000;

/// The answer the client did not send to the server's request `id`.
fn client_gone(id: RequestId) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": CLIENT_GONE,
            "message": "the MCP client went away (it closed its input) before answering",
        },
    })
}

/// What becomes of one line from the client.
enum Read {
    /// The service takes it.
    Pass(Box<ClientJsonRpcMessage>),
    /// The client's answer to the server's request of this id; it goes on
    /// to the service.
    Answer(RequestId, Box<ClientJsonRpcMessage>),
    /// Answered here with this error (a line, or a batch of them); the
    /// service never sees it.
    Refuse(String),
    /// Neither passed on nor answered: a notification or an answer the
    /// service cannot read (JSON-RPC answers neither).
    Drop,
}

/// What to do with `line`: rmcp answers any message it cannot read as MCP
/// with `"Invalid request"` and no id, and a few not at all, so each line
/// is read here first the way rmcp reads it, and one it would refuse is
/// refused here, with its id and what was wrong.
fn read(line: &[u8]) -> Read {
    let text = line.trim_ascii();
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    if text.is_empty() {
        return Read::Drop;
    }
    let why = match serde_json::from_slice::<ClientJsonRpcMessage>(text) {
        Ok(message) => {
            let answered = match &message {
                JsonRpcMessage::Response(answer) => Some(answer.id.clone()),
                JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) => Some(id.clone()),
                _ => None,
            };
            return match answered {
                Some(id) => Read::Answer(id, Box::new(message)),
                None => Read::Pass(Box::new(message)),
            };
        }
        Err(e) => e,
    };
    let message: Value = match serde_json::from_slice(text) {
        Ok(m) => m,
        Err(e) => {
            let id = leading_id(text);
            tracing::warn!(id = %crate::terminal::inert_line(&id.to_string()), "a request that is not JSON was refused: {e}");
            if id.is_null() && !looks_like_a_request(text) {
                // Nothing to answer to; rmcp drops such lines too.
                return Read::Drop;
            }
            return Read::Refuse(error_line(
                id,
                -32700,
                format!(
                    "the request is not valid JSON ({e}); it was not read. Send UTF-8 JSON, with \
                     any character outside the Basic Multilingual Plane escaped as a surrogate \
                     pair (a lone `\\ud800` is not a character)"
                ),
            ));
        }
    };
    let refused = match message {
        Value::Array(batch) => return refuse_batch(&batch),
        Value::Object(object) => refuse_message(&object, &why),
        other => Some(Refusal {
            id: Value::Null,
            code: -32600,
            message: format!(
                "a JSON-RPC message is a JSON object, and this one is {}; it was not read. Send \
                 each request as an object on a line of its own, e.g. \
                 {{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\"}}",
                json_kind(&other)
            ),
        }),
    };
    match refused {
        Some(r) => {
            tracing::warn!(id = %crate::terminal::inert_line(&r.id.to_string()), "a request was refused: {}", r.message);
            Read::Refuse(error_line(r.id, r.code, r.message))
        }
        None => Read::Drop,
    }
}

/// An error answer not yet written out.
struct Refusal {
    id: Value,
    code: i64,
    message: String,
}

/// Why a batch is refused. MCP 2025-03-26 had batches; the versions after it
/// dropped them, and this server answers each message on its own.
const NO_BATCH: &str = "a batch is not supported by MCP 2025-06-18 and later (corral takes each \
     message on its own); nothing in it was run. Send each request as a JSON object on a line of \
     its own";

/// The answer to a batch: as JSON-RPC answers one, a batch holding an error
/// for each request in it (with its id), or one error when the batch is
/// empty. Its notifications and answers get nothing, as ever.
fn refuse_batch(batch: &[Value]) -> Read {
    tracing::warn!(messages = batch.len(), "a batch was refused");
    if batch.is_empty() {
        return Read::Refuse(error_line(Value::Null, -32600, NO_BATCH.to_owned()));
    }
    let answers: Vec<Value> = batch
        .iter()
        .filter_map(|message| {
            let object = message.as_object();
            let id = match object.and_then(|o| o.get("id")) {
                // A message that is not an object is a request that cannot
                // be read: JSON-RPC answers it with a null id.
                None if object.is_none() => Value::Null,
                None => return None,
                Some(id) => checked_id(id).unwrap_or(Value::Null),
            };
            let is_answer = object.is_some_and(|o| {
                !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
            });
            (!is_answer).then(|| error_value(id, -32600, NO_BATCH.to_owned()))
        })
        .collect();
    if answers.is_empty() {
        return Read::Drop;
    }
    Read::Refuse(Value::Array(answers).to_string())
}

/// The refusal of a message rmcp could not read (`why`), or `None` when
/// nothing may answer it.
fn refuse_message(
    object: &serde_json::Map<String, Value>,
    why: &serde_json::Error,
) -> Option<Refusal> {
    let method = object.get("method");
    if method.is_none() && (object.contains_key("result") || object.contains_key("error")) {
        // An answer to one of the server's own requests that does not read
        // as one; answering an answer is not allowed.
        tracing::warn!(
            "an answer from the MCP client that is not valid JSON-RPC was dropped: {why}"
        );
        return None;
    }
    let id = match object.get("id") {
        Some(id) => checked_id(id),
        None if method.is_some() => {
            // A notification: JSON-RPC answers none, even a broken one.
            tracing::warn!("a notification that is not valid MCP was dropped: {why}");
            return None;
        }
        None => Ok(Value::Null),
    };
    let id = match id {
        Ok(id) => id,
        Err(message) => {
            return Some(Refusal {
                id: Value::Null,
                code: -32600,
                message,
            });
        }
    };
    let refusal = |code, message| {
        Some(Refusal {
            id: id.clone(),
            code,
            message,
        })
    };
    match object.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        other => {
            let was = other.map_or("missing".to_owned(), |v| format!("{v}"));
            return refusal(
                -32600,
                format!(
                    "the request's `jsonrpc` is {}, and MCP speaks JSON-RPC 2.0; it was not run. \
                     Add \"jsonrpc\": \"2.0\" to each message",
                    crate::terminal::inert_line(&was)
                ),
            );
        }
    }
    let method = match method {
        None => {
            return refusal(
                -32600,
                "the request has no method, so it cannot be run; name one, e.g. \
                 \"method\": \"tools/list\""
                    .to_owned(),
            );
        }
        Some(Value::String(m)) => m,
        Some(other) => {
            return refusal(
                -32600,
                format!(
                    "the request's `method` must be a string, and it is {}; name one, e.g. \
                     \"method\": \"tools/list\"",
                    json_kind(other)
                ),
            );
        }
    };
    match object.get("params") {
        None | Some(Value::Object(_) | Value::Null) => refusal(
            -32602,
            format!(
                "the request's `params` do not fit `{}` ({why}); it was not run. See the MCP \
                 schema for what it takes",
                crate::terminal::inert_line(method)
            ),
        ),
        Some(other) => refusal(
            -32602,
            format!(
                "the request's `params` is {}, not an object; MCP requests take their parameters \
                 as a JSON object (e.g. `\"params\": {{}}`)",
                json_kind(other)
            ),
        ),
    }
}

/// `id` when MCP allows it (a string or an integer rmcp can hold), or why
/// not.
fn checked_id(id: &Value) -> Result<Value, String> {
    let fits = match id {
        Value::String(_) => true,
        Value::Number(n) => {
            n.is_i64()
                || n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
        }
        _ => false,
    };
    if fits {
        return Ok(id.clone());
    }
    let what = match id {
        Value::Number(n) if n.is_u64() => "an integer above 2^63 - 1".to_owned(),
        Value::Number(_) => format!("the fractional number {id}"),
        other => json_kind(other).to_owned(),
    };
    Err(format!(
        "the id must be a string or an integer (between -2^63 and 2^63 - 1), and it is {what}; \
         the request was not run. Give each request such an id, e.g. \"id\": 1"
    ))
}

/// Whether a line that is not JSON starts as a JSON-RPC message would.
fn looks_like_a_request(text: &[u8]) -> bool {
    text.first() == Some(&b'{')
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn error_line(id: Value, code: i64, message: String) -> String {
    error_value(id, code, message).to_string()
}

fn error_value(id: Value, code: i64, message: String) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
}

/// The error answer for an oversized request.
fn oversize_error(id: Value, len: usize) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": format!(
                "the request is over {len} bytes, more than corral's limit of {} MiB for one \
                 message; it was not read. Send less in one call (e.g. a path instead of the \
                 file's content, or the change as a patch)",
                MAX_REQUEST_BYTES >> 20
            ),
        },
    })
    .to_string()
}

async fn write_answers<O>(
    mut output: O,
    mut from_service: FromService,
    mut errors: mpsc::UnboundedReceiver<String>,
    asked: mpsc::UnboundedSender<RequestId>,
    mut after_answer: impl FnMut(),
) where
    O: AsyncWrite + Unpin,
{
    let mut errors_open = true;
    loop {
        let (line, answer) = tokio::select! {
            message = from_service.next() => {
                // The service's own output, one message a line.
                let Some(message) = message else { break };
                // Told before the client can see it, so that a client
                // which goes once it has seen a request finds it known.
                if let JsonRpcMessage::Request(request) = &message {
                    let _ = asked.send(request.id.clone());
                }
                match serde_json::to_vec(&message) {
                    Ok(mut line) => {
                        line.push(b'\n');
                        (line, true)
                    }
                    Err(e) => {
                        tracing::error!("an answer could not be written as JSON: {e}");
                        continue;
                    }
                }
            }
            error = errors.recv(), if errors_open => match error {
                Some(error) => {
                    let mut line = error.into_bytes();
                    line.push(b'\n');
                    (line, false)
                }
                None => {
                    errors_open = false;
                    continue;
                }
            },
        };
        if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            break;
        }
        if answer {
            after_answer();
        }
    }
}

/// The top-level `"id"` of a JSON object whose first bytes are `head`, if
/// they reach it: a number or a string, as JSON-RPC allows. Anything else
/// (no id before the cut, a nested `"id"`) is `null`.
fn leading_id(head: &[u8]) -> Value {
    let text = String::from_utf8_lossy(head);
    let mut chars = text.char_indices().peekable();
    let mut depth = 0usize;
    // Whether the next string at depth 1 is a key.
    let mut expect_key = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '{' | '[' => {
                depth += 1;
                expect_key = c == '{' && depth == 1;
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
            }
            ',' if depth == 1 => expect_key = true,
            '"' => {
                let start = i + 1;
                let mut end = None;
                let mut escaped = false;
                for (j, d) in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == '"' {
                        end = Some(j);
                        break;
                    }
                }
                let Some(end) = end else { return Value::Null };
                if depth == 1 && expect_key {
                    expect_key = false;
                    if &text[start..end] == "id" {
                        return id_value(&text[end + 1..]);
                    }
                }
            }
            _ => {}
        }
    }
    Value::Null
}

/// The value after `"id"`: `: 7` or `: "abc"`.
fn id_value(rest: &str) -> Value {
    let Some(rest) = rest.trim_start().strip_prefix(':') else {
        return Value::Null;
    };
    let mut de = serde_json::Deserializer::from_str(rest.trim_start()).into_iter::<Value>();
    match de.next() {
        Some(Ok(v @ (Value::Number(_) | Value::String(_)))) => v,
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_found_at_the_top_level_only() {
        assert_eq!(
            leading_id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#),
            Value::from(7)
        );
        assert_eq!(
            leading_id(br#"{"method":"x","params":{"id":5,"a":"b"},"id":"k"}"#),
            Value::from("k")
        );
        assert_eq!(
            leading_id(br#"{"method":"x","params":{"id":5,"content":"aaaa"#),
            Value::Null
        );
        assert_eq!(leading_id(br#"{"x":"\"id\":3","id": 4}"#), Value::from(4));
        assert_eq!(leading_id(b"garbage"), Value::Null);
    }

    #[tokio::test]
    async fn an_oversized_line_is_answered_and_the_next_one_served() {
        let small = b"{\"id\":1}\n".to_vec();
        let mut big = br#"{"jsonrpc":"2.0","id":9,"params":""#.to_vec();
        big.resize(100, b'a');
        big.extend_from_slice(b"\"}\n");
        let input = [big, small.clone()].concat();
        let mut reader = BufReader::with_capacity(16, &input[..]);
        match read_line(&mut reader, 50).await {
            Line::Oversized { head, len } => {
                assert_eq!(len, 103);
                assert_eq!(leading_id(&head), Value::from(9));
            }
            _ => panic!("not refused"),
        }
        match read_line(&mut reader, 50).await {
            Line::Whole(line) => assert_eq!(line, small),
            _ => panic!("the next line was lost"),
        }
        assert!(matches!(read_line(&mut reader, 50).await, Line::End));
    }
}
