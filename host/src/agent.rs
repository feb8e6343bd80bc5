//! The loop: build the request, ask the provider (streaming), run the tools
//! it calls in their sandboxes, send the results back, until a final answer
//! or another explicit stop. Every step is an event, sent to the UI and
//! written to the session log.
//!
//! Invariants: the history the provider sees pairs every assistant tool call
//! with exactly one tool result, in call order; unknown tools and invalid
//! arguments go back to the model as tool errors; consecutive read-only calls
//! run in parallel, and their results are recorded in call order.

use crate::protocol::{Event, StopReason, ToolOutcome};
use crate::runtime::{
    ChatRequest, ChatResponse, FinishReason, Message, Plugin, Plugins, ProviderError, StreamEvent,
    ToolCall, ToolResult,
};
use crate::session::{Record, SessionLog};
use anyhow::Context as _;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// What the user is asked about a call the policy does not allow outright.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The call.
    pub call: ToolCall,
    /// Why it needs approval (the rule or mode).
    pub reason: String,
    /// The unified diff it would apply, when the tool can tell.
    pub preview: Option<String>,
    /// What an [`Approval::Session`] answer approves from now on: `this
    /// command` or `every <tool> call`.
    pub session_covers: String,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run this call.
    Once,
    /// Run this call and later calls of the same tool in this session.
    Session,
    /// Do not run it; the reason goes to the model.
    Deny {
        /// What the user said, if anything.
        reason: Option<String>,
    },
}

/// Answers approval requests: a terminal prompt, or a fixed policy for
/// non-interactive runs. The library never prompts by itself.
pub trait Approver: Send + Sync {
    /// Asks about one call.
    fn approve<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Approval> + Send + 'a>>;
}

/// Non-interactive runs: every `ask` becomes a denial the model can read.
pub struct NoApprover;

impl Approver for NoApprover {
    fn approve<'a>(
        &'a self,
        _: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async {
            Approval::Deny {
                reason: Some(
                    "this call needs the user's approval and the run is not interactive; the user can allow it \
                     with --yes, a permission mode (--mode auto-edit or full-auto) or an allow rule"
                        .into(),
                ),
            }
        })
    }
}

/// `--yes`: every `ask` is approved (deny rules and read-only mode still hold).
pub struct YesApprover;

impl Approver for YesApprover {
    fn approve<'a>(
        &'a self,
        _: &'a ApprovalRequest,
    ) -> std::pin::Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async { Approval::Once })
    }
}

/// How the loop runs.
#[derive(Clone)]
pub struct AgentOptions {
    /// Model id; empty for the provider's configured model.
    pub model: String,
    /// Provider round trips per prompt.
    pub max_iterations: u32,
    /// Generated-token bound per request.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Tool output longer than this (bytes) is cut for the model and saved whole.
    pub tool_output_limit: usize,
    /// The directory the user is in (for `AGENTS.md` discovery).
    pub cwd: PathBuf,
    /// The permission mode and rules.
    pub policy: crate::policy::Policy,
    /// Who answers `ask` decisions.
    pub approver: Arc<dyn Approver>,
    /// Keep every provider stream event for a cassette (`--record`); without
    /// it the events are forwarded and dropped.
    pub record: bool,
}

impl std::fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOptions")
            .field("model", &self.model)
            .field("max_iterations", &self.max_iterations)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Default for AgentOptions {
    fn default() -> Self {
        Self {
            model: String::new(),
            max_iterations: 50,
            max_tokens: None,
            temperature: None,
            tool_output_limit: 32 * 1024,
            cwd: PathBuf::from("."),
            policy: crate::policy::Policy::default(),
            approver: Arc::new(NoApprover),
            record: false,
        }
    }
}

/// One provider round trip as recorded for a replay cassette.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CassetteTurn {
    /// The stream events the provider emitted, in order.
    pub events: Vec<StreamEvent>,
    /// Its complete answer.
    pub response: ChatResponse,
}

