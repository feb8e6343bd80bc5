//! Tools the host provides itself, beside the plugins' tools: `update_plan`
//! (the model's plan, an event in the session log), `read_output` (pages
//! through a tool output that was cut, from the session's artifacts) and
//! `task` (a subagent, [`super::subagent`]).
//!
//! They take the same path as a plugin's tool: the dispatcher looks them up,
//! validates the arguments against their schema, asks the permission policy
//! (with the effects of the call: a `task` that asks for tools that write
//! declares `write`), and logs the begin and the end. Only their call is the
//! host's own. The MCP server does not serve them: they need a session.

use crate::call::{CallOutcome, Checked, HostSpec, Runner};
use crate::protocol::{Effect, Event, Label, LabelKind, PlanStatus, PlanStep, ToolCall, ToolSpec};
use crate::runtime::Plugins;
use crate::runtime::Touched;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// What `tools list` shows in the plugin column for the host's own tools.
pub const HOST_TOOLS: &str = "(corral)";

/// Most steps a plan may have.
const MAX_STEPS: usize = 30;
/// Longest step text, in bytes.
const MAX_STEP: usize = 300;
/// Default and largest page of `read_output`, in bytes: a page stays under
/// the default cut (32 KiB), so reading it back is never cut again.
const PAGE: u64 = 16 * 1024;
const MAX_PAGE: u64 = 30 * 1024;

/// A tool the host provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostTool {
    /// `update_plan`.
    UpdatePlan,
    /// `read_output`.
    ReadOutput,
    /// `task`.
    Task,
    /// `skill`.
    Skill,
    /// `editor_read`: a file as the editor hosting corral has it.
    EditorRead,
    /// `editor_write`: a file written through that editor.
    EditorWrite,
}

