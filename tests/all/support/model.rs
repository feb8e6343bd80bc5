//! Scripted models: mock servers (see [`crate::support::mock`]) that answer a run's
//! requests in a fixed order.

use crate::support::mock::{MockServer, Reply, openai_sse};
use serde_json::json;

/// An OpenAI model that writes `new.txt` (call `w1`), then answers "Done.".
pub fn writer() -> MockServer {
    MockServer::start(|n, _| match n {
        0 => Reply::Sse(openai_sse(
            "Writing. ",
            &[(
                "w1",
                "write_file",
                json!({"path": "new.txt", "content": "fresh line\n"}),
            )],
        )),
        _ => Reply::Sse(openai_sse("Done.", &[])),
    })
}

/// An OpenAI model that makes `calls` at once, then answers "Done.".
pub fn calls_then_done(calls: Vec<crate::support::mock::Call>) -> MockServer {
    MockServer::start(move |n, _| match n {
        0 => Reply::Sse(openai_sse("", &calls)),
        _ => Reply::Sse(openai_sse("Done.", &[])),
    })
}
