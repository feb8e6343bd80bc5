//! Reading the `--json` events of a finished `corral run`: each checked
//! against the schema, call ids put back to the model's, and the labels a
//! call's result carries.

use crate::*;
use serde_json::Value;

/// The JSON events of a `run --json`.
pub fn events(o: &std::process::Output) -> Vec<Value> {
    with_model_ids(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("a JSON event"))
            .inspect(crate::support::schema::check_event)
            .collect(),
    )
}

pub fn find<'a>(events: &'a [Value], kind: &str, call_id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == kind && (e["call_id"] == call_id || e["call"]["id"] == call_id))
        .unwrap_or_else(|| panic!("no {kind} event for {call_id} in {events:#?}"))
}

pub fn labels(end: &Value) -> Vec<(String, String)> {
    end["outcome"]["labels"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|l| {
                    (
                        l["kind"].as_str().expect("kind").to_owned(),
                        l["source"].as_str().expect("source").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn label(kind: &str, source: &str) -> (String, String) {
    (kind.to_owned(), source.to_owned())
}

/// The (call id, decision) of each `permission` event, in order.
pub fn decisions(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "permission")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap_or("").to_owned(),
                e["decision"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// The end of the call `id`: its content must hold `part` and its result be
/// labelled `untrusted` by `source` alone.
#[track_caller]
pub fn untrusted_end<'a>(events: &'a [Value], id: &str, part: &str, source: &str) -> &'a Value {
    let end = find(events, "tool_call_end", id);
    assert!(
        end["outcome"]["content"]
            .as_str()
            .unwrap_or_default()
            .contains(part),
        "{end}"
    );
    assert_eq!(labels(end), vec![label("untrusted", source)]);
    end
}

/// Fails the test, showing the event, unless the `permission` event `p` is
/// `decision` for a reason that holds `part`.
#[track_caller]
pub fn assert_decided(p: &Value, decision: &str, part: &str) {
    assert_eq!(p["decision"], decision, "{p}");
    assert!(
        p["reason"].as_str().is_some_and(|r| r.contains(part)),
        "no {part:?} in the reason of {p}"
    );
}
