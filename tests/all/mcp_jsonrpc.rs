//! `corral mcp serve` leaves no request unanswered, spoken to in raw
//! JSON-RPC over pipes: every request is answered with its id (`null` only
//! when the id itself cannot be read), in words that say what was wrong,
//! and a call still waiting for the user's approval when the client closes
//! its input gets its answer before the server exits.

use crate::support::served::Served;
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};

/// The error of `answer`, checked to carry `id`.
fn error_with_id<'a>(answer: &'a Value, id: &Value) -> &'a str {
    assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
    assert_eq!(
        answer.get("id"),
        Some(id),
        "the answer does not carry the id: {answer}"
    );
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    answer["error"]["message"].as_str().unwrap()
}

/// Failed before the fix: rmcp answered a batch with `"Invalid request"`
/// and no `id` at all, so a client could not tell which requests it meant.
#[test]
fn a_batch_is_refused_with_each_request_s_id_and_why() {
    let (sb, cli) = workspace_and_cli();
    let mut raw = Served::start(&cli, &sb, &["--mode", "read-only"]);
    let answer = raw.answer_to(
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/progress"},{"jsonrpc":"2.0","id":"b","method":"ping"}]"#,
    );
    // A batch is answered by a batch: one error per request, none for the
    // notification.
    let answers = answer.as_array().unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(answers.len(), 2, "{answer}");
    for (got, id) in answers.iter().zip([json!(1), json!("b")]) {
        let message = error_with_id(got, &id);
        has(message, "a batch is not supported by MCP 2025-06-18");
    }
    // An empty one has no request to name.
    let empty = raw.answer_to("[]");
    assert!(
        error_with_id(&empty, &Value::Null).contains("a batch is not supported"),
        "{empty}"
    );
    // And the server goes on.
    let next = raw.answer_to(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    assert_eq!(next["id"], 2, "{next}");
}

/// Failed before the fix: an id of `1.5`, `{"a":1}`, `null` or `true` got
/// `"Invalid request"` with no `id` (JSON-RPC wants `null`) and no word of
/// what was invalid.
#[test]
fn an_id_that_is_not_a_string_or_an_integer_is_answered_with_null() {
    let (sb, cli) = workspace_and_cli();
    let mut raw = Served::start(&cli, &sb, &["--mode", "read-only"]);
    for id in [
        "1.5",
        r#"{"a":1}"#,
        "null",
        "true",
        "[3]",
        "18446744073709551615",
    ] {
        let answer = raw.answer_to(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#
        ));
        let message = error_with_id(&answer, &Value::Null);
        assert!(
            message.contains("the id must be a string or an integer"),
            "id {id}: {message}"
        );
    }
    let next = raw.answer_to(r#"{"jsonrpc":"2.0","id":-4,"method":"ping"}"#);
    assert_eq!(next["id"], -4, "{next}");
}

/// Failed before the fix: a request without a method, with a `jsonrpc`
/// other than "2.0" or with a method that is not a string got
/// `"Invalid request"` without the id it did carry.
#[test]
fn a_request_without_a_method_is_answered_with_its_id() {
    let (sb, cli) = workspace_and_cli();
    let mut raw = Served::start(&cli, &sb, &["--mode", "read-only"]);
    let answer = raw.answer_to(r#"{"jsonrpc":"2.0","id":7}"#);
    assert!(
        error_with_id(&answer, &json!(7)).contains("the request has no method"),
        "{answer}"
    );
    let answer = raw.answer_to(r#"{"jsonrpc":"2.0","id":"m","method":5}"#);
    assert!(
        error_with_id(&answer, &json!("m")).contains("`method` must be a string"),
        "{answer}"
    );
    let answer = raw.answer_to(r#"{"id":8,"method":"ping"}"#);
    assert!(
        error_with_id(&answer, &json!(8)).contains(r#""jsonrpc": "2.0""#),
        "{answer}"
    );
    // A message that is not even an object has no id to carry.
    let answer = raw.answer_to("5");
    assert!(
        error_with_id(&answer, &Value::Null).contains("a JSON object"),
        "{answer}"
    );
}

/// Failed before the fix: when the client closed its input while corral
/// waited for it to answer an approval (`elicitation/create`), the call
/// that asked never got a response.
#[test]
fn a_call_waiting_for_approval_is_answered_when_the_client_goes_away() {
    let (sb, cli) = workspace_and_cli();
    let mut raw = Served::start_with(&cli, &sb, &["--mode", "ask"], json!({"elicitation": {}}));
    raw.send(
        &json!({"jsonrpc":"2.0","id":"w","method":"tools/call","params":{
        "name":"write_file","arguments":{"path":"new.txt","content":"x\n"}}}),
    );
    let asked = raw.next_where(|m| m["method"] == "elicitation/create");
    assert!(asked.get("id").is_some(), "{asked}");
    raw.close_input();
    let answer = raw.next_where(|m| m["id"] == "w");
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("went away") && text.contains("approval"),
        "{text}"
    );
    assert!(!sb.ws().join("new.txt").exists());
    raw.wait_exit();
}
