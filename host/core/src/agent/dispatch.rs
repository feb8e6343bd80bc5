//! One tool call's path, the same for the loop and the MCP server, in this
//! order: look up the tool → validate the arguments against its schema
//! (nobody is asked about a call that cannot run) → protected paths →
//! permission policy → approval → sandboxed call → truncation (the whole
//! output saved as an artifact) → the events that log it.
//!
//! The loop takes the steps one call at a time up to the approval, then
//! runs consecutive read-only calls together; [`Dispatcher::dispatch`] takes
//! them all for one call.

use super::approval::Approver;
use super::host_tools::HostTool;
use crate::call::{CallOutcome, Sink};
use crate::manifest::Source;
use crate::policy::{Decision, Policy};
use crate::protocol::{
    ApprovalAnswer, ApprovalRequest, Effect, Event, FinishReason, Mode, PermissionDecision,
    ToolCall, ToolOutcome, ToolSpec,
};
use crate::provenance::Tracker;
use crate::runtime::{Plugin, Plugins, ToolError, Touched};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// A call that passed look-up and validation.
#[derive(Clone)]
pub struct Checked {
    /// The call.
    pub call: ToolCall,
    /// The plugin that runs it; `None` for a host tool.
    plugin: Option<Arc<Plugin>>,
    host: Option<HostTool>,
    spec: ToolSpec,
    args: serde_json::Value,
    /// Where [`Dispatcher::call`] leaves what the call touched, by call id,
    /// for [`Dispatcher::finish`] to label.
    touched: Arc<Mutex<HashMap<String, Touched>>>,
}

impl Checked {
    /// Whether the tool only reads (such calls may run together).
    pub fn is_read_only(&self) -> bool {
        self.spec.is_read_only()
    }

    /// The host tool it calls, if it is one.
    pub fn host_tool(&self) -> Option<HostTool> {
        self.host
    }

    /// The validated arguments.
    pub fn args(&self) -> &serde_json::Value {
        &self.args
    }
}

/// Takes tool calls through their path; holds what the session approved.
/// Calls may be dispatched concurrently (the MCP server takes each client
/// request as it comes): one call waiting for its approval holds up no other.
pub struct Dispatcher {
    plugins: Arc<Plugins>,
    policy: Policy,
    approver: Arc<dyn Approver>,
    /// What the user approved for the rest of the session, as
    /// [`crate::policy::session_scope`] names it: a command, or a tool.
    /// Locked only to look up or insert, never across an await.
    approved: Mutex<HashSet<String>>,
    output_limit: Option<usize>,
    /// Provenance labels and the exfiltration guard; `None` labels nothing.
    tracker: Option<Arc<Tracker>>,
    /// What each call touched, between its run and its end.
    touched: Arc<Mutex<HashMap<String, Touched>>>,
    /// The host's own tools this dispatcher takes (none for the MCP server).
    host_tools: Vec<HostTool>,
    /// The session's hooks (`[hooks]`): before a call's policy check, after it.
    hooks: Arc<crate::hooks::Hooks>,
    /// The canonical workspace root, against which a `path` argument is
    /// resolved for the rules; `None` judges the path as written only.
    workspace: Option<PathBuf>,
}

impl Dispatcher {
    /// A dispatcher for `plugins`' tools under `policy`. Output longer than
    /// `output_limit` bytes is cut for the model and saved whole.
    pub fn new(
        plugins: Arc<Plugins>,
        policy: Policy,
        approver: Arc<dyn Approver>,
        output_limit: Option<usize>,
    ) -> Self {
        Self {
            plugins,
            policy,
            approver,
            approved: Mutex::new(HashSet::new()),
            output_limit,
            tracker: None,
            touched: Arc::default(),
            host_tools: Vec::new(),
            hooks: Arc::default(),
            workspace: None,
        }
    }

