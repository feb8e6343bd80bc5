//! The `replay` provider: plays back a cassette, the exact provider responses
//! (stream events and final answers) recorded by `corral run --record FILE`,
//! for offline demos and deterministic tests. The tools the recorded model
//! calls still run for real, in their sandboxes.
//!
//! Config: `cassette` (a workspace-relative path, read through the plugin's
//! `grants.fs`; default: the demo cassette built into the plugin) and
//! `delay_ms` (pause between streamed events, default 0).
//!
//! Each instance is fresh, so the position in the cassette comes from the
//! request: the n-th request of a conversation (counted by the assistant
//! messages already in it) gets the n-th recorded response. Turns marked
//! `summary` answer only summary requests (compaction). Once a conversation
//! is compacted, counting no longer works: the position is then found after
//! the last recorded turn whose tool-call id the request still holds (in an
//! assistant message, or in the text of a summary request), so cassettes of
//! compacted sessions need call ids that are unique, as providers make them.
//! A cassette may hold a script per agent (subagents started by `task`),
//! picked by the conversation's first user message.

use corral_sdk::cassette::{
    Call as RecordedCall, Cassette, Event as RecordedEvent, SUMMARY_MESSAGE_MARK,
    SUMMARY_REQUEST_MARK, Turn, Usage as RecordedUsage,
};
use corral_sdk::provider::{
    AssistantMessage, ChatRequest, ChatResponse, Event, FinishReason, Message, ModelInfo, Provider,
    ProviderError, ToolCall, ToolCallDelta, Usage, emit,
};

/// The cassette shown by the README's offline demo.
const DEMO: &str = include_str!("../demo.json");

fn call(c: &RecordedCall) -> ToolCall {
    ToolCall {
        id: c.id.clone(),
        name: c.name.clone(),
        arguments: c.arguments.clone(),
    }
}

fn usage(u: RecordedUsage) -> Usage {
    Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    }
}

fn load() -> Result<Cassette, ProviderError> {
    let text = match corral_sdk::config("cassette") {
        Some(path) => std::fs::read_to_string(&path).map_err(|e| {
            // Outside every granted directory, WASI says "not found": the
            // likelier cause is the grant, so it is named first.
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    "it does not exist in the replay plugin's granted directories".to_owned()
                }
                std::io::ErrorKind::PermissionDenied => {
                    "the replay plugin may not read it".to_owned()
                }
                std::io::ErrorKind::InvalidData => "it is not UTF-8 text".to_owned(),
                _ => {
                    let text = e.to_string();
                    text.split(" (os error").next().unwrap_or(&text).to_owned()
                }
            };
            ProviderError::Protocol(format!(
                "cannot read the cassette `{path}`: {why}; put it inside the workspace (the \
                 plugin's grants.fs) and name it by a path relative to the workspace root"
            ))
        })?,
        None => DEMO.to_owned(),
    };
    let cassette = Cassette::parse(&text).map_err(ProviderError::Protocol)?;
    Ok(cassette)
}

fn pause(ms: u64) {
    if ms > 0 {
        #[cfg(target_family = "wasm")]
        wasip2::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
    }
}

/// Whether `text` holds `id` as a whole word: `call_1` is not in `call_10`.
fn holds_id(text: &str, id: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    !id.is_empty()
        && text.match_indices(id).any(|(at, _)| {
            !text[..at].chars().next_back().is_some_and(word)
                && !text[at + id.len()..].chars().next().is_some_and(word)
        })
}

/// Where `request` is in the recorded conversation: the index of the turn
/// that answers it.
pub fn position(request: &ChatRequest, turns: &[Turn]) -> Result<usize, ProviderError> {
    let summary = matches!(request.messages.first(),
        Some(Message::System(text)) if text.starts_with(SUMMARY_REQUEST_MARK));
    let compacted = request
        .messages
        .iter()
        .any(|m| matches!(m, Message::User(text) if text.starts_with(SUMMARY_MESSAGE_MARK)));
    let kind = |t: &&Turn| t.summary == summary;
    if !summary && !compacted {
        let n = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant(_)))
            .count();
        return turns
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.summary)
            .nth(n)
            .map(|(i, _)| i)
            .ok_or_else(|| {
                ProviderError::Protocol(format!(
                    "the replay cassette has {} recorded responses and the conversation asks \
                     for response {}: a cassette plays back only what it recorded. To go on, \
                     continue with a live provider (`corral resume --last --provider openai -p \
                     ...`), or record a longer cassette (`corral run --record FILE`)",
                    turns.iter().filter(|t| !t.summary).count(),
                    n + 1
                ))
            });
    }
    // The ids of the calls the request still shows: as tool calls, or (in a
    // summary request's transcript) as text.
    let text: String = if summary {
        request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::User(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    } else {
        String::new()
    };
    let held = |c: &RecordedCall| {
        request.messages.iter().any(|m| match m {
            Message::Assistant(a) => a.tool_calls.iter().any(|t| t.id == c.id),
            _ => false,
        }) || (summary && holds_id(&text, &c.id))
    };
    let anchor = turns
        .iter()
        .rposition(|t| !t.summary && t.response.message.tool_calls.iter().any(held));
    let from = anchor.map_or(0, |a| a + 1);
    turns[from..]
        .iter()
        .position(|t| kind(&t))
        .map(|i| from + i)
        .ok_or_else(|| {
            ProviderError::Protocol(format!(
                "the replay cassette has no recorded {} after response {from}: a cassette plays \
                 back only what it recorded{}",
                if summary { "summary" } else { "response" },
                if summary {
                    ". Compact with a live provider, or add a turn with `\"summary\": true` to \
                     the cassette (its format is `corral_sdk::cassette`)"
                } else {
                    ". To go on, continue with a live provider (`corral resume --last --provider \
                     openai -p ...`)"
                }
            ))
        })
}

