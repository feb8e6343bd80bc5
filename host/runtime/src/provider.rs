//! Provider plugins (`corral:plugin/provider`): the conversions between the
//! chat types of [`crate::protocol`] and the WIT types, and the call that
//! asks a provider for the next assistant turn, forwarding its stream events
//! while it runs.

use super::bindings::{chat as wit, stream, types as wit_types};
use super::plugin::{Offered, Plugin};
use super::sandbox::{Extras, PluginKind, ProviderPre};
use crate::protocol::{
    AssistantMessage, ChatRequest, ChatResponse, Effect, FinishReason, Message, ModelInfo,
    ProviderError, StreamEvent, ToolCall, ToolSpec, Usage,
};
use std::sync::Arc;

impl From<wit_types::ToolCall> for ToolCall {
    fn from(c: wit_types::ToolCall) -> Self {
        Self {
            id: c.id,
            name: c.name,
            arguments: c.arguments,
            model_id: None,
        }
    }
}

impl From<&ToolCall> for wit_types::ToolCall {
    fn from(c: &ToolCall) -> Self {
        Self {
            id: c.wire_id().to_owned(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        }
    }
}

impl From<wit::Usage> for Usage {
    fn from(u: wit::Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
        }
    }
}

impl From<stream::Event> for StreamEvent {
    fn from(e: stream::Event) -> Self {
        use stream::Event as E;
        match e {
            E::MessageStarted => StreamEvent::MessageStarted,
            E::TextDelta(text) => StreamEvent::TextDelta { text },
            E::ToolCallDelta(d) => StreamEvent::ToolCallDelta {
                index: d.index,
                id: d.id,
                name: d.name,
                arguments_delta: d.arguments_delta,
            },
            E::ToolCallCompleted(c) => StreamEvent::ToolCallCompleted { call: c.into() },
            E::Usage(u) => StreamEvent::Usage { usage: u.into() },
        }
    }
}

fn to_wit_spec(t: &ToolSpec) -> wit_types::ToolSpec {
    wit_types::ToolSpec {
        name: t.name.clone(),
        description: t.description.clone(),
        input_schema: t.input_schema.to_string(),
        effects: t
            .effects
            .iter()
            .map(|e| match e {
                Effect::Read => wit_types::Effect::Read,
                Effect::Write => wit_types::Effect::Write,
                Effect::Execute => wit_types::Effect::Execute,
                Effect::Network => wit_types::Effect::Network,
            })
            .collect(),
    }
}

/// The ids the provider gets back, by corral's id: the model's own where the
/// call kept it ([`ToolCall::wire_id`]), so each tool result answers the id
/// its assistant call carries on the wire.
fn wire_ids(messages: &[Message]) -> std::collections::HashMap<&str, &str> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.tool_calls.iter()),
            _ => None,
        })
        .flatten()
        .map(|c| (c.id.as_str(), c.wire_id()))
        .collect()
}

fn to_wit_message(m: &Message, wire: &std::collections::HashMap<&str, &str>) -> wit::Message {
    match m {
        Message::System { text } => wit::Message::System(text.clone()),
        Message::User { text } => wit::Message::User(text.clone()),
        Message::Assistant(a) => wit::Message::Assistant(wit::AssistantMessage {
            text: a.text.to_string(),
            tool_calls: a
                .tool_calls
                .iter()
                .map(|call| {
                    let mut call = wit_types::ToolCall::from(call);
                    // A call the model left malformed was answered with a
                    // tool error; its text cannot go back as it is, since
                    // APIs and local servers parse it (Anthropic's `input`
                    // is an object, vLLM renders it through its template).
                    if !is_json_object(&call.arguments) {
                        call.arguments = "{}".to_owned();
                    }
                    call
                })
                .collect(),
        }),
        Message::ToolResult(r) => wit::Message::ToolResult(wit::ToolResult {
            call_id: wire
                .get(r.call_id.as_str())
                .map_or_else(|| r.call_id.clone(), |w| (*w).to_owned()),
            content: r.content.clone(),
            is_error: r.is_error,
        }),
    }
}

/// Whether `text` is a JSON object, as tool-call arguments must be. Checked
/// without building it: a resumed session asks this of every call it holds.
fn is_json_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

fn from_wit_error(e: wit::ProviderError) -> ProviderError {
    use wit::ProviderError as E;
    match e {
        E::Auth(message) => ProviderError::Auth { message },
        E::RateLimit(r) => ProviderError::RateLimit {
            message: r.message,
            retry_after_ms: r.retry_after_ms,
        },
        E::ContextLength(message) => ProviderError::ContextLength { message },
        E::Server(message) => ProviderError::Server { message },
        E::Network(message) => ProviderError::Network { message },
        E::Protocol(message) => ProviderError::Protocol { message },
    }
}

/// `e` with its message cut to the output limit.
fn capped(mut e: ProviderError, cap: u64) -> ProviderError {
    let message = match &mut e {
        ProviderError::Auth { message }
        | ProviderError::RateLimit { message, .. }
        | ProviderError::ContextLength { message }
        | ProviderError::Server { message }
        | ProviderError::Network { message }
        | ProviderError::Protocol { message }
        | ProviderError::Plugin { message } => message,
    };
    *message = super::budget::cap_text(std::mem::take(message), cap, "error text");
    e
}

