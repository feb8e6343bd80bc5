//! Subagents: the `task` tool starts a child [`Agent`] with a prompt, a
//! subset of its parent's tools and a context of its own; its final answer
//! is the call's output.
//!
//! A child never gets more than its parent: its tools are among the
//! parent's (by default only those that read), every other plugin tool is
//! refused by a deny rule added to the parent's rules, and its mode is
//! read-only unless it was handed a tool that does more, then the parent's.
//! Its session log is its own, in the parent's sessions directory, linked by
//! an [`Event::SubagentStarted`]; the parent's `ToolCallEnd` names the
//! child's session in its data. Its events reach the front-end wrapped in
//! [`Event::Subagent`]. Children of one turn run in parallel, bounded; a
//! child may start children of its own only below the depth limit; its
//! iterations are bounded; interrupting the parent cancels the children
//! (their logs end with an interrupted stop before the parent's turn ends).
//!
//! With `worktree`, the child works in a git worktree of the workspace
//! ([`crate::worktree`]) with its plugins loaded for that tree; what it
//! changed is put to the user as a diff and applied only when approved,
//! otherwise kept as a patch file.

use super::host_tools::{HostCall, HostTool, Tasks};
use super::{Agent, AgentOptions};
use crate::call::CallOutcome;
use crate::log::SessionLog;
use crate::manifest::Manifest;
use crate::policy::{Action, parse_rule};
use crate::protocol::{
    ApprovalAnswer, ApprovalRequest, Event, Message, Mode, PermissionDecision, StopReason, ToolCall,
};
use crate::runtime::{Plugin, Plugins, Runtime};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// What a runtime needs to load a child's plugins for a worktree.
#[derive(Clone)]
pub struct SubagentEnv {
    /// The engine the session's plugins were loaded by.
    pub runtime: Arc<Runtime>,
    /// The session's manifest.
    pub manifest: Manifest,
}

/// How subagents are started, and where this agent stands among them.
#[derive(Clone)]
pub struct SubagentOptions {
    /// 0 for a top-level session, 1 for its children, …
    pub depth: u32,
    /// Deepest level that may be started: children of an agent at this
    /// depth are refused (default 1: children, no grandchildren).
    pub max_depth: u32,
    /// Children of one agent running at once.
    pub parallel: usize,
    /// Iterations a child gets unless its call asks for fewer (never more
    /// than its parent's).
    pub max_iterations: u32,
    /// For a child: its parent's session and `task` call.
    pub parent: Option<(String, String)>,
    /// For a child in a worktree: the worktree's directory.
    pub worktree: Option<String>,
    /// For worktrees: the runtime and manifest to load plugins with.
    pub env: Option<SubagentEnv>,
    /// What the whole tree of agents holds (provenance), shared so that a
    /// child's reads arm its parent's guard and the parent's arm the child's.
    pub held: Option<Arc<crate::provenance::SharedHeld>>,
    pub(crate) slots: Arc<Semaphore>,
}

impl Default for SubagentOptions {
    fn default() -> Self {
        Self::new(1, 4, 20)
    }
}

impl SubagentOptions {
    /// A top-level agent's settings: children may nest `max_depth` deep, run
    /// `parallel` at once, and get `max_iterations` round trips each.
    pub fn new(max_depth: u32, parallel: usize, max_iterations: u32) -> Self {
        let parallel = parallel.max(1);
        Self {
            depth: 0,
            max_depth,
            parallel,
            max_iterations: max_iterations.max(1),
            parent: None,
            worktree: None,
            env: None,
            held: None,
            slots: Arc::new(Semaphore::new(parallel)),
        }
    }
}

/// The host tools an agent with `options` is offered.
pub(crate) fn host_tools(options: &AgentOptions) -> Vec<HostTool> {
    let mut tools = vec![HostTool::UpdatePlan, HostTool::ReadOutput];
    if options.subagents.depth < options.subagents.max_depth {
        tools.push(HostTool::Task);
    }
    if options.skills.any_offered() {
        tools.push(HostTool::Skill);
    }
    if let Some(editor) = &options.editor {
        if editor.can_read() {
            tools.push(HostTool::EditorRead);
        }
        if editor.can_write() {
            tools.push(HostTool::EditorWrite);
        }
    }
    tools
}