/// A session in progress.
pub struct Agent {
    plugins: Arc<Plugins>,
    provider: Arc<Plugin>,
    options: AgentOptions,
    workspace: PathBuf,
    log: SessionLog,
    history: Vec<Message>,
    turn: u32,
    recorded: Vec<CassetteTurn>,
    /// Logged when the session opened; shown to the UI with the first run.
    announce: Option<Event>,
    /// What the user approved for the rest of the session, as
    /// [`crate::policy::session_scope`] names it: a command, or a tool.
    approved: std::collections::HashSet<String>,
}

impl Agent {
    /// Starts a new session.
    pub fn new(
        plugins: Arc<Plugins>,
        provider: Arc<Plugin>,
        options: AgentOptions,
        workspace: PathBuf,
        mut log: SessionLog,
    ) -> anyhow::Result<Self> {
        let started = Event::SessionStarted {
            session_id: log.id().to_owned(),
            workspace: workspace.display().to_string(),
            provider: provider.decl().name.clone(),
            model: options.model.clone(),
        };
        log.append(&started, true)
            .context("cannot write the session log")?;
        Ok(Self {
            plugins,
            provider,
            options,
            workspace,
            log,
            history: Vec::new(),
            turn: 0,
            recorded: Vec::new(),
            announce: Some(started),
            approved: Default::default(),
        })
    }

    /// Reopens a session from its log. Tool calls that were logged without a
    /// result (the process died while they ran) are closed with an
    /// "interrupted" result, so the history stays paired.
    pub fn resume(
        plugins: Arc<Plugins>,
        provider: Arc<Plugin>,
        options: AgentOptions,
        workspace: PathBuf,
        log: SessionLog,
        records: &[Record],
    ) -> anyhow::Result<Self> {
        let (history, turn, open) = replay_history(records);
        let mut agent = Self {
            plugins,
            provider,
            options,
            workspace,
            log,
            history,
            turn,
            recorded: Vec::new(),
            announce: None,
            approved: Default::default(),
        };
        let mut closed = Vec::new();
        for call in open {
            let outcome = ToolOutcome {
                content: "interrupted: the session ended before this call finished".into(),
                is_error: true,
                truncated_from: None,
                artifact: None,
            };
            agent.history.push(Message::ToolResult(ToolResult {
                call_id: call.id.clone(),
                content: outcome.content.clone(),
                is_error: true,
            }));
            agent.log.append(
                &Event::ToolCallEnd {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    outcome,
                    duration_ms: 0,
                },
                true,
            )?;
            closed.push(call.id);
        }
        let resumed = Event::SessionResumed {
            session_id: agent.log.id().to_owned(),
            closed_calls: closed,
        };
        agent.log.append(&resumed, true)?;
        agent.announce = Some(resumed);
        Ok(agent)
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        self.log.id()
    }

    /// The session log's path.
    pub fn log_path(&self) -> PathBuf {
        self.log.path().to_path_buf()
    }

    /// The conversation so far.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Provider round trips recorded so far (for `--record`).
    pub fn recorded(&self) -> &[CassetteTurn] {
        &self.recorded
    }

    fn emit(&mut self, ui: &UnboundedSender<Event>, event: Event) -> anyhow::Result<()> {
        if event.is_logged() {
            self.log
                .append(&event, event.is_durable())
                .context("cannot write the session log")?;
        }
        let _ = ui.send(event);
        Ok(())
    }

    fn stop(
        &mut self,
        ui: &UnboundedSender<Event>,
        reason: StopReason,
        message: Option<String>,
    ) -> anyhow::Result<StopReason> {
        self.emit(ui, Event::Stop { reason, message })?;
        Ok(reason)
    }

