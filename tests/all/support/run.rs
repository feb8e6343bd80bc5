//! Starting `corral run` the ways several modules drive it.

use crate::{Cli, Sandbox};
use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::process::{Child, ExitStatus, Output, Stdio};

/// A workspace whose `openai` provider talks to the mock on `port` (see
/// [`super::manifest::openai_project`]), with `extra` manifest lines.
pub fn openai_workspace(port: u16, extra: &str) -> Sandbox {
    let sb = Sandbox::new();
    sb.write(
        "corral.toml",
        &crate::support::manifest::openai_project(port, extra),
    );
    sb
}

/// `corral run --provider openai --json --approvals stdin PROMPT` with `key`
/// as `TEST_OPENAI_KEY`, and stdin, stdout and stderr piped.
pub fn answering(cli: &Cli, sb: &Sandbox, prompt: &str, key: &str) -> Child {
    let mut cmd = cli.command(
        &sb.ws(),
        &[
            "run",
            "--provider",
            "openai",
            "--json",
            "--approvals",
            "stdin",
            prompt,
        ],
    );
    cmd.env("TEST_OPENAI_KEY", key);
    piped(&mut cmd, Stdio::piped())
}

/// `corral run --provider replay --json --approvals stdin PROMPT`, with
/// stdin and stdout piped and stderr dropped.
pub fn replaying(cli: &Cli, sb: &Sandbox, prompt: &str) -> Child {
    let mut cmd = cli.command(
        &sb.ws(),
        &[
            "run",
            "--provider",
            "replay",
            "--json",
            "--approvals",
            "stdin",
            prompt,
        ],
    );
    piped(&mut cmd, Stdio::null())
}

/// `corral tool call TOOL --args ARGS` (the JSON text of `args`), run to
/// its end.
pub fn tool_call(cli: &Cli, sb: &Sandbox, tool: &str, args: impl std::fmt::Display) -> Output {
    cli.run(
        &sb.ws(),
        &["tool", "call", tool, "--args", &args.to_string()],
    )
}

/// The words of `line` (split at spaces) as a command's arguments.
pub fn argv(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The words of `line`, then `last` whole (a prompt or JSON that may hold
/// spaces) as a command's arguments.
pub fn argv_with<'a>(line: &'a str, last: &'a str) -> Vec<&'a str> {
    let mut args = argv(line);
    args.push(last);
    args
}

/// `corral run --provider replay --json PROMPT`, which must end well; its
/// events ([`crate::support::events::events`]).
pub fn replay_events(cli: &Cli, sb: &Sandbox, prompt: &str) -> Vec<serde_json::Value> {
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "--json", prompt]);
    crate::support::output::assert_exit(&o, 0);
    crate::support::events::events(&o)
}

/// Starts `cmd` with stdin and stdout piped and its stderr going to
/// `stderr`: a run to answer on stdin ([`drive`]).
pub fn piped(cmd: &mut std::process::Command, stderr: Stdio) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn")
}

/// What a run driven by [`drive`] printed, and how it ended.
pub struct Driven {
    /// Every event line, as printed (corral's call ids).
    pub events: Vec<Value>,
    /// Its stderr (empty when it was not piped).
    pub stderr: String,
    /// How it ended.
    pub status: ExitStatus,
}

/// Drives `child` (started by [`piped`]): every stdout line must be a JSON
/// event and is kept; `answer` is asked for the op lines to send on stdin
/// after each one. Stdin is closed once stdout ends; a run that then does
/// not end within [`super::process::HANG`] fails the test.
pub fn drive(mut child: Child, mut answer: impl FnMut(&Value) -> Vec<String>) -> Driven {
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let stderr = child.stderr.take().map(|mut stderr| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
            s
        })
    });
    let mut events = Vec::new();
    for line in stdout.lines() {
        let event: Value = serde_json::from_str(&line.expect("line")).expect("a JSON event");
        for op in answer(&event) {
            writeln!(stdin, "{op}").expect("answer");
            stdin.flush().expect("flush");
        }
        events.push(event);
    }
    drop(stdin);
    super::process::wait_bounded(&mut child, super::process::HANG);
    let status = child.wait().expect("wait");
    let stderr = stderr.map_or_else(String::new, |t| t.join().expect("stderr"));
    Driven {
        events,
        stderr,
        status,
    }
}

/// [`drive`] answering each `approval_requested` event with the decision
/// `decide` gives for it (after any check it makes while the call waits);
/// the run must end well. Its events with the model's call ids.
pub fn answer_approvals(child: Child, mut decide: impl FnMut(&Value) -> Value) -> Vec<Value> {
    let driven = drive(child, |event| {
        if event["type"] != "approval_requested" {
            return vec![];
        }
        let mut answer = decide(event);
        if let Value::String(decision) = answer {
            answer = json!({ "decision": decision });
        }
        answer["op"] = json!("approval");
        answer["call_id"] = event["call"]["id"].clone();
        vec![answer.to_string()]
    });
    assert!(
        driven.status.success(),
        "{}\n{:#?}",
        driven.stderr,
        driven.events
    );
    crate::with_model_ids(driven.events)
}

/// The op line approving the call `id` once.
pub fn approve(id: &str) -> String {
    json!({"op": "approval", "call_id": id, "decision": "approve"}).to_string()
}

/// The op line denying the call `id`, with the reason "no".
pub fn deny(id: &str) -> String {
    json!({"op": "approval", "call_id": id, "decision": "deny", "reason": "no"}).to_string()
}