/// Starts the children of one agent.
pub(crate) struct Spawner {
    pub plugins: Arc<Plugins>,
    pub provider: Arc<Plugin>,
    pub options: AgentOptions,
    pub workspace: PathBuf,
    pub sessions_dir: PathBuf,
    pub session_id: String,
    /// The children running, awaited before the parent's turn ends.
    pub running: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// What each child ended with, by call id, for a turn whose calls were
    /// interrupted before their outcomes were taken.
    pub outcomes: Arc<Mutex<std::collections::HashMap<String, CallOutcome>>>,
}

/// A call's arguments, read.
struct Task {
    prompt: String,
    tools: Vec<String>,
    worktree: Option<String>,
    max_iterations: u32,
}

impl Tasks for Spawner {
    fn run<'a>(
        &'a self,
        call: &'a ToolCall,
        args: &'a Value,
        host: &'a HostCall,
    ) -> futures::future::BoxFuture<'a, CallOutcome> {
        Box::pin(self.start(call, args, host))
    }

    fn wait(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.wait_all())
    }

    fn outcome(&self, call_id: &str) -> Option<CallOutcome> {
        self.outcomes.lock().ok()?.remove(call_id)
    }
}

impl Spawner {
    /// Waits for every child started so far to end (after an interrupt,
    /// each writes its own interrupted stop first).
    async fn wait_all(&self) {
        let running: Vec<JoinHandle<()>> = match self.running.lock() {
            Ok(mut r) => r.drain(..).collect(),
            Err(_) => return,
        };
        for handle in running {
            let _ = handle.await;
        }
    }

    fn task(&self, call: &ToolCall, args: &Value) -> Result<Task, String> {
        let prompt = args
            .get("prompt")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_owned();
        if prompt.is_empty() {
            return Err("`prompt` is empty: say what the subagent is to do".into());
        }
        let offered: Vec<String> = self
            .plugins
            .tools()
            .into_iter()
            .map(|(_, t)| t)
            .filter(|t| {
                self.options
                    .tools
                    .as_ref()
                    .is_none_or(|o| o.contains(&t.name))
            })
            .filter(|t| {
                !self
                    .options
                    .policy
                    .rules
                    .iter()
                    .any(|r| denies_tool(r, &t.name))
            })
            .map(|t| t.name.clone())
            .collect();
        let tools = match args.get("tools").and_then(Value::as_array) {
            None => self
                .plugins
                .tools()
                .into_iter()
                .filter(|(_, t)| t.is_read_only() && offered.contains(&t.name))
                .map(|(_, t)| t.name.clone())
                .collect(),
            Some(names) => {
                let mut tools = Vec::new();
                for name in names.iter().filter_map(Value::as_str) {
                    if HostTool::by_name(name).is_some() {
                        continue;
                    }
                    if !offered.iter().any(|o| o == name) {
                        return Err(format!(
                            "the subagent cannot have `{name}`: it is not among this agent's tools ({})",
                            offered.join(", ")
                        ));
                    }
                    tools.push(name.to_owned());
                }
                tools
            }
        };
        let worktree = match args.get("worktree") {
            None | Some(Value::Bool(false)) => None,
            Some(Value::String(name)) => {
                crate::worktree::check_name(name)?;
                Some(name.clone())
            }
            Some(_) => Some(format!("task-{}", safe(&call.id))),
        };
        let asked = args
            .get("max_iterations")
            .and_then(Value::as_u64)
            .map_or(self.options.subagents.max_iterations, |n| {
                u32::try_from(n).unwrap_or(u32::MAX)
            });
        Ok(Task {
            prompt,
            tools,
            worktree,
            max_iterations: asked.min(self.options.max_iterations).max(1),
        })
    }

