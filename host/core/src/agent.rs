//! The loop: build the request, ask the provider (streaming), take the
//! tools it calls through the [`Dispatcher`], send the results back, until a
//! final answer or another explicit stop. Every step is an event, sent to
//! the front-end and written to the session log.
//!
//! Invariants: the history the provider sees pairs every assistant tool call
//! with exactly one tool result, in call order; every `tool_call_begin` has
//! one `tool_call_end`; unknown tools and invalid arguments go back to the
//! model as tool errors; consecutive read-only calls run in parallel, and
//! their results are recorded in call order.

mod backlog;
mod budget;
mod cassette;
mod compact;
mod history;
mod host_tools;
mod limits;
mod rewind;
mod shell;
mod subagent;

pub use backlog::{BACKLOG_BYTES, Backlog};
pub use budget::{BYTES_PER_TOKEN, Budget, DEFAULT_COMPACT_AT, DEFAULT_WINDOW, request_bytes};
pub use cassette::write as write_cassette;
pub use compact::{SUMMARY_PROMPT, apply as apply_compaction, summary_request};
pub use history::replay_history;
pub use host_tools::{HOST_TOOLS, HostTool};
pub use limits::{ANSWER_RETRIES, SpendLimit};
pub use shell::{SHELL_TOOL, USER_CALL_PREFIX, shell_note};
pub use subagent::{SubagentEnv, SubagentOptions};

use crate::call::{Approver, Dispatcher, Emit, NoApprover, Sink};
use crate::log::{Record, SessionLog};
use crate::protocol::{
    ChatRequest, ChatResponse, Event, FinishReason, Message, Mode, ProviderError, StopReason,
    StreamEvent, ToolCall, ToolOutcome, ToolResult,
};
use crate::provenance::Tracker;
use crate::runtime::{Plugin, Plugins};
use anyhow::Context as _;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// How the loop runs.
#[derive(Clone)]
pub struct AgentOptions {
    /// Model id; empty for the provider's configured model.
    pub model: String,
    /// The JSON Schema the final answer must fit (`--output-schema`).
    pub output_schema: Option<crate::AnswerSchema>,
    /// What the run may spend (`--max-cost-usd`).
    pub spend_limit: Option<SpendLimit>,
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
    /// `[guard]`: provenance labels and the exfiltration guard.
    pub guard: crate::policy::GuardSettings,
    /// The plugin tools offered to the model; `None` for all of them (a
    /// subagent gets the ones its task named).
    pub tools: Option<Vec<String>>,
    /// Subagents: depth, limits, and what worktrees need.
    pub subagents: SubagentOptions,
    /// The hooks of the session (`[hooks]`).
    pub hooks: Arc<crate::hooks::Hooks>,
    /// Compact the history when a request would take more than this share
    /// of the model's context window (`[agent] compact_at`).
    pub compact_at: f64,
    /// Model limits over the provider's (`[agent.models."ID"]`).
    pub models: std::collections::BTreeMap<String, crate::manifest::ModelOverride>,
    /// Where corral's ids for the model's calls come from; a session's
    /// subagents share it, since their approvals reach the same front-end.
    pub call_ids: CallIds,
    /// The byte budget of deltas queued for the front-end, shared with the
    /// session's subagents; `None` when no front-end gives room back (a
    /// test driving the agent directly).
    pub backlog: Option<Backlog>,
    /// The workspace's `git status`, started early (see
    /// [`crate::context::GitStatus`]); one for another workspace, or
    /// `None`, is taken when the first prompt is built.
    pub git_status: Option<crate::context::GitStatus>,
    /// The `[mcp.NAME]` servers, started, whose tools the session offers.
    pub mcp: Arc<crate::mcp_client::McpTools>,
    /// The skills found when the session opened ([`crate::skills`]): the
    /// offered ones are listed in the system prompt and read with the
    /// `skill` tool.
    pub skills: Arc<crate::skills::Skills>,
    /// The editor hosting the session (`corral acp`), whose files
    /// `editor_read` and `editor_write` reach; never a subagent's.
    pub editor: Option<Arc<dyn crate::editor::EditorFiles>>,
}

/// corral's ids for the model's tool calls, `c-1`, `c-2`, …: the model's
/// own ids are text from outside (empty, or the same for two calls of one
/// response), so nothing is keyed by them (see [`ToolCall::id`]).
#[derive(Debug, Clone, Default)]
pub struct CallIds(Arc<std::sync::atomic::AtomicU64>);

impl CallIds {
    fn next(&self) -> String {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        format!("c-{n}")
    }

    /// Goes on after every `c-N` a resumed session's log already holds,
    /// its subagents' wrapped events included: a child's calls took ids
    /// from the same counter, and their artifacts are named by them.
    fn continue_after(&self, records: &[Record]) {
        let highest = records
            .iter()
            .map(|r| highest_call_id(&r.event))
            .max()
            .unwrap_or(0);
        self.0
            .fetch_max(highest, std::sync::atomic::Ordering::Relaxed);
    }