impl HostTool {
    /// Every host tool.
    pub const ALL: [HostTool; 6] = [
        HostTool::UpdatePlan,
        HostTool::ReadOutput,
        HostTool::Task,
        HostTool::Skill,
        HostTool::EditorRead,
        HostTool::EditorWrite,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            HostTool::UpdatePlan => "update_plan",
            HostTool::ReadOutput => "read_output",
            HostTool::Task => "task",
            HostTool::Skill => "skill",
            HostTool::EditorRead => "editor_read",
            HostTool::EditorWrite => "editor_write",
        }
    }

    /// The host tool called `name`.
    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// How the model sees it.
    pub fn spec(self) -> ToolSpec {
        let (description, input_schema, effects) = match self {
            HostTool::UpdatePlan => (
                "Keep a short plan of the task: send the whole list of steps each time, in order, \
                 each pending, in_progress or done (at most one in_progress). Update it as you \
                 finish steps; the user sees it.",
                json!({
                    "type": "object",
                    "properties": {
                        "plan": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "step": {"type": "string"},
                                    "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                                },
                                "required": ["step", "status"],
                                "additionalProperties": false
                            }
                        },
                        "explanation": {"type": "string"}
                    },
                    "required": ["plan"],
                    "additionalProperties": false
                }),
                vec![],
            ),
            HostTool::ReadOutput => (
                "Read a page of a tool output that was cut: call_id is the id of the call whose \
                 output was cut, offset and limit are in bytes (defaults 0 and 16384, at most 30720). \
                 The answer says where the next page starts.",
                json!({
                    "type": "object",
                    "properties": {
                        "call_id": {"type": "string"},
                        "offset": {"type": "integer", "minimum": 0},
                        "limit": {"type": "integer", "minimum": 1}
                    },
                    "required": ["call_id"],
                    "additionalProperties": false
                }),
                vec![Effect::Read],
            ),
            HostTool::Task => (
                "Hand a bounded sub-task to a subagent with its own context: it gets `prompt` as \
                 its task and the tools named in `tools` (default: the tools that only read), and \
                 its final answer comes back as this call's output. Calls in one turn run in \
                 parallel. With `worktree` (true, or a name) it works in a git worktree of the \
                 workspace and its changes come back as a diff the user approves.",
                json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string"},
                        "tools": {"type": "array", "items": {"type": "string"}},
                        "worktree": {"type": ["boolean", "string"]},
                        "max_iterations": {"type": "integer", "minimum": 1}
                    },
                    "required": ["prompt"],
                    "additionalProperties": false
                }),
                vec![Effect::Read],
            ),
            HostTool::Skill => (
                "Read a skill listed under Skills in the system prompt before you use it: with \
                 `name` alone, its instructions and the list of its files; with `file` too (a \
                 path relative to the skill's folder, as listed), that file's text. Run a \
                 skill's scripts with run_command.",
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "file": {"type": "string"}
                    },
                    "required": ["name"],
                    "additionalProperties": false
                }),
                vec![Effect::Read],
            ),
            HostTool::EditorRead => (
                "Read a file as the user's editor has it, unsaved changes included: prefer it to \
                 read_file for files the user is editing. `path` is relative to the workspace; \
                 `line` (from 1) and `limit` pick lines.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "line": {"type": "integer", "minimum": 1},
                        "limit": {"type": "integer", "minimum": 1}
                    },
                    "required": ["path"],
                    "additionalProperties": false
                }),
                vec![Effect::Read],
            ),
            HostTool::EditorWrite => (
                "Write a whole file through the user's editor, so that its open buffer shows the \
                 change (the editor saves it). `path` is relative to the workspace; `content` is \
                 the file's new text.",
                json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "content": {"type": "string"}
                    },
                    "required": ["path", "content"],
                    "additionalProperties": false
                }),
                vec![Effect::Write],
            ),
        };
        ToolSpec {
            name: self.name().to_owned(),
            description: description.to_owned(),
            input_schema,
            effects,
            warnings: Vec::new(),
        }
    }

    /// The effects of one call with `args`: a `task` declares the effects of
    /// the tools it hands its subagent (with a worktree, its writes land in
    /// the worktree, but applying them to the workspace is a write too).
    pub fn effects(self, args: &Value, plugins: &Plugins) -> Vec<Effect> {
        let mut effects = self.spec().effects;
        if self == HostTool::Task {
            if let Some(names) = args.get("tools").and_then(Value::as_array) {
                for name in names.iter().filter_map(Value::as_str) {
                    if let Some((_, spec)) =
                        plugins.tools().into_iter().find(|(_, t)| t.name == name)
                    {
                        effects.extend(spec.effects.iter().copied());
                    }
                }
            }
            if args
                .get("worktree")
                .is_some_and(|w| w != &Value::Bool(false))
            {
                effects.push(Effect::Write);
            }
            effects.sort();
            effects.dedup();
        }
        effects
    }
}

impl HostSpec for HostTool {
    fn spec(&self) -> ToolSpec {
        HostTool::spec(*self)
    }

    fn effects(&self, args: &Value, plugins: &Plugins) -> Vec<Effect> {
        HostTool::effects(*self, args, plugins)
    }
}

/// What runs the `task` tool's subagents (the loop's spawner).
pub(crate) trait Tasks: Send + Sync {
    /// Runs one `task` call to the child's stop.
    fn run<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        host: &'a HostCall,
    ) -> BoxFuture<'a, CallOutcome>;

    /// Waits for every child started so far to end.
    fn wait(&self) -> BoxFuture<'_, ()>;

    /// The outcome the child of `call_id` ended with, once it has ended.
    fn outcome(&self, call_id: &str) -> Option<CallOutcome>;
}

