//! Scripted models: mock servers (see [`crate::support::mock`]) that answer a run's
//! requests in a fixed order.

use crate::support::mock::{Call, MockServer, Reply, openai_sse, write_call};

/// An OpenAI model that writes `new.txt` (call `w1`), then answers "Done.".
pub fn writer() -> MockServer {
    calls_then(
        "Writing. ",
        vec![write_call("w1", "new.txt", "fresh line\n")],
        "Done.",
    )
}

/// An OpenAI model that makes `calls` at once, then answers "Done.".
pub fn calls_then_done(calls: Vec<Call>) -> MockServer {
    calls_then("", calls, "Done.")
}

/// An OpenAI model that says `text` and makes `calls` at once, then answers
/// `answer` (with no call) to every later request.
pub fn calls_then(text: &str, calls: Vec<Call>, answer: &str) -> MockServer {
    let (text, answer) = (text.to_owned(), answer.to_owned());
    MockServer::start(move |n, _| match n {
        0 => Reply::Sse(openai_sse(&text, &calls)),
        _ => Reply::Sse(openai_sse(&answer, &[])),
    })
}