    async fn start(&self, call: &ToolCall, args: &Value, host: &HostCall) -> CallOutcome {
        let task = match self.task(call, args) {
            Ok(t) => t,
            Err(e) => return CallOutcome::Invalid(format!("invalid `task` call: {e}")),
        };
        let slots = self.options.subagents.slots.clone();
        let permit = tokio::select! {
            biased;
            () = host.cancel.cancelled() => return CallOutcome::Interrupted,
            p = slots.acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return CallOutcome::Failed("subagents are shut down".into()),
            },
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let child = match self.prepare(call, &task).await {
            Ok(c) => c,
            Err(e) => return CallOutcome::Failed(e),
        };
        let ui = host.ui.clone();
        let cancel = host.cancel.child_token();
        let artifacts = host.artifacts.clone();
        let call = call.clone();
        let options = self.options.clone();
        let workspace = self.workspace.clone();
        let outcomes = self.outcomes.clone();
        let handle = tokio::spawn(async move {
            let parent = Parent {
                call: &call,
                ui,
                options: &options,
                workspace: &workspace,
                artifacts: &artifacts,
            };
            let outcome = child.run(&task.prompt, cancel, parent).await;
            drop(permit);
            if let Ok(mut outcomes) = outcomes.lock() {
                outcomes.insert(call.id.clone(), outcome.clone());
            }
            let _ = tx.send(outcome);
        });
        if let Ok(mut running) = self.running.lock() {
            running.push(handle);
        }
        rx.await
            .unwrap_or_else(|_| CallOutcome::Failed("the subagent ended without an answer".into()))
    }

    /// Makes the child: its worktree, plugins, log and options.
    async fn prepare(&self, call: &ToolCall, task: &Task) -> Result<Child, String> {
        let parent = &self.options;
        let read_only = task.worktree.is_none()
            && task.tools.iter().all(|name| {
                self.plugins
                    .tools()
                    .into_iter()
                    .any(|(_, t)| &t.name == name && t.is_read_only())
            });
        let mut policy = parent.policy.clone();
        if read_only {
            policy.mode = Mode::ReadOnly;
        }
        for (_, spec) in self.plugins.tools() {
            if !task.tools.contains(&spec.name) {
                let rule = parse_rule(
                    &spec.name,
                    Action::Deny,
                    "subagent: not among the tools its task gave it",
                )?;
                policy.rules.push(rule);
            }
        }
        let mut worktree = None;
        let mut plugins = self.plugins.clone();
        let mut workspace = self.workspace.clone();
        let mut cwd = parent.cwd.clone();
        if let Some(name) = &task.worktree {
            let env = parent.subagents.env.clone().ok_or_else(|| {
                "worktrees are not available in this session (no runtime to load plugins for them)"
                    .to_owned()
            })?;
            let ws = self.workspace.clone();
            let tag = self.session_id.clone();
            let name = name.clone();
            let wt = tokio::task::spawn_blocking(move || crate::worktree::create(&ws, &tag, &name))
                .await
                .map_err(|e| e.to_string())??;
            let manifest = crate::worktree::rebase(&env.manifest, wt.path());
            match env.runtime.load(&manifest).await {
                Ok(p) => plugins = Arc::new(p),
                Err(e) => {
                    let _ = tokio::task::spawn_blocking(move || wt.remove()).await;
                    return Err(format!("cannot load the plugins for the worktree: {e}"));
                }
            }
            workspace = wt.path().to_path_buf();
            cwd = workspace.clone();
            worktree = Some(wt);
        }
        let log = SessionLog::create(&self.sessions_dir)
            .map_err(|e| format!("cannot create the subagent's session log: {e}"))?;
        let mut subagents = parent.subagents.clone();
        subagents.depth += 1;
        subagents.parent = Some((self.session_id.clone(), call.id.clone()));
        subagents.worktree = worktree.as_ref().map(|w| w.path().display().to_string());
        subagents.slots = Arc::new(Semaphore::new(subagents.parallel.max(1)));
        let options = AgentOptions {
            max_iterations: task.max_iterations,
            policy,
            cwd,
            record: false,
            tools: Some(task.tools.clone()),
            subagents,
            editor: None,
            ..parent.clone()
        };
        let agent = Agent::new(plugins, self.provider.clone(), options, workspace, log)
            .map_err(|e| format!("{e:#}"))?;
        Ok(Child { agent, worktree })
    }
}

