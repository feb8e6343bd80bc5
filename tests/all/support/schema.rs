//! The JSON Schema of `corral run --json` (`host/protocol/events.schema.json`)
//! checked against every event the `--json` readers of [`super::output`],
//! [`super::process`] and `guard::events` hand to a test, so the schema
//! cannot drift from what corral prints.

use serde_json::Value;
use std::sync::OnceLock;

fn compiled() -> &'static jsonschema::Validator {
    static SCHEMA: OnceLock<jsonschema::Validator> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let doc: Value =
            serde_json::from_str(corral_protocol::EVENTS_SCHEMA).expect("the schema is JSON");
        jsonschema::options()
            .offline()
            .build(&doc)
            .unwrap_or_else(|e| panic!("the schema compiles: {e}"))
    })
}

/// Fails the test unless `event` is valid against the events schema.
#[track_caller]
pub fn check_event(event: &Value) {
    let faults: Vec<String> = compiled()
        .iter_errors(event)
        .map(|e| format!("{} at `{}`", e, e.instance_path()))
        .collect();
    if !faults.is_empty() {
        panic!(
            "an event does not fit host/protocol/events.schema.json: {}\nevent: {event}",
            faults.join("; ")
        );
    }
}
