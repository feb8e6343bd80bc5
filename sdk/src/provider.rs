//! Write an LLM provider plugin: implement [`Provider`] for a type and call
//! [`provider!`](crate::provider!) once.
//!
//! A provider plugin is a component of the `corral:plugin/provider-plugin`
//! world. The host calls [`Provider::complete`] with the conversation; the
//! plugin sends it to its API over `wasi:http` (see [`send`]), reports the
//! answer as it streams in with [`emit`], and returns the complete turn.
//!
//! The plugin never holds an API key: it sends requests to the `base_url` from
//! its config, and the host adds the credentials configured in the manifest's
//! `grants.secrets` for that host on the way out.
//!
//! ```no_run
//! use corral_sdk::http::Request;
//! use corral_sdk::provider::{
//!     self, AssistantMessage, ChatRequest, ChatResponse, Event, FinishReason, ModelInfo,
//!     Provider, ProviderError,
//! };
//! use std::ops::ControlFlow;
//!
//! struct Echo;
//!
//! impl Provider for Echo {
//!     fn models() -> Result<Vec<ModelInfo>, ProviderError> {
//!         Ok(vec![ModelInfo {
//!             id: "echo-1".to_owned(),
//!             context_window: Some(8192),
//!             max_output_tokens: Some(1024),
//!             accepts_images: false,
//!         }])
//!     }
//!
//!     fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError> {
//!         let base = corral_sdk::config("base_url").unwrap_or_default();
//!         let body = serde_json::json!({ "model": request.model, "stream": true });
//!         let mut response = provider::send(&Request::post_json(format!("{base}/echo"), &body))?;
//!         let mut text = String::new();
//!         provider::emit(Event::MessageStarted);
//!         provider::read_sse(&mut response, |event| {
//!             if event.data == "[DONE]" {
//!                 return Ok(ControlFlow::Break(()));
//!             }
//!             provider::emit(Event::TextDelta(event.data.clone()));
//!             text.push_str(&event.data);
//!             Ok(ControlFlow::Continue(()))
//!         })?;
//!         Ok(ChatResponse {
//!             message: AssistantMessage { text, tool_calls: Vec::new() },
//!             finish_reason: FinishReason::Stop,
//!             usage: None,
//!         })
//!     }
//! }
//!
//! corral_sdk::provider!(Echo);
//! ```
//!
//! Keep the protocol logic (building the request body, folding stream events
//! into a response) in plain functions that take an event sink such as
//! `&mut dyn FnMut(Event)`: they then run in native unit tests, where the
//! host's imports ([`emit`], [`config`](crate::config), HTTP) do not exist.

use crate::http::{self, Request, Response, Timeouts};
use crate::sse;
use std::ops::ControlFlow;
use std::time::Duration;

#[doc(hidden)]
#[allow(
    missing_docs,
    reason = "generated; the public types are re-exported below"
)]
pub mod __bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "provider-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_provider_plugin",
        default_bindings_module: "corral_sdk::provider::__bindings",
        // One set of `host` imports for both worlds, so `corral_sdk::log`
        // and `corral_sdk::config` work in provider plugins too.
        with: {
            "corral:plugin/host@0.1.0": crate::__bindings::corral::plugin::host,
        },
        additional_derives: [PartialEq],
    });
}

pub use __bindings::corral::plugin::chat::{
    AssistantMessage, ChatRequest, ChatResponse, FinishReason, Message, ModelInfo, ProviderError,
    RateLimited, ToolResult, Usage,
};
pub use __bindings::corral::plugin::stream::{Event, ToolCallDelta};
pub use __bindings::corral::plugin::types::{Effect, ToolCall, ToolSpec};

/// An LLM provider. Implement it for a unit struct and name the struct in
/// [`provider!`](crate::provider!).
pub trait Provider {
    /// The models this provider knows, with their context window and output
    /// limit where known: the host sizes requests to them. A plugin keeps a
    /// table of the models it knows and may add what its API's model list
    /// reports (see [`model_table`]).
    fn models() -> Result<Vec<ModelInfo>, ProviderError>;

