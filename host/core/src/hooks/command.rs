//! Command hooks: a command line written for Claude Code's hooks, run by
//! `/bin/sh -c` inside the confinement of every native program
//! ([`crate::exec::Launch`]), given the event as Claude Code's JSON on its
//! standard input, and answering as Claude Code reads a hook: by its exit
//! code, and by JSON (or, for a prompt or a session's start, plain text)
//! on its standard output.
//!
//! What it may do is what its entry grants and nothing else: it reads the
//! system's directories, the workspace and its `grants.read` directories
//! (never the rest of the home directory, credentials included), writes
//! only its `grants.write` directories and a private temporary directory
//! removed when it ends, has no network unless `grants.net` says, and gets
//! a scrubbed environment (`PATH`, `HOME`, `LANG`, the project directory as
//! `CLAUDE_PROJECT_DIR` and `CORRAL_PROJECT_DIR`, and its `grants.env`).
//!
//! The answer becomes one [`Verdict`]; an `allow` never widens corral's
//! policy (it is no objection), and a decision the event cannot carry out
//! is dropped with a note rather than failing the hook, as Claude Code
//! ignores it. A hook that cannot be started, times out, is killed, floods
//! its output or answers JSON that does not parse fails, which blocks a
//! blocking event (the rule of every hook).

use crate::exec::{Confinement, ExecOutput, Launch};
use crate::manifest::CommandHook;
use crate::protocol::{HookEvent, HookInput, Verdict};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes kept of a command hook's standard output and of its standard
/// error; more fails the hook.
pub const OUTPUT_CAP: usize = 256 * 1024;

/// What a session tells its command hooks beyond the event.
#[derive(Debug, Clone, Default)]
pub(super) struct Session {
    /// The session's id (empty before it is known).
    pub(super) id: String,
    /// Whether the run goes on because a `stop` hook blocked the last stop
    /// (Claude Code's `stop_hook_active`).
    pub(super) stop_active: bool,
}

/// A command hook's answer: its verdict, and a note for the log (why a
/// part of its answer was dropped, or the text of a non-blocking error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Answer {
    pub(super) verdict: Verdict,
    pub(super) note: String,
}

impl Answer {
    fn new(verdict: Verdict) -> Self {
        Self {
            verdict,
            note: String::new(),
        }
    }

    fn noted(verdict: Verdict, note: impl Into<String>) -> Self {
        Self {
            verdict,
            note: note.into(),
        }
    }
}

/// Runs `hook` on `input` confined and reads its answer; `Err` says why it
/// failed.
pub(super) async fn run(
    hook: &CommandHook,
    input: &HookInput,
    session: &Session,
) -> Result<Answer, String> {
    if crate::exec::confinement() == Confinement::Unavailable {
        return Err(
            "this kernel cannot confine programs (no Landlock), and corral runs no command hook \
             it cannot confine; run corral on a kernel with Landlock, or remove the hook"
                .into(),
        );
    }
    crate::manifest::trust::check_hook_code(hook).map_err(|e| e.to_string())?;
    let workspace = &hook.workspace;
    let stdin = serde_json::to_vec(&claude_input(input, session, workspace))
        .map_err(|e| format!("its input cannot be written: {e}"))?;
    let tmp = tempfile::Builder::new()
        .prefix("corral-hook-")
        .tempdir()
        .map_err(|e| format!("cannot create its temporary directory: {e}"))?;
    let launch = launch(hook, tmp.path()).stdin(stdin);
    let out = launch
        .run()
        .await
        .map_err(|e| format!("it did not run: {e}"))?;
    drop(tmp);
    answer(input.event(), hook.timeout_secs, out)
}

/// How `hook` is started: `/bin/sh -c COMMAND` in the workspace, reading
/// only the system, the workspace and its grants, writing only its
/// `grants.write` directories and `tmp`.
fn launch(hook: &CommandHook, tmp: &Path) -> Launch {
    let workspace = &hook.workspace;
    let mut dirs: Vec<PathBuf> = vec![workspace.clone(), tmp.to_path_buf()];
    dirs.extend(hook.read.iter().cloned());
    dirs.extend(hook.write.iter().cloned());
    let shell = Path::new("/bin/sh");
    let mut launch = Launch::new(shell, workspace)
        .named(crate::manifest::command_name(&hook.command))
        .arg("-c")
        .arg(&hook.command)
        .pass_env(["HOME", "LANG", "LC_ALL", "USER"])
        .env("TMPDIR", tmp)
        .pass_env(&hook.env)
        .strict(&dirs, Some(shell), None, workspace)
        .network(hook.net.clone())
        .timeout(Duration::from_secs(hook.timeout_secs))
        .output_cap(OUTPUT_CAP)
        .writable(tmp);
    if !hook.env.iter().any(|v| v == "PATH") {
        launch = launch.env("PATH", "/usr/local/bin:/usr/bin:/bin");
    }
    for var in CommandHook::PROJECT_DIR_VARS {
        launch = launch.env(var, workspace);
    }
    for dir in &hook.write {
        launch = launch.writable(dir).protect(dir);
    }
    launch
}