    /// Goes on after every `c-N` the logs of `log`'s subagents hold, at any
    /// depth: a subagent killed mid-run used ids its parent's log never
    /// saw.
    fn continue_after_subagents(&self, log: &SessionLog) {
        let Some(dir) = log.path().parent() else {
            return;
        };
        let children = match crate::log::descendants(dir, log.id()) {
            Ok(children) => children,
            Err(e) => {
                tracing::warn!("cannot list this session's subagents: {e}");
                return;
            }
        };
        for child in children {
            match crate::log::read(&child.path) {
                Ok(theirs) => self.continue_after(&theirs),
                Err(e) => tracing::warn!(
                    "cannot read the log of subagent {} for its call ids: {e}",
                    child.id
                ),
            }
        }
    }

    /// Gives each call of `message` an id of corral's. The model's id is
    /// kept as [`ToolCall::model_id`] for the provider when it names one
    /// call only; an empty or repeated one is dropped, and corral's id goes
    /// back in its place.
    ///
    /// A model id shaped like corral's own (`c-5`) is dropped too: corral's
    /// `c-5` may go back for another call of the same response, and the
    /// provider would then see two calls with one id.
    fn assign(&self, message: &mut crate::protocol::AssistantMessage) {
        let mut uses: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for call in &message.tool_calls {
            *uses.entry(call.id.clone()).or_default() += 1;
        }
        for call in &mut message.tool_calls {
            let model = std::mem::take(&mut call.id);
            let unique = uses.get(&model) == Some(&1);
            let keep = unique && !model.is_empty() && !looks_like_call_id(&model);
            call.model_id = keep.then_some(model);
            call.id = self.next();
        }
    }
}

/// Whether `id` is shaped like corral's `c-N` (`^c-[0-9]+$`), however
/// many digits.
fn looks_like_call_id(id: &str) -> bool {
    id.strip_prefix("c-")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// `N` of corral's id `c-N`; `None` for other ids, and for a number no
/// counter reaches (it must not push the counter to overflow).
fn call_number(id: &str) -> Option<u64> {
    if !looks_like_call_id(id) {
        return None;
    }
    id.get(2..)?.parse::<u64>().ok()
}

/// The highest `c-N` an event names, looking inside subagent wrappers.
///
/// Every event that names a call counts, not only its begin and end: the
/// response that asked for a call and the call's permission are logged
/// before it begins, and a session killed between them must not hand the
/// same id to a later call (the provider would then send both results
/// under one id).
fn highest_call_id(event: &Event) -> u64 {
    let number = |id: &str| call_number(id).unwrap_or(0);
    match event {
        Event::ToolCallBegin { call } => number(&call.id),
        Event::ToolCallEnd { call_id, .. }
        | Event::Permission { call_id, .. }
        | Event::PlanUpdated { call_id, .. }
        | Event::Hook {
            call_id: Some(call_id),
            ..
        } => number(call_id),
        Event::RequestEnd { message, .. } => message
            .tool_calls
            .iter()
            .map(|c| number(&c.id))
            .max()
            .unwrap_or(0),
        Event::SessionResumed { closed_calls, .. } => {
            closed_calls.iter().map(|c| number(c)).max().unwrap_or(0)
        }
        Event::Subagent { call_id, event, .. } => number(call_id).max(highest_call_id(event)),
        _ => 0,
    }
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
            guard: crate::policy::GuardSettings::default(),
            tools: None,
            subagents: SubagentOptions::default(),
            hooks: Arc::default(),
            compact_at: DEFAULT_COMPACT_AT,
            models: std::collections::BTreeMap::new(),
            call_ids: CallIds::default(),
            backlog: None,
            git_status: None,
            mcp: Arc::default(),
            skills: Arc::default(),
            editor: None,
            output_schema: None,
            spend_limit: None,
        }
    }
}

/// The session log and the front-end, as one [`Sink`].
struct Out<'a> {
    log: &'a mut SessionLog,
    ui: &'a UnboundedSender<Event>,
}

impl Emit for Out<'_> {
    fn emit(&mut self, event: Event) -> anyhow::Result<()> {
        if event.is_logged() {
            self.log
                .append(&event, false)
                .context("cannot write the session log")?;
        }
        let _ = self.ui.send(event);
        Ok(())
    }
}

impl Sink for Out<'_> {
    fn save_artifact(&self, name: &str, content: &str) -> Option<std::io::Result<PathBuf>> {
        Some(self.log.save_artifact(name, content))
    }

    fn flush(&mut self) -> futures::future::BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(sync(self.log.durability()))
    }
}

