//! Context windows from local servers, through the real `corral` binary
//! against a mock server: the window is the context the server runs with
//! (llama.cpp's `n_ctx`, Ollama's `num_ctx` or default), not the context
//! the model was trained with, so compaction starts before the server
//! refuses a request.

use crate::support::manifest::openai_plugin;
use crate::support::mock::*;
use crate::*;
use serde_json::{Value, json};

const KEYS: [(&str, &str); 1] = [("TEST_OPENAI_KEY", "sk-test-openai-0123456789")];

fn manifest(port: u16, model: &str) -> String {
    let config = format!(r#"stall_timeout_ms = 2000, model = "{model}", models_endpoint = "true""#);
    format!("\n{}", openai_plugin(port, &config, ""))
}

/// The windows a `corral run --json` reported against a server that
/// answers `GET /v1/models` with `models` and `POST /api/show` with `show`
/// (404 when `None`), and the paths it asked.
fn windows(model: &str, models: Value, show: Option<Value>) -> (Vec<Value>, Vec<String>) {
    let server = MockServer::start(move |_, req| {
        let json_reply = |v: &Value| {
            Reply::Status(
                200,
                vec![("content-type", "application/json".into())],
                v.to_string(),
            )
        };
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/v1/models") => json_reply(&models),
            ("POST", "/api/show") => match &show {
                Some(v) => json_reply(v),
                None => Reply::Status(404, vec![], "404 page not found".into()),
            },
            _ => Reply::Sse(openai_sse("ok", &[])),
        }
    });
    let sb = Sandbox::with_manifest(&manifest(server.port, model));
    let o = Cli::new().run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--json", "hi"],
        &KEYS,
    );
    // A window this small does not hold the system prompt and the tool
    // schemas: the run then stops with `context_exhausted` before sending,
    // and its message names the window instead of a `context` event.
    let windows: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| match e["type"].as_str() {
            Some("context") => Some(e["window"].clone()),
            Some("stop") if e["reason"] == "context_exhausted" => {
                let message = e["message"].as_str().unwrap_or("");
                let (_, after) = message.split_once("context window is ")?;
                let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
                Some(json!(digits.parse::<u64>().ok()?))
            }
            _ => None,
        })
        .collect();
    assert!(
        !windows.is_empty(),
        "no context event: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let paths = server.requests().iter().map(|r| r.path.clone()).collect();
    (windows, paths)
}

#[test]
fn llama_cpp_gives_the_servers_n_ctx_not_the_training_context() {
    let (got, _) = windows(
        "qwen.gguf",
        json!({"object": "list", "data": [{
            "id": "qwen.gguf", "object": "model", "owned_by": "llamacpp",
            "meta": {"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": 32768,
                     "n_ctx": 2048, "n_embd": 2048, "n_params": 1_000_000}
        }]}),
        None,
    );
    assert_eq!(got, vec![json!(2048)]);
}

#[test]
fn ollama_gives_num_ctx_from_api_show() {
    let (got, paths) = windows(
        "qwen3:8b",
        json!({"object": "list", "data": [
            {"id": "qwen3:8b", "object": "model", "owned_by": "library"},
            {"id": "llama3:latest", "object": "model", "owned_by": "library"}
        ]}),
        Some(json!({
            "modelfile": "FROM qwen3",
            "parameters": "num_ctx                        8192\nstop                           \"<|im_end|>\"",
            "details": {"family": "qwen3"},
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}
        })),
    );
    assert_eq!(got, vec![json!(8192)]);
    // Only the configured model is asked about.
    assert_eq!(paths.iter().filter(|p| *p == "/api/show").count(), 1);
}

#[test]
fn ollama_without_num_ctx_gives_its_default_context() {
    let (got, _) = windows(
        "qwen3:8b",
        json!({"object": "list", "data": [
            {"id": "qwen3:8b", "object": "model", "owned_by": "library"}
        ]}),
        Some(json!({
            "parameters": "stop                           \"<|im_end|>\"",
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}
        })),
    );
    assert_eq!(got, vec![json!(4096)]);
}