    /// Runs one prompt to a stop. Without a prompt, the model goes on from
    /// the history as it is (after `resume`).
    pub async fn run(
        &mut self,
        prompt: Option<&str>,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<StopReason> {
        if let Some(event) = self.announce.take() {
            let _ = ui.send(event);
        }
        self.turn += 1;
        self.emit(ui, Event::TurnBegin { turn: self.turn })?;
        if let Some(prompt) = prompt {
            self.emit(
                ui,
                Event::UserMessage {
                    text: prompt.to_owned(),
                },
            )?;
            self.history.push(Message::User {
                text: prompt.to_owned(),
            });
        }
        let tools: Vec<_> = self
            .plugins
            .tools()
            .into_iter()
            .map(|(_, t)| t.clone())
            .collect();
        let system =
            crate::context::system_prompt(&self.workspace, &self.options.cwd, &self.plugins);

        for iteration in 1..=self.options.max_iterations {
            let mut messages = Vec::with_capacity(self.history.len() + 1);
            messages.push(Message::System {
                text: system.clone(),
            });
            messages.extend(self.history.iter().cloned());
            let request = ChatRequest {
                model: self.options.model.clone(),
                messages,
                tools: tools.clone(),
                max_tokens: self.options.max_tokens,
                temperature: self.options.temperature,
            };
            let prompt_hash = hex::encode(Sha256::digest(
                serde_json::to_vec(&request).unwrap_or_default(),
            ));
            self.emit(
                ui,
                Event::RequestBegin {
                    iteration,
                    prompt_hash,
                    messages: request.messages.len(),
                },
            )?;

            let response = match self.ask(&request, ui, cancel).await? {
                Ok(r) => r,
                Err(None) => {
                    return self.stop(
                        ui,
                        StopReason::Interrupted,
                        Some("interrupted while the model was answering".into()),
                    );
                }
                Err(Some(error)) => {
                    let reason = if matches!(error, ProviderError::ContextLength { .. }) {
                        StopReason::ContextExhausted
                    } else {
                        StopReason::ProviderError
                    };
                    let message = error.to_string();
                    self.emit(ui, Event::ProviderFailed { error })?;
                    return self.stop(ui, reason, Some(message));
                }
            };
            self.emit(
                ui,
                Event::RequestEnd {
                    message: response.message.clone(),
                    finish_reason: response.finish_reason,
                    usage: response.usage,
                },
            )?;
            self.history
                .push(Message::Assistant(response.message.clone()));
            if response.message.tool_calls.is_empty() {
                return self.stop(ui, StopReason::FinalAnswer, None);
            }
            if let Some((reason, message)) = self
                .run_tools(
                    &response.message.tool_calls,
                    response.finish_reason,
                    ui,
                    cancel,
                )
                .await?
            {
                return self.stop(ui, reason, Some(message));
            }
        }
        let n = self.options.max_iterations;
        self.stop(
            ui,
            StopReason::MaxIterations,
            Some(format!(
                "no final answer after {n} iterations (--max-iterations)"
            )),
        )
    }

    /// One provider call, forwarding its stream. `Err(None)` is an interrupt.
    async fn ask(
        &mut self,
        request: &ChatRequest,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Result<ChatResponse, Option<ProviderError>>> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(crate::runtime::EVENT_CHANNEL_CAPACITY);
        let provider = self.provider.clone();
        let call = provider.complete(request, tx);
        tokio::pin!(call);
        let record = self.options.record;
        let mut events = Vec::new();
        let result = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(Err(None)),
                Some(ev) = rx.recv() => {
                    forward(ui, &ev);
                    if record {
                        events.push(ev);
                    }
                }
                res = &mut call => break res,
            }
        };
        while let Ok(ev) = rx.try_recv() {
            forward(ui, &ev);
            if record {
                events.push(ev);
            }
        }
        if let Ok(response) = &result
            && record
        {
            self.recorded.push(CassetteTurn {
                events,
                response: response.clone(),
            });
        }
        Ok(result.map_err(Some))
    }

    /// Runs the calls of one assistant turn. Returns a stop when the run must end.
    async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        finish: FinishReason,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<(StopReason, String)>> {
        // Decide every call first, in order: approvals are asked one at a time.
        let mut refused: std::collections::HashMap<String, String> = Default::default();
        let mut stop: Option<(StopReason, String)> = None;
        for call in calls {
            if stop.is_some() {
                break;
            }
            // Nothing to judge or ask the user about: the model hears why.
            if let Some(why) = malformed_arguments(call, finish) {
                refused.insert(call.id.clone(), why);
                continue;
            }
            if let Some(message) = self.permit(call, ui, cancel).await? {
                if message.1 {
                    stop = Some((StopReason::PermissionDenied, message.0.clone()));
                }
                refused.insert(call.id.clone(), message.0);
            }
        }
        let mut i = 0;
        while i < calls.len() {
            if let Some(why) = refused.remove(&calls[i].id) {
                self.emit(
                    ui,
                    Event::ToolCallBegin {
                        call: calls[i].clone(),
                    },
                )?;
                self.finish_call(ui, &calls[i], Err(why), 0)?;
                i += 1;
                continue;
            }
            if let Some((_, why)) = &stop {
                let why = why.clone();
                self.finish_call(ui, &calls[i], Err(format!("not run: {why}")), 0)?;
                i += 1;
                continue;
            }
            // A group: one call, or a run of consecutive read-only calls.
            let mut end = i + 1;
            if self.is_read_only(&calls[i]) {
                while end < calls.len()
                    && self.is_read_only(&calls[end])
                    && !refused.contains_key(&calls[end].id)
                {
                    end += 1;
                }
            }
            let group = &calls[i..end];
            for call in group {
                self.emit(ui, Event::ToolCallBegin { call: call.clone() })?;
            }
            let plugins = self.plugins.clone();
            let started = std::time::Instant::now();
            let work = futures::future::join_all(group.iter().map(|c| execute(&plugins, c)));
            let results = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                r = work => Some(r),
            };
            let ms = started.elapsed().as_millis() as u64;
            match results {
                None => {
                    for call in group {
                        self.finish_call(ui, call, Err("interrupted by the user".into()), ms)?;
                    }
                    stop = Some((
                        StopReason::Interrupted,
                        "interrupted while tools were running".into(),
                    ));
                }
                Some(results) => {
                    for (call, result) in group.iter().zip(results) {
                        if let Err(Fatal(m)) = &result {
                            stop = Some((
                                StopReason::FatalToolError,
                                format!("`{}` failed fatally: {m}", call.name),
                            ));
                        }
                        let result = result.map_err(|Fatal(m)| m).and_then(|r| r);
                        self.finish_call(ui, call, result, ms)?;
                    }
                }
            }
            i = end;
        }
        Ok(stop)
    }

    /// Applies the permission policy to one call, asking the user when it
    /// says so. `Some((message, stop))` refuses the call.
    async fn permit(
        &mut self,
        call: &ToolCall,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<(String, bool)>> {
        let Some(spec) = self
            .plugins
            .plugin_for(&call.name)
            .and_then(|p| p.tools().iter().find(|t| t.name == call.name))
            .cloned()
        else {
            // Unknown tools are answered by `execute`.
            return Ok(None);
        };
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        if spec.effects.contains(&crate::runtime::Effect::Write) {
            // By identity: any plugin may be named "git".
            let exempt = self.plugins.plugin_for(&call.name).is_some_and(
                |p| matches!(&p.decl().source, crate::manifest::Source::Builtin(b) if b == "git"),
            );
            if let Some(path) = protected_target(&args).filter(|_| !exempt) {
                let reason = format!(
                    "`{path}` is protected: .git internals (use the git tools) and corral's manifest are read-only to tools"
                );
                self.emit(
                    ui,
                    Event::Permission {
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        decision: "deny".into(),
                        reason: reason.clone(),
                    },
                )?;
                return Ok(Some((format!("denied: {reason}"), false)));
            }
        }
        let verdict = self.options.policy.decide(&call.name, &spec.effects, &args);
        let scope = crate::policy::session_scope(&call.name, &args);
        let record = |decision: &str, reason: String| Event::Permission {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            decision: decision.to_owned(),
            reason,
        };
        match verdict.decision {
            crate::policy::Decision::Allow => {
                self.emit(ui, record("allow", verdict.reason))?;
                Ok(None)
            }
            crate::policy::Decision::Deny { stop } => {
                self.emit(
                    ui,
                    record(
                        if stop { "deny_and_stop" } else { "deny" },
                        verdict.reason.clone(),
                    ),
                )?;
                Ok(Some((
                    format!("denied by the permission policy: {}", verdict.reason),
                    stop,
                )))
            }
            crate::policy::Decision::Ask if self.approved.contains(&scope) => {
                self.emit(
                    ui,
                    record(
                        "approved_for_session",
                        format!("{}; approved earlier in this session", verdict.reason),
                    ),
                )?;
                Ok(None)
            }
            crate::policy::Decision::Ask => {
                let preview = if spec.effects.contains(&crate::runtime::Effect::Write) {
                    match self.plugins.plugin_for(&call.name) {
                        Some(p) => tokio::select! {
                            biased;
                            () = cancel.cancelled() => None,
                            r = p.preview(&call.name, &call.arguments, &call.id) => r.ok().flatten(),
                        },
                        None => None,
                    }
                } else {
                    None
                };
                let request = ApprovalRequest {
                    call: call.clone(),
                    reason: verdict.reason.clone(),
                    preview,
                    session_covers: if scope == call.name {
                        format!("every {} call", call.name)
                    } else {
                        "this command".to_owned()
                    },
                };
                let answer = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Approval::Deny { reason: Some("interrupted by the user".into()) },
                    a = self.options.approver.approve(&request) => a,
                };
                match answer {
                    Approval::Once => {
                        self.emit(
                            ui,
                            record(
                                "approved",
                                format!("{}; approved by the user", verdict.reason),
                            ),
                        )?;
                        Ok(None)
                    }
                    Approval::Session => {
                        self.approved.insert(scope);
                        self.emit(
                            ui,
                            record(
                                "approved_for_session",
                                format!(
                                    "{}; approved by the user for this session",
                                    verdict.reason
                                ),
                            ),
                        )?;
                        Ok(None)
                    }
                    Approval::Deny { reason } => {
                        let why = reason.unwrap_or_else(|| "the user declined".into());
                        self.emit(ui, record("refused", format!("{}; {why}", verdict.reason)))?;
                        Ok(Some((format!("not run: {why}"), false)))
                    }
                }
            }
        }
    }

    fn is_read_only(&self, call: &ToolCall) -> bool {
        self.plugins
            .plugin_for(&call.name)
            .and_then(|p| p.tools().iter().find(|t| t.name == call.name))
            .is_some_and(|t| t.is_read_only())
    }

    /// Records a call's result (cut for the model when long), durably.
    fn finish_call(
        &mut self,
        ui: &UnboundedSender<Event>,
        call: &ToolCall,
        result: Result<String, String>,
        duration_ms: u64,
    ) -> anyhow::Result<()> {
        let (mut content, is_error) = match result {
            Ok(c) => (c, false),
            Err(e) => (e, true),
        };
        let mut outcome = ToolOutcome {
            content: String::new(),
            is_error,
            truncated_from: None,
            artifact: None,
        };
        let limit = self.options.tool_output_limit;
        if content.len() > limit {
            let whole = content.len();
            let artifact = self
                .log
                .save_artifact(&call.id, &content)
                .context("cannot save a tool artifact")?;
            let mut cut = limit;
            while !content.is_char_boundary(cut) {
                cut -= 1;
            }
            content.truncate(cut);
            content.push_str(&format!(
                "\n[output cut at {limit} of {whole} bytes; ask for less (offset/limit, narrower pattern)]"
            ));
            outcome.truncated_from = Some(whole);
            outcome.artifact = Some(artifact.display().to_string());
        }
        outcome.content = content;
        self.history.push(Message::ToolResult(ToolResult {
            call_id: call.id.clone(),
            content: outcome.content.clone(),
            is_error,
        }));
        self.emit(
            ui,
            Event::ToolCallEnd {
                call_id: call.id.clone(),
                name: call.name.clone(),
                outcome,
                duration_ms,
            },
        )
    }
}

