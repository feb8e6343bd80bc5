//! From a corral [`ChatRequest`] to a Chat Completions request body.

use corral_sdk::provider::{self, ChatRequest, Message, ProviderError};
use serde_json::{Value, json};

/// The plugin's settings, read from its config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// API root without a trailing `/`.
    pub base_url: String,
    /// Model used when the request names none (may be empty).
    pub model: String,
    /// The body field that carries the token limit.
    pub max_tokens_param: String,
}

impl Settings {
    /// Reads the settings through `lookup` (the host's config in a
    /// component, a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let non_empty = |key: &str| lookup(key).filter(|v| !v.trim().is_empty());
        let base_url = non_empty("base_url")
            .unwrap_or_else(|| "https://api.openai.com/v1".to_owned())
            .trim()
            .trim_end_matches('/')
            .to_owned();
        // OpenAI's reasoning models refuse `max_tokens`, while several
        // compatible servers only know `max_tokens`.
        let max_tokens_param = non_empty("max_tokens_param").unwrap_or_else(|| {
            if base_url.contains("api.openai.com") {
                "max_completion_tokens".to_owned()
            } else {
                "max_tokens".to_owned()
            }
        });
        Self {
            base_url,
            model: non_empty("model").unwrap_or_default(),
            max_tokens_param,
        }
    }
}

/// The JSON body of a streaming `POST /chat/completions`.
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
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                let parameters = provider::tool_schema(tool)?;
                Ok(json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": parameters,
                    },
                }))
            })
            .collect::<Result<Vec<_>, ProviderError>>()?;
        body["tools"] = Value::Array(tools);
    }
    if let Some(max) = request.max_tokens {
        body[settings.max_tokens_param.as_str()] = json!(max);
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(corral_sdk::provider::f32_to_json(temperature));
    }
    Ok(body)
}

fn message(message: &Message) -> Value {
    match message {
        Message::System(text) => json!({ "role": "system", "content": text }),
        Message::User(text) => json!({ "role": "user", "content": text }),
        Message::Assistant(turn) => {
            let mut out = json!({ "role": "assistant", "content": turn.text });
            if !turn.tool_calls.is_empty() {
                if turn.text.is_empty() {
                    // Some compatible servers reject `""` next to tool calls.
                    out["content"] = Value::Null;
                }
                out["tool_calls"] = turn
                    .tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": { "name": call.name, "arguments": call.arguments },
                        })
                    })
                    .collect();
            }
            out
        }
        Message::ToolResult(result) => {
            // The API has no error flag on tool results; the model reads it
            // from the text.
            let content = if result.is_error {
                format!("Error: {}", result.content)
            } else {
                result.content.clone()
            };
            json!({ "role": "tool", "tool_call_id": result.call_id, "content": content })
        }
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

    fn conversation() -> ChatRequest {
        ChatRequest {
            model: String::new(),
            messages: vec![
                Message::System("Be brief.".into()),
                Message::User("Read a.txt".into()),
                Message::Assistant(AssistantMessage {
                    text: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "read_file".into(),
                        arguments: r#"{"path":"a.txt"}"#.into(),
                    }],
                }),
                Message::ToolResult(ToolResult {
                    call_id: "call_1".into(),
                    content: "no such file".into(),
                    is_error: true,
                }),
                Message::Assistant(AssistantMessage {
                    text: "It does not exist.".into(),
                    tool_calls: vec![],
                }),
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads a file.".into(),
                input_schema: r#"{"type":"object","properties":{"path":{"type":"string"}}}"#.into(),
                effects: vec![Effect::Read],
            }],
            max_tokens: Some(512),
            temperature: Some(0.7),
        }
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(
            settings(&[]),
            Settings {
                base_url: "https://api.openai.com/v1".into(),
                model: String::new(),
                max_tokens_param: "max_completion_tokens".into(),
            }
        );
        assert_eq!(
            settings(&[
                ("base_url", "http://localhost:11434/v1/"),
                ("model", "qwen3")
            ]),
            Settings {
                base_url: "http://localhost:11434/v1".into(),
                model: "qwen3".into(),
                max_tokens_param: "max_tokens".into(),
            }
        );
    }

    #[test]
    fn full_conversation_maps_to_chat_completions() {
        let body = request_body(&conversation(), &settings(&[("model", "gpt-4.1")])).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "gpt-4.1",
                "stream": true,
                "stream_options": { "include_usage": true },
                "max_completion_tokens": 512,
                "temperature": 0.7,
                "messages": [
                    { "role": "system", "content": "Be brief." },
                    { "role": "user", "content": "Read a.txt" },
                    { "role": "assistant", "content": null, "tool_calls": [
                        { "id": "call_1", "type": "function",
                          "function": { "name": "read_file", "arguments": "{\"path\":\"a.txt\"}" } }
                    ] },
                    { "role": "tool", "tool_call_id": "call_1", "content": "Error: no such file" },
                    { "role": "assistant", "content": "It does not exist." },
                ],
                "tools": [
                    { "type": "function", "function": {
                        "name": "read_file",
                        "description": "Reads a file.",
                        "parameters": { "type": "object", "properties": { "path": { "type": "string" } } },
                    } }
                ],
            })
        );
    }

    #[test]
    fn request_model_wins_and_optional_fields_are_omitted() {
        let mut request = conversation();
        request.model = "llama3.2".into();
        request.tools.clear();
        request.max_tokens = None;
        request.temperature = None;
        let body = request_body(&request, &settings(&[("model", "gpt-4.1")])).unwrap();
        assert_eq!(body["model"], "llama3.2");
        for absent in [
            "tools",
            "max_tokens",
            "max_completion_tokens",
            "temperature",
        ] {
            assert!(body.get(absent).is_none(), "{absent} should be absent");
        }
    }

    #[test]
    fn missing_model_and_bad_schema_are_errors() {
        assert!(matches!(
            request_body(&conversation(), &settings(&[])),
            Err(ProviderError::Protocol(m)) if m.contains("model")
        ));
        let mut request = conversation();
        request.tools[0].input_schema = "{not json".into();
        assert!(matches!(
            request_body(&request, &settings(&[("model", "m")])),
            Err(ProviderError::Protocol(m)) if m.contains("read_file")
        ));
    }
}