/// A session in progress.
pub struct Agent {
    /// Before-images of the files each turn changes, for undo.
    checkpoints: Arc<crate::checkpoint::Checkpoints>,
    dispatcher: Dispatcher,
    provider: Arc<Plugin>,
    options: AgentOptions,
    workspace: PathBuf,
    log: SessionLog,
    history: Vec<Message>,
    /// The JSON size of the history's first messages
    /// ([`Agent::history_sizes`]).
    sizes: Vec<usize>,
    /// The JSON size of this turn's request without its history.
    frame: Option<usize>,
    /// The digest of the tools the last request offered, with that list: a
    /// turn offers the same list in every request ([`Agent::prompt_hash`]).
    tools_digest: Option<(Arc<[crate::protocol::ToolSpec]>, [u8; 32])>,
    turn: u32,
    recorded: Vec<corral_sdk::cassette::Turn>,
    /// Logged when the session opened; shown to the front-end with the first run.
    announce: Option<Event>,
    /// The session's hooks; `session_start` runs with the first run
    /// (`Some(resumed)` until then), and its context joins the system prompt.
    hooks: crate::hooks::SessionHooks,
    /// The model's limits, once asked of the provider.
    budget: Option<Budget>,
    /// The last request the provider counted (bytes, input tokens), from
    /// the log of a resumed session, so its estimates are the same.
    calibration: Option<(usize, u32)>,
    /// The plan as the model last set it (`update_plan`), carried by the
    /// summary when the history is compacted.
    plan: Vec<crate::protocol::PlanStep>,
    /// Undos and `!` lines logged since the last prompt, told to the model
    /// with the next.
    undone: Vec<String>,
    /// The workspace's `git status` for the system prompt.
    git_status: crate::context::GitStatus,
    /// The answer text streamed in the running request, kept in the
    /// history if the user interrupts it.
    partial: String,
    /// What the run has spent against its `--max-cost-usd`.
    spent: limits::Spent,
    /// Final answers of this turn that did not fit `--output-schema`.
    rejected: u32,
}