/// A failure that stops the run.
struct Fatal(String);

/// Why `call` cannot run when its arguments are not a JSON object, in words
/// the model can act on; a call cut by the output token limit says so.
fn malformed_arguments(call: &ToolCall, finish: FinishReason) -> Option<String> {
    let why = match serde_json::from_str::<serde_json::Value>(&call.arguments) {
        Ok(serde_json::Value::Object(_)) => return None,
        Ok(other) => format!("they are JSON but not an object: {}", json_kind(&other)),
        Err(e) => format!("they are not valid JSON ({e})"),
    };
    let mut message = format!(
        "invalid arguments for `{}`: {why}; the call was not run.",
        call.name
    );
    if finish == FinishReason::Length {
        message.push_str(
            " Your answer reached the output token limit (max_tokens) in the middle of this \
             call, so its arguments were cut off. Send the call again with less content, \
             e.g. a large file in several smaller edits.",
        );
    } else {
        message.push_str(" Send the call again with the arguments as one JSON object.");
    }
    Some(message)
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

/// The first path a writing call names that is protected: `.git` and what is
/// inside it, and corral's own manifest. Paths come from the usual argument
/// names and from the file headers of an `apply_patch` envelope. This only
/// gives the model an early, clear answer; the host's filesystem layer
/// enforces the protection on what a path resolves to, whatever names it.
fn protected_target(args: &serde_json::Value) -> Option<String> {
    let mut paths: Vec<String> = Vec::new();
    for key in ["path", "from", "to", "destination"] {
        if let Some(p) = args.get(key).and_then(|v| v.as_str()) {
            paths.push(p.to_owned());
        }
    }
    if let Some(list) = args.get("paths").and_then(|v| v.as_array()) {
        paths.extend(list.iter().filter_map(|v| v.as_str()).map(str::to_owned));
    }
    if let Some(patch) = args.get("patch").and_then(|v| v.as_str()) {
        for line in patch.lines() {
            for header in [
                "*** Add File:",
                "*** Update File:",
                "*** Delete File:",
                "*** Move to:",
            ] {
                if let Some(p) = line.trim_start().strip_prefix(header) {
                    paths.push(p.trim().to_owned());
                }
            }
        }
    }
    paths.into_iter().find(|p| {
        let mut parts: Vec<&str> = Vec::new();
        for part in p.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                other => parts.push(other),
            }
        }
        parts
            .first()
            .is_some_and(|first| first.eq_ignore_ascii_case(".git"))
            || (parts.len() == 1 && parts[0] == "corral.toml")
    })
}

