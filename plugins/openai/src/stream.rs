//! From a Chat Completions event stream to a corral [`ChatResponse`], with
//! the streaming events on the way.

use crate::fast;
use corral_sdk::provider::{
    self, AssistantMessage, ChatResponse, Event, FinishReason, ModelInfo, ProviderError,
    RateLimited, ToolCall, ToolCallDelta, TurnStream, Usage,
};
use corral_sdk::sse;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ops::ControlFlow;

/// A tool call being assembled from `delta.tool_calls` fragments.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    completed: bool,
}

/// The state of one streamed completion. Feed it every SSE event with
/// [`on_event`](TurnStream::on_event), then call [`finish`](TurnStream::finish).
/// The answer's text is not kept here: it is the text deltas, which the
/// host puts together (`TEXT_IS_STREAMED`).
#[derive(Debug, Default)]
pub struct Stream {
    started: bool,
    /// The completion id, used to make ids for calls that come without one.
    completion_id: String,
    /// Whether the model refused (`delta.refusal`): its refusal is the
    /// turn's text, and the turn ends as filtered whatever `finish_reason`
    /// says.
    refused: bool,
    /// Keyed by the fragments' `index`, the only field every fragment has.
    calls: BTreeMap<u32, PartialCall>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
}

impl Stream {
    /// The state before the first event.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`on_event`](TurnStream::on_event), with or without the one-pass reader
    /// ([`crate::bench`] compares the two).
    pub(crate) fn read_event(
        &mut self,
        event: &sse::EventRef<'_>,
        one_pass: bool,
        sink: &mut dyn FnMut(Event),
    ) -> Result<ControlFlow<()>, ProviderError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(ControlFlow::Break(()));
        }
        if data.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        // Most chunks are one short text delta: read those in one pass.
        if one_pass
            && event.event != "error"
            && let Some(chunk) = fast::parse(data)
        {
            self.on_simple(chunk, sink)?;
            return Ok(ControlFlow::Continue(()));
        }
        // Typed, borrowing parse for the rest: building a `Value` tree for
        // each chunk was most of the plugin's time.
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|e| {
            ProviderError::Protocol(format!(
                "a stream chunk is not JSON ({e}): {}",
                provider::error_message(data)
            ))
        })?;
        // OpenAI, OpenRouter and vLLM report failures after the 200 status
        // as a chunk with an `error` object.
        if let Some(error) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            return Err(stream_error(error));
        }
        if event.event == "error" {
            let whole: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            return Err(stream_error(&whole));
        }
        if !self.started {
            self.started = true;
            sink(Event::MessageStarted);
        }
        if self.completion_id.is_empty()
            && let Some(id) = chunk.id.as_deref()
        {
            self.completion_id = id.to_owned();
        }
        // Only the first choice is asked for (no `n`); a server that sends
        // more is ignored beyond it.
        let choice = chunk
            .choices
            .iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(choice) = choice {
            if let Some(delta) = &choice.delta {
                if let Some(text) = delta.content.as_deref()
                    && !text.is_empty()
                {
                    sink(Event::TextDelta(text.to_owned()));
                }
                // Structured outputs and safety refusals stream their text
                // here instead of in `content`; dropping it left an empty
                // answer with no reason given.
                if let Some(text) = delta.refusal.as_deref()
                    && !text.is_empty()
                {
                    self.refused = true;
                    sink(Event::TextDelta(text.to_owned()));
                }
                for fragment in delta.tool_calls.iter().flatten() {
                    self.tool_fragment(fragment, sink)?;
                }
            }
            if let Some(reason) = choice.finish_reason.as_deref().filter(|r| !r.is_empty()) {
                self.finish = Some(finish_reason(reason));
                self.complete_all(sink)?;
            }
        }
        if let Some(usage) = chunk.usage.as_ref().filter(|u| u.is_object()) {
            let usage = Usage {
                input_tokens: tokens(usage, "prompt_tokens"),
                output_tokens: tokens(usage, "completion_tokens"),
            };
            self.usage = Some(usage);
            sink(Event::Usage(usage));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// [`on_event`](TurnStream::on_event) for a chunk [`fast::parse`] read: the
    /// same steps, for a chunk without tool calls, refusal, usage or error.
    fn on_simple(
        &mut self,
        chunk: fast::Simple<'_>,
        sink: &mut dyn FnMut(Event),
    ) -> Result<(), ProviderError> {
        if !self.started {
            self.started = true;
            sink(Event::MessageStarted);
        }
        if self.completion_id.is_empty()
            && let Some(id) = chunk.id
        {
            self.completion_id = id.into_owned();
        }
        if !chunk.has_choice {
            return Ok(());
        }
        if let Some(text) = chunk.content.as_deref()
            && !text.is_empty()
        {
            sink(Event::TextDelta(text.to_owned()));
        }
        if let Some(reason) = chunk.finish_reason.as_deref().filter(|r| !r.is_empty()) {
            self.finish = Some(finish_reason(reason));
            self.complete_all(sink)?;
        }
        Ok(())
    }

    fn tool_fragment(
        &mut self,
        fragment: &Value,
        sink: &mut dyn FnMut(Event),
    ) -> Result<(), ProviderError> {
        let id = fragment
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let name = fragment
            .pointer("/function/name")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty());
        let arguments = match fragment.pointer("/function/arguments") {
            Some(Value::String(text)) => text.clone(),
            // Some servers send the arguments as an object in one piece.
            Some(object @ Value::Object(_)) => object.to_string(),
            _ => String::new(),
        };
        let last = self.calls.keys().next_back().copied();
        let index = match fragment.get("index").and_then(Value::as_u64) {
            Some(index) => u32::try_from(index).map_err(|_| {
                ProviderError::Protocol(format!("tool call index {index} is out of range"))
            })?,
            // Without an index, a new id is the only sign of a new call.
            None => match (last, id) {
                (Some(last), Some(id)) if self.calls[&last].id != id => last + 1,
                (Some(last), _) => last,
                (None, _) => 0,
            },
        };
        // Calls are streamed one after another, so a fragment of a later call
        // means the earlier ones are done; completing them now lets the UI
        // show them before the turn ends.
        if last.is_some_and(|last| index > last) {
            for (&earlier, call) in self.calls.range_mut(..index) {
                complete(earlier, call, &self.completion_id, false, sink)?;
            }
        }
        let call = self.calls.entry(index).or_default();
        if call.completed && !arguments.is_empty() {
            return Err(ProviderError::Protocol(format!(
                "tool call #{index} (`{}`) got more arguments after it was complete",
                call.name
            )));
        }
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id.to_owned();
        }
        if let Some(name) = name
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        call.arguments.push_str(&arguments);
        if id.is_some() || name.is_some() || !arguments.is_empty() {
            sink(Event::ToolCallDelta(ToolCallDelta {
                index,
                id: id.map(str::to_owned),
                name: name.map(str::to_owned),
                arguments_delta: arguments,
            }));
        }
        Ok(())
    }

    fn complete_all(&mut self, sink: &mut dyn FnMut(Event)) -> Result<(), ProviderError> {
        for (&index, call) in &mut self.calls {
            complete(index, call, &self.completion_id, true, sink)?;
        }
        Ok(())
    }
}

