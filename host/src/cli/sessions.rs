//! `corral sessions`, `corral show` and `corral compact`: the workspace's
//! session logs.

use super::render::short;
use super::{fail, out, out_json};
use corral_core::session;
use corral_protocol::Event;
use std::path::Path;
use std::process::ExitCode;

fn sessions_dir(workspace: &Path) -> Result<std::path::PathBuf, ExitCode> {
    session::sessions_dir(workspace).map_err(|e| fail(&e.to_string()))
}

pub fn sessions(workspace: &Path, json: bool) -> ExitCode {
    let dir = match sessions_dir(workspace) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let list = match session::list(&dir) {
        Ok(l) => l,
        Err(e) => return fail(&format!("cannot list sessions: {e}")),
    };
    if json {
        out_json(&serde_json::to_string_pretty(&list).unwrap_or_default());
        return ExitCode::SUCCESS;
    }
    if list.is_empty() {
        out("no sessions in this workspace yet; start one with `corral run \"...\"`");
        return ExitCode::SUCCESS;
    }
    let mut text = String::new();
    for s in list {
        let (y, mo, d, h, mi, _) = session::civil(s.started_ms / 1000);
        let prompt: String = s.first_prompt.chars().take(60).collect();
        text.push_str(&format!(
            "{}  {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}  {:<16}  {}  {prompt}\n",
            s.id, s.status, s.workspace
        ));
    }
    out(&text);
    ExitCode::SUCCESS
}

/// Prints the transcript of session `id`, or of the latest one (`--last`).
pub fn show(workspace: &Path, id: Option<&str>, json: bool) -> ExitCode {
    let dir = match sessions_dir(workspace) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let path = match session::find_session(&dir, id) {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string()),
    };
    let records = match session::read(&path) {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot read {}: {e}", path.display())),
    };
    if json {
        for r in &records {
            out_json(&serde_json::to_string(r).unwrap_or_default());
        }
        return ExitCode::SUCCESS;
    }
    out(&transcript(&records));
    ExitCode::SUCCESS
}

/// A session's transcript as `corral show` prints it: prompts, answers,
/// tool calls with the first line of their output, plans, compactions and
/// stops (not yet made inert: the caller prints it through `out`).
fn transcript(records: &[session::Record]) -> String {
    let mut text = String::new();
    for r in records {
        match &r.event {
            Event::SessionStarted {
                session_id,
                workspace,
                provider,
                ..
            } => text.push_str(&format!(
                "session {session_id} in {workspace} (provider {provider})\n"
            )),
            Event::SessionResumed { closed_calls, .. } => text.push_str(&format!(
                "-- resumed ({} unfinished calls closed) --\n",
                closed_calls.len()
            )),
            Event::UserMessage { text: t } => text.push_str(&format!("\n> {t}\n\n")),
            Event::RequestEnd { message, .. } if !message.text.is_empty() => {
                text.push_str(&format!("{}\n", message.text.trim_end()));
            }
            Event::ToolCallBegin { call } => {
                text.push_str(&format!("● {}({})\n", call.name, short(&call.arguments)))
            }
            Event::PlanUpdated { steps, .. } => {
                text.push_str("  plan:\n");
                for step in steps {
                    text.push_str(&format!("    [{}] {}\n", step.status.as_str(), step.step));
                }
            }
            Event::SubagentStarted {
                parent,
                parent_call,
                worktree,
                ..
            } => {
                text.push_str(&format!(
                    "subagent of session {parent} (call {parent_call})"
                ));
                if let Some(w) = worktree {
                    text.push_str(&format!(" in worktree {w}"));
                }
                text.push('\n');
            }
            Event::ToolCallEnd { outcome, .. } => {
                let first: String = outcome
                    .content
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(100)
                    .collect();
                let tag = if outcome.is_error { "error: " } else { "" };
                text.push_str(&format!("  ⎿ {tag}{first}\n"));
                if let Some(child) = outcome
                    .data
                    .as_ref()
                    .and_then(|d| d.get("session_id"))
                    .and_then(serde_json::Value::as_str)
                {
                    text.push_str(&format!("    (subagent session {child})\n"));
                }
            }
            Event::Compacted {
                summary,
                replaced,
                trigger,
                ..
            } => text.push_str(&format!(
                "-- compacted ({trigger}): {replaced} messages replaced by this summary --\n{}\n--\n",
                summary.trim_end()
            )),
            Event::CompactionFailed { message } => {
                text.push_str(&format!("-- compaction failed: {message} --\n"))
            }
            Event::AnswerInterrupted { text: t } => {
                text.push_str(&format!("{}\n[answer interrupted by the user]\n", t.trim_end()));
            }
            Event::Undone { turn, files } => text.push_str(&format!(
                "-- undone: the files of turn {turn} restored ({}) --\n",
                files.join(", ")
            )),
            Event::Rewound {
                turn,
                conversation,
                files,
            } => {
                let restored = if files.is_empty() {
                    "no file restored".to_owned()
                } else {
                    format!("restored {}", files.join(", "))
                };
                text.push_str(&if *conversation {
                    format!(
                        "-- rewound to before turn {turn}: the messages from it on (above) are \
                         left out of the conversation; {restored} --\n"
                    )
                } else {
                    format!("-- files as before turn {turn}: {restored} --\n")
                });
            }
            // A turn that ended with its answer needs no marker: the answer
            // (or a `!` command's output) is its end.
            Event::Stop {
                reason: corral_protocol::StopReason::FinalAnswer,
                ..
            } => {}
            Event::Stop { reason, message } => text.push_str(&format!(
                "[{}{}]\n",
                reason.as_str(),
                message
                    .as_ref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )),
            _ => {}
        }
    }
    text
}

