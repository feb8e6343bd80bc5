//! `corral mcp serve` end to end: the real `corral` binary as a stdio MCP
//! server, driven by the official Python MCP client (tests/mcp/client.py) as
//! a real process, on real files in a temp workspace. The grants and the
//! permission policy hold for an MCP client as they do for corral's model.
//!
//! The Python interpreter with `mcp` installed is `CORRAL_TEST_PYTHON`, else
//! the virtualenv `.ci/run` keeps in its cache; without either the Python
//! tests are counted as skipped (under CI, which always has it, they fail).

use crate::support::mcp_clients::client;
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::process::Stdio;

// pipeline.rs still names this by its former place.

fn tool<'a>(listed: &'a Value, name: &str) -> &'a Value {
    listed["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("`{name}` is not listed: {listed}"))
}

fn write_call(path: &str, content: &str) -> Value {
    json!({ "name": "write_file", "arguments": { "path": path, "content": content }, "asks": true })
}

#[test]
fn tools_list_shows_every_tool_with_its_effects_as_hints() {
    let (sb, cli) = workspace_and_cli();
    let Some(out) = client(&cli, &sb.ws(), &[], json!({ "list": true })) else {
        return;
    };
    // elicitation/create is a request to the client, which 2026-07-28 forbids.
    assert_eq!(out["protocol_version"], "2025-11-25");
    let hints = |name: &str| tool(&out, name)["annotations"].clone();
    let read = json!({ "readOnlyHint": true, "destructiveHint": false, "openWorldHint": false });
    let write = json!({ "readOnlyHint": false, "destructiveHint": true, "openWorldHint": false });
    assert_eq!(hints("read_file"), read);
    assert_eq!(hints("grep"), read);
    assert_eq!(hints("write_file"), write);
    assert_eq!(hints("edit_file"), write);
    assert_eq!(hints("run_command"), write);
    let read_file = tool(&out, "read_file");
    assert!(
        read_file["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(read_file["input_schema"]["required"], json!(["path"]));
    // Providers are plugins, not tools.
    let names: Vec<&str> = out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for provider in ["openai", "anthropic", "replay", "complete", "models"] {
        assert!(!names.contains(&provider), "{provider} listed: {names:?}");
    }
}

/// The text of a client's call result, once `is_error` is as expected
/// (failing with `what` and the result otherwise).
#[track_caller]
fn result_text<'a>(call: &'a Value, is_error: bool, what: &str) -> &'a str {
    assert_eq!(call["is_error"], is_error, "{what}: {call}");
    call["text"].as_str().unwrap()
}

#[test]
fn read_file_and_grep_return_the_workspace_content() {
    let sb = Sandbox::new();
    sb.write("src/lib.rs", "fn needle() {}\n");
    let cli = Cli::new();
    let scenario = json!({ "calls": [
        { "name": "read_file", "arguments": { "path": "hello.txt" } },
        { "name": "grep", "arguments": { "pattern": "needle" } },
    ]});
    let Some(out) = client(&cli, &sb.ws(), &[], scenario) else {
        return;
    };
    let read = &out["calls"][0];
    let text = result_text(read, false, "read_file");
    assert!(text.contains("hello from the workspace"), "{read}");
    assert_eq!(
        read["structured"],
        Value::Null,
        "the text is sent once: {read}"
    );
    let grep = &out["calls"][1];
    let text = result_text(grep, false, "grep");
    assert!(
        text.contains("src/lib.rs") && text.contains("fn needle() {}"),
        "{grep}"
    );
    assert_eq!(
        grep["structured"],
        Value::Null,
        "the text is sent once: {grep}"
    );
}