/// Marks `call` complete and emits it, if its arguments are valid. Without
/// `strict`, a call whose arguments do not parse yet is left for later. With
/// `strict` (the turn is over), such a call is kept with its arguments as the
/// model sent them: the host answers it with a tool error the model can act
/// on, instead of the whole run failing. A call without a name is an error.
fn complete(
    index: u32,
    call: &mut PartialCall,
    completion_id: &str,
    strict: bool,
    sink: &mut dyn FnMut(Event),
) -> Result<(), ProviderError> {
    if call.completed {
        return Ok(());
    }
    let arguments = match provider::tool_arguments(&call.arguments) {
        Ok(arguments) => Some(arguments),
        Err(_) if !strict => return Ok(()),
        Err(_) => None,
    };
    if call.name.is_empty() {
        if !strict {
            return Ok(());
        }
        return Err(ProviderError::Protocol(format!(
            "tool call #{index} has no function name"
        )));
    }
    if call.id.is_empty() {
        // llama.cpp and some proxies omit call ids; the conversation needs
        // one to pair the result with the call.
        call.id = if completion_id.is_empty() {
            format!("call_{index}")
        } else {
            format!("{completion_id}_{index}")
        };
    }
    call.completed = true;
    // Only a call with usable arguments is reported complete while the
    // turn streams; a malformed one reaches the host in the response alone.
    if let Some(arguments) = arguments {
        call.arguments = arguments;
        sink(Event::ToolCallCompleted(ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }));
    }
    Ok(())
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        _ => FinishReason::Other,
    }
}