    /// Produces the next assistant turn for `request`, reporting progress
    /// with [`emit`] while it streams. Tool calls in the response carry
    /// their arguments as JSON object text (check them with
    /// [`tool_arguments`]); a call whose arguments the model left invalid (cut
    /// at `max_tokens`, say) is returned as the model sent it, and the host
    /// answers it with a tool error instead of ending the run.
    fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError>;
}

/// A model table as a plugin writes it: `(id, context window, max output
/// tokens, accepts images)` rows turned into [`ModelInfo`] records.
pub fn model_table(rows: &[(&str, u32, u32, bool)]) -> Vec<ModelInfo> {
    rows.iter()
        .map(|&(id, window, output, images)| ModelInfo {
            id: id.to_owned(),
            context_window: Some(window),
            max_output_tokens: Some(output),
            accepts_images: images,
        })
        .collect()
}

/// `listed` (from an API's model list) merged over `table`: a listed model's
/// known limits win, and what the list leaves out comes from the table entry
/// of the same id. Models only in the table are kept.
pub fn merge_models(table: Vec<ModelInfo>, listed: Vec<ModelInfo>) -> Vec<ModelInfo> {
    let mut out = table;
    for m in listed {
        match out.iter_mut().find(|t| t.id == m.id) {
            Some(t) => {
                t.context_window = m.context_window.or(t.context_window);
                t.max_output_tokens = m.max_output_tokens.or(t.max_output_tokens);
                t.accepts_images |= m.accepts_images;
            }
            None => out.push(m),
        }
    }
    out
}

/// Sends one streaming event to the host, which forwards it to the UI while
/// [`Provider::complete`] runs. Only available inside a component.
pub fn emit(event: Event) {
    __bindings::corral::plugin::stream::emit(&event);
}

/// Tells the host that the text of the answer the current
/// [`Provider::complete`] returns is exactly the text of the
/// [`Event::TextDelta`] events it emits, in order: the plugin then returns an
/// empty `text` and the host puts the answer together, so a long answer is
/// not held in the plugin's memory. Call it before the first text delta
/// (`corral:plugin/answer`); [`stream_turn`] does for a [`TurnStream`] whose
/// [`TEXT_IS_STREAMED`](TurnStream::TEXT_IS_STREAMED) is `true`. Only
/// available inside a component.
pub fn keep_streamed_text() {
    __bindings::corral::plugin::answer::keep_streamed_text();
}

/// How [`send_with`] retries rate limits (HTTP 429) and server errors (5xx).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The wait before the first retry; it doubles with each retry.
    pub base_delay: Duration,
    /// The longest wait. A server that asks (with `retry-after`) for a
    /// longer one gets no retry: the error goes to the host at once, with
    /// the requested wait in [`RateLimited::retry_after_ms`].
    pub max_delay: Duration,
}