#[test]
fn calls_outside_the_grant_are_tool_errors_that_say_why() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("link.txt"))
        .expect("symlink");
    let cli = Cli::new();
    let scenario = json!({ "calls": [
        { "name": "read_file", "arguments": { "path": "../outside/secret.txt" } },
        { "name": "read_file", "arguments": { "path": "link.txt" } },
        { "name": "read_file", "arguments": { "path": sb.outside().join("secret.txt") } },
        { "name": "read_file", "arguments": {} },
        { "name": "no_such_tool", "arguments": {} },
        { "name": "read_file", "arguments": { "path": "hello.txt" } },
    ]});
    // Full-auto: the refusals below are the sandbox's and the schema's, not
    // the policy's.
    let Some(out) = client(&cli, &sb.ws(), &["--mode", "full-auto"], scenario) else {
        return;
    };
    let calls = out["calls"].as_array().unwrap();
    for call in &calls[..5] {
        assert_eq!(call["is_error"], true, "{call}");
        let text = call["text"].as_str().unwrap();
        assert!(!text.contains(SECRET), "the secret leaked: {call}");
        assert!(!text.trim().is_empty(), "an error with no message: {call}");
    }
    let msg = |i: usize| calls[i]["text"].as_str().unwrap().to_owned();
    has(&msg(0), "../outside/secret.txt");
    has(&msg(1), "link.txt");
    assert!(
        msg(3).contains("invalid arguments for `read_file`") && msg(3).contains("path"),
        "{}",
        msg(3)
    );
    assert!(
        msg(4).contains("unknown tool `no_such_tool`") && msg(4).contains("read_file"),
        "{}",
        msg(4)
    );
    // The server goes on after refusals.
    assert_eq!(calls[5]["is_error"], false, "{}", calls[5]);
}

#[test]
fn read_only_mode_refuses_writes_and_protected_paths_stay_protected() {
    let sb = Sandbox::new();
    std::fs::create_dir(sb.ws().join(".git")).expect(".git");
    let cli = Cli::new();
    let scenario = json!({ "calls": [
        write_call("new.txt", "x\n"),
        { "name": "edit_file", "arguments": { "path": "hello.txt", "old_string": "hello", "new_string": "bye" } },
        { "name": "read_file", "arguments": { "path": "hello.txt" } },
    ]});
    let Some(out) = client(&cli, &sb.ws(), &["--mode", "read-only"], scenario) else {
        return;
    };
    for call in &out["calls"].as_array().unwrap()[..2] {
        assert_eq!(call["is_error"], true, "{call}");
        let text = call["text"].as_str().unwrap();
        assert!(
            text.contains("denied by the permission policy") && text.contains("read-only"),
            "{call}"
        );
    }
    assert_eq!(out["calls"][2]["is_error"], false);
    assert!(!sb.ws().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("hello.txt")).unwrap(),
        "hello from the workspace\n"
    );

    // Whatever the mode, .git internals are not the tools' to write.
    let scenario = json!({ "calls": [write_call(".git/config", "[core]\n")] });
    let out = client(&cli, &sb.ws(), &["--mode", "full-auto"], scenario).unwrap();
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], true, "{call}");
    assert!(
        call["text"].as_str().unwrap().contains("is protected"),
        "{call}"
    );
    assert!(!sb.ws().join(".git/config").exists());
}

#[test]
fn ask_mode_puts_a_write_to_the_user_through_elicitation() {
    let (sb, cli) = workspace_and_cli();

    let scenario =
        json!({ "elicitation": "accept", "calls": [write_call("new.txt", "fresh line\n")] });
    let Some(out) = client(&cli, &sb.ws(), &["--mode", "ask"], scenario) else {
        return;
    };
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], false, "{call}");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("new.txt")).unwrap(),
        "fresh line\n"
    );
    let asked = out["elicitations"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{out}");
    let message = asked[0]["message"].as_str().unwrap();
    // The call, the mode that asked and the diff it would apply.
    has(message, "`write_file`");
    has(message, "mode ask");
    has(message, "+fresh line");
    assert_eq!(
        asked[0]["schema"]["properties"]["for_session"]["type"],
        "boolean"
    );

    for answer in ["decline", "cancel"] {
        let scenario =
            json!({ "elicitation": answer, "calls": [write_call("refused.txt", "no\n")] });
        let out = client(&cli, &sb.ws(), &["--mode", "ask"], scenario).unwrap();
        let call = &out["calls"][0];
        let text = result_text(call, true, answer);
        assert!(text.starts_with("not run: the user"), "{answer}: {call}");
        assert_eq!(out["elicitations"].as_array().unwrap().len(), 1);
        assert!(!sb.ws().join("refused.txt").exists(), "{answer}");
    }
}