/// What a host tool's call runs with, besides its arguments.
pub(crate) struct HostCall {
    /// The session's artifacts directory (whole outputs of cut calls).
    pub artifacts: PathBuf,
    /// The front-end, for subagents' events.
    pub ui: UnboundedSender<Event>,
    /// Cancelled when the user interrupts the turn.
    pub cancel: CancellationToken,
    /// Starts subagents; `None` where `task` is not offered.
    pub spawner: Option<Arc<dyn Tasks>>,
    /// corral's call ids by the model's own, for the model ids that name
    /// one call only in the session, so `read_output` takes either.
    pub model_ids: std::collections::HashMap<String, String>,
    /// The session's skills, which `skill` reads.
    pub skills: Arc<crate::skills::Skills>,
    /// The editor hosting the session, which `editor_read` and
    /// `editor_write` reach; `None` elsewhere.
    pub editor: Option<Arc<dyn crate::editor::EditorFiles>>,
    /// The workspace, which the editor's paths stay inside.
    pub workspace: PathBuf,
}

/// The loop's host tools, and the subagents `task` started awaited before
/// the turn goes on.
impl Runner for HostCall {
    fn run<'a>(&'a self, checked: &'a Checked) -> BoxFuture<'a, CallOutcome> {
        Box::pin(call(checked, self))
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {
            if let Some(spawner) = &self.spawner {
                spawner.wait().await;
            }
        })
    }

    fn interrupted(&self, call_id: &str) -> Option<CallOutcome> {
        self.spawner.as_ref()?.outcome(call_id)
    }

    fn note(&self, call: &ToolCall, outcome: &CallOutcome) -> Option<Event> {
        plan_event(&call.id, outcome)
    }

    fn provenance(&self, checked: &Checked, outcome: &CallOutcome) -> (Touched, Vec<Label>) {
        if checked.call.name == HostTool::EditorRead.name() {
            // The editor's text of a workspace file is labelled as a read of it.
            return match outcome {
                CallOutcome::Output {
                    data: Some(data),
                    is_error: false,
                    ..
                } => {
                    let path = data.get("path").and_then(Value::as_str).unwrap_or_default();
                    let touched = Touched {
                        reads: vec![PathBuf::from(path)],
                        ..Touched::default()
                    };
                    (touched, Vec::new())
                }
                _ => (Touched::default(), Vec::new()),
            };
        }
        if checked.call.name != HostTool::Skill.name() {
            return (Touched::default(), Vec::new());
        }
        skill_provenance(outcome)
    }
}

/// Where what a `skill` call read came from: a project's skill is a file of
/// the workspace, labelled as any read of it is; the user's skill is the
/// user's own.
fn skill_provenance(outcome: &CallOutcome) -> (Touched, Vec<Label>) {
    let CallOutcome::Output {
        data: Some(data), ..
    } = outcome
    else {
        return (Touched::default(), Vec::new());
    };
    let path = data.get("path").and_then(Value::as_str).unwrap_or_default();
    let name = data
        .get("skill")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if data.get("scope").and_then(Value::as_str) == Some(crate::skills::Scope::User.as_str()) {
        let label = Label {
            kind: LabelKind::Workspace,
            source: format!(
                "the user's skill `{name}` ({})",
                crate::terminal::inert_line(path)
            ),
        };
        return (Touched::default(), vec![label]);
    }
    let touched = Touched {
        reads: vec![PathBuf::from(path)],
        ..Touched::default()
    };
    (touched, Vec::new())
}

