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
//! | `models_endpoint` | `true`: `models()` also asks the server's `GET /models`, whose entries (with a context length, as vLLM, llama.cpp, LM Studio and OpenRouter report it) win over the built-in table | `false` (the table only: OpenAI's own list carries no limits) |
//!
//! The plugin never reads an API key: the host adds the `authorization`
//! header configured in `grants.secrets` when the request leaves.

mod request;
mod stream;

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
        Ok(provider::merge_models(table, parse_models(&body)?))
    }

    fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError> {
        let settings = Settings::from_lookup(corral_sdk::config);
        let body = request_body(&request, &settings)?;
        let url = format!("{}/chat/completions", settings.base_url);
        let mut response = provider::send(
            &Request::post_json(url, &body)
                .header("accept", "text/event-stream")
                .timeouts(provider::timeouts_from_config()),
        )?;
        provider::stream_turn(&mut response, Stream::new())
    }
}

corral_sdk::provider!(OpenAi);
