//! From a corral [`ChatRequest`] to a Messages API request body.

use corral_sdk::provider::{self, ChatRequest, Message, ProviderError, ToolCall, ToolResult};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

/// The `anthropic-version` header every request carries.
pub const API_VERSION: &str = "2023-06-01";

/// The plugin's settings, read from its config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// API root without a trailing `/`.
    pub base_url: String,
    /// Model used when the request names none (may be empty).
    pub model: String,
    /// `max_tokens` when the request sets none; the API requires a value.
    pub max_tokens: u32,
}

impl Settings {
    /// Reads the settings through `lookup` (the host's config in a
    /// component, a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());
        Self {
            base_url: non_empty("base_url")
                .unwrap_or_else(|| "https://api.anthropic.com/v1".to_owned())
                .trim()
                .trim_end_matches('/')
                .to_owned(),
            model: non_empty("model").unwrap_or_default(),
            max_tokens: non_empty("max_tokens")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(4096),
        }
    }
}

/// The JSON body of a streaming `POST /messages`, as bytes.
///
/// Serialised straight from the borrowed conversation (tool-call
/// arguments and schemas are checked to be JSON and copied as they are),
/// so a long conversation is not held again as a `serde_json::Value` tree
/// and then as a string.
pub fn request_body(request: &ChatRequest, settings: &Settings) -> Result<Vec<u8>, ProviderError> {
    let model = if request.model.is_empty() {
        &settings.model
    } else {
        &request.model
    };
    if model.is_empty() {
        return Err(ProviderError::Protocol(
            "no model given: the request names none and the plugin's config has no `model`"
                .to_owned(),
        ));
    }
    let mut system = Vec::new();
    let mut turns = Turns::default();
    for message in &request.messages {
        match message {
            // The API takes instructions only at the top level.
            Message::System(text) => system.push(text.as_str()),
            Message::User(text) => turns.push("user", text_block(text)),
            Message::ToolResult(result) => turns.push("user", Some(Block::ToolResult(result))),
            Message::Assistant(turn) => {
                turns.push("assistant", text_block(&turn.text));
                for call in &turn.tool_calls {
                    let input: &RawValue = serde_json::from_str(&call.arguments).map_err(|e| {
                        ProviderError::Protocol(format!(
                            "the arguments of earlier tool call `{}` ({}) are not JSON: {e}",
                            call.name, call.id
                        ))
                    })?;
                    turns.push("assistant", Some(Block::ToolUse(call, input)));
                }
            }
        }
    }
    let system: Vec<&str> = system.into_iter().filter(|s| !s.is_empty()).collect();
    let tools = request
        .tools
        .iter()
        .map(|tool| {
            Ok(WireTool {
                name: &tool.name,
                description: &tool.description,
                input_schema: provider::tool_schema_raw(tool)?,
            })
        })
        .collect::<Result<Vec<_>, ProviderError>>()?;
    let body = Body {
        model,
        max_tokens: request.max_tokens.unwrap_or(settings.max_tokens),
        turns: &turns.0,
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        tools: &tools,
        temperature: request.temperature.map(provider::f32_to_json),
    };
    let mut out = Vec::with_capacity(provider::json_size_hint(request));
    serde_json::to_writer(&mut out, &body).map_err(|e| {
        ProviderError::Protocol(format!("the request could not be serialised: {e}"))
    })?;
    Ok(out)
}

/// The request body, borrowing the conversation.
struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    turns: &'a [Turn<'a>],
    system: Option<String>,
    tools: &'a [WireTool<'a>],
    temperature: Option<f64>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("max_tokens", &self.max_tokens)?;
        map.serialize_entry("stream", &true)?;
        map.serialize_entry("messages", self.turns)?;
        if let Some(system) = &self.system {
            map.serialize_entry("system", system)?;
        }
        if !self.tools.is_empty() {
            map.serialize_entry("tools", self.tools)?;
        }
        if let Some(temperature) = self.temperature {
            map.serialize_entry("temperature", &temperature)?;
        }
        map.end()
    }
}

/// One content block of a message, borrowed from the conversation.
enum Block<'a> {
    Text(&'a str),
    ToolResult(&'a ToolResult),
    /// A call with its arguments checked to be JSON (the API wants an
    /// object; the host sends `{}` for a call the model left malformed),
    /// copied as they are.
    ToolUse(&'a ToolCall, &'a RawValue),
}

/// A tool in the API's shape, its schema copied as the host wrote it.
#[derive(serde::Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a RawValue,
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self {
            Block::Text(text) => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            Block::ToolResult(result) => {
                map.serialize_entry("type", "tool_result")?;
                map.serialize_entry("tool_use_id", &result.call_id)?;
                map.serialize_entry("content", &result.content)?;
                if result.is_error {
                    map.serialize_entry("is_error", &true)?;
                }
            }
            Block::ToolUse(call, input) => {
                map.serialize_entry("type", "tool_use")?;
                map.serialize_entry("id", &call.id)?;
                map.serialize_entry("name", &call.name)?;
                map.serialize_entry("input", input)?;
            }
        }
        map.end()
    }
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Option<Block<'_>> {
    (!text.is_empty()).then_some(Block::Text(text))
}