/// Validates and runs one call. The inner `Err` is an error for the model.
async fn execute(plugins: &Plugins, call: &ToolCall) -> Result<Result<String, String>, Fatal> {
    let Some(plugin) = plugins.plugin_for(&call.name) else {
        let known: Vec<String> = plugins
            .tools()
            .iter()
            .map(|(_, t)| t.name.clone())
            .collect();
        return Ok(Err(format!(
            "unknown tool `{}`; available tools: {}",
            call.name,
            known.join(", ")
        )));
    };
    let Some(spec) = plugin.tools().iter().find(|t| t.name == call.name) else {
        return Ok(Err(format!("unknown tool `{}`", call.name)));
    };
    let args: serde_json::Value = match serde_json::from_str(&call.arguments) {
        Ok(v) => v,
        Err(e) => {
            return Ok(Err(format!(
                "invalid arguments for `{}`: not JSON: {e}",
                call.name
            )));
        }
    };
    if let Err(e) = crate::schema::validate(&spec.input_schema, &args) {
        return Ok(Err(format!("invalid arguments for `{}`: {e}", call.name)));
    }
    match plugin.call(&call.name, &call.arguments, &call.id).await {
        Ok(out) if out.is_error => Ok(Err(out.content)),
        Ok(out) => Ok(Ok(out.content)),
        Err(e) if e.is_fatal() => Err(Fatal(e.to_string())),
        Err(e) => Ok(Err(e.to_string())),
    }
}