impl Default for Retry {
    /// 3 retries, after 1 s, 2 s and 4 s unless the server says otherwise;
    /// at most 60 s.
    fn default() -> Self {
        Self {
            max_retries: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// [`send_with`] with the default [`Retry`] policy.
pub fn send(request: &Request) -> Result<Response, ProviderError> {
    send_with(request, &Retry::default())
}

/// Sends `request`, retrying 429 and 5xx answers with exponential backoff
/// (or the wait the server asks for in `retry-after-ms` / `retry-after`),
/// and returns the response once its status is 2xx.
///
/// Other statuses become typed errors: 401/403 [`ProviderError::Auth`], a 400
/// about the context window [`ProviderError::ContextLength`], 429
/// [`ProviderError::RateLimit`], 5xx [`ProviderError::Server`], any other
/// [`ProviderError::Protocol`]; each carries the provider's own message.
/// Transport failures are [`ProviderError::Network`] and are not retried:
/// the request may have reached the model.
pub fn send_with(request: &Request, retry: &Retry) -> Result<Response, ProviderError> {
    let mut attempt = 0;
    loop {
        let mut response = request.send().map_err(ProviderError::from)?;
        let status = response.status();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        // The error body only feeds a message; a broken one still leaves
        // the status to report.
        let body = response.read_to_end(64 * 1024).unwrap_or_default();
        let body = String::from_utf8_lossy(&body);
        match judge_status(&request.url, status, response.headers(), &body) {
            Verdict::Fail(error) => return Err(error),
            Verdict::Retry { error, wait } => {
                if attempt >= retry.max_retries {
                    return Err(error);
                }
                let Some(delay) = retry_delay(attempt, wait, retry) else {
                    return Err(error);
                };
                crate::log(
                    crate::Level::Warn,
                    &format!(
                        "HTTP {status} from {}; retry {} of {} in {} ms",
                        request.url,
                        attempt + 1,
                        retry.max_retries,
                        delay.as_millis()
                    ),
                );
                drop(response);
                http::sleep(delay);
                attempt += 1;
            }
        }
    }
}

/// What to do with a non-2xx answer.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Worth another try, after `wait` if the server named one.
    Retry {
        error: ProviderError,
        wait: Option<Duration>,
    },
    Fail(ProviderError),
}

fn judge_status(url: &str, status: u16, headers: &[(String, String)], body: &str) -> Verdict {
    let message = format!("HTTP {status} from {url}: {}", error_message(body));
    match status {
        401 | 403 => Verdict::Fail(ProviderError::Auth(format!(
            "{message} (the key is added by the host: check grants.secrets of this plugin in the manifest)"
        ))),
        400 | 413 if mentions_context_length(body) => {
            Verdict::Fail(ProviderError::ContextLength(message))
        }
        429 => {
            let wait = retry_after(headers);
            Verdict::Retry {
                error: ProviderError::RateLimit(RateLimited {
                    message,
                    retry_after_ms: wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
                }),
                wait,
            }
        }
        500..=599 => Verdict::Retry {
            error: ProviderError::Server(message),
            wait: retry_after(headers),
        },
        _ => Verdict::Fail(ProviderError::Protocol(message)),
    }
}

/// The wait before retry number `attempt + 1`, or `None` when the server
/// asks for more than the policy allows.
fn retry_delay(attempt: u32, asked: Option<Duration>, retry: &Retry) -> Option<Duration> {
    match asked {
        Some(wait) if wait > retry.max_delay => None,
        Some(wait) => Some(wait),
        None => Some(
            retry
                .base_delay
                .saturating_mul(1u32 << attempt.min(16))
                .min(retry.max_delay),
        ),
    }
}

/// `retry-after-ms` (OpenAI, fractional milliseconds) wins over
/// `retry-after` (seconds). The HTTP-date form of `retry-after` is not used
/// by LLM APIs and is ignored.
fn retry_after(headers: &[(String, String)]) -> Option<Duration> {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.trim().parse::<f64>().ok())
    };
    if let Some(ms) = find("retry-after-ms")
        && let Ok(wait) = Duration::try_from_secs_f64(ms / 1000.0)
    {
        return Some(wait);
    }
    find("retry-after").and_then(|s| Duration::try_from_secs_f64(s).ok())
}

/// Whether an error message says the prompt did not fit the model's
/// context. The phrases are those of OpenAI, Anthropic, vLLM, llama.cpp and
/// Ollama; use it to type errors that arrive inside a stream, too.
pub fn mentions_context_length(body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "context length",
        "context_length",
        "context window",
        "context size",
        "prompt is too long",
        "maximum context",
    ]
    .iter()
    .any(|phrase| body.contains(phrase))
}

/// The human-readable part of an API error body: `error.message` (OpenAI,
/// Anthropic), a string `error` (Ollama) or `message`, else the body itself,
/// shortened.
pub fn error_message(body: &str) -> String {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(body) {
        let message = json
            .pointer("/error/message")
            .or_else(|| json.get("error"))
            .or_else(|| json.get("message"))
            .and_then(serde_json::Value::as_str);
        if let Some(message) = message {
            return message.to_owned();
        }
    }
    let body = body.trim();
    match body.char_indices().nth(500) {
        Some((cut, _)) => format!("{}…", &body[..cut]),
        None if body.is_empty() => "(empty body)".to_owned(),
        None => body.to_owned(),
    }
}

impl From<http::Error> for ProviderError {
    fn from(err: http::Error) -> Self {
        ProviderError::Network(err.to_string())
    }
}