/// One message: a role and its blocks.
struct Turn<'a> {
    role: &'static str,
    blocks: Vec<Block<'a>>,
}

impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", self.role)?;
        map.serialize_entry("content", &self.blocks)?;
        map.end()
    }
}

/// Messages under construction: blocks of consecutive messages with the
/// same role go into one message, which keeps tool results that answer one
/// turn together and keeps the roles alternating as the API wants.
#[derive(Default)]
struct Turns<'a>(Vec<Turn<'a>>);

impl<'a> Turns<'a> {
    fn push(&mut self, role: &'static str, block: Option<Block<'a>>) {
        let Some(block) = block else { return };
        if let Some(last) = self.0.last_mut().filter(|m| m.role == role) {
            last.blocks.push(block);
            return;
        }
        self.0.push(Turn {
            role,
            blocks: vec![block],
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::provider::{AssistantMessage, Effect, ToolSpec};
    use corral_sdk::testing::{self, tool_call as call};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_lookup(testing::config(pairs))
    }

    fn result(id: &str, content: &str, is_error: bool) -> Message {
        Message::ToolResult(ToolResult {
            call_id: id.into(),
            content: content.into(),
            is_error,
        })
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(
            settings(&[]),
            Settings {
                base_url: "https://api.anthropic.com/v1".into(),
                model: String::new(),
                max_tokens: 4096,
            }
        );
        assert_eq!(
            settings(&[
                ("base_url", "http://127.0.0.1:9/v1/"),
                ("max_tokens", "8192")
            ])
            .max_tokens,
            8192
        );
    }

    #[test]
    fn full_conversation_maps_to_messages() {
        let request = ChatRequest {
            model: "claude-sonnet-4-5".into(),
            messages: vec![
                Message::System("Be brief.".into()),
                Message::System("Project rules: none.".into()),
                Message::User("Compare a.txt and b.txt".into()),
                Message::Assistant(AssistantMessage {
                    text: "Reading both.".into(),
                    tool_calls: vec![
                        call("toolu_1", "read_file", r#"{"path":"a.txt"}"#),
                        call("toolu_2", "read_file", r#"{"path":"b.txt"}"#),
                    ],
                }),
                result("toolu_1", "alpha", false),
                result("toolu_2", "no such file", true),
                Message::User("Also: be quick.".into()),
                Message::Assistant(AssistantMessage {
                    text: String::new(),
                    tool_calls: vec![call("toolu_3", "list_files", "{}")],
                }),
                result("toolu_3", "a.txt", false),
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads a file.".into(),
                input_schema: r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#.into(),
                effects: vec![Effect::Read],
            }],
            max_tokens: None,
            temperature: Some(0.2),
        };
        assert_eq!(
            testing::json_body(request_body(&request, &settings(&[]))),
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 4096,
                "stream": true,
                "temperature": 0.2,
                "system": "Be brief.\n\nProject rules: none.",
                "messages": [
                    { "role": "user", "content": [{ "type": "text", "text": "Compare a.txt and b.txt" }] },
                    { "role": "assistant", "content": [
                        { "type": "text", "text": "Reading both." },
                        { "type": "tool_use", "id": "toolu_1", "name": "read_file", "input": { "path": "a.txt" } },
                        { "type": "tool_use", "id": "toolu_2", "name": "read_file", "input": { "path": "b.txt" } },
                    ] },
                    { "role": "user", "content": [
                        { "type": "tool_result", "tool_use_id": "toolu_1", "content": "alpha" },
                        { "type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true },
                        { "type": "text", "text": "Also: be quick." },
                    ] },
                    { "role": "assistant", "content": [
                        { "type": "tool_use", "id": "toolu_3", "name": "list_files", "input": {} },
                    ] },
                    { "role": "user", "content": [
                        { "type": "tool_result", "tool_use_id": "toolu_3", "content": "a.txt" },
                    ] },
                ],
                "tools": [{
                    "name": "read_file",
                    "description": "Reads a file.",
                    "input_schema": { "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] },
                }],
            })
        );
    }

    #[test]
    fn request_limits_and_config_model() {
        let request = ChatRequest {
            model: String::new(),
            messages: vec![Message::User("hi".into())],
            tools: vec![],
            max_tokens: Some(100),
            temperature: None,
        };
        let body = testing::json_body(request_body(
            &request,
            &settings(&[("model", "claude-haiku-4-5")]),
        ));
        assert_eq!(body["model"], "claude-haiku-4-5");
        assert_eq!(body["max_tokens"], 100);
        for absent in ["system", "tools", "temperature"] {
            assert!(body.get(absent).is_none(), "{absent} should be absent");
        }
        assert!(matches!(
            request_body(&request, &settings(&[])),
            Err(ProviderError::Protocol(m)) if m.contains("model")
        ));
    }
}
