//! From a corral [`ChatRequest`] to a Chat Completions request body.

use corral_sdk::provider::{self, ChatRequest, Message, ProviderError, ToolCall, ToolResult};
use serde::ser::{Serialize, SerializeMap, Serializer};

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

/// The JSON body of a streaming `POST /chat/completions`, as bytes.
///
/// Serialised straight from the borrowed conversation: no
/// [`serde_json::Value`] tree and no second string of it, so a
/// conversation of tens of megabytes takes about its own size again in the
/// plugin's memory, once.
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
    let tools = request
        .tools
        .iter()
        .map(|tool| {
            Ok(WireTool {
                kind: "function",
                function: WireToolFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: provider::tool_schema_raw(tool)?,
                },
            })
        })
        .collect::<Result<Vec<_>, ProviderError>>()?;
    let body = Body {
        model,
        messages: &request.messages,
        tools: &tools,
        max_tokens: request
            .max_tokens
            .map(|max| (settings.max_tokens_param.as_str(), max)),
        temperature: request.temperature.map(provider::f32_to_json),
    };
    let mut out = Vec::with_capacity(provider::json_size_hint(request));
    serde_json::to_writer(&mut out, &body).map_err(|e| {
        ProviderError::Protocol(format!("the request could not be serialised: {e}"))
    })?;
    Ok(out)
}

/// The request body, borrowing everything it writes.
struct Body<'a> {
    model: &'a str,
    messages: &'a [Message],
    tools: &'a [WireTool<'a>],
    /// The configured field name and the limit.
    max_tokens: Option<(&'a str, u32)>,
    temperature: Option<f64>,
}

impl Serialize for Body<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("model", self.model)?;
        map.serialize_entry("messages", &Messages(self.messages))?;
        map.serialize_entry("stream", &true)?;
        map.serialize_entry(
            "stream_options",
            &StreamOptions {
                include_usage: true,
            },
        )?;
        if !self.tools.is_empty() {
            map.serialize_entry("tools", self.tools)?;
        }
        if let Some((field, max)) = self.max_tokens {
            map.serialize_entry(field, &max)?;
        }
        if let Some(temperature) = self.temperature {
            map.serialize_entry("temperature", &temperature)?;
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// A tool in the API's shape, its schema copied as the host wrote it.
#[derive(serde::Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(serde::Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::value::RawValue,
}

struct Messages<'a>(&'a [Message]);

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Wire))
    }
}

/// One message in the API's shape.
struct Wire<'a>(&'a Message);

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            Message::System(text) => {
                map.serialize_entry("role", "system")?;
                map.serialize_entry("content", text)?;
            }
            Message::User(text) => {
                map.serialize_entry("role", "user")?;
                map.serialize_entry("content", text)?;
            }
            Message::Assistant(turn) => {
                map.serialize_entry("role", "assistant")?;
                if turn.tool_calls.is_empty() {
                    map.serialize_entry("content", &turn.text)?;
                } else {
                    // Some compatible servers reject `""` next to tool calls.
                    let text = Some(&turn.text).filter(|t| !t.is_empty());
                    map.serialize_entry("content", &text)?;
                    map.serialize_entry("tool_calls", &Calls(&turn.tool_calls))?;
                }
            }
            Message::ToolResult(result) => {
                map.serialize_entry("role", "tool")?;
                map.serialize_entry("tool_call_id", &result.call_id)?;
                // The API has no error flag on tool results; the model reads
                // it from the text.
                map.serialize_entry("content", &ResultText(result))?;
            }
        }
        map.end()
    }
}

struct Calls<'a>(&'a [ToolCall]);

impl Serialize for Calls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|call| WireCall {
            id: &call.id,
            kind: "function",
            function: WireFunction {
                name: &call.name,
                arguments: &call.arguments,
            },
        }))
    }
}

#[derive(serde::Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(serde::Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// A tool result's text, marked when it is an error, written without a
/// copy of it.
struct ResultText<'a>(&'a ToolResult);

impl Serialize for ResultText<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.is_error {
            serializer.collect_str(&format_args!("Error: {}", self.0.content))
        } else {
            serializer.serialize_str(&self.0.content)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sdk::provider::{AssistantMessage, Effect, ToolCall, ToolResult, ToolSpec};
    use corral_sdk::testing;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        Settings::from_lookup(testing::config(pairs))
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
        let body = testing::json_body(request_body(
            &conversation(),
            &settings(&[("model", "gpt-4.1")]),
        ));
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
        let body = testing::json_body(request_body(&request, &settings(&[("model", "gpt-4.1")])));
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
