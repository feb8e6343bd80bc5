//! What scripts ask of `corral run`, through the binary with the replay
//! provider: `--output-schema FILE` (an answer that does not fit is asked
//! for again with what was wrong, a bounded number of times; the `result`
//! event carries the parsed value), `--max-cost-usd` (counted from the
//! usage each response reports at the model's price; `budget_exhausted`),
//! and `--max-turns` (Claude Code's name for `--max-iterations`).

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::output::{assert_exit, json_events, stderr};
use crate::*;
use serde_json::{Value, json};

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {"files": {"type": "array", "items": {"type": "string"}}},
  "required": ["files"],
  "additionalProperties": false
}"#;

/// A project whose replay provider plays `turns`; the model `m` costs
/// $10 in and $30 out per million tokens.
fn project(turns: &[Value]) -> Sandbox {
    let sb = Sandbox::new();
    sb.write("a.txt", "a\n");
    sb.write("answer.schema.json", SCHEMA);
    sb.write(".gitignore", "*.cassette.json\n");
    sb.write(
        "corral.toml",
        "[plugins.fs]\nsource = \"builtin:fs\"\ngrants.fs = [{ path = \".\", access = \"ro\" }]\n\n\
         [plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\
         config = { cassette = \"scripts.cassette.json\" }\n\n\
         [agent.models.\"m\"]\nprice = { input_per_mtok = 10.0, output_per_mtok = 30.0 }\n",
    );
    crate::support::cassette::write(&sb, "scripts.cassette.json", turns);
    sb
}

/// `corral run --provider replay --json ARGS… PROMPT`: exit code, events.
fn run(sb: &Sandbox, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let mut all = vec!["run", "--provider", "replay", "--json"];
    all.extend_from_slice(args);
    all.push("List the files");
    let o = Cli::new().run(&sb.ws(), &all);
    assert!(o.status.code().is_some(), "killed: {}", stderr(&o));
    (o.status.code(), json_events(&o))
}

fn result(events: &[Value]) -> &Value {
    let last = events.last().expect("events");
    assert_eq!(last["type"], "result", "{events:#?}");
    last
}

/// A turn answering `text` that reports `input`/`output` tokens.
fn answer_costing(text: &str, input: u32, output: u32) -> Value {
    let mut turn = answer_turn(text);
    turn["response"]["usage"] = json!({"input_tokens": input, "output_tokens": output});
    turn
}

/// A turn calling `read_file` that reports `input`/`output` tokens.
fn call_costing(id: &str, input: u32, output: u32) -> Value {
    let mut turn = call_turn(id, "read_file", json!({"path": "a.txt"}));
    turn["response"]["usage"] = json!({"input_tokens": input, "output_tokens": output});
    turn
}

#[test]
fn an_answer_that_does_not_fit_is_asked_again_and_the_result_carries_the_parsed_value() {
    let sb = project(&[
        answer_turn("The only file is a.txt."),
        answer_turn("```json\n{\"files\": [\"a.txt\"]}\n```"),
    ]);
    let (code, events) = run(&sb, &["--output-schema", "answer.schema.json"]);
    assert_eq!(code, Some(0), "{events:#?}");
    let rejected: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "answer_rejected")
        .collect();
    assert_eq!(rejected.len(), 1, "{events:#?}");
    assert_eq!(rejected[0]["attempt"], 1);
    let reason = rejected[0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("the answer is not JSON"), "{reason}");
    assert!(
        rejected[0]["retry"]
            .as_str()
            .is_some_and(|r| r.contains("\"required\":[\"files\"]")),
        "the model is not shown the schema: {}",
        rejected[0]
    );
    let r = result(&events);
    assert_eq!(r["stop_reason"], "final_answer");
    assert_eq!(r["output"], json!({"files": ["a.txt"]}));
    assert_eq!(r["requests"], 2);
}

#[test]
fn an_answer_that_never_fits_stops_after_the_bound_with_its_reason() {
    let sb = project(&[
        answer_turn("{\"files\": [1]}"),
        answer_turn("{\"files\": [2]}"),
        answer_turn("{\"files\": [3]}"),
        answer_turn("{\"files\": [\"never asked\"]}"),
    ]);
    let (code, events) = run(&sb, &["--output-schema", "answer.schema.json"]);
    assert_eq!(code, Some(4), "an incomplete run: {events:#?}");
    let r = result(&events);
    assert_eq!(r["stop_reason"], "invalid_output");
    assert_eq!(r["requests"], 3, "asked more than twice again");
    assert!(r.get("output").is_none_or(Value::is_null), "{r}");
    let stop = events.iter().find(|e| e["type"] == "stop").expect("stop");
    assert!(
        stop["message"].as_str().is_some_and(|m| m.contains(
            "did not fit --output-schema after 3 answers: answer.files[0] must be string"
        )),
        "{stop}"
    );
}