    /// Resolves `path` arguments beneath `workspace` (canonical) for the
    /// rules; a tracker set later does not replace it.
    pub fn with_workspace(mut self, workspace: PathBuf) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// Labels every result by where its content came from and holds risky
    /// calls when the session holds sensitive content (see [`crate::policy::hold`]).
    pub fn set_tracker(&mut self, tracker: Arc<Tracker>) {
        if self.workspace.is_none() {
            self.workspace = Some(tracker.classifier.workspace().to_path_buf());
        }
        self.tracker = Some(tracker);
    }

    /// Takes `tools`, the host's own, besides the plugins' (a host tool's
    /// name shadows a plugin tool of the same name).
    pub fn with_host_tools(mut self, tools: Vec<HostTool>) -> Self {
        self.host_tools = tools;
        self
    }

    /// The host tools this dispatcher takes.
    pub fn host_tools(&self) -> &[HostTool] {
        &self.host_tools
    }

    /// The dispatcher with `hooks` run around every call.
    pub fn with_hooks(mut self, hooks: Arc<crate::hooks::Hooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The session's hooks.
    pub fn hooks(&self) -> &Arc<crate::hooks::Hooks> {
        &self.hooks
    }

    /// Changes the output limit from the next call on (the agent sizes it
    /// to the model's context window).
    pub fn set_output_limit(&mut self, output_limit: Option<usize>) {
        self.output_limit = output_limit;
    }

    /// The loaded plugins.
    pub fn plugins(&self) -> &Arc<Plugins> {
        &self.plugins
    }

    /// The permission policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Changes the permission mode from the next call on.
    pub fn set_mode(&mut self, mode: Mode) {
        self.policy.mode = mode;
    }

    /// The whole path for one call: its outcome as the model reads it, and
    /// whether the run must stop. Emits the permission events, the begin and
    /// the end of the call.
    pub async fn dispatch(
        &self,
        call: &ToolCall,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<(ToolOutcome, bool)> {
        let outcome = match self.check(call, None) {
            Err(invalid) => invalid,
            Ok(mut checked) => match self.permit(&mut checked, sink, cancel).await? {
                Some(refused) => refused,
                None => {
                    sink.emit(Event::ToolCallBegin { call: call.clone() })?;
                    let started = std::time::Instant::now();
                    let outcome = tokio::select! {
                        biased;
                        () = cancel.cancelled() => CallOutcome::Interrupted,
                        o = Self::call(&checked) => o,
                    };
                    let stop = matches!(outcome, CallOutcome::Fatal(_));
                    let ms = started.elapsed().as_millis() as u64;
                    return Ok((self.finish(&checked.call, outcome, ms, sink).await?, stop));
                }
            },
        };
        let stop = matches!(outcome, CallOutcome::Refused { stop: true, .. });
        sink.emit(Event::ToolCallBegin { call: call.clone() })?;
        Ok((self.finish(call, outcome, 0, sink).await?, stop))
    }

    /// Steps 1–2: the tool exists and the arguments are a JSON object its
    /// schema accepts. `finish` tells a call cut by the token limit apart.
    pub fn check(
        &self,
        call: &ToolCall,
        finish: Option<FinishReason>,
    ) -> Result<Checked, CallOutcome> {
        let host = self
            .host_tools
            .iter()
            .copied()
            .find(|t| t.name() == call.name);
        let plugin = match host {
            Some(_) => None,
            None => self.plugins.plugin_for(&call.name).cloned(),
        };
        if host.is_none() && plugin.is_none() {
            let known: Vec<String> = self
                .plugins
                .tools()
                .iter()
                .map(|(_, t)| t.name.clone())
                .chain(self.host_tools.iter().map(|t| t.name().to_owned()))
                .collect();
            return Err(CallOutcome::Invalid(format!(
                "unknown tool `{}`; available tools: {}",
                call.name,
                known.join(", ")
            )));
        }
        let spec = match (host, &plugin) {
            (Some(tool), _) => Some(tool.spec()),
            (None, Some(plugin)) => plugin.tools().iter().find(|t| t.name == call.name).cloned(),
            (None, None) => None,
        };
        let Some(mut spec) = spec else {
            return Err(CallOutcome::Invalid(format!(
                "unknown tool `{}`",
                call.name
            )));
        };
        let args = match serde_json::from_str::<serde_json::Value>(&call.arguments) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            other => {
                let why = match other {
                    Ok(v) => format!("they are JSON but not an object: {}", json_kind(&v)),
                    Err(e) => format!("they are not valid JSON ({e})"),
                };
                let mut message = format!(
                    "invalid arguments for `{}`: {why}; the call was not run.",
                    call.name
                );
                if finish == Some(FinishReason::Length) {
                    message.push_str(
                        " Your answer reached the output token limit (max_tokens) in the middle of this \
                         call, so its arguments were cut off. Send the call again with less content, \
                         e.g. a large file in several smaller edits.",
                    );
                } else {
                    message.push_str(" Send the call again with the arguments as one JSON object.");
                }
                return Err(CallOutcome::Invalid(message));
            }
        };
        if let Err(e) = crate::schema::validate(&spec.input_schema, &args) {
            return Err(CallOutcome::Invalid(format!(
                "invalid arguments for `{}`: {e}",
                call.name
            )));
        }
        if let Some(tool) = host {
            spec.effects = tool.effects(&args, &self.plugins);
        }
        Ok(Checked {
            call: call.clone(),
            plugin,
            host,
            spec,
            args,
            touched: self.touched.clone(),
        })
    }

    /// Steps 3–5: the `before_tool` hooks (which may block the call, ask
    /// for approval, or rewrite its arguments, then validated again into
    /// `checked`), protected paths, the policy, and the user when the policy
    /// or a hook asks. `None` lets the call run; every decision is logged.
    pub async fn permit(
        &self,
        checked: &mut Checked,
        sink: &mut dyn Sink,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<CallOutcome>> {
        let hooked = match self.before_tool_hooks(checked, sink).await? {
            Ok(hooked) => hooked,
            Err(refused) => return Ok(Some(refused)),
        };
        let checked = &*checked;
        let call = &checked.call;
        let record = |decision: PermissionDecision, reason: String| Event::Permission {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            decision,
            reason,
        };
        if checked.spec.effects.contains(&Effect::Write) {
            // By identity: any plugin may be named "git".
            let exempt = checked
                .plugin
                .as_ref()
                .is_some_and(|p| matches!(&p.decl().source, Source::Builtin(b) if b == "git"));
            let resolve = |p: &str| match &self.workspace {
                Some(workspace) => resolve_beneath(workspace, p),
                None => p.to_owned(),
            };
            if let Some(path) =
                crate::policy::protected_target_at(&checked.args, &resolve).filter(|_| !exempt)
            {
                let reason = format!(
                    "{path} is protected: .git internals (use the git tools) and corral's manifest are read-only to tools"
                );
                sink.emit(record(PermissionDecision::Deny, reason.clone()))?;
                return Ok(Some(CallOutcome::Refused {
                    message: format!("denied: {reason}"),
                    stop: false,
                }));
            }
        }
        let mut verdict = self.decide(&call.name, &checked.spec.effects, &checked.args);
        hooked.judge(&mut verdict, |args| {
            self.decide(&call.name, &checked.spec.effects, args)
        });
        let mut scope = crate::policy::session_scope(&call.name, &checked.args);
        // The guard asks even where a rule or the mode would allow; an
        // approval for the session covers only calls the guard held.
        let guard = match verdict.decision {
            Decision::Deny { .. } => None,
            _ => self.guard_hold(checked),
        };
        if let Some(why) = &guard {
            verdict = crate::policy::Verdict {
                decision: Decision::Ask,
                reason: format!("{why} (the policy alone: {})", verdict.reason),
            };
            scope = format!("guard: {scope}");
        }
        match verdict.decision {
            Decision::Allow => {
                sink.emit(record(PermissionDecision::Allow, verdict.reason))?;
                Ok(None)
            }
            Decision::Deny { stop } => {
                let decision = if stop {
                    PermissionDecision::DenyAndStop
                } else {
                    PermissionDecision::Deny
                };
                sink.emit(record(decision, verdict.reason.clone()))?;
                Ok(Some(CallOutcome::Refused {
                    message: format!("denied by the permission policy: {}", verdict.reason),
                    stop,
                }))
            }
            Decision::Ask if self.approved_for_session(&scope) => {
                sink.emit(record(
                    PermissionDecision::ApprovedForSession,
                    format!("{}; approved earlier in this session", verdict.reason),
                ))?;
                Ok(None)
            }
            Decision::Ask => {
                let preview = if let Some(plugin) = checked.plugin.as_ref().filter(|_| {
                    checked.spec.effects.contains(&Effect::Write) && self.approver.wants_preview()
                }) {
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => None,
                        r = plugin.preview(&call.name, &call.arguments, &call.id) => r.ok().flatten(),
                    }
                } else {
                    None
                };
                let request = ApprovalRequest::new(
                    call.clone(),
                    verdict.reason.clone(),
                    preview,
                    if scope == call.name {
                        format!("every {} call", call.name)
                    } else {
                        "this command".to_owned()
                    },
                    guard.clone(),
                );
                let pending = self.approver.approve(&request);
                if self.approver.asks_front_end() {
                    sink.emit(Event::ApprovalRequested(request))?;
                }
                let answer = tokio::select! {
                    biased;
                    () = cancel.cancelled() => ApprovalAnswer::Deny { reason: Some("interrupted by the user".into()) },
                    a = pending => a,
                };
                let by = self.approver.approved_by();
                match answer {
                    ApprovalAnswer::Approve => {
                        sink.emit(record(
                            PermissionDecision::Approved,
                            format!("{}; {by}", verdict.reason),
                        ))?;
                        Ok(None)
                    }
                    ApprovalAnswer::ApproveForSession => {
                        if let Ok(mut approved) = self.approved.lock() {
                            approved.insert(scope);
                        }
                        sink.emit(record(
                            PermissionDecision::ApprovedForSession,
                            format!("{}; {by} for this session", verdict.reason),
                        ))?;
                        Ok(None)
                    }
                    ApprovalAnswer::Deny { reason } => {
                        let why = reason.unwrap_or_else(|| "the user declined".into());
                        sink.emit(record(
                            PermissionDecision::Refused,
                            format!("{}; {why}", verdict.reason),
                        ))?;
                        let message = match &guard {
                            Some(held) => format!("not run: {why}; {held}"),
                            None => format!("not run: {why}"),
                        };
                        Ok(Some(CallOutcome::Refused {
                            message,
                            stop: false,
                        }))
                    }
                }
            }
        }
    }

    /// The `before_tool` hooks of `checked`: a rewrite replaces it with the
    /// call on the new arguments, validated again. `Err` is the refusal
    /// when a hook blocked (or failed) or the new arguments are invalid.
    async fn before_tool_hooks(
        &self,
        checked: &mut Checked,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<Result<crate::hooks::BeforeTool, CallOutcome>> {
        if !self.hooks.has(crate::protocol::HookEvent::BeforeTool) {
            return Ok(Ok(crate::hooks::BeforeTool::default()));
        }
        let input = crate::protocol::HookInput::BeforeTool {
            call: checked.call.clone(),
            effects: checked.spec.effects.clone(),
        };
        let outcome = self.hooks.run(input, sink).await?;
        let refused = |message: String| CallOutcome::Refused {
            message,
            stop: false,
        };
        if let Some(why) = outcome.blocked {
            return Ok(Err(refused(why)));
        }
        let mut original = None;
        if let Some(arguments) = outcome.rewrite {
            let call = ToolCall {
                arguments,
                ..checked.call.clone()
            };
            match self.check(&call, None) {
                Ok(rewritten) => original = Some(std::mem::replace(checked, rewritten).args),
                Err(invalid) => {
                    let (why, ..) = invalid.into_parts();
                    return Ok(Err(refused(format!(
                        "blocked: a before_tool hook rewrote the arguments into a call that cannot run: {why}"
                    ))));
                }
            }
        }
        Ok(Ok(crate::hooks::BeforeTool {
            original,
            ask: outcome.ask,
        }))
    }

    /// The policy's verdict on a call of `tool` with `args`, every path it
    /// names judged both as written and as it resolves beneath the workspace.
    fn decide(
        &self,
        tool: &str,
        effects: &[Effect],
        args: &serde_json::Value,
    ) -> crate::policy::Verdict {
        let resolve = |p: &str| match &self.workspace {
            Some(workspace) => resolve_beneath(workspace, p),
            None => p.to_owned(),
        };
        let resolve: Option<&dyn Fn(&str) -> String> =
            self.workspace.as_ref().map(|_| &resolve as _);
        self.policy.decide_at(tool, effects, args, resolve)
    }

    /// Whether the user approved `scope` for the rest of the session. A
    /// poisoned table approves nothing: the user is asked again.
    fn approved_for_session(&self, scope: &str) -> bool {
        self.approved
            .lock()
            .is_ok_and(|approved| approved.contains(scope))
    }

    /// Why the exfiltration guard holds `checked`, if it does: the session
    /// holds sensitive content and the call could send data out (network,
    /// a program with the network, a write outside the workspace), or the
    /// call's own arguments name a secret file and it could reach the
    /// network; judged by its declared effects and its plugin's grants.
    fn guard_hold(&self, checked: &Checked) -> Option<String> {
        let tracker = self.tracker.as_ref()?;
        if !tracker.settings.enabled {
            return None;
        }
        // A host tool sends nothing itself; a subagent's calls are judged by
        // its own dispatcher, which shares this tracker.
        let decl = checked.plugin.as_ref()?.decl();
        let net = decl
            .net
            .iter()
            .map(|g| format!("{}:{}", g.host, g.port))
            .collect();
        let programs = decl
            .exec
            .iter()
            .map(|g| (g.program.clone(), g.network))
            .collect();
        let workspace = tracker.classifier.workspace();
        let outside = decl
            .fs
            .iter()
            .filter(|g| {
                g.access == crate::manifest::Access::Rw && !g.host_path.starts_with(workspace)
            })
            .map(|g| g.host_path.display().to_string())
            .collect();
        let reach = crate::policy::Reach::of(&checked.spec.effects, net, programs, outside);
        let tool = &checked.call.name;
        crate::policy::hold(&tracker.settings, &tracker.held(), tool, &reach).or_else(|| {
            let named = tracker.classifier.secret_args(&checked.args);
            crate::policy::hold_named(&tracker.settings, &named, tool, &reach)
        })
    }

    /// Step 6: the call in its plugin's sandbox.
    pub async fn call(checked: &Checked) -> CallOutcome {
        let call = &checked.call;
        let Some(plugin) = &checked.plugin else {
            return CallOutcome::Failed(format!(
                "`{}` is the host's own tool and runs only in a session",
                call.name
            ));
        };
        let (result, touched) = plugin
            .call_touched(&call.name, &call.arguments, &call.id)
            .await;
        if !touched.is_empty()
            && let Ok(mut all) = checked.touched.lock()
        {
            all.insert(call.id.clone(), touched);
        }
        match result {
            Ok(out) => CallOutcome::Output {
                content: out.content,
                is_error: out.is_error,
                data: out.data,
            },
            Err(ToolError::Fatal(m)) => CallOutcome::Fatal(m),
            Err(e) => CallOutcome::Failed(e.to_string()),
        }
    }

    /// Steps 7–8: cuts long output for the model (saving it whole) and
    /// records the end of the call durably.
    pub async fn finish(
        &self,
        call: &ToolCall,
        outcome: CallOutcome,
        duration_ms: u64,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<ToolOutcome> {
        // Labels come from what the call touched, whatever its outcome: an
        // error text can carry what it read as well as an output can. They
        // are known before the hooks run, which see sensitive content only
        // through the guard.
        let touched = self
            .touched
            .lock()
            .ok()
            .and_then(|mut all| all.remove(&call.id))
            .unwrap_or_default();
        let mut labels = Vec::new();
        if let Some(tracker) = &self.tracker {
            let plugin = self.plugins.plugin_for(&call.name);
            let reads_secrets = plugin.is_some_and(|p| p.decl().reads_secrets.contains(&call.name));
            labels = tracker
                .classifier
                .labels(&call.name, &touched, reads_secrets);
            // What a reading tool was asked for may come back from where no
            // file is opened (`git_show HEAD:.env` reads a git object); a
            // result already sensitive by what it opened needs no more.
            let ran = !labels
                .iter()
                .any(|l| l.kind == crate::protocol::LabelKind::Sensitive)
                && matches!(
                    outcome,
                    CallOutcome::Output { .. } | CallOutcome::Failed(_) | CallOutcome::Fatal(_)
                );
            let reads = plugin.is_some_and(|p| {
                p.tools()
                    .iter()
                    .any(|t| t.name == call.name && t.effects.contains(&Effect::Read))
            });
            if ran
                && reads
                && let Ok(args) = serde_json::from_str(&call.arguments)
            {
                for label in tracker.classifier.argument_labels(&call.name, &args, true) {
                    if !labels.contains(&label) {
                        labels.push(label);
                    }
                }
            }
            // A diff can carry a secret file's content with no argument
            // naming it (`git_show HEAD` of a commit that added `.env`).
            let sensitive = labels
                .iter()
                .any(|l| l.kind == crate::protocol::LabelKind::Sensitive);
            if !sensitive && let Some(text) = outcome.text() {
                for label in tracker.classifier.diff_labels(&call.name, text) {
                    if !labels.contains(&label) {
                        labels.push(label);
                    }
                }
            }
            tracker.absorb(&labels);
        }
        let outcome = self.after_tool_hooks(call, outcome, &labels, sink).await?;
        let (mut content, is_error, data) = outcome.into_parts();
        let mut outcome = ToolOutcome {
            content: String::new(),
            is_error,
            data,
            truncated_from: None,
            artifact: None,
            labels,
        };
        if let Some(limit) = self.output_limit
            && content.len() > limit
            && let Some(saved) = sink.save_artifact(&call.id, &content)
        {
            let artifact = anyhow::Context::context(saved, "cannot save a tool artifact")?;
            let whole = content.len();
            let mut cut = limit;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            content.truncate(cut);
            let id = serde_json::to_string(&call.id).unwrap_or_default();
            content.push_str(&format!(
                "\n[output cut at {limit} of {whole} bytes; the whole output is saved: read the rest with \
                 read_output {{\"call_id\": {id}, \"offset\": {cut}, \"limit\": {limit}}}, or ask for less]"
            ));
            outcome.truncated_from = Some(whole);
            outcome.artifact = Some(artifact.display().to_string());
        }
        outcome.content = content;
        sink.emit(Event::ToolCallEnd {
            call_id: call.id.clone(),
            name: call.name.clone(),
            outcome: outcome.clone(),
            duration_ms,
        })?;
        Ok(outcome)
    }
}

impl Dispatcher {
    /// The `after_tool` hooks of a call that produced an output, or the
    /// `after_tool_failure` hooks of one that failed, ran invalid or failed
    /// fatally: a block withholds the output from the model (the reason
    /// takes its place), context is added after it.
    ///
    /// A result labelled sensitive (`labels`) is withheld from hooks that
    /// could send it out (see [`crate::hooks::Hooks::run_withholding`]),
    /// unless the guard is off.
    async fn after_tool_hooks(
        &self,
        call: &ToolCall,
        outcome: CallOutcome,
        labels: &[crate::protocol::Label],
        sink: &mut dyn Sink,
    ) -> anyhow::Result<CallOutcome> {
        use crate::protocol::HookEvent;
        use crate::protocol::HookInput;
        let input = match &outcome {
            CallOutcome::Output {
                content, is_error, ..
            } if self.hooks.has(HookEvent::AfterTool) => HookInput::AfterTool {
                call: call.clone(),
                content: content.clone(),
                is_error: *is_error,
            },
            CallOutcome::Invalid(error)
            | CallOutcome::Failed(error)
            | CallOutcome::Fatal(error)
                if self.hooks.has(HookEvent::AfterToolFailure) =>
            {
                HookInput::AfterToolFailure {
                    call: call.clone(),
                    error: error.clone(),
                }
            }
            _ => return Ok(outcome),
        };
        let sensitive: Vec<String> = match &self.tracker {
            Some(tracker) if tracker.settings.enabled => labels
                .iter()
                .filter(|l| l.kind == crate::protocol::LabelKind::Sensitive)
                .map(|l| l.source.clone())
                .collect(),
            _ => Vec::new(),
        };
        let hooked = self.hooks.run_withholding(input, &sensitive, sink).await?;
        Ok(crate::hooks::after_tool(outcome, hooked))
    }
}

/// Where `path` (an argument, relative to `workspace` or absolute) leads
/// once symlinks are followed as the kernel would: each existing component
/// resolved in turn (a link's target spliced in, at most 40 links), the
/// components that do not exist yet appended as written. Inside the
/// workspace it is named relative to it (`protected/keep.txt`), outside by
/// its absolute path.
fn resolve_beneath(workspace: &std::path::Path, path: &str) -> String {
    use std::collections::VecDeque;
    use std::path::{Component, Path};
    fn parts(path: &Path) -> impl Iterator<Item = std::ffi::OsString> + '_ {
        path.components().filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
    }
    let path = Path::new(path);
    let mut out = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        workspace.to_path_buf()
    };
    let mut todo: VecDeque<std::ffi::OsString> = parts(path).collect();
    let mut existing = true;
    let mut links = 0;
    while let Some(part) = todo.pop_front() {
        // `out` holds no symlink, so `..` is its parent, as for the kernel.
        if part == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&part);
        if existing {
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() && links < 40 => {
                    links += 1;
                    if let Ok(target) = std::fs::read_link(&next) {
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        for (i, p) in parts(&target).enumerate() {
                            todo.insert(i, p);
                        }
                        continue;
                    }
                    existing = false;
                }
                Ok(_) => {}
                Err(_) => existing = false,
            }
        }
        out = next;
    }
    match out.strip_prefix(workspace) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => out.display().to_string(),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_beneath;
    use std::os::unix::fs::symlink;

    #[test]
    fn paths_resolve_through_symlinks_beneath_the_workspace() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(ws.join("protected/sub")).unwrap();
        std::fs::create_dir_all(root.path().join("elsewhere")).unwrap();
        symlink("protected", ws.join("alias")).unwrap();
        symlink("../alias/sub", ws.join("protected/up")).unwrap();
        symlink("../elsewhere", ws.join("out")).unwrap();
        symlink("protected/new.txt", ws.join("dangling")).unwrap();
        symlink("loop", ws.join("loop")).unwrap();
        let r = |p: &str| resolve_beneath(&ws, p);
        assert_eq!(r("alias/keep.txt"), "protected/keep.txt");
        assert_eq!(r("./alias//x/../keep.txt"), "protected/keep.txt");
        assert_eq!(r("alias/up/a/b"), "protected/sub/a/b");
        assert_eq!(r("dangling"), "protected/new.txt");
        assert_eq!(r("src/new/file.rs"), "src/new/file.rs");
        assert_eq!(r("."), ".");
        let outside = root.path().canonicalize().unwrap().join("elsewhere/x");
        assert_eq!(r("out/x"), outside.display().to_string());
        assert_eq!(r(&ws.join("alias/k").display().to_string()), "protected/k");
        // A loop ends (at the link limit) instead of spinning.
        assert!(r("loop/x").ends_with("loop/x"));
    }
}
