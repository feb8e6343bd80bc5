//! The stdio framing in front of the MCP service: one JSON-RPC message per
//! line, each line at most [`MAX_REQUEST_BYTES`].
//!
//! rmcp's own stdio transport drops a line over its cap without a word, so
//! a client that sent one waits for an answer forever. Here stdin is read
//! first by [`guard`], which never holds more than the cap of one line:
//! lines within it go on to the service unchanged, and a line over it is
//! answered at once with a JSON-RPC `Invalid Request` error, carrying the
//! request's id when its first bytes name one (`null` otherwise), and the
//! server goes on. The service's answers and these errors share stdout
//! whole line by whole line, so they never interleave.
//!
//! rmcp also answers some malformed requests without their id, and others
//! not at all: a request whose `params` is not an object (`""`, `1`, `[]`)
//! got an error with `"id": null`, one holding a lone surrogate escape
//! (`"\ud800"`, not valid JSON) no answer, so its client waited forever.
//! [`malformed`] finds both before the service sees them and answers them
//! here, with their id.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// The largest request line, its newline included (rmcp's own stdio cap).
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// How much of an oversized line is kept to find its id in.
const HEAD_KEPT: usize = 64 << 10;

/// Runs the framing: reads requests from `input`, hands the lines within
/// the cap to the service through `to_service`, and writes the service's
/// answers (`from_service`) and the errors for oversized lines to `output`.
/// Returns when the service's output ends.
pub async fn guard<I, O, S, T>(input: I, output: O, to_service: S, from_service: T)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
    S: AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + Unpin + Send + 'static,
{
    let (errors_tx, errors_rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_requests(input, to_service, errors_tx));
    write_answers(output, from_service, errors_rx).await;
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

async fn read_requests<I, S>(input: I, mut to_service: S, errors: mpsc::UnboundedSender<String>)
where
    I: AsyncRead + Unpin,
    S: AsyncWrite + Unpin,
{
    let mut input = BufReader::with_capacity(64 << 10, input);
    loop {
        match read_line(&mut input, MAX_REQUEST_BYTES).await {
            Line::End => break,
            Line::Whole(bytes) => {
                if let Some(error) = malformed(&bytes) {
                    if errors.send(error).is_err() {
                        break;
                    }
                    continue;
                }
                if to_service.write_all(&bytes).await.is_err() || to_service.flush().await.is_err()
                {
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
    // Dropping `to_service` tells the service the client is gone.
}

/// The error answer for a line the service would answer without its id or
/// not at all, `None` for one it can take. A notification (no `id`) gets
/// no answer, as JSON-RPC wants, and is dropped.
fn malformed(line: &[u8]) -> Option<String> {
    let text = line.trim_ascii();
    if text.is_empty() {
        return None;
    }
    let message: Value = match serde_json::from_slice(text) {
        Ok(m) => m,
        Err(e) => {
            let id = leading_id(text);
            tracing::warn!(id = %crate::terminal::inert_line(&id.to_string()), "a request that is not JSON was refused: {e}");
            if id.is_null() && !looks_like_a_request(text) {
                // Nothing to answer to; rmcp drops such lines too.
                return None;
            }
            return Some(error_line(
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
    let object = message.as_object()?;
    let id = object.get("id")?;
    if !object.contains_key("method") {
        // An answer to one of the server's own requests (elicitation).
        return None;
    }
    match object.get("params") {
        None | Some(Value::Object(_) | Value::Null) => None,
        Some(other) => Some(error_line(
            id.clone(),
            -32602,
            format!(
                "the request's `params` is {}, not an object; MCP requests take their parameters \
                 as a JSON object (e.g. `\"params\": {{}}`)",
                json_kind(other)
            ),
        )),
    }
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
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
    .to_string()
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

async fn write_answers<O, T>(
    mut output: O,
    from_service: T,
    mut errors: mpsc::UnboundedReceiver<String>,
) where
    O: AsyncWrite + Unpin,
    T: AsyncRead + Unpin,
{
    let mut answers = BufReader::new(from_service);
    let mut line = Vec::new();
    let mut errors_open = true;
    loop {
        tokio::select! {
            read = answers.read_until(b'\n', &mut line) => {
                // The service's own output: whole lines of its own making.
                if !matches!(read, Ok(n) if n > 0) {
                    break;
                }
                if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                    break;
                }
                line.clear();
            }
            error = errors.recv(), if errors_open => match error {
                Some(mut error) => {
                    error.push('\n');
                    if output.write_all(error.as_bytes()).await.is_err()
                        || output.flush().await.is_err()
                    {
                        break;
                    }
                }
                None => errors_open = false,
            },
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