#[test]
fn a_schema_file_that_is_not_a_schema_is_refused_before_the_run() {
    let sb = project(&[answer_turn("{}")]);
    sb.write("bad.json", "{\"type\": 7}");
    sb.write("prose.json", "files, please");
    for (file, says) in [
        ("bad.json", "--output-schema bad.json: not a JSON Schema"),
        ("prose.json", "--output-schema prose.json: not JSON"),
        (
            "missing.json",
            "--output-schema missing.json: cannot read it",
        ),
    ] {
        let o = Cli::new().run(
            &sb.ws(),
            &["run", "--provider", "replay", "--output-schema", file, "go"],
        );
        assert_exit(&o, 2);
        assert!(stderr(&o).contains(says), "{file}: {}", stderr(&o));
    }
}

#[test]
fn a_run_stops_once_it_has_spent_its_budget() {
    // Each response costs $0.01 (1000 tokens in at $10/M) + $0 out.
    let turns = [
        call_costing("c1", 1000, 0),
        call_costing("c2", 1000, 0),
        call_costing("c3", 1000, 0),
        answer_costing("Done.", 1000, 0),
    ];
    let sb = project(&turns);
    let (code, events) = run(&sb, &["--model", "m", "--max-cost-usd", "0.015"]);
    assert_eq!(code, Some(4), "{events:#?}");
    let r = result(&events);
    assert_eq!(r["stop_reason"], "budget_exhausted");
    assert_eq!(r["requests"], 2, "a request was sent past the budget");
    assert!(
        (r["cost_usd"].as_f64().expect("priced") - 0.02).abs() < 1e-9,
        "{r}"
    );
    let stop = events.iter().find(|e| e["type"] == "stop").expect("stop");
    assert!(
        stop["message"]
            .as_str()
            .is_some_and(|m| m.contains("spent $0.0200 of its --max-cost-usd 0.015")),
        "{stop}"
    );
    // Under the budget the same run ends with its answer.
    let sb = project(&turns);
    let (code, events) = run(&sb, &["--model", "m", "--max-cost-usd", "1"]);
    assert_eq!(code, Some(0));
    assert_eq!(result(&events)["stop_reason"], "final_answer");
}

#[test]
fn a_budget_that_cannot_be_counted_stops_the_run() {
    // No price for the model: nothing is sent.
    let sb = project(&[answer_turn("Done.")]);
    let (code, events) = run(&sb, &["--model", "unpriced", "--max-cost-usd", "1"]);
    assert_eq!(code, Some(4));
    let r = result(&events);
    assert_eq!(
        (r["stop_reason"].clone(), r["requests"].clone()),
        (json!("budget_exhausted"), json!(0))
    );
    // A response without usage: the next request is not sent.
    let sb = project(&[
        call_turn("c1", "read_file", json!({"path": "a.txt"})),
        answer_turn("Done."),
    ]);
    let (code, events) = run(&sb, &["--model", "m", "--max-cost-usd", "1"]);
    assert_eq!(code, Some(4));
    let r = result(&events);
    assert_eq!(r["stop_reason"], "budget_exhausted");
    assert_eq!(r["requests"], 1);
    for bad in ["0", "-1", "nan"] {
        let flag = format!("--max-cost-usd={bad}");
        let o = Cli::new().run(&sb.ws(), &["run", "--provider", "replay", &flag, "go"]);
        assert_exit(&o, 2);
        assert!(
            stderr(&o).contains("give a positive amount in US dollars"),
            "{bad}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn max_turns_is_the_iteration_limit_under_claude_codes_name() {
    let sb = project(&[
        call_turn("c1", "read_file", json!({"path": "a.txt"})),
        call_turn("c2", "read_file", json!({"path": "a.txt"})),
        answer_turn("Done."),
    ]);
    let (code, events) = run(&sb, &["--max-turns", "2"]);
    assert_eq!(code, Some(4), "{events:#?}");
    let r = result(&events);
    assert_eq!(r["stop_reason"], "max_iterations");
    assert_eq!(r["requests"], 2);
}