/// A provider's reading of one streamed answer: it folds in events as they
/// arrive and knows when its protocol's final event has been seen.
pub trait TurnStream {
    /// `true` when [`finish`](TurnStream::finish) leaves the answer's text
    /// empty because it is exactly the text of the [`Event::TextDelta`]
    /// events the stream sent: [`stream_turn`] then tells the host so (see
    /// [`keep_streamed_text`]), and [`replay_turn`] puts the text together
    /// from the events the same way the host does. A stream that keeps no
    /// copy of the text holds a long answer only once, in the host. Use such
    /// a stream for one [`stream_turn`] per [`Provider::complete`]: the host
    /// refuses a second request to keep text once text has streamed.
    const TEXT_IS_STREAMED: bool = false;

    /// Folds in one SSE event, sending streaming events to `sink`; `Break`
    /// ends the stream early (e.g. at OpenAI's `[DONE]`). The event is
    /// borrowed from the parser: a long answer is hundreds of thousands of
    /// them.
    fn on_event(
        &mut self,
        event: &sse::EventRef<'_>,
        sink: &mut dyn FnMut(Event),
    ) -> Result<ControlFlow<()>, ProviderError>;
    /// Whether the protocol's final event has been seen.
    fn is_complete(&self) -> bool;
    /// The complete turn, or why the stream did not make one.
    fn finish(self, sink: &mut dyn FnMut(Event)) -> Result<ChatResponse, ProviderError>;
}

/// Reads the streamed answer in `response` into `stream`, forwarding its
/// events to the host as they come, and returns the turn.
///
/// Deltas that arrive in the same piece of the body are sent as one event
/// (see [`Coalesce`]): a long answer streams one event per network read
/// instead of one per token, and each is sent before the next read waits.
///
/// A connection that drops or lingers after the final event has already said
/// everything: that network error is logged and ignored.
pub fn stream_turn<S: TurnStream>(
    response: &mut Response,
    mut stream: S,
) -> Result<ChatResponse, ProviderError> {
    if S::TEXT_IS_STREAMED {
        keep_streamed_text();
    }
    let mut out = Coalesce::new(emit);
    let read = {
        let out = std::cell::RefCell::new(&mut out);
        read_sse_ref(
            response,
            |event| stream.on_event(event, &mut |e| out.borrow_mut().push(e)),
            || out.borrow_mut().flush(),
        )
    };
    match read {
        Err(ProviderError::Network(why)) if stream.is_complete() => crate::log(
            crate::Level::Debug,
            &format!("ignoring a network error after the end of the message: {why}"),
        ),
        read => read?,
    }
    let turn = stream.finish(&mut |e| out.push(e));
    out.flush();
    turn
}

/// Most bytes of text (or of tool-call arguments) [`Coalesce`] puts in one
/// event. Far below the host's per-event limit (`limits.output_kb`, 1 MiB
/// by default), and big enough that a fast stream sends a few events per
/// network read.
pub const COALESCE_BYTES: usize = 16 * 1024;

/// An event sink that merges consecutive text deltas, and consecutive
/// argument deltas of the same tool call, into one event of at most
/// [`COALESCE_BYTES`], until [`flush`](Coalesce::flush) (or any other kind of
/// event) sends it on. Order is kept: an event of another kind first sends
/// what is pending.
pub struct Coalesce<F: FnMut(Event)> {
    out: F,
    pending: Option<Event>,
}

impl<F: FnMut(Event)> std::fmt::Debug for Coalesce<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalesce")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl<F: FnMut(Event)> Coalesce<F> {
    /// A sink that sends merged events to `out`.
    pub fn new(out: F) -> Self {
        Self { out, pending: None }
    }

    /// Takes one event: merged into the pending one where it can be, else
    /// the pending one is sent and this one waits (deltas) or goes too.
    pub fn push(&mut self, event: Event) {
        match (&mut self.pending, event) {
            (Some(Event::TextDelta(text)), Event::TextDelta(more))
                if text.len() + more.len() <= COALESCE_BYTES =>
            {
                text.push_str(&more);
            }
            (Some(Event::ToolCallDelta(call)), Event::ToolCallDelta(more))
                if more.index == call.index
                    && more.id.is_none()
                    && more.name.is_none()
                    && call.arguments_delta.len() + more.arguments_delta.len()
                        <= COALESCE_BYTES =>
            {
                call.arguments_delta.push_str(&more.arguments_delta);
            }
            (_, event) => {
                self.flush();
                match event {
                    Event::TextDelta(text) if text.len() < COALESCE_BYTES => {
                        // Room for what follows, so that merging does not
                        // reallocate at every token.
                        let mut buffer = String::with_capacity(COALESCE_BYTES.min(4096));
                        buffer.push_str(&text);
                        self.pending = Some(Event::TextDelta(buffer));
                    }
                    event @ Event::ToolCallDelta(_) => self.pending = Some(event),
                    event => (self.out)(event),
                }
            }
        }
    }

    /// Sends the pending event, if any.
    pub fn flush(&mut self) {
        if let Some(event) = self.pending.take() {
            (self.out)(event);
        }
    }
}

