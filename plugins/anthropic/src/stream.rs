//! From a Messages API event stream to a corral [`ChatResponse`], with the
//! streaming events on the way.

use corral_sdk::provider::{
    self, AssistantMessage, ChatResponse, Event, FinishReason, ModelInfo, ProviderError,
    RateLimited, ToolCall, ToolCallDelta, TurnStream, Usage,
};
use corral_sdk::sse;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::ControlFlow;

/// A `tool_use` content block being assembled.
#[derive(Debug)]
struct ToolBlock {
    /// Position among the turn's tool calls (content block indexes also
    /// count text blocks).
    ordinal: u32,
    id: String,
    name: String,
    partial_json: String,
    completed: bool,
}

/// The state of one streamed message. Feed it every SSE event with
/// [`on_event`](TurnStream::on_event), then call [`finish`](TurnStream::finish).
/// The answer's text is not kept here: it is the text deltas, which the
/// host puts together (`TEXT_IS_STREAMED`).
#[derive(Debug, Default)]
pub struct Stream {
    started: bool,
    /// `tool_use` blocks by content block index; text and thinking blocks
    /// need no state.
    tools: BTreeMap<u64, ToolBlock>,
    stop_reason: Option<FinishReason>,
    input_tokens: u32,
    output_tokens: u32,
    saw_usage: bool,
    done: bool,
}

impl Stream {
    /// The state before the first event.
    pub fn new() -> Self {
        Self::default()
    }

    fn push_text(&mut self, text: &str, sink: &mut dyn FnMut(Event)) {
        if !text.is_empty() {
            sink(Event::TextDelta(text.to_owned()));
        }
    }

    /// `message_start` and `message_delta` both carry usage; the counts are
    /// running totals, so the latest wins. Cached prompt tokens are counted
    /// apart from `input_tokens` by the API but fill the context all the same.
    fn read_usage(&mut self, usage: &Value) {
        let count = |key: &str| {
            usage
                .get(key)
                .and_then(Value::as_u64)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        if let Some(input) = count("input_tokens") {
            self.saw_usage = true;
            self.input_tokens = input
                .saturating_add(count("cache_creation_input_tokens").unwrap_or(0))
                .saturating_add(count("cache_read_input_tokens").unwrap_or(0));
        }
        if let Some(output) = count("output_tokens") {
            self.saw_usage = true;
            self.output_tokens = output;
        }
    }

    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
        }
    }
}

fn block_index(data: &Value) -> Result<u64, ProviderError> {
    data.get("index").and_then(Value::as_u64).ok_or_else(|| {
        ProviderError::Protocol(format!("a content block event without an index: {data}"))
    })
}

/// Closes a `tool_use` block. Arguments that are not a JSON object (a call
/// cut by `max_tokens`) stay as the model sent them, and the call is not
/// reported complete: the host answers it with a tool error the model can
/// act on, instead of the whole run failing.
fn complete(tool: &mut ToolBlock, sink: &mut dyn FnMut(Event)) -> Result<(), ProviderError> {
    if tool.completed {
        return Ok(());
    }
    if tool.id.is_empty() || tool.name.is_empty() {
        return Err(ProviderError::Protocol(format!(
            "tool_use block #{} has no id or name",
            tool.ordinal
        )));
    }
    tool.completed = true;
    if let Ok(arguments) = provider::tool_arguments(&tool.partial_json) {
        tool.partial_json = arguments;
        sink(Event::ToolCallCompleted(ToolCall {
            id: tool.id.clone(),
            name: tool.name.clone(),
            arguments: tool.partial_json.clone(),
        }));
    }
    Ok(())
}

fn stop_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

/// Types an `error` event (`{"type": "overloaded_error", "message": …}`).
fn stream_error(error: &Value) -> ProviderError {
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    let message = format!("the provider reported `{kind}` mid-stream: {message}");
    match kind {
        "rate_limit_error" => ProviderError::RateLimit(RateLimited {
            message,
            retry_after_ms: None,
        }),
        "authentication_error" | "permission_error" => ProviderError::Auth(message),
        "invalid_request_error" | "request_too_large"
            if provider::mentions_context_length(&message) =>
        {
            ProviderError::ContextLength(message)
        }
        "invalid_request_error" | "request_too_large" | "not_found_error" => {
            ProviderError::Protocol(message)
        }
        // overloaded_error, api_error, timeout_error and anything new.
        _ => ProviderError::Server(message),
    }
}