/// `options`' git status if it is `workspace`'s, else one taken later.
fn git_status_for(
    options: &AgentOptions,
    workspace: &std::path::Path,
) -> crate::context::GitStatus {
    options
        .git_status
        .clone()
        .filter(|g| g.workspace() == workspace)
        .unwrap_or_else(|| crate::context::GitStatus::later(workspace))
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
        log.append(&started, false)
            .context("cannot write the session log")?;
        if let Some((parent, parent_call)) = &options.subagents.parent {
            let linked = Event::SubagentStarted {
                parent: parent.clone(),
                parent_call: parent_call.clone(),
                depth: options.subagents.depth,
                worktree: options.subagents.worktree.clone(),
            };
            log.append(&linked, false)
                .context("cannot write the session log")?;
        }
        let tracker = match options.subagents.held.clone() {
            Some(held) => Tracker::sharing(&workspace, options.guard.clone(), held),
            None => Tracker::new(&workspace, options.guard.clone(), Default::default()),
        }?;
        let mut agent = Self::assemble(plugins, provider, options, workspace, log, tracker, 0);
        agent.announce = Some(started);
        Ok(agent)
    }

    /// The agent at `turn` of its session, with an empty history and the
    /// hooks of a new session: what a new and a resumed session start from.
    fn assemble(
        plugins: Arc<Plugins>,
        provider: Arc<Plugin>,
        mut options: AgentOptions,
        workspace: PathBuf,
        log: SessionLog,
        tracker: Tracker,
        turn: u32,
    ) -> Self {
        let hooks = crate::hooks::SessionHooks::new(options.hooks.clone(), false);
        let mut dispatcher = dispatcher(plugins, &mut options, tracker);
        let checkpoints = checkpoints(&mut dispatcher, log.path(), &workspace, turn);
        let git_status = git_status_for(&options, &workspace);
        Self {
            checkpoints,
            git_status,
            dispatcher,
            provider,
            options,
            workspace,
            log,
            history: Vec::new(),
            sizes: Vec::new(),
            frame: None,
            tools_digest: None,
            turn,
            recorded: Vec::new(),
            announce: None,
            hooks,
            budget: None,
            calibration: None,
            plan: Vec::new(),
            undone: Vec::new(),
            partial: String::new(),
            spent: limits::Spent::default(),
            rejected: 0,
        }
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
        records: Vec<Record>,
    ) -> anyhow::Result<Self> {
        let ((history, turn, open), undone) = history::replay_with_notes(&records);
        options.call_ids.continue_after(&records);
        options.call_ids.continue_after_subagents(&log);
        // File changes a crash cut short were finished or taken back when
        // the plugins loaded; the model must know which, not only that its
        // call was interrupted.
        let recovered = plugins.recovered().join("\n");
        let calibration = compact::last_calibration(&records);
        let plan = records
            .iter()
            .rev()
            .find_map(|r| match &r.event {
                Event::PlanUpdated { steps, .. } => Some(steps.clone()),
                _ => None,
            })
            .unwrap_or_default();
        // What the session holds comes from every result in its log, not
        // from the history the model will read (which compaction shortens):
        // learnt while the first request goes out, waited for by the first
        // call the guard judges.
        let held = Arc::new(crate::provenance::SharedHeld::learning(records));
        let tracker = Tracker::sharing(&workspace, options.guard.clone(), held)?;
        let mut agent = Self::assemble(plugins, provider, options, workspace, log, tracker, turn);
        agent.hooks = crate::hooks::SessionHooks::new(agent.options.hooks.clone(), true);
        agent.history = history;
        agent.calibration = calibration;
        agent.plan = plan;
        agent.undone = undone;
        let mut closed = Vec::new();
        for call in open {
            let mut content =
                String::from("interrupted: the session ended before this call finished");
            if !recovered.is_empty() {
                content.push_str("\n\nWhen the session was resumed, corral found file changes the end had cut short:\n");
                content.push_str(&recovered);
            }
            let outcome = ToolOutcome {
                content,
                is_error: true,
                data: None,
                truncated_from: None,
                artifact: None,
                labels: Vec::new(),
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
                false,
            )?;
            closed.push(call.id);
        }
        // Subagents the kill cut short wrote no stop of their own.
        if let Some(dir) = agent.log.path().parent()
            && let Err(e) = crate::log::close_children(dir, agent.log.id())
        {
            tracing::warn!("cannot close the logs of this session's subagents: {e}");
        }
        let resumed = Event::SessionResumed {
            session_id: agent.log.id().to_owned(),
            closed_calls: closed,
        };
        agent.log.append(&resumed, false)?;
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

    /// What of the session log is on disk, for a front-end that shows its
    /// events through [`crate::log::acknowledge`].
    pub fn durability(&self) -> crate::log::Durable {
        self.log.durability()
    }

    /// Puts the log on disk, off the async runtime's threads: before a
    /// tool's effects happen and at the end of a turn.
    async fn sync_log(&self) -> anyhow::Result<()> {
        sync(self.log.durability()).await
    }

    /// The conversation so far.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// The loaded plugins.
    pub fn plugins(&self) -> &Arc<Plugins> {
        self.dispatcher.plugins()
    }

    /// Provider round trips recorded so far (for `--record`).
    pub fn recorded(&self) -> &[corral_sdk::cassette::Turn] {
        &self.recorded
    }

    /// Changes the permission mode from the next call on, and logs it.
    pub fn set_mode(&mut self, mode: Mode, ui: &UnboundedSender<Event>) -> anyhow::Result<()> {
        self.dispatcher.set_mode(mode);
        self.out(ui).emit(Event::ModeChanged { mode })
    }

    /// Changes the model from the next request on, and logs it.
    pub fn set_model(&mut self, model: String, ui: &UnboundedSender<Event>) -> anyhow::Result<()> {
        self.options.model = model.clone();
        self.budget = None;
        self.calibration = None;
        self.out(ui).emit(Event::ModelChanged { model })
    }

    /// Switches to another provider plugin from the next request on, and
    /// logs it.
    pub fn set_provider(
        &mut self,
        provider: Arc<Plugin>,
        ui: &UnboundedSender<Event>,
    ) -> anyhow::Result<()> {
        let name = provider.decl().name.clone();
        self.provider = provider;
        self.budget = None;
        self.calibration = None;
        self.out(ui).emit(Event::ProviderChanged { provider: name })
    }

    fn out<'a>(&'a mut self, ui: &'a UnboundedSender<Event>) -> Out<'a> {
        Out {
            log: &mut self.log,
            ui,
        }
    }

    fn emit(&mut self, ui: &UnboundedSender<Event>, event: Event) -> anyhow::Result<()> {
        self.out(ui).emit(event)
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
    /// the history as it is (after `resume`). The turn's end is on disk
    /// when this returns.
    pub async fn run(
        &mut self,
        prompt: Option<&str>,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<StopReason> {
        let stop = self.run_turn(prompt, ui, cancel).await;
        let synced = self.sync_log().await;
        let stop = stop?;
        synced?;
        Ok(stop)
    }

    async fn run_turn(
        &mut self,
        prompt: Option<&str>,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<StopReason> {
        if let Some(blocked) = self.begin_turn(prompt, ui).await? {
            return self.stop(ui, StopReason::PermissionDenied, Some(blocked));
        }
        let (mut system, mut tools) = self.offer().await;
        // A provider that says the context is exceeded gets one compaction
        // and a retry before the run stops.
        let mut retried = false;
        for iteration in 1..=self.options.max_iterations {
            // A server's changed tool list is read again before the next request.
            if iteration > 1 && self.dispatcher.mcp().list_changed() {
                (system, tools) = self.offer().await;
                self.frame = None;
            }
            if let Some(why) = self.over_budget() {
                return self.stop(ui, StopReason::BudgetExhausted, Some(why));
            }
            let (request, bytes) = match self.prepare_request(&system, &tools, ui, cancel).await? {
                Ok(r) => r,
                Err((reason, message)) => return self.stop(ui, reason, Some(message)),
            };
            if let Some(b) = &self.budget {
                let limit = b.tool_output_limit(self.options.tool_output_limit);
                self.dispatcher.set_output_limit(Some(limit));
            }
            let prompt_hash = self.prompt_hash(&request);
            self.emit(
                ui,
                Event::RequestBegin {
                    iteration,
                    prompt_hash,
                    messages: request.messages.len(),
                },
            )?;
            let mut response = match self.ask(&request, ui, cancel).await? {
                Ok(r) => r,
                Err(None) => {
                    self.keep_interrupted(ui)?;
                    return self.stop(
                        ui,
                        StopReason::Interrupted,
                        Some("interrupted while the model was answering".into()),
                    );
                }
                Err(Some(error)) => match self.provider_failed(error, retried, ui, cancel).await? {
                    Ok(()) => {
                        retried = true;
                        continue;
                    }
                    Err((reason, message)) => return self.stop(ui, reason, Some(message)),
                },
            };
            retried = false;
            // Before anything is keyed by them: the log, approvals, labels.
            self.options.call_ids.assign(&mut response.message);
            self.calibrate(bytes, response.usage);
            self.spend(response.usage);
            // The event and the history share the message's text (a long
            // answer is megabytes): the clone copies its tool calls only.
            let message = response.message;
            self.emit(
                ui,
                Event::RequestEnd {
                    message: message.clone(),
                    finish_reason: response.finish_reason,
                    usage: response.usage,
                },
            )?;
            if message.tool_calls.is_empty() {
                match self.fit(&message.text, ui)? {
                    limits::Fit::Yes => {}
                    limits::Fit::Again(retry) => {
                        self.history.push(Message::Assistant(message));
                        self.history.push(Message::User { text: retry });
                        continue;
                    }
                    limits::Fit::GiveUp(why) => {
                        self.history.push(Message::Assistant(message));
                        return self.stop(ui, StopReason::InvalidOutput, Some(why));
                    }
                }
                // The stop hooks read the answer, not the history.
                let go_on = self.final_answer(&message.text, ui).await;
                self.history.push(Message::Assistant(message));
                if let Some(go_on) = go_on? {
                    self.history.push(Message::User { text: go_on });
                    continue;
                }
                return self.stop(ui, StopReason::FinalAnswer, None);
            }
            let calls = message.tool_calls.clone();
            self.history.push(Message::Assistant(message));
            if let Some((reason, message)) = self
                .run_tools(&calls, response.finish_reason, ui, cancel)
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

    /// The turn's start: its event, the `session_start` hooks (first turn
    /// only) and the prompt, through its hooks, into the history. `Some`
    /// is why a hook blocked the prompt.
    async fn begin_turn(
        &mut self,
        prompt: Option<&str>,
        ui: &UnboundedSender<Event>,
    ) -> anyhow::Result<Option<String>> {
        self.frame = None;
        if let Some(event) = self.announce.take() {
            let _ = ui.send(event);
        }
        self.turn += 1;
        self.checkpoints.set_turn(self.turn);
        self.emit(ui, Event::TurnBegin { turn: self.turn })?;
        let session_id = self.log.id().to_owned();
        let mut out = Out {
            log: &mut self.log,
            ui,
        };
        self.hooks.start(&session_id, &mut out).await?;
        let Some(prompt) = prompt else {
            return Ok(None);
        };
        let text = match self.hooks.prompt(prompt, &mut out).await? {
            Ok(text) => text,
            Err(blocked) => return Ok(Some(blocked)),
        };
        self.emit(
            ui,
            Event::UserMessage {
                text: prompt.to_owned(),
            },
        )?;
        // A subagent's task was written by the model, not by the user.
        if self.options.subagents.parent.is_none() {
            self.dispatcher.trust(prompt);
            if self.turn == 1 {
                for (_, text) in crate::context::agents_md(&self.workspace, &self.options.cwd) {
                    self.dispatcher.trust(&text);
                }
            }
        }
        let text = crate::hooks::with_context(&text, &std::mem::take(&mut self.undone));
        self.history.push(Message::User { text });
        Ok(None)
    }

    /// What the model is offered this turn: the system prompt and the
    /// tools (the plugins' it may use, then the host's own).
    async fn offer(&self) -> (String, Arc<[crate::protocol::ToolSpec]>) {
        let mut tools: Vec<_> = self
            .plugins()
            .tools()
            .into_iter()
            .filter(|(_, t)| self.offers(&t.name))
            .map(|(_, t)| t.clone())
            .collect();
        self.dispatcher.mcp().refresh().await;
        tools.extend(
            self.dispatcher
                .mcp()
                .tools()
                .into_iter()
                .filter(|t| self.offers(&t.spec.name))
                .map(|t| t.spec),
        );
        // What a server says of its tools reaches the model as its results
        // do: untrusted.
        for tool in self.dispatcher.mcp().tools() {
            let said = format!("{} {}", tool.spec.description, tool.spec.input_schema);
            let source = format!(
                "the description of `{}`, from mcp:{}",
                tool.spec.name,
                tool.server()
            );
            self.dispatcher.taint(&said, &source);
        }
        let host = self.dispatcher.host_specs();
        let git_status = self.git_status.clone();
        let mut system = self.hooks.system_prompt(crate::context::system_prompt(
            &self.workspace,
            &self.options.cwd,
            self.plugins(),
            git_status.get().await,
        ));
        system.push_str(&crate::context::host_tools_section(&host));
        system.push_str(&crate::skills::prompt_section(&self.options.skills));
        if let Some(section) = self.answer_section() {
            system.push_str(&section);
        }
        if let Some(offered) = &self.options.tools {
            system.push_str(&crate::context::subagent_section(offered));
        }
        tools.extend(host);
        (system, tools.into())
    }

    /// A provider's failure, logged. `Ok` when the history was compacted
    /// for a retry (once per exceeded context, `retried` says whether it
    /// was already); `Err` is the stop.
    async fn provider_failed(
        &mut self,
        error: ProviderError,
        retried: bool,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Result<(), (StopReason, String)>> {
        let exceeded = matches!(error, ProviderError::ContextLength { .. });
        let message = error.to_string();
        self.emit(ui, Event::ProviderFailed { error })?;
        if exceeded && !retried {
            match self
                .compact(crate::protocol::CompactTrigger::ContextLength, ui, cancel)
                .await?
            {
                compact::Compaction::Done => return Ok(Ok(())),
                compact::Compaction::Interrupted => {
                    return Ok(Err((
                        StopReason::Interrupted,
                        "interrupted while the history was being compacted".into(),
                    )));
                }
                compact::Compaction::Failed => {}
            }
        }
        let reason = if exceeded {
            StopReason::ContextExhausted
        } else {
            StopReason::ProviderError
        };
        Ok(Err((reason, message)))
    }

    /// The hooks of a final answer `text`: a subagent's runs
    /// `subagent_stop` (with the task it was given), a session's own runs
    /// `stop`. `Some` is a hook's reason to go on.
    async fn final_answer(
        &mut self,
        text: &str,
        ui: &UnboundedSender<Event>,
    ) -> anyhow::Result<Option<String>> {
        let mut out = Out {
            log: &mut self.log,
            ui,
        };
        if self.options.subagents.parent.is_none() {
            return self.hooks.stop(text, &mut out).await;
        }
        let task = self
            .history
            .iter()
            .find_map(|m| match m {
                Message::User { text } => Some(text.as_str()),
                _ => None,
            })
            .unwrap_or_default();
        Ok(self
            .options
            .hooks
            .subagent_stop(task, text, &mut out)
            .await?
            .blocked)
    }

    /// Runs the `session_end` hooks; called once when the session closes.
    pub async fn end(&mut self, ui: &UnboundedSender<Event>) -> anyhow::Result<()> {
        let session_id = self.log.id().to_owned();
        let mut out = Out {
            log: &mut self.log,
            ui,
        };
        self.hooks.end(&session_id, &mut out).await
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
        let backlog = self.options.backlog.clone();
        // Once the model has started answering, the host mostly waits: the
        // tools' next instances are made then, off the calls' path, and not
        // while the request is still being sent.
        let mut ahead = Some(self.plugins().clone());
        let mut events = Vec::new();
        // The text streamed so far: kept when the user interrupts it.
        self.partial.clear();
        let partial = &mut self.partial;
        let mut note = |ev: &StreamEvent| {
            if let StreamEvent::TextDelta { text } = ev {
                rewind::keep_partial(partial, text);
            }
            if record {
                events.push(ev.clone());
            }
        };
        let result = loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(Err(None)),
                Some(ev) = rx.recv() => {
                    if let Some(plugins) = ahead.take() {
                        plugins.make_ahead();
                    }
                    note(&ev);
                    if !forward(ui, ev, backlog.as_ref(), cancel).await {
                        return Ok(Err(None));
                    }
                }
                res = &mut call => break res,
            }
        };
        while let Ok(ev) = rx.try_recv() {
            note(&ev);
            if !forward(ui, ev, backlog.as_ref(), cancel).await {
                return Ok(Err(None));
            }
        }
        if let Ok(response) = &result
            && record
        {
            self.recorded.push(cassette::turn(&events, response));
        }
        Ok(result.map_err(Some))
    }

    /// Takes the calls of one assistant turn through the pipeline's one
    /// orchestrator ([`Dispatcher::run_batch`]) and puts their results in
    /// the history, in call order. Returns a stop when the run must end.
    async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        finish: FinishReason,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Option<(StopReason, String)>> {
        let host = self.host_call(ui, cancel);
        let mut out = Out {
            log: &mut self.log,
            ui,
        };
        let ran = self
            .dispatcher
            .run_batch(calls, Some(finish), &host, &mut out, cancel)
            .await?;
        if let Some(plan) = ran.plan {
            self.plan = plan;
        }
        for (call, outcome) in calls.iter().zip(ran.outcomes) {
            self.history.push(Message::ToolResult(ToolResult {
                call_id: call.id.clone(),
                content: outcome.content,
                is_error: outcome.is_error,
            }));
        }
        Ok(ran.stop)
    }
}

impl Agent {
    /// Whether the model is offered the plugin tool `name`.
    fn offers(&self, name: &str) -> bool {
        self.options
            .tools
            .as_ref()
            .is_none_or(|t| t.iter().any(|n| n == name))
    }

    /// corral's ids by the model's, for every model id that names one call
    /// of the history only (a repeated one names none).
    fn model_ids(&self) -> std::collections::HashMap<String, String> {
        let mut ids: std::collections::HashMap<String, Option<String>> =
            std::collections::HashMap::new();
        for m in &self.history {
            let Message::Assistant(a) = m else { continue };
            for call in &a.tool_calls {
                if let Some(model) = &call.model_id {
                    ids.entry(model.clone())
                        .and_modify(|own| *own = None)
                        .or_insert_with(|| Some(call.id.clone()));
                }
            }
        }
        ids.into_iter()
            .filter_map(|(model, own)| Some((model, own?)))
            .collect()
    }

    /// What the host's own tools run with in this turn.
    fn host_call(
        &self,
        ui: &UnboundedSender<Event>,
        cancel: &CancellationToken,
    ) -> host_tools::HostCall {
        let spawner = subagent::host_tools(&self.options)
            .contains(&HostTool::Task)
            .then(|| {
                // The policy in force now: the mode may have changed since the start.
                let options = AgentOptions {
                    policy: self.dispatcher.policy().clone(),
                    ..self.options.clone()
                };
                Arc::new(subagent::Spawner {
                    plugins: self.plugins().clone(),
                    provider: self.provider.clone(),
                    options,
                    workspace: self.workspace.clone(),
                    sessions_dir: self
                        .log
                        .path()
                        .parent()
                        .map(std::path::Path::to_path_buf)
                        .unwrap_or_default(),
                    session_id: self.log.id().to_owned(),
                    running: Arc::default(),
                    outcomes: Arc::default(),
                })
            });
        host_tools::HostCall {
            artifacts: self.log.artifacts_dir(),
            ui: ui.clone(),
            cancel: cancel.clone(),
            spawner: spawner.map(|s| s as Arc<dyn host_tools::Tasks>),
            model_ids: self.model_ids(),
            skills: self.options.skills.clone(),
            editor: self.options.editor.clone(),
            workspace: self.workspace.clone(),
        }
    }
}

/// The dispatcher of a session with `options`: its plugins, policy, host
/// tools, hooks and provenance `tracker`, whose state the session's
/// subagents share.
fn dispatcher(plugins: Arc<Plugins>, options: &mut AgentOptions, tracker: Tracker) -> Dispatcher {
    options.subagents.held = Some(tracker.shared());
    Dispatcher::of(crate::call::Front {
        plugins,
        policy: options.policy.clone(),
        approver: options.approver.clone(),
        output_limit: Some(options.tool_output_limit),
        hooks: options.hooks.clone(),
        mcp: options.mcp.clone(),
        tracker: Some(Arc::new(tracker)),
        host_tools: subagent::host_tools(options)
            .into_iter()
            .map(|t| Arc::new(t) as Arc<dyn crate::call::HostSpec>)
            .collect(),
    })
}

/// The checkpoints of the session whose log is `log`, from `turn` on,
/// given to `dispatcher`, which also watches `workspace` for them.
fn checkpoints(
    dispatcher: &mut Dispatcher,
    log: &Path,
    workspace: &Path,
    turn: u32,
) -> Arc<crate::checkpoint::Checkpoints> {
    let checkpoints = Arc::new(crate::checkpoint::Checkpoints::for_log(log));
    checkpoints.set_turn(turn);
    dispatcher.set_checkpoint(checkpoints.clone());
    dispatcher.set_watch(Arc::new(crate::checkpoint::Watch::new(
        checkpoints.clone(),
        workspace.to_path_buf(),
    )));
    checkpoints
}

/// Puts the session log on disk, off the async runtime's threads.
async fn sync(durable: crate::log::Durable) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || durable.sync())
        .await
        .context("the session-log sync thread panicked")?
        .context("cannot write the session log to disk")
}

impl Agent {
    /// The hash of `request`, for the log: SHA-256 over its JSON without
    /// the tools (model, messages with the system prompt, settings), then
    /// the SHA-256 of the tools' JSON. The tools' digest is kept for the
    /// list it was made of, so the requests of one turn serialise their
    /// tools (most of a short request) once.
    fn prompt_hash(&mut self, request: &ChatRequest) -> String {
        let tools = match &self.tools_digest {
            Some((list, digest)) if Arc::ptr_eq(list, &request.tools) => *digest,
            _ => {
                let mut hasher = HashWriter(Sha256::new());
                let _ = serde_json::to_writer(&mut hasher, &request.tools);
                let digest: [u8; 32] = hasher.0.finalize().into();
                self.tools_digest = Some((request.tools.clone(), digest));
                digest
            }
        };
        let mut hasher = HashWriter(Sha256::new());
        let _ = serde_json::to_writer(
            &mut hasher,
            &(
                &request.model,
                &request.messages,
                request.max_tokens,
                request.temperature,
            ),
        );
        hasher.0.update(tools);
        hex::encode(hasher.0.finalize())
    }
}

/// Hashes what is written to it, so a request is hashed as it is
/// serialised, without a copy of its JSON.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends a stream event on to the front-end, first waiting for room in the
/// backlog. `false` when the turn was interrupted while it waited.
async fn forward(
    ui: &UnboundedSender<Event>,
    ev: StreamEvent,
    backlog: Option<&Backlog>,
    cancel: &CancellationToken,
) -> bool {
    let event = match ev {
        StreamEvent::TextDelta { text } => Event::TextDelta { text },
        StreamEvent::ToolCallDelta {
            index,
            name,
            arguments_delta,
            ..
        } => Event::ToolCallDelta {
            index,
            name,
            arguments_delta,
        },
        _ => return true,
    };
    if let Some(b) = backlog {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return false,
            () = b.reserve(&event) => {}
        }
    }
    let _ = ui.send(event);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::AssistantMessage;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "read".to_owned(),
            arguments: "{}".to_owned(),
            model_id: None,
        }
    }

    fn record(event: Event) -> Record {
        Record {
            seq: 1,
            ts_ms: 0,
            event,
        }
    }

    #[test]
    fn resume_counts_the_ids_of_wrapped_subagent_events() {
        let ids = CallIds::default();
        let child = Event::ToolCallBegin { call: call("c-7") };
        let nested = Event::Subagent {
            call_id: "c-2".to_owned(),
            session_id: "s".to_owned(),
            event: Box::new(Event::Subagent {
                call_id: "c-3".to_owned(),
                session_id: "t".to_owned(),
                event: Box::new(child),
            }),
        };
        ids.continue_after(&[
            record(Event::ToolCallBegin { call: call("c-2") }),
            record(nested),
        ]);
        assert_eq!(ids.next(), "c-8");
    }

    #[test]
    fn resume_counts_a_call_the_log_names_before_it_began() {
        // Killed after the response that asked for `c-1` was logged, before
        // the call began: the resumed session's next call is `c-2`, not a
        // second `c-1`.
        let ids = CallIds::default();
        ids.continue_after(&[record(Event::RequestEnd {
            message: AssistantMessage {
                text: Default::default(),
                tool_calls: vec![call("c-1")],
            },
            finish_reason: crate::protocol::FinishReason::ToolCalls,
            usage: None,
        })]);
        assert_eq!(ids.next(), "c-2");
        let ids = CallIds::default();
        ids.continue_after(&[record(Event::Permission {
            call_id: "c-4".to_owned(),
            tool: "edit_file".to_owned(),
            decision: crate::protocol::PermissionDecision::Allow,
            reason: String::new(),
        })]);
        assert_eq!(ids.next(), "c-5");
    }

    #[test]
    fn resume_ignores_an_id_past_the_counter() {
        let ids = CallIds::default();
        ids.continue_after(&[record(Event::ToolCallBegin {
            call: call("c-99999999999999999999999"),
        })]);
        assert_eq!(ids.next(), "c-1");
    }

    #[test]
    fn a_model_id_shaped_like_corrals_is_not_kept() {
        let ids = CallIds::default();
        let mut message = AssistantMessage {
            text: Default::default(),
            tool_calls: vec![call("c-2"), call("toolu_1"), call("c-0099"), call("c-")],
        };
        ids.assign(&mut message);
        let wire: Vec<&str> = message.tool_calls.iter().map(|c| c.wire_id()).collect();
        assert_eq!(wire, ["c-1", "toolu_1", "c-3", "c-"]);
        let mut unique = wire.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), wire.len(), "wire ids repeat: {wire:?}");
        assert_eq!(message.tool_calls[0].model_id, None);
        assert_eq!(message.tool_calls[1].model_id.as_deref(), Some("toolu_1"));
    }
}
