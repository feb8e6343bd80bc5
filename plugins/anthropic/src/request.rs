//! From a corral [`ChatRequest`] to a Messages API request body.

use corral_sdk::provider::{self, ChatRequest, Message, ProviderError};
use serde_json::{Value, json};

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

/// The JSON body of a streaming `POST /messages`.
pub fn request_body(request: &ChatRequest, settings: &Settings) -> Result<Value, ProviderError> {
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
    let mut messages = Messages::default();
    for message in &request.messages {
        match message {
            // The API takes instructions only at the top level.
            Message::System(text) => system.push(text.as_str()),
            Message::User(text) => messages.push("user", text_block(text)),
            Message::ToolResult(result) => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": result.content,
                });
                if result.is_error {
                    block["is_error"] = Value::Bool(true);
                }
                messages.push("user", Some(block));
            }
            Message::Assistant(turn) => {
                messages.push("assistant", text_block(&turn.text));
                for call in &turn.tool_calls {
                    let input: Value = serde_json::from_str(&call.arguments).map_err(|e| {
                        ProviderError::Protocol(format!(
                            "the arguments of earlier tool call `{}` ({}) are not JSON: {e}",
                            call.name, call.id
                        ))
                    })?;
                    messages.push(
                        "assistant",
                        Some(json!({
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.name,
                            "input": input,
                        })),
                    );
                }
            }
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(settings.max_tokens),
        "stream": true,
        "messages": messages.0,
    });
    let system: Vec<&str> = system.into_iter().filter(|s| !s.is_empty()).collect();
    if !system.is_empty() {
        body["system"] = Value::String(system.join("\n\n"));
    }
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let schema = provider::tool_schema(tool)?;
                Ok(json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": schema,
                }))
            })
            .collect::<Result<Vec<_>, ProviderError>>()?;
        body["tools"] = Value::Array(tools);
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(provider::f32_to_json(temperature));
    }
    Ok(body)
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| json!({ "type": "text", "text": text }))
}

/// Messages under construction: blocks of consecutive messages with the
/// same role go into one message, which keeps tool results that answer one
/// turn together and keeps the roles alternating as the API wants.
#[derive(Default)]
struct Messages(Vec<Value>);

impl Messages {
    fn push(&mut self, role: &str, block: Option<Value>) {
        let Some(block) = block else { return };
        if let Some(last) = self.0.last_mut().filter(|m| m["role"] == role)
            && let Some(content) = last["content"].as_array_mut()
        {
            content.push(block);
            return;
        }
        self.0.push(json!({ "role": role, "content": [block] }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::provider::{AssistantMessage, Effect, ToolCall, ToolResult, ToolSpec};
    use pretty_assertions::assert_eq;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_lookup(|key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
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
            request_body(&request, &settings(&[])).unwrap(),
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
        let body = request_body(&request, &settings(&[("model", "claude-haiku-4-5")])).unwrap();
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