fn tokens(usage: &Value, key: &str) -> u32 {
    usage
        .get(key)
        .and_then(Value::as_u64)
        .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// Types an `error` object that arrived inside the stream.
fn stream_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    let text = |key: &str| match error.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let (code, kind) = (text("code"), text("type"));
    let message = format!("the provider reported an error mid-stream: {message}");
    if code == "429" || code.contains("rate_limit") || kind.contains("rate_limit") {
        ProviderError::RateLimit(RateLimited {
            message,
            retry_after_ms: None,
        })
    } else if code == "401" || code == "403" || kind.contains("authentication") {
        ProviderError::Auth(message)
    } else if code.contains("context_length") || provider::mentions_context_length(&message) {
        ProviderError::ContextLength(message)
    } else {
        ProviderError::Server(message)
    }
}

/// The models of a `GET /models` answer (`{"data": [{"id": …}, …]}`), with
/// the limits the server reports. OpenAI's own API lists ids only; local and
/// routing servers add the context length under one of several names, the
/// server's runtime context first: `n_ctx` or `meta.n_ctx` (llama.cpp's
/// `-c`), `max_model_len` (vLLM), `context_length` (OpenRouter, LiteLLM),
/// `max_context_length` (LM Studio), `context_window`, and last
/// `meta.n_ctx_train` (llama.cpp's training context: the server may run with
/// less, so it is used only when nothing else is given).
pub fn parse_models(body: &[u8]) -> Result<Vec<ModelInfo>, ProviderError> {
    let json: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Protocol(format!("the model list is not JSON ({e})")))?;
    let data = json.get("data").and_then(Value::as_array).ok_or_else(|| {
        ProviderError::Protocol(format!(
            "the model list has no `data` array: {}",
            provider::error_message(&String::from_utf8_lossy(body))
        ))
    })?;
    let number = |m: &Value, paths: &[&[&str]]| {
        paths.iter().find_map(|path| {
            let v = path.iter().try_fold(m, |v, k| v.get(k))?;
            v.as_u64()
                .filter(|n| *n > 0)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        })
    };
    Ok(data
        .iter()
        .filter_map(|m| {
            let id = m.get("id").and_then(Value::as_str)?;
            let images = m
                .pointer("/architecture/input_modalities")
                .and_then(Value::as_array)
                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some("image")));
            Some(ModelInfo {
                id: id.to_owned(),
                context_window: number(
                    m,
                    &[
                        &["meta", "n_ctx"],
                        &["n_ctx"],
                        &["max_model_len"],
                        &["context_length"],
                        &["max_context_length"],
                        &["context_window"],
                        &["top_provider", "context_length"],
                        &["meta", "n_ctx_train"],
                    ],
                ),
                max_output_tokens: number(
                    m,
                    &[
                        &["max_completion_tokens"],
                        &["max_output_tokens"],
                        &["top_provider", "max_completion_tokens"],
                    ],
                ),
                accepts_images: images,
            })
        })
        .collect())
}