/// Claude Code's name of `event`.
pub fn claude_event(event: HookEvent) -> &'static str {
    match event {
        HookEvent::SessionStart => "SessionStart",
        HookEvent::SessionEnd => "SessionEnd",
        HookEvent::UserPrompt => "UserPromptSubmit",
        HookEvent::BeforeTool => "PreToolUse",
        HookEvent::AfterTool => "PostToolUse",
        HookEvent::AfterToolFailure => "PostToolUseFailure",
        HookEvent::BeforeCompact => "PreCompact",
        HookEvent::Stop => "Stop",
        HookEvent::SubagentStop => "SubagentStop",
    }
}

/// corral's file tools, whose `path` argument Claude Code's hooks read as
/// `file_path`.
const FILE_TOOLS: [&str; 3] = ["read_file", "write_file", "edit_file"];

/// A tool call's arguments as a hook reads them: the JSON object, with a
/// file tool's `path` also given as `file_path`.
fn tool_input(name: &str, arguments: &str) -> Value {
    let mut value: Value =
        serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()));
    if FILE_TOOLS.contains(&name)
        && let Value::Object(map) = &mut value
        && !map.contains_key("file_path")
        && let Some(path) = map.get("path").cloned()
    {
        map.insert("file_path".into(), path);
    }
    value
}

/// The event as Claude Code gives it to a hook on its standard input.
fn claude_input(input: &HookInput, session: &Session, workspace: &Path) -> Value {
    let mut v = json!({
        "session_id": session.id,
        "transcript_path": "",
        "cwd": workspace,
        "hook_event_name": claude_event(input.event()),
    });
    let extra = match input {
        HookInput::SessionStart { resumed, .. } => {
            json!({ "source": if *resumed { "resume" } else { "startup" } })
        }
        HookInput::SessionEnd { .. } => json!({ "reason": "other" }),
        HookInput::UserPrompt { text } => json!({ "prompt": text }),
        HookInput::BeforeTool { call, .. } => json!({
            "tool_name": call.name,
            "tool_input": tool_input(&call.name, &call.arguments),
        }),
        HookInput::AfterTool {
            call,
            content,
            is_error,
        } => json!({
            "tool_name": call.name,
            "tool_input": tool_input(&call.name, &call.arguments),
            "tool_response": serde_json::from_str::<serde_json::Map<String, Value>>(content)
                .map(Value::Object)
                .unwrap_or_else(|_| json!({ "content": content, "is_error": is_error })),
        }),
        HookInput::AfterToolFailure { call, error } => json!({
            "tool_name": call.name,
            "tool_input": tool_input(&call.name, &call.arguments),
            "error": error,
        }),
        HookInput::BeforeCompact { manual, .. } => json!({
            "trigger": if *manual { "manual" } else { "auto" },
            "custom_instructions": "",
        }),
        HookInput::Stop { .. } => json!({ "stop_hook_active": session.stop_active }),
        HookInput::SubagentStop { .. } => json!({ "stop_hook_active": false }),
    };
    if let (Value::Object(map), Value::Object(extra)) = (&mut v, extra) {
        map.extend(extra);
    }
    v
}

/// The JSON a hook may answer with, as Claude Code documents it (unknown
/// fields are ignored, as Claude Code ignores them).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Reply {
    #[serde(rename = "continue")]
    go_on: Option<bool>,
    stop_reason: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<Specific>,
}

/// `hookSpecificOutput`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Specific {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Value>,
    additional_context: Option<String>,
}

/// Text from the program, safe for the log, a terminal and the model.
fn shown(text: &str) -> String {
    crate::terminal::inert(text.trim()).into_owned()
}