fn forward(ui: &UnboundedSender<Event>, ev: &StreamEvent) {
    let event = match ev {
        StreamEvent::TextDelta { text } => Event::TextDelta { text: text.clone() },
        StreamEvent::ToolCallDelta {
            index,
            name,
            arguments_delta,
            ..
        } => Event::ToolCallDelta {
            index: *index,
            name: name.clone(),
            arguments_delta: arguments_delta.clone(),
        },
        _ => return,
    };
    let _ = ui.send(event);
}

/// Rebuilds the conversation from a log: the history, the last turn number,
/// and the tool calls that have no result.
pub fn replay_history(records: &[Record]) -> (Vec<Message>, u32, Vec<ToolCall>) {
    let mut history = Vec::new();
    let mut turn = 0;
    let mut open: Vec<ToolCall> = Vec::new();
    for r in records {
        match &r.event {
            Event::TurnBegin { turn: t } => turn = *t,
            Event::UserMessage { text } => {
                close_open(&mut history, &mut open);
                history.push(Message::User { text: text.clone() });
            }
            Event::RequestEnd { message, .. } => {
                close_open(&mut history, &mut open);
                history.push(Message::Assistant(message.clone()));
                open = message.tool_calls.clone();
            }
            Event::ToolCallEnd {
                call_id, outcome, ..
            } => {
                if let Some(pos) = open.iter().position(|c| &c.id == call_id) {
                    open.remove(pos);
                    history.push(Message::ToolResult(ToolResult {
                        call_id: call_id.clone(),
                        content: outcome.content.clone(),
                        is_error: outcome.is_error,
                    }));
                }
            }
            _ => {}
        }
    }
    (history, turn, open)
}