/// A child ready to run.
struct Child {
    agent: Agent,
    worktree: Option<crate::worktree::Worktree>,
}

/// Where a child's outcome goes.
struct Parent<'a> {
    call: &'a ToolCall,
    ui: tokio::sync::mpsc::UnboundedSender<Event>,
    options: &'a AgentOptions,
    workspace: &'a std::path::Path,
    artifacts: &'a std::path::Path,
}

impl Child {
    async fn run(
        mut self,
        prompt: &str,
        cancel: tokio_util::sync::CancellationToken,
        parent: Parent<'_>,
    ) -> CallOutcome {
        let session_id = self.agent.session_id().to_owned();
        let (tx, rx_child) = tokio::sync::mpsc::unbounded_channel::<Event>();
        let forward = {
            let ui = parent.ui.clone();
            let call_id = parent.call.id.clone();
            let session_id = session_id.clone();
            // The child's own log holds what its events acknowledge before
            // the parent's front-end shows them.
            let (durable_tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
            let hold = crate::log::acknowledge(rx_child, durable_tx, self.agent.durability());
            let wrap = async move {
                while let Some(event) = rx.recv().await {
                    // The front-end answers the child's approvals as its own.
                    let event = match event {
                        e @ Event::ApprovalRequested(_) => e,
                        e => Event::Subagent {
                            call_id: call_id.clone(),
                            session_id: session_id.clone(),
                            event: Box::new(e),
                        },
                    };
                    let _ = ui.send(event);
                }
            };
            async move {
                tokio::join!(hold, wrap);
            }
        };
        let agent = &mut self.agent;
        let work = async move {
            let r = agent.run(Some(prompt), &tx, &cancel).await;
            drop(tx);
            r
        };
        let (result, ()) = tokio::join!(work, forward);
        let answer = self
            .agent
            .history()
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant(a) => Some(a.text.to_string()),
                _ => None,
            })
            .unwrap_or_default();
        let stop = match &result {
            Ok(s) => s.as_str().to_owned(),
            Err(e) => format!("error: {e:#}"),
        };
        let mut data = json!({ "session_id": session_id, "stop": stop });
        let interrupted = matches!(result, Ok(StopReason::Interrupted));
        let note = self.close(&parent, &mut data, !interrupted).await;
        if interrupted {
            return match note {
                // Where the unapplied changes went is worth knowing.
                Some(note) => CallOutcome::Output {
                    content: format!("interrupted by the user\n\n{note}"),
                    is_error: true,
                    data: Some(data),
                },
                None => CallOutcome::Interrupted,
            };
        }
        let mut content = match &result {
            Ok(StopReason::FinalAnswer) => answer,
            Ok(reason) => format!(
                "the subagent stopped without a final answer ({}); its last words: {answer}",
                reason.as_str()
            ),
            Err(e) => format!("the subagent failed: {e:#}"),
        };
        if let Some(note) = note {
            content.push_str("\n\n");
            content.push_str(&note);
        }
        CallOutcome::Output {
            content,
            is_error: !matches!(result, Ok(StopReason::FinalAnswer)),
            data: Some(data),
        }
    }

    /// Ends the child's worktree, if any: with `ask`, its diff is put to the
    /// user and applied when approved; otherwise (or when refused) it is
    /// saved as a patch. The worktree is removed either way. Returns a note
    /// of what became of the changes.
    async fn close(&mut self, parent: &Parent<'_>, data: &mut Value, ask: bool) -> Option<String> {
        let wt = self.worktree.take()?;
        let name = wt.name().to_owned();
        let (wt, diff) = tokio::task::spawn_blocking(move || {
            let d = wt.diff();
            (wt, d)
        })
        .await
        .ok()?;
        let mut note = match diff {
            Err(e) => format!("[worktree {name}: its changes could not be read: {e}]"),
            Ok(diff) if diff.is_empty() => format!("[worktree {name}: no changes]"),
            Ok(diff) => {
                data["diff_bytes"] = json!(diff.len());
                let answer = if ask {
                    let request = ApprovalRequest::new(
                        parent.call.clone(),
                        format!(
                            "apply the changes the subagent made in worktree `{name}` to the workspace"
                        ),
                        Some(diff.clone()),
                        "this change".into(),
                        None,
                    );
                    let approver = &parent.options.approver;
                    let pending = approver.approve(&request);
                    let asked = approver.asks_front_end();
                    if asked {
                        let _ = parent.ui.send(Event::ApprovalRequested(request.clone()));
                    }
                    let answer = pending.await;
                    if asked {
                        // Settles the request for the front-end, as the dispatcher's
                        // permission event does for a call.
                        let decision = match answer {
                            ApprovalAnswer::Deny { .. } => PermissionDecision::Refused,
                            _ => PermissionDecision::Approved,
                        };
                        let _ = parent.ui.send(Event::Permission {
                            call_id: request.call.id.clone(),
                            tool: request.call.name.clone(),
                            decision,
                            reason: request.reason.clone(),
                        });
                    }
                    answer
                } else {
                    ApprovalAnswer::Deny {
                        reason: Some("the subagent was interrupted".into()),
                    }
                };
                match answer {
                    ApprovalAnswer::Approve | ApprovalAnswer::ApproveForSession => {
                        let ws = parent.workspace.to_path_buf();
                        let patch = diff.clone();
                        let applied = tokio::task::spawn_blocking(move || {
                            crate::worktree::apply(&ws, &patch)
                        })
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.map_err(String::from));
                        match applied {
                            Ok(()) => {
                                data["applied"] = json!(true);
                                format!(
                                    "[worktree {name}: the changes were approved and applied to the workspace]"
                                )
                            }
                            Err(why) => keep(
                                &name,
                                &diff,
                                parent,
                                data,
                                &format!("they did not apply: {why}"),
                            ),
                        }
                    }
                    ApprovalAnswer::Deny { reason } => keep(
                        &name,
                        &diff,
                        parent,
                        data,
                        &format!(
                            "not applied: {}",
                            reason.unwrap_or_else(|| "the user declined".into())
                        ),
                    ),
                }
            }
        };
        let removed = matches!(
            tokio::task::spawn_blocking(move || wt.remove()).await,
            Ok(Ok(()))
        );
        if !removed {
            note.push_str(" (the worktree could not be removed)");
        }
        data["worktree_removed"] = json!(removed);
        Some(note)
    }
}

/// Saves an unapplied diff as `<call id>.patch` in the artifacts directory
/// and says where.
fn keep(name: &str, diff: &str, parent: &Parent<'_>, data: &mut Value, why: &str) -> String {
    let artifacts = parent.artifacts;
    let path = artifacts.join(format!("{}.patch", safe(&parent.call.id)));
    let saved = std::fs::create_dir_all(artifacts).and_then(|()| std::fs::write(&path, diff));
    match saved {
        Ok(()) => {
            data["patch"] = json!(path.display().to_string());
            format!(
                "[worktree {name}: {why}; the diff is kept in {} (apply it with git apply)]",
                path.display()
            )
        }
        Err(e) => format!("[worktree {name}: {why}; the diff could not be saved: {e}]"),
    }
}

/// Whether `rule` denies every call of `tool` (a bare tool name).
fn denies_tool(rule: &crate::policy::Rule, tool: &str) -> bool {
    matches!(rule.action, Action::Deny | Action::DenyAndStop) && rule.to_string() == tool
}

fn safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
