//! corral's provider for the Anthropic Messages API, compiled to a WASI 0.2
//! component.
//!
//! ```toml
//! [plugins.anthropic]
//! source = "builtin:anthropic"
//! grants.net = ["https://api.anthropic.com:443"]
//! grants.secrets = [{ host = "api.anthropic.com", header = "x-api-key", value = "${env:ANTHROPIC_API_KEY}" }]
//! config = { model = "claude-sonnet-4-5" }
//! ```
//!
//! Config keys (all optional):
//!
//! | key | meaning | default |
//! | --- | --- | --- |
//! | `base_url` | API root; `/messages` and `/models` are appended | `https://api.anthropic.com/v1` |
//! | `model` | model used when the request names none | none (the request must name one) |
//! | `max_tokens` | output limit when the request sets none (the API requires one) | 4096 |
//! | `response_timeout_ms` | wait for the response headers | 120000 |
//! | `stall_timeout_ms` | longest silence inside the stream (the API pings every few seconds) | 120000 |
//! | `models_endpoint` | `true`: `models()` also asks `GET /models`, whose `max_input_tokens` and `max_tokens` win over the built-in table | `false` (the table only, no request) |
//!
//! The plugin never reads an API key: the host adds the `x-api-key` header
//! configured in `grants.secrets` when the request leaves.

mod request;
mod stream;

pub use request::{API_VERSION, Settings, request_body};
pub use stream::{Stream, parse_models};

use corral_sdk::http::Request;
use corral_sdk::provider::{self, ChatRequest, ChatResponse, ModelInfo, Provider, ProviderError};

/// Models whose limits are published: id, context window, output limit,
/// whether they take images. Dated ids (`claude-sonnet-4-5-20250929`) take
/// the limits of the entry they start with.
const MODELS: &[(&str, u32, u32, bool)] = &[
    ("claude-opus-4-1", 200_000, 32_000, true),
    ("claude-opus-4", 200_000, 32_000, true),
    ("claude-sonnet-4-5", 200_000, 64_000, true),
    ("claude-sonnet-4", 200_000, 64_000, true),
    ("claude-haiku-4-5", 200_000, 64_000, true),
    ("claude-3-7-sonnet", 200_000, 64_000, true),
    ("claude-3-5-haiku", 200_000, 8_192, true),
];

/// The provider exported by this component.
pub struct Anthropic;

impl Provider for Anthropic {
    fn models() -> Result<Vec<ModelInfo>, ProviderError> {
        let table = provider::model_table(MODELS);
        if corral_sdk::config("models_endpoint").as_deref() != Some("true") {
            return Ok(table);
        }
        let settings = Settings::from_lookup(corral_sdk::config);
        // 1000 is the API's page limit: one page holds every model.
        let url = format!("{}/models?limit=1000", settings.base_url);
        let mut response = provider::send(
            &Request::get(url)
                .header("anthropic-version", API_VERSION)
                .timeouts(provider::timeouts_from_config()),
        )?;
        let body = response.read_to_end(8 * 1024 * 1024)?;
        Ok(provider::merge_models(table, parse_models(&body)?))
    }

    fn complete(request: ChatRequest) -> Result<ChatResponse, ProviderError> {
        let settings = Settings::from_lookup(corral_sdk::config);
        let body = request_body(&request, &settings)?;
        // The conversation is in the body now; its memory serves the answer.
        drop(request);
        let url = format!("{}/messages", settings.base_url);
        let mut response = provider::send(
            &Request::post_json_bytes(url, body)
                .header("anthropic-version", API_VERSION)
                .header("accept", "text/event-stream")
                .timeouts(provider::timeouts_from_config()),
        )?;
        provider::stream_turn(&mut response, Stream::new())
    }
}

corral_sdk::provider!(Anthropic);
