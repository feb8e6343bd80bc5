//! The JSON Schema of `corral run --json` (`host/protocol/events.schema.json`)
//! checked against every event the `--json` readers of [`super::output`],
//! [`super::process`] and `guard::events` hand to a test, so the schema
//! cannot drift from what corral prints.

use serde_json::Value;
use std::sync::OnceLock;

/// Where the schema says it lives (its `$id`).
const ID: &str = "https://corral.invalid/schemas/events.schema.json";

fn compiled() -> &'static (boon::Schemas, boon::SchemaIndex) {
    static SCHEMA: OnceLock<(boon::Schemas, boon::SchemaIndex)> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let doc: Value =
            serde_json::from_str(corral_protocol::EVENTS_SCHEMA).expect("the schema is JSON");
        let mut schemas = boon::Schemas::new();
        let mut compiler = boon::Compiler::new();
        compiler.add_resource(ID, doc).expect("the schema loads");
        let index = compiler
            .compile(ID, &mut schemas)
            .unwrap_or_else(|e| panic!("the schema compiles: {e:#}"));
        (schemas, index)
    })
}

/// Fails the test unless `event` is valid against the events schema.
#[track_caller]
pub fn check_event(event: &Value) {
    let (schemas, index) = compiled();
    if let Err(e) = schemas.validate(event, *index) {
        panic!("an event does not fit host/protocol/events.schema.json: {e:#}\nevent: {event}");
    }
}