/// [`stream_turn`] over chunks in memory, collecting the events instead of
/// sending them: how a provider's tests replay a wire transcript. Events
/// are collected as the stream makes them, not merged. For a stream whose
/// [`TEXT_IS_STREAMED`](TurnStream::TEXT_IS_STREAMED) is `true`, the turn's
/// text is put together from the text deltas, as the host does.
pub fn replay_turn<'a, S: TurnStream>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut stream: S,
) -> (Result<ChatResponse, ProviderError>, Vec<Event>) {
    let mut events = Vec::new();
    let mut sink = |e| events.push(e);
    let mut chunks = chunks.into_iter();
    let result = drive_sse(
        || Ok(chunks.next().map(<[u8]>::to_vec)),
        |event| stream.on_event(event, &mut sink),
        || {},
    )
    .and_then(|()| stream.finish(&mut sink));
    let result = match result {
        Ok(mut turn) if S::TEXT_IS_STREAMED => {
            if !turn.message.text.is_empty() {
                return (
                    Err(ProviderError::Protocol(
                        "the stream says its text is streamed (`TEXT_IS_STREAMED`) but \
                         returned text of its own"
                            .to_owned(),
                    )),
                    events,
                );
            }
            // What the host does with the events of `keep_streamed_text`.
            for e in &events {
                if let Event::TextDelta(text) = e {
                    turn.message.text.push_str(text);
                }
            }
            Ok(turn)
        }
        result => result,
    };
    (result, events)
}

