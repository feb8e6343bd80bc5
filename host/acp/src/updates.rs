//! corral's events as ACP `session/update` notifications: what an editor
//! shows of a turn.
//!
//! - streamed text → `agent_message_chunk` (live), the logged answer →
//!   `agent_message_chunk` (when a finished session is loaded), the user's
//!   prompt → `user_message_chunk` (loaded only: the editor wrote it);
//! - a tool call → `tool_call` when it is first seen (asked about or
//!   started), with its title, kind, locations, raw input and, for an edit,
//!   the diff; its end → `tool_call_update` `completed` or `failed` with
//!   what the model read;
//! - the plan (`update_plan`) → `plan`; a mode change →
//!   `current_mode_update`.
//!
//! Every text from the model or a tool is made inert first
//! ([`corral_protocol::terminal::inert`]): an editor renders it, and some
//! render it in a terminal.

use corral_protocol::terminal::inert;
use corral_protocol::{Event, PlanStatus, ToolCall, ToolOutcome};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Longest title shown for a call, in characters.
const TITLE_CHARS: usize = 120;

/// Turns one session's events into updates; remembers which calls the
/// editor has been told of.
#[derive(Debug)]
pub struct Updates {
    workspace: PathBuf,
    announced: HashSet<String>,
    /// Playing a finished session's log back: the answers come whole from
    /// the log, not as deltas, and the prompts are shown.
    replay: bool,
}

impl Updates {
    /// Updates of a live session in `workspace`.
    pub fn live(workspace: &Path) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            announced: HashSet::new(),
            replay: false,
        }
    }

    /// Updates of a finished session's log, played back.
    pub fn replay(workspace: &Path) -> Self {
        Self {
            replay: true,
            ..Self::live(workspace)
        }
    }

    /// The updates `event` makes (often none).
    pub fn of(&mut self, event: &Event) -> Vec<Value> {
        match event {
            Event::TextDelta { text } if !self.replay => vec![chunk("agent_message_chunk", text)],
            Event::UserMessage { text } if self.replay => vec![chunk("user_message_chunk", text)],
            Event::RequestEnd { message, .. } if self.replay && !message.text.is_empty() => {
                vec![chunk("agent_message_chunk", &message.text)]
            }
            Event::ApprovalRequested(request) => self.announce(&request.call),
            Event::ToolCallBegin { call } => {
                let mut out = self.announce(call);
                out.push(json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call.id,
                    "status": "in_progress",
                }));
                out
            }
            Event::ToolCallEnd {
                call_id, outcome, ..
            } => vec![ended(call_id, outcome)],
            Event::PlanUpdated { steps, .. } => {
                let entries: Vec<Value> = steps
                    .iter()
                    .map(|s| {
                        json!({
                            "content": inert(&s.step),
                            "priority": "medium",
                            "status": match s.status {
                                PlanStatus::Pending => "pending",
                                PlanStatus::InProgress => "in_progress",
                                PlanStatus::Done => "completed",
                            },
                        })
                    })
                    .collect();
                vec![json!({"sessionUpdate": "plan", "entries": entries})]
            }
            Event::ModeChanged { mode } => vec![json!({
                "sessionUpdate": "current_mode_update",
                "currentModeId": mode.as_str(),
            })],
            _ => Vec::new(),
        }
    }

    /// The `tool_call` for `call` the first time it is seen, else nothing.
    fn announce(&mut self, call: &ToolCall) -> Vec<Value> {
        if !self.announced.insert(call.id.clone()) {
            return Vec::new();
        }
        let mut update = self.tool_call(call);
        update["sessionUpdate"] = json!("tool_call");
        update["status"] = json!("pending");
        vec![update]
    }

    /// What an editor shows of `call`: `toolCallId`, `title`, `kind`,
    /// `rawInput`, `locations` and, for an edit, its diff.
    pub fn tool_call(&self, call: &ToolCall) -> Value {
        let input: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let mut out = json!({
            "toolCallId": call.id,
            "title": title(&call.name, &input),
            "kind": kind(&call.name),
            "rawInput": input,
        });
        if let Some(path) = input["path"].as_str() {
            let mut location = json!({"path": self.absolute(path)});
            if let Some(line) = input["line"].as_u64().or(input["offset"].as_u64()) {
                location["line"] = json!(line);
            }
            out["locations"] = json!([location]);
            if let Some(diff) = self.diff(&call.name, path, &input) {
                out["content"] = json!([diff]);
            }
        }
        // The raw input, the paths and the diff are the model's text too.
        inert_value(out)
    }

    /// The edit `tool` makes of `path`, as an ACP diff.
    fn diff(&self, tool: &str, path: &str, input: &Value) -> Option<Value> {
        let path = self.absolute(path);
        match tool {
            "write_file" | "editor_write" => Some(json!({
                "type": "diff",
                "path": path,
                "oldText": null,
                "newText": input["content"].as_str()?,
            })),
            "edit_file" => Some(json!({
                "type": "diff",
                "path": path,
                "oldText": input["old_string"].as_str()?,
                "newText": input["new_string"].as_str()?,
            })),
            _ => None,
        }
    }

    /// `path` as an absolute path (ACP's paths are absolute).
    fn absolute(&self, path: &str) -> String {
        let p = Path::new(path);
        if p.is_absolute() {
            path.to_owned()
        } else {
            self.workspace.join(p).display().to_string()
        }
    }
}