/// Plays back recorded responses.
pub struct Replay;

impl Provider for Replay {
    fn models() -> Result<Vec<ModelInfo>, ProviderError> {
        // A cassette has no limits of its own; `[agent.models."replay"]`
        // in the manifest gives it a window.
        Ok(vec![ModelInfo {
            id: "replay".to_owned(),
            context_window: None,
            max_output_tokens: None,
            accepts_images: false,
        }])
    }

    fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError> {
        let cassette = load()?;
        // A subagent's conversation has its own script, picked by its
        // first prompt.
        let first = request.messages.iter().find_map(|m| match m {
            Message::User(text) => Some(text.as_str()),
            _ => None,
        });
        let turns = cassette.turns_for(first);
        let turn = &turns[position(&request, turns)?];
        let delay = corral_sdk::config("delay_ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        for event in &turn.events {
            emit(match event {
                RecordedEvent::MessageStarted => Event::MessageStarted,
                RecordedEvent::TextDelta { text } => Event::TextDelta(text.clone()),
                RecordedEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments_delta,
                } => Event::ToolCallDelta(ToolCallDelta {
                    index: *index,
                    id: id.clone(),
                    name: name.clone(),
                    arguments_delta: arguments_delta.clone(),
                }),
                RecordedEvent::ToolCallCompleted { call: c } => Event::ToolCallCompleted(call(c)),
                RecordedEvent::Usage { usage: u } => Event::Usage(usage(*u)),
            });
            pause(delay);
        }
        let r = &turn.response;
        Ok(ChatResponse {
            message: AssistantMessage {
                text: r.message.text.clone(),
                tool_calls: r.message.tool_calls.iter().map(call).collect(),
            },
            finish_reason: match r.finish_reason.as_str() {
                "stop" => FinishReason::Stop,
                "tool_calls" => FinishReason::ToolCalls,
                "length" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                _ => FinishReason::Other,
            },
            usage: r.usage.map(usage),
        })
    }
}

corral_sdk::provider!(Replay);

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::cassette::{Message as RecordedMessage, Response};

    fn turn(id: Option<&str>, summary: bool) -> Turn {
        Turn {
            summary,
            events: Vec::new(),
            response: Response {
                message: RecordedMessage {
                    text: String::new(),
                    tool_calls: id
                        .map(|id| RecordedCall {
                            id: id.into(),
                            name: "t".into(),
                            arguments: "{}".into(),
                        })
                        .into_iter()
                        .collect(),
                },
                finish_reason: "tool_calls".into(),
                usage: None,
            },
        }
    }

    fn asked(id: &str) -> Message {
        Message::Assistant(AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: "{}".into(),
            }],
        })
    }

    fn request(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            model: String::new(),
            messages,
            tools: Vec::new(),
            max_tokens: None,
            temperature: None,
        }
    }

    #[test]
    fn summary_turns_answer_only_summary_requests() {
        let turns = [
            turn(Some("a"), false),
            turn(None, true),
            turn(Some("b"), false),
            turn(None, true),
            turn(Some("c"), false),
        ];
        // Counting, summary turns skipped.
        let r = request(vec![Message::User("go".into()), asked("a")]);
        assert_eq!(position(&r, &turns).unwrap(), 2);
        // A summary request whose transcript ends with call `b`.
        let s = request(vec![
            Message::System(format!("{SUMMARY_REQUEST_MARK} ...")),
            Message::User("[tool call a t]\n{}\n[tool call b t]\n{}\n".into()),
        ]);
        assert_eq!(position(&s, &turns).unwrap(), 3);
        // After compaction: found by the last call the request still holds.
        let c = request(vec![
            Message::User(format!("{SUMMARY_MESSAGE_MARK}\n\nsummary")),
            asked("b"),
        ]);
        assert_eq!(position(&c, &turns).unwrap(), 4);
        let over = request(vec![
            Message::User(format!("{SUMMARY_MESSAGE_MARK}\n\nsummary")),
            asked("c"),
        ]);
        assert!(position(&over, &turns).is_err());
    }
}
