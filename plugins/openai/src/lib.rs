//! corral's provider for the OpenAI Chat Completions API, compiled to a WASI
//! 0.2 component. The same wire format is spoken by Ollama, vLLM, llama.cpp,
//! LM Studio and OpenRouter, so one plugin serves them all: point `base_url`
//! at the server.
//!
//! ```toml
//! [plugins.openai]
//! source = "builtin:openai"
//! grants.net = ["https://api.openai.com:443"]
//! grants.secrets = [{ host = "api.openai.com", header = "authorization", value = "Bearer ${env:OPENAI_API_KEY}" }]
//! config = { base_url = "https://api.openai.com/v1", model = "gpt-4.1" }
//! ```
//!
//! Config keys (all optional):
//!
//! | key | meaning | default |
//! | --- | --- | --- |
//! | `base_url` | API root; `/chat/completions` and `/models` are appended | `https://api.openai.com/v1` |
//! | `model` | model used when the request names none | none (the request must name one) |
//! | `max_tokens_param` | body field for the token limit | `max_completion_tokens` for api.openai.com, else `max_tokens` |
//! | `response_timeout_ms` | wait for the response headers | 120000 |
//! | `stall_timeout_ms` | longest silence inside the stream | 120000 |
//! | `models_endpoint` | `true`: `models()` also asks the server's `GET /models`, whose entries (with a context length, as vLLM, llama.cpp, LM Studio and OpenRouter report it) win over the built-in table; the server's runtime context is read first (llama.cpp `n_ctx` before `meta.n_ctx_train`; Ollama's `POST /api/show` `num_ctx`, else its 4,096 default, for the configured `model`) | `false` (the table only: OpenAI's own list carries no limits) |
//!
//! The plugin never reads an API key: the host adds the `authorization`
//! header configured in `grants.secrets` when the request leaves.

mod fast;
mod request;
mod stream;

/// For `benches/chunks.rs` only: the stream read without the one-pass
/// reader, every chunk through serde. Not part of the plugin's interface.
#[doc(hidden)]
pub mod bench {
    use corral_sdk::provider::{Event, ProviderError};
    use corral_sdk::sse;
    use std::ops::ControlFlow;

    /// [`TurnStream::on_event`](corral_sdk::provider::TurnStream::on_event) with serde reading
    /// every chunk.
    pub fn on_event_serde_only(
        stream: &mut crate::Stream,
        event: &sse::EventRef<'_>,
        sink: &mut dyn FnMut(Event),
    ) -> Result<ControlFlow<()>, ProviderError> {
        stream.read_event(event, false, sink)
    }
}

pub use request::{Settings, request_body};
pub use stream::{Stream, parse_models};

use corral_sdk::http::Request;
use corral_sdk::provider::{self, ChatRequest, ChatResponse, ModelInfo, Provider, ProviderError};

/// Models whose limits are published: id, context window, output limit,
/// whether they take images.
const MODELS: &[(&str, u32, u32, bool)] = &[
    ("gpt-5", 400_000, 128_000, true),
    ("gpt-5-mini", 400_000, 128_000, true),
    ("gpt-5-nano", 400_000, 128_000, true),
    ("gpt-4.1", 1_047_576, 32_768, true),
    ("gpt-4.1-mini", 1_047_576, 32_768, true),
    ("gpt-4.1-nano", 1_047_576, 32_768, true),
    ("gpt-4o", 128_000, 16_384, true),
    ("gpt-4o-mini", 128_000, 16_384, true),
    ("o3", 200_000, 100_000, true),
    ("o4-mini", 200_000, 100_000, true),
];

/// The runtime context of `model` from the Ollama server at `root`, or
/// `None` when the server does not answer Ollama's way.
fn ollama_context(root: &str, model: &str) -> Option<u32> {
    let request = Request::post_json(
        format!("{root}/api/show"),
        &serde_json::json!({ "model": model }),
    )
    .timeouts(provider::timeouts_from_config());
    // Not retried: a server that is not Ollama answers 404 or an error,
    // and the model list must not wait seconds on that.
    let once = provider::Retry {
        max_retries: 0,
        ..provider::Retry::default()
    };
    let mut response = provider::send_with(&request, &once).ok()?;
    let body = response.read_to_end(8 * 1024 * 1024).ok()?;
    stream::parse_ollama_show(&body)
}

/// The provider exported by this component.
pub struct OpenAi;

impl Provider for OpenAi {
    fn models() -> Result<Vec<ModelInfo>, ProviderError> {
        let table = provider::model_table(MODELS);
        if corral_sdk::config("models_endpoint").as_deref() != Some("true") {
            return Ok(table);
        }
        let settings = Settings::from_lookup(corral_sdk::config);
        let url = format!("{}/models", settings.base_url);
        let mut response =
            provider::send(&Request::get(url).timeouts(provider::timeouts_from_config()))?;
        let body = response.read_to_end(8 * 1024 * 1024)?;
        let mut listed = parse_models(&body)?;
        // Ollama's `/v1/models` gives ids only; its native `/api/show`
        // tells the context the model runs with. Asked for the configured
        // model only, so a server with many models costs one request.
        if let Some(m) = listed
            .iter_mut()
            .find(|m| m.context_window.is_none() && m.id == settings.model)
            && let Some(root) = settings.base_url.strip_suffix("/v1")
        {
            m.context_window = ollama_context(root, &m.id);
        }
        Ok(provider::merge_models(table, listed))
    }

    fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError> {
        let settings = Settings::from_lookup(corral_sdk::config);
        let body = request_body(&request, &settings)?;
        // The conversation is in the body now; its memory serves the answer.
        drop(request);
        let url = format!("{}/chat/completions", settings.base_url);
        let mut response = provider::send(
            &Request::post_json_bytes(url, body)
                .header("accept", "text/event-stream")
                .timeouts(provider::timeouts_from_config()),
        )?;
        provider::stream_turn(&mut response, Stream::new())
    }
}

corral_sdk::provider!(OpenAi);