#[test]
fn approval_for_the_session_covers_later_calls_of_that_tool() {
    let (sb, cli) = workspace_and_cli();
    let scenario = json!({ "elicitation": "accept_for_session", "calls": [
        write_call("a.txt", "a\n"),
        write_call("b.txt", "b\n"),
    ]});
    let Some(out) = client(&cli, &sb.ws(), &[], scenario) else {
        return;
    };
    for call in out["calls"].as_array().unwrap() {
        assert_eq!(call["is_error"], false, "{call}");
    }
    assert_eq!(out["elicitations"].as_array().unwrap().len(), 1, "{out}");
    assert!(sb.ws().join("a.txt").exists() && sb.ws().join("b.txt").exists());
}

#[test]
fn ask_mode_without_elicitation_refuses_and_says_how_to_allow() {
    let (sb, cli) = workspace_and_cli();
    let scenario = json!({ "calls": [write_call("new.txt", "x\n")] });
    let Some(out) = client(&cli, &sb.ws(), &["--mode", "ask"], scenario.clone()) else {
        return;
    };
    let call = &out["calls"][0];
    assert_eq!(call["is_error"], true, "{call}");
    let text = call["text"].as_str().unwrap();
    for part in [
        "`write_file` needs the user's approval",
        "elicitation",
        "--mode auto-edit",
        "allow rule",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    assert!(!sb.ws().join("new.txt").exists());

    // The way out it names works.
    let out = client(&cli, &sb.ws(), &["--mode", "auto-edit"], scenario).unwrap();
    assert_eq!(out["calls"][0]["is_error"], false, "{}", out["calls"][0]);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("new.txt")).unwrap(),
        "x\n"
    );
}

#[test]
fn a_call_waiting_for_approval_holds_up_no_other_call() {
    let (sb, cli) = workspace_and_cli();
    // The client answers the elicitation only after the reads came back: a
    // server that took calls one at a time would never answer them.
    let scenario = json!({ "elicitation": "accept", "concurrent": true, "calls": [
        write_call("new.txt", "y\n"),
        { "name": "read_file", "arguments": { "path": "hello.txt" } },
        { "name": "grep", "arguments": { "pattern": "hello" } },
    ]});
    let Some(out) = client(&cli, &sb.ws(), &["--mode", "ask"], scenario) else {
        return;
    };
    for call in out["calls"].as_array().unwrap() {
        assert_eq!(call["is_error"], false, "{call}");
    }
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("new.txt")).unwrap(),
        "y\n"
    );
}

/// JSON-RPC lines for a handshake and a `tools/list`.
const HANDSHAKE: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    "\n",
);

#[test]
fn stdout_carries_nothing_but_the_protocol() {
    let (sb, cli) = workspace_and_cli();
    // The most verbose logging there is: all of it must go to stderr, here a
    // file (a pipe nobody reads would fill up and stall the server).
    let log = sb.root.path().join("stderr.log");
    let mut child = cli
        .command(&sb.ws(), &["-vvv", "mcp", "serve"])
        .env("CORRAL_LOG", "trace")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start corral mcp serve");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(HANDSHAKE.as_bytes()).unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let msg: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not a JSON-RPC message on stdout ({e}): {line}"));
        assert_eq!(msg["jsonrpc"], "2.0", "{line}");
        let done = msg["id"] == 2;
        lines.push(msg);
        if done {
            // Closing stdin ends the session; the server exits.
            drop(stdin);
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert!(
        out.stdout.is_empty(),
        "after the last answer: {:?}",
        out.stdout
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["result"]["serverInfo"]["name"], "corral");
    assert!(
        lines[1]["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "read_file"),
        "{}",
        lines[1]
    );
    // The logs went to stderr.
    let logged = std::fs::read_to_string(&log).unwrap();
    has(&logged, "serving MCP on stdio");
}

#[test]
fn a_bad_manifest_is_a_clear_error_on_stderr_and_nothing_on_stdout() {
    let (sb, cli) = workspace_and_cli();
    // The user's own manifest: it needs no trust, so it is read as it is.
    cli.write_user_manifest("[plugins.fs]\nsource = \"builtin:fs\"\ncolour = 1\n");
    let out = cli.run(&sb.ws(), &["mcp", "serve"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("corral.toml") && err.contains("colour"),
        "{err}"
    );

    std::fs::remove_file(cli.home.path().join("config/corral/corral.toml")).unwrap();
    let out = cli.run(&sb.ws(), &["mcp", "serve", "--mode", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    has(&String::from_utf8_lossy(&out.stderr), "read-only");
}