/// Closes calls left open by an earlier crash before a later message, so the
/// history stays paired even in a log resumed more than once.
fn close_open(history: &mut Vec<Message>, open: &mut Vec<ToolCall>) {
    for call in open.drain(..) {
        history.push(Message::ToolResult(ToolResult {
            call_id: call.id,
            content: "interrupted: the session ended before this call finished".into(),
            is_error: true,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::protected_target;
    use serde_json::json;

    #[test]
    fn protected_paths() {
        assert_eq!(
            protected_target(&json!({"path": ".git/config"})),
            Some(".git/config".into())
        );
        assert!(protected_target(&json!({"path": "./src/../.git/hooks/pre-commit"})).is_some());
        assert_eq!(
            protected_target(&json!({"path": "corral.toml"})),
            Some("corral.toml".into())
        );
        assert!(protected_target(&json!({"path": ".GIT/HEAD"})).is_some());
        assert!(protected_target(&json!({"patch": "*** Begin Patch\n*** Add File: .git/hooks/post-checkout\n+x\n*** End Patch"})).is_some());
        assert_eq!(protected_target(&json!({"path": "src/.gitignore"})), None);
        assert_eq!(
            protected_target(&json!({"path": ".github/workflows/ci.yml"})),
            None
        );
        assert_eq!(protected_target(&json!({"path": "docs/corral.toml"})), None);
    }
}