/// Ollama's context when nothing else is set (`num_ctx`,
/// `OLLAMA_CONTEXT_LENGTH`): the server truncates a longer prompt.
pub const OLLAMA_DEFAULT_CONTEXT: u32 = 4096;

/// The runtime context of a model from Ollama's `POST /api/show` answer:
/// its `num_ctx` parameter (a `parameters` line such as `num_ctx 8192`, or a
/// number in `model_info`), else Ollama's default context
/// ([`OLLAMA_DEFAULT_CONTEXT`]), never above the model's own
/// `<architecture>.context_length`. `None` when the answer is not Ollama's.
pub fn parse_ollama_show(body: &[u8]) -> Option<u32> {
    let json: Value = serde_json::from_slice(body).ok()?;
    let info = json.get("model_info").and_then(Value::as_object);
    let trained = info.and_then(|info| {
        info.iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    });
    let from_params = json
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|p| {
            p.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u64>().ok())
                    .flatten()
            })
        })
        .or_else(|| info?.get("num_ctx")?.as_u64());
    if info.is_none() && from_params.is_none() {
        return None;
    }
    let window = from_params
        .unwrap_or(u64::from(OLLAMA_DEFAULT_CONTEXT))
        .min(trained.unwrap_or(u64::MAX));
    u32::try_from(window).ok().filter(|n| *n > 0)
}

/// The fields of a `chat.completion.chunk` this plugin reads; the rest is
/// skipped without being built.
#[derive(serde::Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(serde::Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

impl TurnStream for Stream {
    const TEXT_IS_STREAMED: bool = true;

    /// Folds in one SSE event, sending streaming events to `sink`. Returns
    /// `Break` at `[DONE]`.
    fn on_event(
        &mut self,
        event: &sse::EventRef<'_>,
        sink: &mut dyn FnMut(Event),
    ) -> Result<ControlFlow<()>, ProviderError> {
        self.read_event(event, true, sink)
    }

    /// Whether the model has finished its turn (`finish_reason` or
    /// `[DONE]` seen): a connection lost after this point lost nothing.
    fn is_complete(&self) -> bool {
        self.done || self.finish.is_some()
    }