/// What the program's run answers at `event`.
fn answer(event: HookEvent, timeout_secs: u64, out: ExecOutput) -> Result<Answer, String> {
    if out.timed_out {
        return Err(format!(
            "it did not finish within its timeout of {timeout_secs} s and was stopped"
        ));
    }
    if out.truncated {
        return Err(format!(
            "it printed more than {OUTPUT_CAP} bytes, more than a hook may answer"
        ));
    }
    let stderr = shown(&out.stderr);
    let answer = match out.exit_code {
        None => return Err(format!("it was killed before it answered; {stderr}")),
        Some(0) => exit_zero(event, &out.stdout)?,
        Some(2) => exit_two(event, stderr),
        Some(code) => Answer::noted(
            Verdict::Continue,
            format!("it exited {code}, a non-blocking error: {stderr}"),
        ),
    };
    Ok(fitted(event, answer))
}

/// Exit 2: what the event blocks, with the standard error as the reason.
fn exit_two(event: HookEvent, stderr: String) -> Answer {
    let reason = if stderr.is_empty() {
        "the hook exited 2 (block) without a reason".to_owned()
    } else {
        stderr
    };
    match event {
        HookEvent::SessionStart | HookEvent::SessionEnd | HookEvent::BeforeCompact => {
            Answer::noted(
                Verdict::Continue,
                format!("it exited 2, which does not block this event: {reason}"),
            )
        }
        _ => Answer::new(Verdict::Block(reason)),
    }
}

/// Exit 0: the JSON answer on standard output, plain text as context for a
/// prompt or a session's start, or nothing.
fn exit_zero(event: HookEvent, stdout: &str) -> Result<Answer, String> {
    let text = stdout.trim();
    if text.is_empty() {
        return Ok(Answer::new(Verdict::Continue));
    }
    if !text.starts_with('{') {
        return Ok(match event {
            HookEvent::UserPrompt | HookEvent::SessionStart => {
                Answer::new(Verdict::AddContext(shown(text)))
            }
            _ => Answer::noted(Verdict::Continue, format!("it printed: {}", shown(text))),
        });
    }
    let reply: Reply = serde_json::from_str(text).map_err(|e| {
        format!("its output starts like JSON but is not a JSON answer ({e}); print one JSON object, or plain text")
    })?;
    let specific = reply.hook_specific_output.unwrap_or_default();
    let say = |r: Option<String>, default: &str| shown(r.as_deref().unwrap_or(default));
    if reply.go_on == Some(false) {
        let reason = say(reply.stop_reason, "the hook answered continue: false");
        return Ok(match event {
            // Stopping is what a stop does anyway.
            HookEvent::Stop | HookEvent::SubagentStop => Answer::noted(Verdict::Continue, reason),
            _ => Answer::new(Verdict::Block(reason)),
        });
    }
    if reply.decision.as_deref() == Some("block") {
        return Ok(Answer::new(Verdict::Block(say(
            reply.reason,
            "the hook answered decision: block",
        ))));
    }
    let why = specific.permission_decision_reason;
    match specific.permission_decision.as_deref() {
        Some("deny") => {
            return Ok(Answer::new(Verdict::Block(say(
                why,
                "the hook answered permissionDecision: deny",
            ))));
        }
        Some("ask") => {
            return Ok(Answer::new(Verdict::Ask(say(
                why,
                "the hook answered permissionDecision: ask",
            ))));
        }
        _ => {}
    }
    let allow = specific.permission_decision.as_deref() == Some("allow")
        || reply.decision.as_deref() == Some("approve");
    let note = if allow {
        "it answered allow, which is no objection: a hook never widens corral's policy".to_owned()
    } else {
        String::new()
    };
    if let Some(input) = specific.updated_input {
        let Value::Object(_) = input else {
            return Err("its updatedInput is not a JSON object of arguments".into());
        };
        return Ok(Answer::noted(Verdict::Rewrite(input.to_string()), note));
    }
    if let Some(context) = specific.additional_context.filter(|c| !c.trim().is_empty()) {
        return Ok(Answer::noted(Verdict::AddContext(shown(&context)), note));
    }
    Ok(Answer::noted(Verdict::Continue, note))
}

