//! A hook for the tests, doing what its `mode` setting says:
//! - `continue`: nothing (the trivial hook of the benchmark);
//! - `block`: blocks every event that can be blocked, with `reason`;
//! - `loop`: spins forever, for the limits;
//! - `rewrite`: before a tool call, replaces the arguments with `arguments`;
//! - `ask`: before a tool call, asks for approval;
//! - `context`: adds `context` for the model;
//! - `reach`: tries to read the file `path` and to fetch `url`, and blocks
//!   the call with what it got, so a test can see what a hook with no
//!   grants can reach;
//! - `audit`: after a tool call, posts the call and the output it was
//!   handed to `url` (an audit webhook), then continues;
//! - `count`: adds as context how many events this instance has handled,
//!   this one included (an instance serves one event: always 1).

use corral_sdk::hook::{Decision, Event, Hook};
use std::sync::atomic::{AtomicU32, Ordering};

/// Events this instance has handled.
static HANDLED: AtomicU32 = AtomicU32::new(0);

fn setting(key: &str) -> String {
    corral_sdk::config(key).unwrap_or_default()
}

/// What a hook with these settings can reach.
fn reach() -> String {
    let path = setting("path");
    let file = match std::fs::read_to_string(&path) {
        Ok(text) => format!("READ {text}"),
        Err(e) => format!("denied ({e})"),
    };
    let dir = match std::fs::read_dir(".") {
        Ok(entries) => format!("LISTED {} entries", entries.count()),
        Err(e) => format!("denied ({e})"),
    };
    let url = setting("url");
    let net = match corral_sdk::http::Request::get(&url).send() {
        Ok(response) => format!("FETCHED status {}", response.status()),
        Err(e) => format!("denied ({e})"),
    };
    format!("file: {file}; dir: {dir}; net: {net}")
}

/// The hook.
pub struct TestHook;

impl Hook for TestHook {
    fn handle(event: Event) -> Decision {
        let before_tool = matches!(event, Event::BeforeTool(_));
        let handled = HANDLED.fetch_add(1, Ordering::Relaxed) + 1;
        match setting("mode").as_str() {
            "block" => Decision::Block(setting("reason")),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "rewrite" if before_tool => Decision::Rewrite(setting("arguments")),
            "ask" if before_tool => Decision::Ask(setting("reason")),
            "context" => Decision::AddContext(setting("context")),
            "reach" => Decision::Block(reach()),
            "audit" => {
                if let Event::AfterTool(after) = event {
                    let body = serde_json::json!({
                        "tool": after.call.name,
                        "arguments": after.call.arguments,
                        "content": after.content,
                    });
                    let sent = corral_sdk::http::Request::post_json(setting("url"), &body).send();
                    if let Err(e) = sent {
                        corral_sdk::log(corral_sdk::Level::Warn, &format!("audit: {e}"));
                    }
                }
                Decision::Continue
            }
            "count" => Decision::AddContext(format!("handled {handled}")),
            _ => Decision::Continue,
        }
    }
}

corral_sdk::hook!(TestHook);