/// The models of a `GET /models` answer, with the limits the API reports:
/// `max_input_tokens` (the context window), `max_tokens` (the output limit)
/// and `capabilities.image_input.supported`. A server that leaves them out
/// (older API versions, compatible servers) gives ids only.
pub fn parse_models(body: &[u8]) -> Result<Vec<ModelInfo>, ProviderError> {
    let json: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Protocol(format!("the model list is not JSON ({e})")))?;
    let data = json.get("data").and_then(Value::as_array).ok_or_else(|| {
        ProviderError::Protocol(format!(
            "the model list has no `data` array: {}",
            provider::error_message(&String::from_utf8_lossy(body))
        ))
    })?;
    let number = |m: &Value, key: &str| {
        m.get(key)
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    };
    Ok(data
        .iter()
        .filter_map(|m| {
            let id = m.get("id").and_then(Value::as_str)?;
            Some(ModelInfo {
                id: id.to_owned(),
                context_window: number(m, "max_input_tokens"),
                max_output_tokens: number(m, "max_tokens"),
                accepts_images: m
                    .pointer("/capabilities/image_input/supported")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        })
        .collect())
}

impl TurnStream for Stream {
    const TEXT_IS_STREAMED: bool = true;

    /// Folds in one SSE event, sending streaming events to `sink`. Returns
    /// `Break` at `message_stop`.
    fn on_event(
        &mut self,
        event: &sse::EventRef<'_>,
        sink: &mut dyn FnMut(Event),
    ) -> Result<ControlFlow<()>, ProviderError> {
        let data: Value = serde_json::from_str(event.data).map_err(|e| {
            ProviderError::Protocol(format!(
                "a `{}` event is not JSON ({e}): {}",
                event.event,
                provider::error_message(event.data)
            ))
        })?;
        // The `type` inside the data repeats the SSE event name; it is the
        // one proxies are least likely to drop.
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event);
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(usage) = data.pointer("/message/usage") {
                    self.read_usage(usage);
                }
                sink(Event::MessageStarted);
            }
            "content_block_start" => {
                let index = block_index(&data)?;
                let block = data.get("content_block").unwrap_or(&Value::Null);
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let text = |key: &str| {
                        block
                            .get(key)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let ordinal = u32::try_from(self.tools.len()).unwrap_or(u32::MAX);
                    let tool = ToolBlock {
                        ordinal,
                        id: text("id"),
                        name: text("name"),
                        partial_json: String::new(),
                        completed: false,
                    };
                    sink(Event::ToolCallDelta(ToolCallDelta {
                        index: ordinal,
                        id: Some(tool.id.clone()),
                        name: Some(tool.name.clone()),
                        arguments_delta: String::new(),
                    }));
                    self.tools.insert(index, tool);
                } else if let Some(text) = block.get("text").and_then(Value::as_str) {
                    // Always empty in practice; kept in case a proxy sends
                    // the whole block at once.
                    self.push_text(text, sink);
                }
            }
            "content_block_delta" => {
                let index = block_index(&data)?;
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        self.push_text(text, sink);
                    }
                    Some("input_json_delta") => {
                        let part = delta
                            .get("partial_json")
                            .and_then(Value::as_str)
                            .unwrap_or("");
                        // Blocks of other types stream their input too
                        // (`server_tool_use`, run by the API itself): they
                        // are not calls for corral to run.
                        let Some(tool) = self.tools.get_mut(&index) else {
                            return Ok(ControlFlow::Continue(()));
                        };
                        if tool.completed {
                            return Err(ProviderError::Protocol(format!(
                                "input_json_delta for content block {index} after its content_block_stop"
                            )));
                        }
                        tool.partial_json.push_str(part);
                        if !part.is_empty() {
                            sink(Event::ToolCallDelta(ToolCallDelta {
                                index: tool.ordinal,
                                id: None,
                                name: None,
                                arguments_delta: part.to_owned(),
                            }));
                        }
                    }
                    // thinking_delta, signature_delta, citations_delta:
                    // nothing corral shows or sends back.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = block_index(&data)?;
                if let Some(tool) = self.tools.get_mut(&index) {
                    complete(tool, sink)?;
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if let Some(usage) = data.get("usage") {
                    self.read_usage(usage);
                }
                sink(Event::Usage(self.usage()));
            }
            "message_stop" => {
                self.done = true;
                return Ok(ControlFlow::Break(()));
            }
            "error" => return Err(stream_error(data.get("error").unwrap_or(&data))),
            // `ping` keeps the connection alive; unknown events are new API
            // features that an older plugin may ignore, as the API asks.
            _ => {}
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Whether the message is complete: `message_stop` or the stop reason
    /// seen. `message_delta` comes after every content block, so a block
    /// still open then (a call cut by `max_tokens`) will get no more input.
    /// A connection lost after this point lost nothing.
    fn is_complete(&self) -> bool {
        self.done || self.stop_reason.is_some()
    }

    /// Ends the stream and returns the turn. A stream that ended before
    /// `message_stop` is complete only if `message_delta` gave the stop
    /// reason; otherwise it was cut off, a [`ProviderError::Network`].
    fn finish(self, sink: &mut dyn FnMut(Event)) -> Result<ChatResponse, ProviderError> {
        if !self.is_complete() {
            return Err(ProviderError::Network(if self.started {
                "stream ended mid-message: the connection closed before `message_stop`".to_owned()
            } else {
                "stream ended mid-message: the connection closed before `message_start`".to_owned()
            }));
        }
        let usage = self.saw_usage.then(|| self.usage());
        let mut tools = self.tools;
        for tool in tools.values_mut() {
            complete(tool, sink)?;
        }
        let tool_calls: Vec<ToolCall> = tools
            .into_values()
            .map(|tool| ToolCall {
                id: tool.id,
                name: tool.name,
                arguments: tool.partial_json,
            })
            .collect();
        let finish_reason = match self.stop_reason {
            Some(reason) => reason,
            None if tool_calls.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        Ok(ChatResponse {
            message: AssistantMessage {
                text: String::new(),
                tool_calls,
            },
            finish_reason,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::testing::{self, Run};
    use pretty_assertions::assert_eq;

    fn run_whole(transcript: &str) -> Run {
        testing::run_whole(transcript, Stream::new)
    }

    /// A text block, then two tool_use blocks (the second without
    /// arguments), as the API sends them.
    const TRANSCRIPT: &str = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5-20250929","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"output_tokens":2}}}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\n",
        "event: ping\n",
        r#"data: {"type": "ping"}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay, lé"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"t me look 🔍"}}"#,
        "\n\n",
        "event: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"read_file","input":{}}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"sr"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"c/main.rs\"}"}}"#,
        "\n\n",
        "event: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":1}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_02","name":"list_files","input":{}}}"#,
        "\n\n",
        "event: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":2}"#,
        "\n\n",
        "event: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        "\n\n",
        "event: message_stop\n",
        r#"data: {"type":"message_stop"}"#,
        "\n\n",
    );

    #[test]
    fn text_and_tool_calls() {
        let read = testing::tool_call(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "read_file",
            r#"{"path": "src/main.rs"}"#,
        );
        let list = testing::tool_call("toolu_02", "list_files", "{}");
        let usage = Usage {
            input_tokens: 572,
            output_tokens: 89,
        };
        let delta = testing::call_delta;
        assert_eq!(
            run_whole(TRANSCRIPT),
            (
                Ok(testing::response(
                    "Okay, lét me look 🔍",
                    vec![read.clone(), list.clone()],
                    FinishReason::ToolCalls,
                    Some(usage),
                )),
                vec![
                    Event::MessageStarted,
                    Event::TextDelta("Okay, lé".into()),
                    Event::TextDelta("t me look 🔍".into()),
                    delta(
                        0,
                        Some("toolu_01T1x1fJ34qAmk2tNTrN7Up6"),
                        Some("read_file"),
                        ""
                    ),
                    delta(0, None, None, "{\"path\": \"sr"),
                    delta(0, None, None, "c/main.rs\"}"),
                    Event::ToolCallCompleted(read),
                    delta(1, Some("toolu_02"), Some("list_files"), ""),
                    Event::ToolCallCompleted(list),
                    Event::Usage(usage),
                ]
            )
        );
        testing::assert_split_invariant(TRANSCRIPT, Stream::new);
    }

    #[test]
    fn crlf_line_endings() {
        testing::assert_crlf_invariant(TRANSCRIPT, Stream::new);
    }

    #[test]
    fn stop_reasons_map() {
        for (wire, expected) in [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("max_tokens", FinishReason::Length),
            ("refusal", FinishReason::ContentFilter),
            ("pause_turn", FinishReason::Other),
        ] {
            let transcript = format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":3,\"output_tokens\":1}}}}}}\n\n\
                 event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{wire}\"}},\"usage\":{{\"output_tokens\":5}}}}\n\n\
                 event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
            );
            let response = run_whole(&transcript).0.unwrap();
            assert_eq!(response.finish_reason, expected, "{wire}");
            assert_eq!(
                response.usage,
                Some(Usage {
                    input_tokens: 3,
                    output_tokens: 5
                })
            );
        }
    }

    #[test]
    fn stream_cut_mid_message_is_a_network_error() {
        // Cut inside the tool call's arguments, at a clean event boundary
        // (a clean close, as a proxy might do).
        let cut = TRANSCRIPT
            .find("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}")
            .unwrap();
        let (result, events) = run_whole(&TRANSCRIPT[..cut]);
        assert_eq!(
            result,
            Err(ProviderError::Network(
                "stream ended mid-message: the connection closed before `message_stop`".into()
            ))
        );
        assert!(testing::completed_calls(&events).is_empty(), "{events:?}");
        assert!(matches!(run_whole(""), (Err(ProviderError::Network(_)), _)));
    }

    #[test]
    fn missing_message_stop_after_the_stop_reason_is_accepted() {
        let end = TRANSCRIPT.find("event: message_stop").unwrap();
        assert_eq!(run_whole(&TRANSCRIPT[..end]).0, run_whole(TRANSCRIPT).0);
    }

    #[test]
    fn complete_once_the_stop_reason_arrives() {
        let first = testing::first_complete(TRANSCRIPT, Stream::new);
        assert_eq!(first.event, "message_delta", "{first:?}");
    }

    #[test]
    fn invalid_tool_json_is_passed_on() {
        let transcript = TRANSCRIPT.replace(r#"c/main.rs\"}"#, r#"c/main.rs\""#);
        let (result, events) = run_whole(&transcript);
        let calls = result.unwrap().message.tool_calls;
        assert_eq!(calls[0].arguments, r#"{"path": "src/main.rs""#);
        assert_eq!(calls[1].arguments, "{}");
        assert_eq!(testing::completed_calls(&events), ["list_files"]);
    }

    /// `max_tokens` reached inside a tool call's input: the API ends the
    /// message with the block still open (no `content_block_stop`). That is
    /// a turn cut at its length, not a dropped connection.
    #[test]
    fn max_tokens_inside_a_tool_call_is_a_length_finish() {
        let transcript = concat!(
            "event: message_start\n",
            r#"data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":900,"output_tokens":1}}}"#,
            "\n\n",
            "event: content_block_start\n",
            r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"write_file","input":{}}}"#,
            "\n\n",
            "event: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"big.txt\", \"content\": \"lorem ip"}}"#,
            "\n\n",
            "event: message_delta\n",
            r#"data: {"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":64}}"#,
            "\n\n",
            "event: message_stop\n",
            r#"data: {"type":"message_stop"}"#,
            "\n\n",
        );
        let cut_call = ToolCall {
            id: "toolu_9".into(),
            name: "write_file".into(),
            arguments: r#"{"path": "big.txt", "content": "lorem ip"#.into(),
        };
        let whole = run_whole(transcript).0.unwrap();
        assert_eq!(whole.finish_reason, FinishReason::Length);
        assert_eq!(whole.message.tool_calls, vec![cut_call]);
        // The same when the connection closes right after the stop reason.
        let end = transcript.find("event: message_stop").unwrap();
        assert_eq!(run_whole(&transcript[..end]).0, Ok(whole));
        testing::assert_split_invariant(transcript, Stream::new);
    }

    /// A server tool (web search) streams its input like a tool_use block;
    /// it is the API's to run, and its blocks are skipped.
    #[test]
    fn server_tool_blocks_are_ignored() {
        let transcript = concat!(
            "event: message_start\n",
            r#"data: {"type":"message_start","message":{"id":"msg_02","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}"#,
            "\n\n",
            "event: content_block_start\n",
            r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
            "\n\n",
            "event: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"rust"}}"#,
            "\n\n",
            "event: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" wasm\"}"}}"#,
            "\n\n",
            "event: content_block_stop\n",
            r#"data: {"type":"content_block_stop","index":0}"#,
            "\n\n",
            "event: content_block_start\n",
            r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}}"#,
            "\n\n",
            "event: content_block_stop\n",
            r#"data: {"type":"content_block_stop","index":1}"#,
            "\n\n",
            "event: content_block_start\n",
            r#"data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}"#,
            "\n\n",
            "event: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"Found it."}}"#,
            "\n\n",
            "event: content_block_stop\n",
            r#"data: {"type":"content_block_stop","index":2}"#,
            "\n\n",
            "event: message_delta\n",
            r#"data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}"#,
            "\n\n",
            "event: message_stop\n",
            r#"data: {"type":"message_stop"}"#,
            "\n\n",
        );
        let response = run_whole(transcript).0.unwrap();
        assert_eq!(response.message.text, "Found it.");
        assert!(response.message.tool_calls.is_empty());
        assert_eq!(response.finish_reason, FinishReason::Stop);
        testing::assert_split_invariant(transcript, Stream::new);
    }

    #[test]
    fn error_events_are_typed() {
        let cases = [
            ("overloaded_error", "server"),
            ("api_error", "server"),
            ("rate_limit_error", "rate-limit"),
            ("authentication_error", "auth"),
            ("invalid_request_error", "protocol"),
        ];
        for (kind, expected) in cases {
            let transcript = format!(
                "{}event: error\ndata: {{\"type\": \"error\", \"error\": {{\"type\": \"{kind}\", \"message\": \"Overloaded\"}}}}\n\n",
                &TRANSCRIPT[..TRANSCRIPT.find("event: content_block_stop").unwrap()]
            );
            let got = testing::error_kind(&run_whole(&transcript).0);
            assert_eq!(got, expected, "{kind}");
        }
        let context = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"prompt is too long: 210000 tokens > 200000 maximum\"}}\n\n";
        assert_eq!(testing::error_kind(&run_whole(context).0), "context-length");
    }

    #[test]
    fn model_list() {
        let body = br#"{"data":[{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"},{"type":"model","id":"claude-haiku-4-5"}],"has_more":false,"first_id":"claude-sonnet-4-5-20250929","last_id":"claude-haiku-4-5"}"#;
        assert_eq!(
            testing::model_ids(parse_models(body)),
            ["claude-sonnet-4-5-20250929", "claude-haiku-4-5"]
        );
        let limits = br#"{"data":[{"type":"model","id":"claude-x","max_input_tokens":200000,"max_tokens":64000,"capabilities":{"image_input":{"supported":true}}}]}"#;
        let got = &parse_models(limits).unwrap()[0];
        assert_eq!(
            (
                got.context_window,
                got.max_output_tokens,
                got.accepts_images
            ),
            (Some(200_000), Some(64_000), true)
        );
    }
}