/// `answer` with a decision `event` cannot carry out dropped, with a note
/// (Claude Code ignores what an event does not honour).
fn fitted(event: HookEvent, answer: Answer) -> Answer {
    if answer.verdict.fits(event) {
        return answer;
    }
    let (_, text) = answer.verdict.logged();
    Answer::noted(
        Verdict::Continue,
        format!(
            "it answered {}, which {} hooks cannot do, so it was dropped: {text}",
            answer.verdict.name(),
            event.as_str()
        ),
    )
}

/// New arguments from a hook's `updatedInput` for a call of `tool` whose
/// arguments were `original`: the `file_path` corral added for a file tool
/// is read back as its `path`.
pub(super) fn rewritten(tool: &str, original: &str, updated: &str) -> String {
    if !FILE_TOOLS.contains(&tool) {
        return updated.to_owned();
    }
    let had = serde_json::from_str::<Value>(original)
        .ok()
        .is_some_and(|v| v.get("file_path").is_some());
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(updated) else {
        return updated.to_owned();
    };
    if !had && let Some(path) = map.remove("file_path") {
        map.insert("path".into(), path);
    }
    Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i32, stdout: &str, stderr: &str) -> ExecOutput {
        ExecOutput {
            exit_code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            truncated: false,
            timed_out: false,
        }
    }

    fn verdict(event: HookEvent, code: i32, stdout: &str, stderr: &str) -> Verdict {
        answer(event, 60, out(code, stdout, stderr))
            .expect("an answer")
            .verdict
    }

    #[test]
    fn exit_codes_and_json_answers_read_as_claude_code_reads_them() {
        use HookEvent as E;
        assert_eq!(
            verdict(E::BeforeTool, 2, "", "no rm -rf\n"),
            Verdict::Block("no rm -rf".into())
        );
        assert_eq!(verdict(E::SessionStart, 2, "", "x"), Verdict::Continue);
        assert_eq!(verdict(E::BeforeTool, 1, "", "oops"), Verdict::Continue);
        assert_eq!(
            verdict(E::UserPrompt, 0, "branch main\n", ""),
            Verdict::AddContext("branch main".into())
        );
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#;
        assert_eq!(
            verdict(E::BeforeTool, 0, deny, ""),
            Verdict::Block("no".into())
        );
        let allow = r#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#;
        assert_eq!(verdict(E::BeforeTool, 0, allow, ""), Verdict::Continue);
        let ask = r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}"#;
        assert_eq!(
            verdict(E::BeforeTool, 0, ask, ""),
            Verdict::Ask("sure?".into())
        );
        let rewrite = r#"{"hookSpecificOutput":{"updatedInput":{"command":"ls"}}}"#;
        assert_eq!(
            verdict(E::BeforeTool, 0, rewrite, ""),
            Verdict::Rewrite(r#"{"command":"ls"}"#.into())
        );
        let stop = r#"{"decision":"block","reason":"run the tests"}"#;
        assert_eq!(
            verdict(E::Stop, 0, stop, ""),
            Verdict::Block("run the tests".into())
        );
        assert_eq!(
            verdict(E::Stop, 0, r#"{"continue":false}"#, ""),
            Verdict::Continue
        );
        let context = r#"{"hookSpecificOutput":{"additionalContext":"\u001b[2Jhi"}}"#;
        assert_eq!(
            verdict(E::AfterTool, 0, context, ""),
            Verdict::AddContext("\\x1b[2Jhi".into())
        );
        // What the event cannot do is dropped, not a failure.
        assert_eq!(verdict(E::BeforeTool, 0, context, ""), Verdict::Continue);
        assert!(answer(E::BeforeTool, 60, out(0, "{not json", "")).is_err());
        let mut timed = out(0, "", "");
        timed.timed_out = true;
        assert!(answer(E::AfterTool, 1, timed).is_err());
    }

    #[test]
    fn file_tools_read_and_rewrite_their_path_as_file_path() {
        let v = tool_input("write_file", r#"{"path":"a.rs","content":"x"}"#);
        assert_eq!(v["file_path"], "a.rs");
        assert_eq!(v["path"], "a.rs");
        let back = rewritten(
            "write_file",
            r#"{"path":"a.rs","content":"x"}"#,
            r#"{"file_path":"b.rs","path":"a.rs","content":"x"}"#,
        );
        assert_eq!(
            serde_json::from_str::<Value>(&back).expect("json"),
            json!({"path":"b.rs","content":"x"})
        );
        assert_eq!(
            tool_input("run_command", r#"{"command":"ls"}"#)["command"],
            "ls"
        );
    }
}