/// About how many bytes `request` takes as a JSON request body: what its
/// strings hold plus a little per message, for reserving the body's buffer
/// once instead of growing (and copying) it step by step. Escapes can make
/// the body longer; the buffer then grows as usual.
pub fn json_size_hint(request: &ChatRequest) -> usize {
    /// Keys, quotes and punctuation around one message or call.
    const PER_ITEM: usize = 64;
    let messages: usize = request
        .messages
        .iter()
        .map(|m| {
            PER_ITEM
                + match m {
                    Message::System(text) | Message::User(text) => text.len(),
                    Message::Assistant(turn) => {
                        turn.text.len()
                            + turn
                                .tool_calls
                                .iter()
                                .map(|c| PER_ITEM + c.id.len() + c.name.len() + c.arguments.len())
                                .sum::<usize>()
                    }
                    Message::ToolResult(r) => r.call_id.len() + r.content.len(),
                }
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| PER_ITEM + t.name.len() + t.description.len() + t.input_schema.len())
        .sum();
    let total = messages + tools + 1024;
    // Room for some escaping (quotes and newlines in code).
    total.saturating_add(total / 16)
}

/// A tool's JSON Schema as a JSON value, for a provider's request body.
///
/// A body that only embeds the schema is built faster with
/// [`tool_schema_raw`], which does not build the value.
pub fn tool_schema(tool: &ToolSpec) -> Result<serde_json::Value, ProviderError> {
    serde_json::from_str(&tool.input_schema).map_err(|e| schema_error(tool, &e))
}

/// A tool's JSON Schema checked to be JSON and kept as the host wrote it,
/// for a request body that embeds it as it is: serialising it copies its
/// text, without building and writing out a [`serde_json::Value`] of it
/// on every request.
pub fn tool_schema_raw(tool: &ToolSpec) -> Result<&serde_json::value::RawValue, ProviderError> {
    serde_json::from_str(&tool.input_schema).map_err(|e| schema_error(tool, &e))
}

fn schema_error(tool: &ToolSpec, e: &serde_json::Error) -> ProviderError {
    ProviderError::Protocol(format!(
        "tool `{}` has an input schema that is not JSON: {e}",
        tool.name
    ))
}

/// Reads a `text/event-stream` body, handing each event to `on_event` until
/// it returns `Break` or the body ends.
///
/// Returning normally at the end of the body says nothing about whether the
/// message was complete: the caller's protocol knows its final event and
/// reports a stream that ended without it as [`ProviderError::Network`].
/// A stall or a broken connection is a [`ProviderError::Network`] here; an
/// answer that is not an event stream at all (an error object sent with
/// status 200, say) is a [`ProviderError::Protocol`].
pub fn read_sse(
    response: &mut Response,
    mut on_event: impl FnMut(sse::Event) -> Result<ControlFlow<()>, ProviderError>,
) -> Result<(), ProviderError> {
    read_sse_ref(response, |event| on_event(event.to_owned()), || {})
}

/// [`read_sse`] with borrowed events, and `after_chunk` called once the
/// events of each piece of the body are handled (before the next read may
/// wait): where a sink that batches events sends them.
pub fn read_sse_ref(
    response: &mut Response,
    on_event: impl FnMut(&sse::EventRef<'_>) -> Result<ControlFlow<()>, ProviderError>,
    after_chunk: impl FnMut(),
) -> Result<(), ProviderError> {
    let content_type = response.header("content-type").unwrap_or("");
    if content_type.contains("json") || content_type.contains("html") {
        let content_type = content_type.to_owned();
        let body = response.read_to_end(64 * 1024).unwrap_or_default();
        return Err(ProviderError::Protocol(format!(
            "expected an event stream, got `{content_type}`: {}",
            error_message(&String::from_utf8_lossy(&body))
        )));
    }
    drive_sse(|| Ok(response.chunk()?), on_event, after_chunk)
}

/// [`read_sse`] over chunks already in memory: feed it a recorded
/// transcript, split wherever a test likes, to check a plugin's stream
/// handling natively exactly as it runs on a live response.
pub fn replay_sse<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    mut on_event: impl FnMut(sse::Event) -> Result<ControlFlow<()>, ProviderError>,
) -> Result<(), ProviderError> {
    let mut chunks = chunks.into_iter();
    drive_sse(
        || Ok(chunks.next().map(<[u8]>::to_vec)),
        |event| on_event(event.to_owned()),
        || {},
    )
}

fn drive_sse(
    mut next_chunk: impl FnMut() -> Result<Option<Vec<u8>>, ProviderError>,
    mut on_event: impl FnMut(&sse::EventRef<'_>) -> Result<ControlFlow<()>, ProviderError>,
    mut after_chunk: impl FnMut(),
) -> Result<(), ProviderError> {
    let mut parser = sse::Parser::new();
    while let Some(chunk) = next_chunk()? {
        // Events after a `Break` or an error in the same chunk are not
        // looked at, as if the stream had ended there.
        let mut flow = Ok(ControlFlow::Continue(()));
        parser.feed_ref(&chunk, &mut |event| {
            if matches!(flow, Ok(ControlFlow::Continue(()))) {
                flow = on_event(&event);
            }
        });
        after_chunk();
        if flow?.is_break() {
            return Ok(());
        }
    }
    Ok(())
}

/// The HTTP deadlines from the plugin's config: `response_timeout_ms` (until
/// the response headers arrive) and `stall_timeout_ms` (longest silence in a
/// streaming body); each defaults to [`Timeouts::default`].
pub fn timeouts_from_config() -> Timeouts {
    let ms = |key: &str| {
        crate::config(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_millis)
    };
    let default = Timeouts::default();
    Timeouts {
        response: ms("response_timeout_ms").unwrap_or(default.response),
        stall: ms("stall_timeout_ms").unwrap_or(default.stall),
    }
}

/// Checks the JSON arguments of a finished tool call and returns the text to
/// put in [`ToolCall::arguments`]: empty (or `null`) becomes `{}`, anything
/// else must be a complete JSON object.
pub fn tool_arguments(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if raw.is_empty() || raw == "null" {
        return Ok("{}".to_owned());
    }
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(serde_json::Value::Object(_)) => Ok(raw.to_owned()),
        Ok(other) => Err(format!("the arguments are JSON but not an object: {other}")),
        Err(err) => Err(format!(
            "the arguments are not complete JSON ({err}): {raw}"
        )),
    }
}

/// `value` as the JSON number a person would write: `0.7f32` becomes `0.7`,
/// not the `0.699999988079071` of a plain widening to `f64`. Use it for
/// [`ChatRequest::temperature`].
pub fn f32_to_json(value: f32) -> f64 {
    // The shortest decimal that round-trips the f32, read back as f64.
    value.to_string().parse().unwrap_or(f64::from(value))
}

#[doc(hidden)]
pub mod __private {
    pub use super::__bindings::exports::corral::plugin::provider::Guest;
}

/// Exports a [`Provider`] type as this component's provider. Call it once, at
/// the crate root of a `cdylib` built for `wasm32-wasip2`.
///
/// ```text
/// corral_sdk::provider!(OpenAi);
/// ```
#[macro_export]
macro_rules! provider {
    ($provider:ty) => {
        #[doc(hidden)]
        #[allow(dead_code, reason = "only exported when built for wasm")]
        struct __CorralProvider;

        impl $crate::provider::__private::Guest for __CorralProvider {
            fn models() -> ::std::result::Result<
                ::std::vec::Vec<$crate::provider::ModelInfo>,
                $crate::provider::ProviderError,
            > {
                <$provider as $crate::provider::Provider>::models()
            }
            fn complete(
                request: $crate::provider::ChatRequest,
            ) -> ::std::result::Result<$crate::provider::ChatResponse, $crate::provider::ProviderError>
            {
                <$provider as $crate::provider::Provider>::complete(request)
            }
        }

        // Only a component exports the provider interface; a native build
        // (unit tests) must not define the export symbols.
        #[cfg(target_family = "wasm")]
        $crate::provider::__bindings::__export_provider_plugin!(
            __CorralProvider with_types_in $crate::provider::__bindings
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const URL: &str = "https://api.example.com/v1/chat";

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn auth_failures_are_not_retried() {
        let body =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        for status in [401, 403] {
            let Verdict::Fail(ProviderError::Auth(message)) = judge_status(URL, status, &[], body)
            else {
                panic!("{status} should be an auth failure");
            };
            assert!(message.contains("Incorrect API key provided"), "{message}");
            assert!(message.contains(&status.to_string()), "{message}");
        }
    }

    #[test]
    fn context_length_is_recognised_from_each_provider() {
        let bodies = [
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
        ];
        for body in bodies {
            assert_eq!(
                judge_status(URL, 400, &[], body),
                Verdict::Fail(ProviderError::ContextLength(format!(
                    "HTTP 400 from {URL}: {}",
                    error_message(body)
                ))),
            );
        }
        // Any other 400 is the plugin's fault, not the conversation's length.
        let other = r#"{"error":{"message":"Invalid value for 'tool_choice'"}}"#;
        assert!(matches!(
            judge_status(URL, 400, &[], other),
            Verdict::Fail(ProviderError::Protocol(_))
        ));
    }

    #[test]
    fn rate_limits_carry_the_requested_wait() {
        let verdict = judge_status(
            URL,
            429,
            &headers(&[("Retry-After", "7"), ("x-other", "1")]),
            r#"{"error":{"message":"Rate limit reached"}}"#,
        );
        assert_eq!(
            verdict,
            Verdict::Retry {
                error: ProviderError::RateLimit(RateLimited {
                    message: format!("HTTP 429 from {URL}: Rate limit reached"),
                    retry_after_ms: Some(7000),
                }),
                wait: Some(Duration::from_secs(7)),
            }
        );
    }

    #[test]
    fn retry_after_ms_wins_over_retry_after() {
        let h = headers(&[("retry-after", "20"), ("retry-after-ms", "1500.5")]);
        assert_eq!(retry_after(&h), Some(Duration::from_micros(1_500_500)));
        assert_eq!(
            retry_after(&headers(&[("retry-after", "0.25")])),
            Some(Duration::from_millis(250))
        );
        // The HTTP-date form, and garbage, fall back to our own backoff.
        let date = headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]);
        assert_eq!(retry_after(&date), None);
        assert_eq!(retry_after(&headers(&[("retry-after-ms", "-5")])), None);
    }

    #[test]
    fn server_errors_are_retried() {
        for status in [500, 502, 503, 529] {
            let Verdict::Retry {
                error: ProviderError::Server(message),
                wait: None,
            } = judge_status(URL, status, &[], "<html>Bad gateway</html>")
            else {
                panic!("{status} should be a retried server error");
            };
            assert!(message.contains("Bad gateway"), "{message}");
        }
    }

    #[test]
    fn backoff_doubles_and_honours_the_server() {
        let retry = Retry::default();
        let delays: Vec<_> = (0..4)
            .map(|a| retry_delay(a, None, &retry).unwrap())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8].map(Duration::from_secs).to_vec());
        assert_eq!(
            retry_delay(0, Some(Duration::from_millis(300)), &retry),
            Some(Duration::from_millis(300))
        );
        assert_eq!(
            retry_delay(0, Some(Duration::from_secs(3600)), &retry),
            None
        );
        assert_eq!(retry_delay(40, None, &retry), Some(retry.max_delay));
    }

    #[test]
    fn error_messages_are_extracted() {
        assert_eq!(error_message(r#"{"error":{"message":"boom"}}"#), "boom");
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#),
            "model 'x' not found"
        );
        assert_eq!(error_message("  plain text \n"), "plain text");
        assert_eq!(error_message(""), "(empty body)");
        let long = "é".repeat(600);
        assert_eq!(error_message(&long).chars().count(), 501);
    }

    #[test]
    fn f32_keeps_its_decimal_form() {
        assert_eq!(serde_json::json!(f32_to_json(0.7)).to_string(), "0.7");
        assert_eq!(serde_json::json!(f32_to_json(1.0)).to_string(), "1.0");
    }

    #[test]
    fn coalesce_merges_runs_of_deltas_in_order_and_within_the_cap() {
        let mut out = Vec::new();
        let mut sink = Coalesce::new(|e| out.push(e));
        let delta = |index, id: Option<&str>, args: &str| {
            Event::ToolCallDelta(ToolCallDelta {
                index,
                id: id.map(Into::into),
                name: id.map(|_| "read".into()),
                arguments_delta: args.into(),
            })
        };
        sink.push(Event::MessageStarted);
        sink.push(Event::TextDelta("a".into()));
        sink.push(Event::TextDelta("é".into()));
        sink.push(delta(0, Some("c1"), ""));
        sink.push(delta(0, None, "{\"p"));
        sink.push(delta(0, None, "\":1}"));
        sink.push(delta(1, Some("c2"), "{}"));
        sink.push(Event::TextDelta("x".repeat(COALESCE_BYTES - 1)));
        sink.push(Event::TextDelta("yz".into()));
        sink.flush();
        sink.push(Event::TextDelta("after".into()));
        sink.flush();
        sink.flush();
        assert_eq!(
            out,
            vec![
                Event::MessageStarted,
                Event::TextDelta("aé".into()),
                Event::ToolCallDelta(ToolCallDelta {
                    index: 0,
                    id: Some("c1".into()),
                    name: Some("read".into()),
                    arguments_delta: "{\"p\":1}".into(),
                }),
                delta(1, Some("c2"), "{}"),
                Event::TextDelta("x".repeat(COALESCE_BYTES - 1)),
                Event::TextDelta("yz".into()),
                Event::TextDelta("after".into()),
            ]
        );
    }

    #[test]
    fn tool_arguments_are_checked() {
        assert_eq!(tool_arguments("").unwrap(), "{}");
        assert_eq!(tool_arguments(" null ").unwrap(), "{}");
        assert_eq!(
            tool_arguments(r#"{"path":"a"}"#).unwrap(),
            r#"{"path":"a"}"#
        );
        assert!(tool_arguments(r#"{"path":"#).is_err());
        assert!(tool_arguments("[1]").is_err());
    }
}
