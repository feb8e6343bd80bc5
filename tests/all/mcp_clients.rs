//! `corral mcp serve` is read correctly by other agents.
//! Through two real clients, the official Python SDK (tests/mcp/client.py)
//! and the official TypeScript SDK (tests/mcp/client.mjs, run with node on
//! the SDK `.ci/run` caches, `CORRAL_TEST_MCP_JS`): `read_file`'s text is in
//! both `content` and `structuredContent` (Codex hands the model the
//! latter), `grep`'s lines likewise, an absolute path inside the workspace
//! reads while one outside is refused, and the read-only git tools say so in
//! their annotations. Through raw JSON lines on the server's stdin: every
//! malformed request gets an answer carrying its id.

use crate::support::served::Served;
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const NOTES: &str = "first line\nthe needle is on line two\nthird line\n";

/// The directory holding the TypeScript SDK in its `node_modules`, or
/// `None`, the test counted as skipped (a failure under CI, which always
/// installs it).
fn typescript_sdk() -> Option<PathBuf> {
    crate::support::skip::node_package(
        "CORRAL_TEST_MCP_JS",
        "@modelcontextprotocol/sdk",
        "no TypeScript MCP client",
    )
}

/// Runs tests/mcp/client.mjs with `scenario` against `corral mcp serve` in
/// `ws`; `None` when there is no TypeScript SDK (the reason is printed).
fn typescript_client(cli: &Cli, ws: &Path, scenario: &Value) -> Option<Value> {
    let sdk = typescript_sdk()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/client.mjs");
    let mut cmd = std::process::Command::new("node");
    cmd.arg(script).arg(sdk);
    let (answered, _) = crate::support::mcp_clients::run_client(
        cmd,
        "TypeScript",
        cli,
        ws,
        &[],
        scenario.clone(),
        &[],
    );
    Some(answered)
}

/// The workspace with `notes.txt`, and the scenario both clients run: list
/// the tools, read relative, absolute inside, absolute outside, grep by
/// absolute path.
fn scenario(sb: &Sandbox) -> Value {
    sb.write("notes.txt", NOTES);
    let ws = sb.ws();
    let inside = ws.join("notes.txt");
    let outside = sb.outside().join("secret.txt");
    json!({
        "list": true,
        "calls": [
            { "name": "read_file", "arguments": { "path": "notes.txt" } },
            { "name": "read_file", "arguments": { "path": inside } },
            { "name": "read_file", "arguments": { "path": outside } },
            { "name": "grep", "arguments": { "pattern": "needle", "path": ws } },
        ],
    })
}

/// What both clients must have been answered.
fn check(client: &str, out: &Value, sb: &Sandbox) {
    let calls = out["calls"].as_array().expect("calls");
    for (i, call) in calls[..2].iter().enumerate() {
        assert_eq!(call["is_error"], false, "{client}, read {i}: {call}");
        let text = call["text"].as_str().unwrap();
        assert!(
            text.contains("the needle is on line two"),
            "{client}, read {i}: {call}"
        );
        assert_eq!(
            text.matches("the needle is on line two").count(),
            1,
            "{client}, read {i}: {call}"
        );
        // The text is sent once: no structuredContent repeats it.
        assert_eq!(
            call["structured"],
            Value::Null,
            "{client}, read {i}: {call}"
        );
    }
    let refused = &calls[2];
    assert_eq!(refused["is_error"], true, "{client}: {refused}");
    let text = refused["text"].as_str().unwrap();
    assert!(!text.contains(SECRET), "{client}: {refused}");
    assert!(
        text.contains("outside the workspace") && text.contains(&*sb.ws().to_string_lossy()),
        "{client}: {refused}"
    );
    let grep = &calls[3];
    assert_eq!(grep["is_error"], false, "{client}: {grep}");
    let lines = grep["text"].as_str().unwrap_or_default();
    assert!(
        lines.contains("notes.txt") && lines.contains("the needle is on line two"),
        "{client}: grep's content lacks its lines: {grep}"
    );
    assert_eq!(grep["structured"], Value::Null, "{client}: {grep}");
    let annotations = |name: &str| {
        out["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{client}: `{name}` is not listed"))["annotations"]
            .clone()
    };
    for name in ["git_status", "git_diff", "git_log", "git_show"] {
        let a = annotations(name);
        assert_eq!(a["readOnlyHint"], true, "{client}: {name}: {a}");
        assert_eq!(a["destructiveHint"], false, "{client}: {name}: {a}");
    }
    for name in [
        "git_add",
        "git_commit",
        "git_branch",
        "run_command",
        "write_file",
    ] {
        let a = annotations(name);
        assert_eq!(a["readOnlyHint"], false, "{client}: {name}: {a}");
        assert_eq!(a["destructiveHint"], true, "{client}: {name}: {a}");
    }
}