impl Plugin {
    /// Asks this provider plugin for the next assistant turn. Stream events go
    /// to `events` while the call runs. Tool-call arguments in the response
    /// are as the model sent them, which may not be a JSON object.
    pub async fn complete(
        &self,
        request: &ChatRequest,
        events: tokio::sync::mpsc::Sender<StreamEvent>,
    ) -> Result<ChatResponse, ProviderError> {
        let pre = self.provider_pre().await?;
        let req = wit::ChatRequest {
            model: request.model.clone(),
            messages: {
                let wire = wire_ids(&request.messages);
                request
                    .messages
                    .iter()
                    .map(|m| to_wit_message(m, &wire))
                    .collect()
            },
            tools: self.wit_tools(&request.tools),
            max_tokens: request.max_tokens,
            temperature: request.temperature,
        };
        let result = self
            .sandbox()
            .call(
                pre,
                super::effects::CallCaps::Provider,
                Extras {
                    events: Some(events),
                    ..Extras::default()
                },
                move |instance, store| {
                    Box::pin(async move {
                        let result = instance
                            .corral_plugin_provider()
                            .call_complete(&mut *store, &req)
                            .await?;
                        Ok((result, store.data_mut().kept_answer()))
                    })
                },
            )
            .await
            .map_err(|e| ProviderError::Plugin {
                message: e.to_string(),
            })?;
        let (result, streamed) = result;
        let cap = self.decl.limits.output_kb.saturating_mul(1024);
        let mut resp = result.map_err(|e| capped(from_wit_error(e), cap))?;
        if let Some(text) = streamed {
            // `answer.keep-streamed-text`: the text is the deltas, and only them.
            if !resp.message.text.is_empty() {
                return Err(ProviderError::Plugin {
                    message: format!(
                        "plugin `{}` said its answer is the text it streamed \
                         (`answer.keep-streamed-text`) but returned text of its own: \
                         a plugin bug; report it to its author",
                        self.decl.name
                    ),
                });
            }
            resp.message.text = text;
        }
        // Arguments that are not a JSON object are the model's mistake, not
        // the plugin's: the agent answers such a call with a tool error.
        let calls: Vec<ToolCall> = resp
            .message
            .tool_calls
            .into_iter()
            .map(Into::into)
            .collect();
        Ok(ChatResponse {
            message: AssistantMessage {
                text: resp.message.text.into(),
                tool_calls: calls,
            },
            finish_reason: match resp.finish_reason {
                wit::FinishReason::Stop => FinishReason::Stop,
                wit::FinishReason::ToolCalls => FinishReason::ToolCalls,
                wit::FinishReason::Length => FinishReason::Length,
                wit::FinishReason::ContentFilter => FinishReason::ContentFilter,
                wit::FinishReason::Other => FinishReason::Other,
            },
            usage: resp.usage.map(Into::into),
        })
    }

    /// `tools` in the plugin's types. Converted once per list: the
    /// requests of a turn offer the same one (the same `Arc`), and each
    /// schema is written out as a string in the conversion.
    fn wit_tools(&self, tools: &Arc<[ToolSpec]>) -> Vec<wit_types::ToolSpec> {
        let mut last = self
            .offered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*last {
            Some(o) if Arc::ptr_eq(&o.list, tools) => o.wit.clone(),
            _ => {
                let wit: Vec<_> = tools.iter().map(to_wit_spec).collect();
                *last = Some(Offered {
                    list: tools.clone(),
                    wit: wit.clone(),
                });
                wit
            }
        }
    }

    /// The plugin's provider export, compiled; an error when it has none.
    async fn provider_pre(&self) -> Result<&ProviderPre, ProviderError> {
        let kind = self
            .kind()
            .await
            .map_err(|e| ProviderError::Plugin { message: e.0 })?;
        let PluginKind::Provider(pre) = kind else {
            return Err(ProviderError::Plugin {
                message: format!("plugin `{}` is not a provider", self.decl.name),
            });
        };
        Ok(pre)
    }

    /// The models this provider knows, with their limits.
    pub async fn models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let pre = self.provider_pre().await?;
        let result = self
            .sandbox()
            .call(
                pre,
                super::effects::CallCaps::Provider,
                Extras::default(),
                move |instance, store| {
                    Box::pin(
                        async move { instance.corral_plugin_provider().call_models(store).await },
                    )
                },
            )
            .await
            .map_err(|e| ProviderError::Plugin {
                message: e.to_string(),
            })?;
        let cap = self.decl.limits.output_kb.saturating_mul(1024);
        let models = result.map_err(|e| capped(from_wit_error(e), cap))?;
        Ok(models
            .into_iter()
            .map(|m| ModelInfo {
                id: m.id,
                context_window: m.context_window,
                max_output_tokens: m.max_output_tokens,
                accepts_images: m.accepts_images,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::is_json_object;

    #[test]
    fn json_objects_are_told_from_other_text() {
        assert!(is_json_object(r#" {"a": [1, {"b": null}]}"#));
        assert!(is_json_object("{}"));
        for other in ["", "[]", "\"{}\"", "{\"a\":", "{} x", "null", "{\"a\" 1}"] {
            assert!(!is_json_object(other), "{other}");
        }
    }
}