    /// Ends the stream: completes the remaining tool calls and returns the
    /// turn. A stream that ended before `[DONE]` and before any
    /// `finish_reason` was cut off: that is a [`ProviderError::Network`].
    fn finish(mut self, sink: &mut dyn FnMut(Event)) -> Result<ChatResponse, ProviderError> {
        if !self.done && self.finish.is_none() {
            return Err(ProviderError::Network(if self.started {
                "stream ended mid-message: the connection closed before `finish_reason` or `[DONE]`"
                    .to_owned()
            } else {
                "stream ended mid-message: the connection closed before any chunk".to_owned()
            }));
        }
        self.complete_all(sink)?;
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .map(|call| ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        // Ollama and llama.cpp say `stop` even when the turn calls tools;
        // what matters to the agent is that it must answer them.
        let finish_reason = match self.finish {
            _ if self.refused => FinishReason::ContentFilter,
            Some(FinishReason::Stop) | None if !tool_calls.is_empty() => FinishReason::ToolCalls,
            Some(reason) => reason,
            None => FinishReason::Stop,
        };
        Ok(ChatResponse {
            message: AssistantMessage {
                text: String::new(),
                tool_calls,
            },
            finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod differential;

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::testing::{self, Run};
    use pretty_assertions::assert_eq;

    fn run_whole(transcript: &str) -> Run {
        testing::run_whole(transcript, Stream::new)
    }

    const TEXT: &str = concat!(
        r#"data: {"id":"chatcmpl-Bx1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-Bx1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":[{"index":0,"delta":{"content":"Héllo"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-Bx1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":[{"index":0,"delta":{"content":", 世界 🦀"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-Bx1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-Bx1","object":"chat.completion.chunk","created":1752000000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_b3f1157249","choices":[],"usage":{"prompt_tokens":21,"completion_tokens":6,"total_tokens":27,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#,
        "\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn text_answer() {
        let usage = Usage {
            input_tokens: 21,
            output_tokens: 6,
        };
        assert_eq!(
            run_whole(TEXT),
            (
                Ok(ChatResponse {
                    message: AssistantMessage {
                        text: "Héllo, 世界 🦀".into(),
                        tool_calls: vec![],
                    },
                    finish_reason: FinishReason::Stop,
                    usage: Some(usage),
                }),
                vec![
                    Event::MessageStarted,
                    Event::TextDelta("Héllo".into()),
                    Event::TextDelta(", 世界 🦀".into()),
                    Event::Usage(usage),
                ]
            )
        );
        testing::assert_split_invariant(TEXT, Stream::new);
    }

    #[test]
    fn crlf_line_endings() {
        testing::assert_crlf_invariant(TEXT, Stream::new);
    }

    /// Two parallel calls: ids and names in the first fragment of each,
    /// arguments in pieces, the second with empty arguments.
    const TOOLS: &str = concat!(
        r#"data: {"id":"chatcmpl-T9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_Ab1","type":"function","function":{"name":"read_file","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-T9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"pa"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-T9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"src/é.rs\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-T9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_Cd2","type":"function","function":{"name":"list_files","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-T9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-T9","object":"chat.completion.chunk","created":1,"model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110}}"#,
        "\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn parallel_tool_calls_assembled_by_index() {
        let read = testing::tool_call("call_Ab1", "read_file", r#"{"path": "src/é.rs"}"#);
        let list = testing::tool_call("call_Cd2", "list_files", "{}");
        let usage = Usage {
            input_tokens: 80,
            output_tokens: 30,
        };
        let delta = testing::call_delta;
        assert_eq!(
            run_whole(TOOLS),
            (
                Ok(testing::response(
                    "",
                    vec![read.clone(), list.clone()],
                    FinishReason::ToolCalls,
                    Some(usage),
                )),
                vec![
                    Event::MessageStarted,
                    delta(0, Some("call_Ab1"), Some("read_file"), ""),
                    delta(0, None, None, "{\"pa"),
                    delta(0, None, None, "th\": \"src/é.rs\"}"),
                    // The first call completes as soon as the second starts.
                    Event::ToolCallCompleted(read),
                    delta(1, Some("call_Cd2"), Some("list_files"), ""),
                    Event::ToolCallCompleted(list),
                    Event::Usage(usage),
                ]
            )
        );
        testing::assert_split_invariant(TOOLS, Stream::new);
    }

    /// A call cut by the output token limit is handed on as it came, with
    /// the `length` finish, for the host to answer; it is not reported
    /// complete while streaming.
    #[test]
    fn invalid_arguments_at_the_end_are_passed_on() {
        let transcript = concat!(
            r#"data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"edit","arguments":"{\"path\": \"a"}}]}}]}"#,
            "\n\n",
            r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            "\n\n",
            "data: [DONE]\n\n",
        );
        let (result, events) = run_whole(transcript);
        let response = result.unwrap();
        assert_eq!(response.finish_reason, FinishReason::Length);
        assert_eq!(
            response.message.tool_calls,
            vec![ToolCall {
                id: "c1".into(),
                name: "edit".into(),
                arguments: r#"{"path": "a"#.into(),
            }]
        );
        assert!(
            testing::completed_calls(&events).is_empty(),
            "an invalid call must not be reported complete: {events:?}"
        );
        testing::assert_split_invariant(transcript, Stream::new);
    }

    /// gpt-4o's refusal, as streamed: `refusal` deltas, `content` null, and
    /// `finish_reason: "stop"`.
    #[test]
    fn refusals_are_the_answer_and_a_content_filter_finish() {
        let transcript = concat!(
            r#"data: {"id":"chatcmpl-R1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]}"#,
            "\n\n",
            r#"data: {"id":"chatcmpl-R1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"refusal":"I'm sorry, "},"logprobs":null,"finish_reason":null}]}"#,
            "\n\n",
            r#"data: {"id":"chatcmpl-R1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"logprobs":null,"finish_reason":null}]}"#,
            "\n\n",
            r#"data: {"id":"chatcmpl-R1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
            "\n\n",
            "data: [DONE]\n\n",
        );
        let (result, events) = run_whole(transcript);
        assert_eq!(
            result,
            Ok(ChatResponse {
                message: AssistantMessage {
                    text: "I'm sorry, I can't help with that.".into(),
                    tool_calls: vec![],
                },
                finish_reason: FinishReason::ContentFilter,
                usage: None,
            })
        );
        assert_eq!(
            events,
            vec![
                Event::MessageStarted,
                Event::TextDelta("I'm sorry, ".into()),
                Event::TextDelta("I can't help with that.".into()),
            ]
        );
        testing::assert_split_invariant(transcript, Stream::new);
    }

    /// Wherever the one-pass reader takes a chunk, it reads what serde
    /// reads.
    #[test]
    fn the_fast_reader_agrees_with_serde() {
        let mut taken = 0;
        for transcript in [TEXT, TOOLS] {
            provider::replay_sse([transcript.as_bytes()], |event| {
                if super::differential::agree(event.data.trim()) {
                    taken += 1;
                }
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        }
        assert!(taken >= 4, "the text chunks take the fast path");
    }

    #[test]
    fn stream_cut_before_the_end_is_a_network_error() {
        let cut = &TEXT[..TEXT.find("\"finish_reason\":\"stop\"").unwrap()];
        let (result, events) = run_whole(cut);
        assert_eq!(
            result,
            Err(ProviderError::Network(
                "stream ended mid-message: the connection closed before `finish_reason` or `[DONE]`"
                    .into()
            ))
        );
        assert_eq!(
            events.len(),
            3,
            "the deltas before the cut still streamed: {events:?}"
        );
        assert!(matches!(run_whole(""), (Err(ProviderError::Network(_)), _)));
    }

    #[test]
    fn complete_once_finish_reason_arrives() {
        let first = testing::first_complete(TEXT, Stream::new);
        assert!(
            first.data.contains("finish_reason\":\"stop"),
            "complete exactly at the finish_reason chunk: {first:?}"
        );
    }

    /// llama.cpp / Ollama style: no chunk ids, no call id, the whole call in
    /// one fragment, `stop` although it calls a tool, no usage, and the
    /// connection closed after `finish_reason` without `[DONE]`.
    #[test]
    fn local_server_quirks_are_tolerated() {
        let transcript = concat!(
            r#"data: {"object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me look."},"finish_reason":null}],"usage":null,"x_extra":{"timings":1}}"#,
            "\r\n\r\n",
            r#"data: {"object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"function","function":{"name":"list_files","arguments":"{\"path\":\".\"}"}}]},"finish_reason":null}]}"#,
            "\r\n\r\n",
            r#"data: {"object":"chat.completion.chunk","created":1,"model":"qwen3","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            "\r\n\r\n",
        );
        let (result, _) = run_whole(transcript);
        assert_eq!(
            result,
            Ok(ChatResponse {
                message: AssistantMessage {
                    text: "Let me look.".into(),
                    tool_calls: vec![ToolCall {
                        id: "call_0".into(),
                        name: "list_files".into(),
                        arguments: r#"{"path":"."}"#.into(),
                    }],
                },
                finish_reason: FinishReason::ToolCalls,
                usage: None,
            })
        );
        testing::assert_split_invariant(transcript, Stream::new);
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let transcript = concat!(
            r#"data: {"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"n\":"}}]}}]}"#,
            "\n\n",
            r#"data: {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
            "\n\n",
            r#"data: {"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":{"m":2}}}]}}]}"#,
            "\n\n",
            r#"data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "\n\ndata: [DONE]\n\n",
        );
        let calls = run_whole(transcript).0.unwrap().message.tool_calls;
        assert_eq!(
            calls,
            vec![
                ToolCall {
                    id: "a".into(),
                    name: "x".into(),
                    arguments: r#"{"n":1}"#.into()
                },
                ToolCall {
                    id: "b".into(),
                    name: "y".into(),
                    arguments: r#"{"m":2}"#.into()
                },
            ]
        );
    }

    #[test]
    fn finish_reasons_map() {
        for (wire, expected) in [
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("something_new", FinishReason::Other),
        ] {
            let transcript = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"x\"}},\"finish_reason\":\"{wire}\"}}]}}\n\ndata: [DONE]\n\n"
            );
            assert_eq!(
                run_whole(&transcript).0.unwrap().finish_reason,
                expected,
                "{wire}"
            );
        }
    }

    #[test]
    fn errors_inside_the_stream_are_typed() {
        let cases = [
            (
                r#"data: {"error":{"message":"Rate limit exceeded","type":"requests","code":"rate_limit_exceeded"}}"#,
                "rate-limit",
            ),
            (
                r#"data: {"error":{"message":"This model's maximum context length is 8192 tokens","code":400}}"#,
                "context-length",
            ),
            (
                r#"data: {"error":{"message":"upstream overloaded","code":502}}"#,
                "server",
            ),
            (
                "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json",
                "protocol",
            ),
        ];
        for (transcript, kind) in cases {
            let transcript = format!("{transcript}\n\n");
            let got = testing::error_kind(&run_whole(&transcript).0);
            assert_eq!(got, kind, "{transcript}");
        }
    }

    #[test]
    fn model_list() {
        let body = br#"{"object":"list","data":[{"id":"gpt-4.1","object":"model","created":1,"owned_by":"system"},{"id":"o3","object":"model"}]}"#;
        assert_eq!(testing::model_ids(parse_models(body)), ["gpt-4.1", "o3"]);
        let vllm = br#"{"data":[{"id":"qwen","max_model_len":32768},{"id":"or","context_length":8000,"top_provider":{"max_completion_tokens":1000},"architecture":{"input_modalities":["text","image"]}}]}"#;
        let got = parse_models(vllm).unwrap();
        assert_eq!(got[0].context_window, Some(32768));
        assert_eq!(got[0].max_output_tokens, None);
        assert_eq!(
            (
                got[1].context_window,
                got[1].max_output_tokens,
                got[1].accepts_images
            ),
            (Some(8000), Some(1000), true)
        );
        assert!(matches!(
            parse_models(br#"{"error":{"message":"nope"}}"#),
            Err(ProviderError::Protocol(m)) if m.contains("nope")
        ));
        let llama = br#"{"data":[{"id":"m","meta":{"n_ctx_train":32768,"n_ctx":2048}},{"id":"old","meta":{"n_ctx_train":4096}}]}"#;
        let got = parse_models(llama).unwrap();
        assert_eq!(got[0].context_window, Some(2048));
        assert_eq!(got[1].context_window, Some(4096));
    }

    #[test]
    fn ollama_show() {
        let with = br#"{"parameters":"stop \"x\"\nnum_ctx 8192","model_info":{"general.architecture":"llama","llama.context_length":131072}}"#;
        assert_eq!(parse_ollama_show(with), Some(8192));
        let default =
            br#"{"model_info":{"general.architecture":"llama","llama.context_length":131072}}"#;
        assert_eq!(parse_ollama_show(default), Some(OLLAMA_DEFAULT_CONTEXT));
        let small = br#"{"model_info":{"general.architecture":"tiny","tiny.context_length":1024}}"#;
        assert_eq!(parse_ollama_show(small), Some(1024));
        assert_eq!(parse_ollama_show(br#"{"error":"not found"}"#), None);
        assert_eq!(parse_ollama_show(b"404 page not found"), None);
    }
}