/// Runs one admitted call of a host tool.
pub(crate) async fn call(checked: &Checked, host: &HostCall) -> CallOutcome {
    let Some(tool) = HostTool::by_name(&checked.call.name).filter(|_| checked.is_host_tool())
    else {
        return CallOutcome::Failed(format!(
            "`{}` is not one of the host's own tools",
            checked.call.name
        ));
    };
    let args = checked.args();
    match tool {
        HostTool::UpdatePlan => update_plan(args),
        HostTool::ReadOutput => {
            let named = args.get("call_id").and_then(Value::as_str).unwrap_or("");
            match host.model_ids.get(named) {
                Some(own) => {
                    let mut args = args.clone();
                    args["call_id"] = Value::String(own.clone());
                    read_output(&args, &host.artifacts)
                }
                None => read_output(args, &host.artifacts),
            }
        }
        HostTool::Task => match &host.spawner {
            Some(spawner) => spawner.run(&checked.call, args, host).await,
            None => CallOutcome::Failed(
                "`task` is not available here: subagents may not start subagents beyond the depth limit"
                    .into(),
            ),
        },
        HostTool::Skill => skill(args, &host.skills),
        HostTool::EditorRead | HostTool::EditorWrite => match &host.editor {
            Some(editor) => crate::editor::call(tool == HostTool::EditorWrite, checked, editor.as_ref(), &host.workspace).await,
            None => CallOutcome::Failed(format!(
                "`{}` is offered only in a session an editor hosts (`corral acp`)",
                tool.name()
            )),
        },
    }
}

/// Reads a skill, or one of its files, for the model.
fn skill(args: &Value, skills: &crate::skills::Skills) -> CallOutcome {
    let name = args.get("name").and_then(Value::as_str).unwrap_or("");
    let file = args.get("file").and_then(Value::as_str);
    match crate::skills::read(skills, name, file) {
        Ok(used) => CallOutcome::Output {
            content: used.content,
            is_error: false,
            data: Some(json!({
                "skill": used.name,
                "scope": used.scope.as_str(),
                "path": used.path.display().to_string(),
            })),
        },
        Err(crate::skills::ReadError::Invalid(why)) => CallOutcome::Invalid(why),
        Err(crate::skills::ReadError::Refused(why)) => CallOutcome::Failed(why),
    }
}

/// The plan a successful `update_plan` call set, to log as an event.
fn plan_event(call_id: &str, outcome: &CallOutcome) -> Option<Event> {
    let CallOutcome::Output {
        is_error: false,
        data: Some(data),
        ..
    } = outcome
    else {
        return None;
    };
    let steps: Vec<PlanStep> = serde_json::from_value(data.get("plan")?.clone()).ok()?;
    Some(Event::PlanUpdated {
        call_id: call_id.to_owned(),
        steps,
    })
}

fn update_plan(args: &Value) -> CallOutcome {
    let steps: Vec<PlanStep> = match args.get("plan").cloned().map(serde_json::from_value) {
        Some(Ok(steps)) => steps,
        Some(Err(e)) => return CallOutcome::Invalid(format!("invalid plan: {e}")),
        None => return CallOutcome::Invalid("invalid arguments: `plan` is missing".into()),
    };
    if steps.len() > MAX_STEPS {
        return CallOutcome::Invalid(format!(
            "the plan has {} steps; keep it to at most {MAX_STEPS}",
            steps.len()
        ));
    }
    if let Some(bad) = steps
        .iter()
        .find(|s| s.step.trim().is_empty() || s.step.len() > MAX_STEP)
    {
        return CallOutcome::Invalid(format!(
            "every step needs a text of 1 to {MAX_STEP} bytes; one has {}",
            bad.step.len()
        ));
    }
    let active = steps
        .iter()
        .filter(|s| s.status == PlanStatus::InProgress)
        .count();
    if active > 1 {
        return CallOutcome::Invalid(format!(
            "{active} steps are in_progress; at most one may be"
        ));
    }
    let done = steps
        .iter()
        .filter(|s| s.status == PlanStatus::Done)
        .count();
    CallOutcome::Output {
        content: format!("plan updated: {} steps, {done} done", steps.len()),
        is_error: false,
        data: Some(json!({ "plan": steps })),
    }
}

/// The artifact file of `call_id`, named as [`crate::log::SessionLog::save_artifact`]
/// names it. The id is a name, never a path.
fn artifact_name(call_id: &str) -> Result<String, String> {
    let valid = !call_id.is_empty()
        && call_id.len() <= 256
        && call_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        && !call_id.contains("..");
    if !valid {
        return Err(format!(
            "`{}` is not a call id: use the id of a call whose output was cut (letters, digits, `-`, `_`)",
            call_id.escape_debug()
        ));
    }
    Ok(crate::log::artifact_file(call_id))
}