/// Prints the transcript of session `id` of `workspace`, so that it stays
/// in the terminal's scrollback after the UI leaves its alternate screen.
/// Prints nothing when the session cannot be read (it may never have
/// started, or was left without a prompt and removed). Whether it printed.
pub(super) fn print_transcript(workspace: &Path, id: &str) -> bool {
    let Ok(dir) = session::sessions_dir(workspace) else {
        return false;
    };
    let Ok(path) = session::find_session(&dir, Some(id)) else {
        return false;
    };
    match session::read(&path) {
        Ok(records) if !records.is_empty() => {
            out(&transcript(&records));
            true
        }
        _ => false,
    }
}

/// `corral compact ID` (or `--last`: the latest session): reopens the
/// session and compacts its history.
pub async fn compact(workspace: &Path, id: Option<&str>, json: bool) -> ExitCode {
    let resume = match id {
        Some(id) => session::Resume::Id(id.to_owned()),
        None => session::Resume::Last,
    };
    let config = session::SessionConfig {
        workspace: workspace.to_path_buf(),
        resume: Some(resume),
        ..session::SessionConfig::default()
    };
    let mut s = match session::open(config).await {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    s.submit(corral_protocol::Op::Compact);
    s.submit(corral_protocol::Op::Shutdown);
    let mut result: Result<String, String> = Err("the session ended before compacting".into());
    while let Some(event) = s.next_event().await {
        if json {
            out_json(&serde_json::to_string(&event).unwrap_or_default());
        }
        match event {
            Event::Compacted {
                replaced,
                kept,
                tokens_before,
                tokens_after,
                ..
            } => {
                result = Ok(format!(
                    "compacted {}: {replaced} messages summarised, {kept} kept; about {tokens_before} → {tokens_after} tokens",
                    s.id()
                ))
            }
            Event::CompactionFailed { message } | Event::Error { message } => result = Err(message),
            _ => {}
        }
    }
    if let Err(e) = s.finish().await {
        return fail(&format!("{e:#}"));
    }
    match result {
        Ok(line) => {
            if !json {
                out(&line);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