/// `value` with every string in it (keys too) made inert: an editor shows
/// a call's raw input and output, and decodes `\u001b` back to an escape.
fn inert_value(value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(inert(&s).into_owned()),
        Value::Array(items) => Value::Array(items.into_iter().map(inert_value).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (inert(&k).into_owned(), inert_value(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A chunk of text of `kind` (`agent_message_chunk`, `user_message_chunk`).
fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": inert(text)}})
}

/// The update that ends call `id` with what the model read.
fn ended(id: &str, outcome: &ToolOutcome) -> Value {
    let mut update = json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "status": if outcome.is_error { "failed" } else { "completed" },
        "content": [{"type": "content", "content": {"type": "text", "text": inert(&outcome.content)}}],
    });
    if let Some(data) = &outcome.data {
        update["rawOutput"] = inert_value(data.clone());
    }
    update
}

/// The ACP kind of a tool, by its name.
pub fn kind(tool: &str) -> &'static str {
    let name = tool.rsplit("__").next().unwrap_or(tool);
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    if has(&[
        "read",
        "show",
        "git_log",
        "git_status",
        "git_diff",
        "word_count",
    ]) {
        "read"
    } else if has(&[
        "write",
        "edit",
        "patch",
        "git_add",
        "git_commit",
        "git_branch",
    ]) {
        "edit"
    } else if has(&["delete", "remove"]) {
        "delete"
    } else if has(&["move", "rename"]) {
        "move"
    } else if has(&["grep", "glob", "search", "list", "find"]) {
        "search"
    } else if has(&["run", "command", "exec", "shell", "task"]) {
        "execute"
    } else if has(&["fetch", "http", "web"]) {
        "fetch"
    } else if has(&["plan"]) {
        "think"
    } else {
        "other"
    }
}

/// A one-line title: the tool and what it works on.
fn title(tool: &str, input: &Value) -> String {
    let what = ["command", "path", "pattern", "url", "query", "prompt"]
        .iter()
        .find_map(|key| input[*key].as_str().map(str::to_owned))
        .or_else(|| {
            input["argv"].as_array().map(|argv| {
                argv.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        });
    let text = match what {
        Some(what) => format!("{tool} {}", what.replace(['\n', '\r'], " ")),
        None => tool.to_owned(),
    };
    let inert = inert(&text);
    let total = inert.chars().count();
    let mut shown: String = inert.chars().take(TITLE_CHARS).collect();
    if total > TITLE_CHARS {
        // Said, not hidden: the whole call is in the request's content.
        shown.push_str(&format!("… (+{} characters)", total - TITLE_CHARS));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str, args: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
            model_id: None,
        }
    }

    #[test]
    fn a_call_is_announced_once_and_ends_with_what_the_model_read() {
        let mut updates = Updates::live(Path::new("/ws"));
        let c = call(
            "c-1",
            "write_file",
            json!({"path": "a.txt", "content": "new\n"}),
        );
        let first = updates.of(&Event::ToolCallBegin { call: c.clone() });
        assert_eq!(first[0]["sessionUpdate"], "tool_call");
        assert_eq!(first[0]["kind"], "edit");
        assert_eq!(first[0]["locations"][0]["path"], "/ws/a.txt");
        assert_eq!(first[0]["content"][0]["newText"], "new\n");
        assert_eq!(first[1]["status"], "in_progress");
        let hidden = call(
            "c-2",
            "write_file",
            json!({"path": "a\u{1b}[8m.txt", "content": "x\u{1b}]52;c;eA==\u{7}", "k\u{1b}": 1}),
        );
        let shown = updates.tool_call(&hidden).to_string();
        assert!(
            !shown.contains("\\u001b") && !shown.contains('\u{1b}'),
            "{shown}"
        );
        let again = updates.of(&Event::ToolCallBegin { call: c });
        assert_eq!(again.len(), 1, "{again:?}");
        let end = updates.of(&Event::ToolCallEnd {
            call_id: "c-1".into(),
            name: "write_file".into(),
            outcome: ToolOutcome {
                content: "wrote \x1b]52;c;x\x07".into(),
                is_error: true,
                data: None,
                truncated_from: None,
                artifact: None,
                labels: Vec::new(),
            },
            duration_ms: 1,
        });
        assert_eq!(end[0]["status"], "failed");
        let text = end[0]["content"][0]["content"]["text"].as_str().unwrap();
        assert!(!text.contains('\x1b'), "{text}");
    }

    #[test]
    fn titles_are_one_inert_line_and_kinds_follow_the_name() {
        let t = title("run_command", &json!({"command": "ls\n\x1b[2J -la"}));
        assert!(!t.contains('\n') && !t.contains('\x1b'), "{t}");
        assert_eq!(kind("read_file"), "read");
        assert_eq!(kind("grep"), "search");
        assert_eq!(kind("run_command"), "execute");
        assert_eq!(kind("web_fetch"), "fetch");
        assert_eq!(kind("tracker__create_issue"), "other");
        let long = title("grep", &json!({"pattern": "x".repeat(500)}));
        assert!(long.ends_with("… (+385 characters)"), "{long}");
    }
}