#[test]
fn the_typescript_client_gets_the_payload_absolute_paths_and_git_hints() {
    let (sb, cli) = workspace_and_cli();
    let scenario = scenario(&sb);
    let Some(out) = typescript_client(&cli, &sb.ws(), &scenario) else {
        return;
    };
    check("typescript", &out, &sb);
}

#[test]
fn the_python_client_gets_the_payload_absolute_paths_and_git_hints() {
    let (sb, cli) = workspace_and_cli();
    let scenario = scenario(&sb);
    let Some(out) = crate::support::mcp_clients::client(&cli, &sb.ws(), &[], scenario) else {
        return;
    };
    check("python", &out, &sb);
}

#[test]
fn every_malformed_request_is_answered_with_its_id() {
    let (sb, cli) = workspace_and_cli();
    let mut served = Served::start(&cli, &sb, &[]);
    let lines = [
        r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":""}"#,
        r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":1}"#,
        r#"{"jsonrpc":"2.0","id":13,"method":"tools/list","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":"s-14","method":"tools/call","params":"x"}"#,
        r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"\ud800"}}}"#,
        r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"hello.txt"}}}"#,
    ];
    for line in lines {
        served.send_raw(format!("{line}\n").as_bytes());
    }
    let ids = [
        json!(11),
        json!(12),
        json!(13),
        json!("s-14"),
        json!(15),
        json!(16),
    ];
    let got = served.wait_for(&ids, Duration::from_secs(60));
    for answer in &got[..5] {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "not an error: {answer}");
    }
    for answer in &got[..4] {
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        has(message, "not an object");
    }
    assert_eq!(got[4]["error"]["code"], -32700, "{}", got[4]);
    assert!(
        got[4]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("surrogate"),
        "{}",
        got[4]
    );
    // The server goes on.
    let text = got[5]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("hello from the workspace"), "{}", got[5]);
}

#[test]
fn the_roots_a_client_offers_narrow_what_it_may_name() {
    let (sb, cli) = workspace_and_cli();
    sb.write("sub/inside.txt", "inside the root\n");
    sb.write("notes.txt", NOTES);
    let root = sb.ws().join("sub");
    let scenario = json!({
        "roots": [format!("file://{}", root.display()), "file:///"],
        "calls": [
            { "name": "read_file", "arguments": { "path": root.join("inside.txt") } },
            { "name": "read_file", "arguments": { "path": "sub/inside.txt" } },
            { "name": "read_file", "arguments": { "path": "notes.txt" } },
            { "name": "read_file", "arguments": { "path": sb.outside().join("secret.txt") } },
        ],
    });
    let Some(out) = typescript_client(&cli, &sb.ws(), &scenario) else {
        return;
    };
    let calls = out["calls"].as_array().expect("calls");
    for call in &calls[..2] {
        assert_eq!(call["is_error"], false, "{call}");
        assert!(
            call["text"].as_str().unwrap().contains("inside the root"),
            "{call}"
        );
    }
    // Beneath the workspace but not beneath a root in it: refused.
    let refused = &calls[2];
    assert_eq!(refused["is_error"], true, "{refused}");
    let text = refused["text"].as_str().unwrap();
    has(text, "outside the roots");
    lacks(text, "the needle");
    // A root wider than the workspace (`/`) widens nothing.
    let outside = &calls[3];
    assert_eq!(outside["is_error"], true, "{outside}");
    assert!(
        !outside["text"].as_str().unwrap().contains(SECRET),
        "{outside}"
    );
}
