//! Test harness for provider plugins (cargo feature `testing`, meant for a
//! plugin's `[dev-dependencies]`): replays a recorded SSE transcript through
//! the SDK's own driver into a provider's [`TurnStream`], whole or cut into
//! pieces, so a test can check that how the network splits the body never
//! changes the turn. In a plugin's tests (the sketch names the plugin's own
//! `Stream` and a recorded `TRANSCRIPT`, so it is not compiled here; both
//! provider plugins' tests run it):
//!
//! ```text
//! use corral_sdk::testing;
//! testing::assert_split_invariant(TRANSCRIPT, Stream::new);
//! ```

use crate::provider::{
    AssistantMessage, ChatResponse, Event, FinishReason, ModelInfo, ProviderError, ToolCall,
    ToolCallDelta, TurnStream, Usage, replay_sse, replay_turn,
};
use crate::sse;

/// What a replayed turn gave: the response (or why there was none) and the
/// streaming events sent on the way.
pub type Run = (Result<ChatResponse, ProviderError>, Vec<Event>);

/// Replays `chunks`, in order, into the fresh stream `new` makes.
pub fn run<S: TurnStream>(chunks: &[&[u8]], new: impl FnOnce() -> S) -> Run {
    replay_turn(chunks.iter().copied(), new())
}

/// Replays `transcript` as one piece into the fresh stream `new` makes.
pub fn run_whole<S: TurnStream>(transcript: &str, new: impl FnOnce() -> S) -> Run {
    run(&[transcript.as_bytes()], new)
}

/// Every way to cut `transcript` in two, plus one byte at a time, must give
/// exactly the events and response of the uncut transcript; panics naming
/// the cut that differs.
pub fn assert_split_invariant<S: TurnStream>(transcript: &str, new: impl Fn() -> S) {
    let whole = run_whole(transcript, &new);
    let bytes = transcript.as_bytes();
    for at in 0..=bytes.len() {
        let (a, b) = bytes.split_at(at);
        assert_eq!(run(&[a, b], &new), whole, "split at byte {at}");
    }
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(run(&singles, &new), whole, "one byte at a time");
}

/// The same transcript with `\r\n` line endings must give exactly the same
/// run.
pub fn assert_crlf_invariant<S: TurnStream>(transcript: &str, new: impl Fn() -> S) {
    assert_eq!(
        run_whole(&transcript.replace('\n', "\r\n"), &new),
        run_whole(transcript, &new)
    );
}

/// The names of the tool calls `events` reported complete, in order.
pub fn completed_calls(events: &[Event]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallCompleted(call) => Some(call.name.as_str()),
            _ => None,
        })
        .collect()
}

/// The first event of `transcript` after which the fresh stream `new` makes
/// says it is complete; panics when it never does.
pub fn first_complete<S: TurnStream>(transcript: &str, new: impl FnOnce() -> S) -> sse::Event {
    let mut stream = new();
    let mut sink = |_| {};
    let mut first = None;
    replay_sse([transcript.as_bytes()], |event| {
        let flow = stream.on_event(&event.as_ref(), &mut sink);
        if first.is_none() && stream.is_complete() {
            first = Some(event);
        }
        flow
    })
    .unwrap_or_else(|e| panic!("the transcript did not replay: {e:?}"));
    first.unwrap_or_else(|| panic!("the stream never said it was complete"))
}

/// The kind of error a run ended in, as a short name (`auth`, `rate-limit`,
/// `context-length`, `server`, `network`, `protocol`); panics on a
/// response.
pub fn error_kind(result: &Result<ChatResponse, ProviderError>) -> &'static str {
    match result {
        Err(ProviderError::Auth(_)) => "auth",
        Err(ProviderError::RateLimit(_)) => "rate-limit",
        Err(ProviderError::ContextLength(_)) => "context-length",
        Err(ProviderError::Server(_)) => "server",
        Err(ProviderError::Network(_)) => "network",
        Err(ProviderError::Protocol(_)) => "protocol",
        Ok(response) => panic!("a response, not an error: {response:?}"),
    }
}

/// The ids of the models a model list gave; panics on an error.
pub fn model_ids(models: Result<Vec<ModelInfo>, ProviderError>) -> Vec<String> {
    models
        .unwrap_or_else(|e| panic!("no model list: {e:?}"))
        .into_iter()
        .map(|m| m.id)
        .collect()
}

/// A tool call, as a test expects one.
pub fn tool_call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

/// The streaming event for a fragment of the tool call at `index`.
pub fn call_delta(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> Event {
    Event::ToolCallDelta(ToolCallDelta {
        index,
        id: id.map(Into::into),
        name: name.map(Into::into),
        arguments_delta: arguments.into(),
    })
}

/// A turn's response, as a test expects one.
pub fn response(
    text: &str,
    tool_calls: Vec<ToolCall>,
    finish_reason: FinishReason,
    usage: Option<Usage>,
) -> ChatResponse {
    ChatResponse {
        message: AssistantMessage {
            text: text.into(),
            tool_calls,
        },
        finish_reason,
        usage,
    }
}

/// A plugin's settings lookup answering from `pairs`, as `corral_sdk::config`
/// answers from the manifest entry's `config` table.
pub fn config<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |key| {
        pairs
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (*v).to_owned())
    }
}

/// The JSON of a request body a plugin built; panics when there is none.
pub fn json_body(body: Result<Vec<u8>, ProviderError>) -> serde_json::Value {
    let body = body.unwrap_or_else(|e| panic!("no request body: {e:?}"));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("the body is not JSON: {e}"))
}