fn read_output(args: &Value, artifacts: &std::path::Path) -> CallOutcome {
    let call_id = args.get("call_id").and_then(Value::as_str).unwrap_or("");
    let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0);
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(PAGE)
        .min(MAX_PAGE);
    let name = match artifact_name(call_id) {
        Ok(n) => n,
        Err(e) => return CallOutcome::Invalid(e),
    };
    let missing = || {
        CallOutcome::Failed(format!(
            "no saved output for the call `{call_id}` in this session: only outputs that were cut are saved"
        ))
    };
    let Ok(dir) = cap_std::fs::Dir::open_ambient_dir(artifacts, cap_std::ambient_authority())
    else {
        return missing();
    };
    let text = {
        use cap_std::fs::OpenOptionsExt as _;
        let opened = dir.open_with(
            &name,
            cap_std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(crate::fsread::OPEN_FLAGS | libc::O_NOFOLLOW),
        );
        let Ok(file) = opened else {
            return missing();
        };
        let mut bytes = Vec::new();
        if let Err(e) = std::io::Read::read_to_end(&mut file.into_std(), &mut bytes) {
            return CallOutcome::Failed(format!(
                "cannot read the saved output of `{call_id}`: {e}"
            ));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let total = text.len() as u64;
    if offset > total || (offset == total && total > 0) {
        return CallOutcome::Invalid(format!(
            "offset {offset} is past the end: the output of `{call_id}` has {total} bytes"
        ));
    }
    let mut start = offset as usize;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut end = (start as u64 + limit).min(total) as usize;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut content = text[start..end].to_owned();
    if end < text.len() {
        content.push_str(&format!(
            "\n[bytes {start}-{end} of {total}; the next page starts at offset {end}]"
        ));
    } else {
        content.push_str(&format!(
            "\n[bytes {start}-{end} of {total}; end of output]"
        ));
    }
    CallOutcome::Output {
        content,
        is_error: false,
        data: Some(json!({ "offset": start, "end": end, "total": total })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_names_are_names_not_paths() {
        assert_eq!(artifact_name("call_1").unwrap(), "call_1.txt");
        assert_eq!(artifact_name("toolu.01:x").unwrap(), "toolu_01_x.txt");
        for bad in ["", "../x", "a/b", "..", "a\0b", "a\\b", "x..y"] {
            assert!(artifact_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pages_say_where_the_next_starts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c1.txt"), "héllo world").unwrap();
        let page = |offset: u64, limit: u64| match read_output(
            &json!({"call_id": "c1", "offset": offset, "limit": limit}),
            dir.path(),
        ) {
            CallOutcome::Output { content, .. } => content,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            page(0, 2),
            "h\n[bytes 0-1 of 12; the next page starts at offset 1]"
        );
        assert_eq!(
            page(1, 5),
            "éllo\n[bytes 1-6 of 12; the next page starts at offset 6]"
        );
        assert_eq!(page(6, 100), " world\n[bytes 6-12 of 12; end of output]");
        assert!(matches!(
            read_output(&json!({"call_id": "c1", "offset": 12}), dir.path()),
            CallOutcome::Invalid(_)
        ));
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("c2.txt")).unwrap();
        assert!(matches!(
            read_output(&json!({"call_id": "c2"}), dir.path()),
            CallOutcome::Failed(_)
        ));
    }

    #[test]
    fn a_plan_has_at_most_one_step_in_progress() {
        let one = json!({"plan": [{"step": "a", "status": "done"}, {"step": "b", "status": "in_progress"}]});
        let out = update_plan(&one);
        assert!(plan_event("p", &out).is_some(), "{out:?}");
        let two = json!({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]});
        assert!(matches!(update_plan(&two), CallOutcome::Invalid(_)));
    }
}
