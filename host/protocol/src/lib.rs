//! # corral-protocol
//!
//! The bottom layer: plain data that every crate above and every front-end
//! shares (exports [`Op`], [`Event`], the chat and tool types, [`HookInput`]
//! and [`Verdict`], and [`terminal`], the inert-text helpers).
//!
//! What the core and every front-end say to each other: plain serde data,
//! no logic, and nothing else of corral. Submissions ([`Op`]) go in; events
//! ([`Event`]) come out, grouped as Begin/Delta/End. The session log stores
//! the same events (all but the deltas).
//!
//! The terminal renderer, `run --json`, and the MCP server all speak this
//! module; none of them reaches into the loop.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

pub mod terminal;

mod chat;
mod hook;
mod mode;
mod tool;

pub use chat::{
    AssistantMessage, ChatRequest, ChatResponse, FinishReason, Message, ModelInfo, ProviderError,
    SharedText, StreamEvent, ToolCall, ToolResult, Usage,
};
pub use hook::{HookInput, Verdict, summary};
pub use mode::Mode;
pub use tool::{Effect, ToolSpec};

/// The JSON Schema (draft 2020-12) of every line `corral run --json` prints:
/// one [`Event`] each, the last one [`Event::Result`].
pub const EVENTS_SCHEMA: &str = include_str!("../events.schema.json");

/// The `program` of a grant that lets a plugin run any program: a name
/// looked up in `PATH` when the command runs, or a path. Here rather than in
/// the process layer because the policy and the manifest judge grants
/// without running anything.
pub const ANY_PROGRAM: &str = "*";

/// The name of every built-in plugin (`source = "builtin:NAME"`), as plain
/// data so the manifest can check a source without embedding the plugins;
/// corral-builtin's tests hold it to what that crate builds.
pub const BUILTIN_PLUGINS: [&str; 12] = [
    "fs",
    "search",
    "replay",
    "openai",
    "anthropic",
    "shell",
    "git",
    "hook-block",
    "hook-format",
    "hook-context",
    "web-fetch",
    "web-search",
];

use serde::{Deserialize, Serialize};

/// A submission from a front-end to a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Op {
    /// A prompt: runs one turn to a [`Event::Stop`]. Turns submitted while
    /// one runs wait their turn.
    UserTurn {
        /// What the user says.
        text: String,
    },
    /// Runs a turn without a new prompt: the model goes on from the history
    /// (after a resume).
    Continue,
    /// The answer to an [`Event::ApprovalRequested`].
    Approval {
        /// The call it answers.
        call_id: String,
        /// The answer.
        #[serde(flatten)]
        answer: ApprovalAnswer,
    },
    /// Stops the running turn: the provider stream or the running tools.
    /// The turn ends with [`StopReason::Interrupted`].
    Interrupt,
    /// Changes the permission mode from the next tool call on.
    SetMode {
        /// The new mode.
        mode: Mode,
    },
    /// Changes the model from the next request on.
    SetModel {
        /// The model id; empty for the provider's configured model.
        model: String,
    },
    /// Switches to another provider plugin from the next request on.
    SetProvider {
        /// The provider plugin's name.
        provider: String,
    },
    /// Compacts the history now: the older turns are summarised and
    /// replaced by the summary ([`Event::Compacted`]).
    Compact,
    /// Runs a command line the user typed (`!cmd`) as a `run_command` call
    /// through the same pipeline as the model's calls (rules, mode,
    /// approval, confinement, the log); its output joins the conversation
    /// with the next prompt. Ends with an [`Event::Stop`].
    Shell {
        /// The command line.
        command: String,
    },
    /// Restores the files the latest turn not undone yet changed (`/undo`),
    /// refusing over files edited since unless `force`; the turn's
    /// [`Event::Undone`] follows, or an [`Event::Error`] saying why not.
    Undo {
        /// Overwrite files edited since the turn.
        #[serde(default)]
        force: bool,
    },
    /// Rewinds the session to before the prompt of `turn` (Esc Esc,
    /// `/rewind`): the conversation, the files, or both; an
    /// [`Event::Rewound`] follows, or an [`Event::Error`] saying why not.
    Rewind {
        /// The turn whose prompt is rewound to (it and every later turn go).
        turn: u32,
        /// Forget the later messages: the model's next request leaves them out.
        conversation: bool,
        /// Restore the files every turn from `turn` on changed.
        code: bool,
        /// Overwrite files edited since those turns.
        #[serde(default)]
        force: bool,
    },
    /// Ends the session once the running turn (if any) is interrupted;
    /// the last event is [`Event::ShutdownComplete`].
    Shutdown,
}

/// A user's answer to an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run this call.
    Approve,
    /// Run this call, and later calls that
    /// [`ApprovalRequest::session_covers`] names, for the rest of the session.
    ApproveForSession,
    /// Do not run it; the reason goes to the model.
    Deny {
        /// What the user said, if anything.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// A call the permission policy does not allow outright, put to the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call.
    pub call: ToolCall,
    /// The rule or mode that asked, e.g. `mode ask: write needs approval`.
    pub reason: String,
    /// The unified diff the call would apply, when the tool can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// What an [`ApprovalAnswer::ApproveForSession`] approves from now on:
    /// `this command` or `every <tool> call`.
    pub session_covers: String,
    /// Why the exfiltration guard holds the call, when it does: what the
    /// session read and where the call could send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// Everything the call will run, whole and made visible
    /// ([`crate::terminal::visible_arguments`]): what a front-end shows
    /// before the call can be approved. A summary may lead it, never replace it.
    #[serde(default)]
    pub shown: String,
}

impl ApprovalRequest {
    /// A request about `call`, its [`ApprovalRequest::shown`] text made from
    /// the call itself.
    pub fn new(
        call: ToolCall,
        reason: String,
        preview: Option<String>,
        session_covers: String,
        guard: Option<String>,
    ) -> Self {
        let shown = crate::terminal::visible_arguments(&call.arguments);
        Self {
            call,
            reason,
            preview,
            session_covers,
            guard,
            shown,
        }
    }
}

/// Where part of a tool result came from ([`ToolOutcome::labels`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    /// What kind of content it is.
    pub kind: LabelKind,
    /// Where it came from: a path relative to the workspace, an absolute
    /// path, `http://host:port`, or a program or tool.
    pub source: String,
}

impl Label {
    /// A label of `kind` for content from `source`.
    pub fn new(kind: LabelKind, source: impl Into<String>) -> Self {
        Self {
            kind,
            source: source.into(),
        }
    }
}

/// The provenance of content a tool result carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelKind {
    /// The user's own workspace files: trusted.
    Workspace,
    /// Written by someone else: outside the workspace, a dependency or
    /// vendored tree, a network response, a program with the network.
    Untrusted,
    /// Secrets: files matching secret patterns, credential stores, outputs of
    /// tools declared to read secrets.
    Sensitive,
}

/// What happened to a call at the permission step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionDecision {
    /// A rule or the mode allowed it.
    Allow,
    /// A rule, the mode or a protected path refused it.
    Deny,
    /// A deny-and-stop rule refused it and ended the run.
    DenyAndStop,
    /// It asked, and the user (or `--yes`) approved it once.
    Approved,
    /// It asked, and it was approved for the rest of the session (now or
    /// earlier).
    ApprovedForSession,
    /// It asked, and the user (or a non-interactive run) refused it.
    Refused,
}

impl PermissionDecision {
    /// Whether the call runs.
    pub fn runs(self) -> bool {
        matches!(
            self,
            Self::Allow | Self::Approved | Self::ApprovedForSession
        )
    }
}

/// Why a run stopped. Every stop is recorded with its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave a final answer.
    FinalAnswer,
    /// The iteration limit was reached before a final answer.
    MaxIterations,
    /// The provider failed (after its own retries).
    ProviderError,
    /// A tool failed in a way that stops the run.
    FatalToolError,
    /// The user interrupted the run.
    Interrupted,
    /// The conversation no longer fits the model's context.
    ContextExhausted,
    /// A deny rule that stops the run matched a call.
    PermissionDenied,
    /// The run spent what `--max-cost-usd` allows, or could no longer count
    /// what it spends.
    BudgetExhausted,
    /// The final answer did not fit `--output-schema`, as often as the
    /// model was asked again.
    InvalidOutput,
}

impl StopReason {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::FinalAnswer => "final_answer",
            StopReason::MaxIterations => "max_iterations",
            StopReason::ProviderError => "provider_error",
            StopReason::FatalToolError => "fatal_tool_error",
            StopReason::Interrupted => "interrupted",
            StopReason::ContextExhausted => "context_exhausted",
            StopReason::PermissionDenied => "permission_denied",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::InvalidOutput => "invalid_output",
        }
    }
}

/// What started a compaction. Logged in [`Event::Compacted`] by its
/// snake_case name, the same text older logs hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactTrigger {
    /// The next request would have gone over the budget's threshold.
    Auto,
    /// The user asked for it (`/compact`, `corral compact`).
    Manual,
    /// The provider refused a request as longer than the model's context.
    ContextLength,
}

impl CompactTrigger {
    /// The snake_case name (as logged).
    pub fn as_str(self) -> &'static str {
        match self {
            CompactTrigger::Auto => "auto",
            CompactTrigger::Manual => "manual",
            CompactTrigger::ContextLength => "context_length",
        }
    }
}

impl std::fmt::Display for CompactTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a tool call produced, as the model saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// The text the model read (possibly cut).
    pub content: String,
    /// Whether it is an error.
    pub is_error: bool,
    /// The tool's structured result, when it gave one (front-ends show it;
    /// the model reads `content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// The whole output's size in bytes, when it was cut for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated_from: Option<usize>,
    /// Where the whole output was saved, when it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// Where its content came from, derived from what the call touched
    /// (none: it read nothing the host tracks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<Label>,
}

/// An event from the core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A session was created.
    SessionStarted {
        /// Its id.
        session_id: String,
        /// The workspace root.
        workspace: String,
        /// The provider plugin.
        provider: String,
        /// The model, empty for the provider's default.
        model: String,
    },
    /// An existing session was reopened.
    SessionResumed {
        /// Its id.
        session_id: String,
        /// Tool calls that had no result in the log and were closed as interrupted.
        closed_calls: Vec<String>,
    },
    /// A prompt starts a turn.
    TurnBegin {
        /// Turn number, from 1.
        turn: u32,
    },
    /// The user's prompt.
    UserMessage {
        /// The text.
        text: String,
    },
    /// A request went to the provider.
    RequestBegin {
        /// Iteration within the turn, from 1.
        iteration: u32,
        /// SHA-256 of the rendered request (system prompt, history,
        /// settings), then of its tools' digest.
        prompt_hash: String,
        /// Messages in the request.
        messages: usize,
    },
    /// Streamed assistant text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A streamed fragment of a tool call.
    ToolCallDelta {
        /// Position in the turn.
        index: u32,
        /// Name, once known.
        name: Option<String>,
        /// Argument fragment.
        arguments_delta: String,
    },
    /// The assistant's complete turn.
    RequestEnd {
        /// What it said and called.
        message: AssistantMessage,
        /// Why it stopped.
        finish_reason: FinishReason,
        /// Tokens used.
        usage: Option<Usage>,
    },
    /// The permission policy decided a call (every decision is logged).
    Permission {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// What was decided.
        decision: PermissionDecision,
        /// The rule or mode that decided, and who answered.
        reason: String,
    },
    /// A call needs the user's answer: reply with [`Op::Approval`]. Every
    /// request is followed by the [`Event::Permission`] that settles it.
    ApprovalRequested(ApprovalRequest),
    /// A tool call starts. Every begin has exactly one [`Event::ToolCallEnd`].
    ToolCallBegin {
        /// The call.
        call: ToolCall,
    },
    /// A tool call ended.
    ToolCallEnd {
        /// The call's id.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the model reads.
        outcome: ToolOutcome,
        /// Wall time of the call.
        duration_ms: u64,
    },
    /// The provider failed.
    ProviderFailed {
        /// The error.
        error: ProviderError,
    },
    /// A submission could not be carried out; the session goes on.
    Error {
        /// What went wrong and what to do.
        message: String,
    },
    /// The permission mode changed ([`Op::SetMode`]).
    ModeChanged {
        /// The new mode.
        mode: Mode,
    },
    /// The model changed ([`Op::SetModel`]).
    ModelChanged {
        /// The new model id.
        model: String,
    },
    /// The provider changed ([`Op::SetProvider`]).
    ProviderChanged {
        /// The new provider plugin.
        provider: String,
    },
    /// The model's plan changed (`update_plan`): the whole list, in order.
    PlanUpdated {
        /// The call that changed it.
        call_id: String,
        /// The steps.
        steps: Vec<PlanStep>,
    },
    /// The user undid the file changes of a turn (`corral undo`, `/undo`):
    /// the files are back as they were before it.
    Undone {
        /// The turn whose changes were undone.
        turn: u32,
        /// The files restored, relative to the workspace.
        files: Vec<String>,
    },
    /// The user rewound the session to before the prompt of `turn` (Esc
    /// Esc, `/rewind`). With `conversation`, the projection the model sees
    /// from here on leaves out that prompt and everything after it (the
    /// events stay in the log); `files` were restored to before that turn.
    Rewound {
        /// The turn rewound to: its prompt and every later turn are gone.
        turn: u32,
        /// Whether the conversation was rewound (else only the files).
        conversation: bool,
        /// The files restored, relative to the workspace.
        files: Vec<String>,
    },
    /// The user interrupted the model's answer: the text it had streamed
    /// until then, kept in the history (marked as interrupted) and sent to
    /// the model with the next prompt.
    AnswerInterrupted {
        /// The partial answer.
        text: String,
    },
    /// This session is a subagent: logged after its
    /// [`Event::SessionStarted`], linking it to its parent.
    SubagentStarted {
        /// The session that started it.
        parent: String,
        /// The parent's `task` call.
        parent_call: String,
        /// How deep it is: 1 for a child of a top-level session.
        depth: u32,
        /// The worktree it works in, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worktree: Option<String>,
    },
    /// An event of a subagent started by a `task` call, for the front-end
    /// (the subagent's own log holds the plain event).
    Subagent {
        /// The parent's `task` call.
        call_id: String,
        /// The subagent's session id.
        session_id: String,
        /// What the subagent did.
        event: Box<Event>,
    },
    /// A hook ran and decided (see `[hooks]` in the manifest). Written at
    /// once but not synced on its own: the permission, tool result or
    /// message that follows it is, and carries it to disk.
    Hook {
        /// The point of the session it ran at.
        event: HookEvent,
        /// The hook plugin, or `$ COMMAND` for a command hook.
        plugin: String,
        /// The tool call it judged, for tool events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// What it decided, or that it failed.
        decision: HookDecision,
        /// The hook's reason, context or new arguments, or why it failed.
        #[serde(default)]
        detail: String,
    },
    /// The provider does not know the model's context window, so corral
    /// assumes `window` tokens (the smallest window of the current models
    /// it knows) and compacts against it; said once per model.
    /// `[agent.models."MODEL"] context_window` in the manifest sets it.
    WindowAssumed {
        /// The model id.
        model: String,
        /// The window assumed, in tokens.
        window: u32,
    },
    /// How much of the model's context window the next request takes, sent
    /// before each request.
    Context {
        /// The request's estimated size in tokens: bytes over the measured
        /// bytes per token, calibrated by the provider's reported usage.
        tokens: u32,
        /// The request's size in bytes (messages and tool schemas as JSON).
        bytes: usize,
        /// The model's context window, when known.
        window: Option<u32>,
        /// `tokens` as a share of `window`, from 0 to 1.
        share: Option<f32>,
    },
    /// The older part of the history was replaced by a summary. The events
    /// it replaces stay in the log; the projection the model sees from here
    /// on is the summary followed by the messages that were kept.
    Compacted {
        /// The summary, as the model reads it.
        summary: String,
        /// Messages at the start of the projection (a previous summary
        /// included) that the summary replaces.
        replaced: usize,
        /// Messages kept whole after it.
        kept: usize,
        /// What started it.
        trigger: CompactTrigger,
        /// Estimated tokens of the history before and after.
        tokens_before: u32,
        /// Estimated tokens after.
        tokens_after: u32,
    },
    /// A compaction could not be made; the history is unchanged.
    CompactionFailed {
        /// Why, and what happens next.
        message: String,
    },
    /// The session ended ([`Op::Shutdown`]); no event follows.
    ShutdownComplete,
    /// A final answer did not fit the run's output schema; the model is
    /// asked again with `retry` (the history holds it as a user message).
    AnswerRejected {
        /// Which rejection of the turn, from 1.
        attempt: u32,
        /// What did not fit, in words.
        reason: String,
        /// What the model is told.
        retry: String,
    },
    /// The run stopped.
    Stop {
        /// Why.
        reason: StopReason,
        /// Details for the user.
        message: Option<String>,
    },
    /// How a whole run went: the last line of `corral run --json`, made by
    /// the front-end from the events before it (the log does not hold it).
    Result(RunResult),
}

/// What [`Event::Result`] says of a run: what a script or a CI job reads
/// instead of folding the event stream itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The session's id (`corral resume ID` goes on from it).
    pub session_id: String,
    /// Why the last turn stopped.
    pub stop_reason: StopReason,
    /// The text of the model's last answer (empty if it said nothing).
    pub answer: String,
    /// Tokens of every provider request of the run (its subagents'
    /// included), summed as the provider reported them.
    pub usage: UsageTotals,
    /// What the run cost in US dollars, from the price the manifest gives
    /// for the model (`[agent.models."ID"] price`); `None` when a model of
    /// the run has no known price or a request reported no usage.
    pub cost_usd: Option<f64>,
    /// Wall time of the run, from start-up to its end.
    pub duration_ms: u64,
    /// Turns run (one per prompt, or one for a resumed session's `Continue`).
    pub turns: u32,
    /// Provider requests (round trips) of the run's own session.
    pub requests: u32,
    /// Tool calls started by the run's own session.
    pub tool_calls: u32,
    /// The final answer parsed as JSON, when the run had an output schema
    /// (`--output-schema`) and the answer fit it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

/// Token counts summed over several requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Requests whose provider reported no usage (their tokens are missing
    /// from the sums).
    pub unreported: u32,
}

impl Event {
    /// Whether the session log keeps this event (deltas are for the UI only).
    pub fn is_logged(&self) -> bool {
        !matches!(
            self,
            Event::TextDelta { .. }
                | Event::ToolCallDelta { .. }
                | Event::Error { .. }
                | Event::Subagent { .. }
                | Event::ShutdownComplete
                | Event::Result(_)
        )
    }

    /// Whether the event is a tool result, a decision or a turn boundary:
    /// the events the log was once fsynced at one by one. The loop now
    /// syncs by group commit (the session log); kept for callers that
    /// write logs themselves and sync at these.
    pub fn is_durable(&self) -> bool {
        // Everything that acknowledges is durable, and these besides.
        self.acknowledges()
            || matches!(
                self,
                Event::Permission { .. }
                    | Event::RequestEnd { .. }
                    | Event::UserMessage { .. }
                    | Event::AnswerRejected { .. }
                    | Event::SessionStarted { .. }
                    | Event::SessionResumed { .. }
                    | Event::ApprovalRequested(_)
                    | Event::AnswerInterrupted { .. }
                    | Event::SubagentStarted { .. }
            )
    }

    /// Whether showing this event tells the user something is done — a
    /// tool's result, a changed mode or model, a plan, a compaction, the
    /// end of a turn — so the log must hold it on disk before a front-end
    /// shows it (see the session log's `acknowledge`).
    pub fn acknowledges(&self) -> bool {
        matches!(
            self,
            Event::ToolCallEnd { .. }
                | Event::Stop { .. }
                | Event::ModeChanged { .. }
                | Event::ModelChanged { .. }
                | Event::ProviderChanged { .. }
                | Event::PlanUpdated { .. }
                | Event::Undone { .. }
                | Event::Rewound { .. }
                | Event::Compacted { .. }
                | Event::CompactionFailed { .. }
        )
    }
}

/// What a front-end says of [`Event::WindowAssumed`].
pub fn window_assumed(model: &str, window: u32) -> String {
    if model.is_empty() {
        // `[agent.models.""]` would be no advice: name the key to set.
        return format!(
            "the context window of the provider's default model is not known; corral assumes \
             {window} tokens and compacts the history against it. Name the model (`[agent] \
             model = \"NAME\"` or --model NAME) and set its window in corral.toml: \
             [agent.models.\"NAME\"] context_window = N"
        );
    }
    format!(
        "the context window of {model} is not known; corral assumes {window} tokens and \
         compacts the history against it. Set the real one in corral.toml: \
         [agent.models.\"{model}\"] context_window = N"
    )
}

/// One step of the model's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    /// What the step does.
    pub step: String,
    /// Where it stands.
    pub status: PlanStatus,
}

/// Where a plan step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Done,
}

impl PlanStatus {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::InProgress => "in_progress",
            PlanStatus::Done => "done",
        }
    }
}

/// A point of a session's life where hooks run (a key of `[hooks]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// A session started or was resumed.
    SessionStart,
    /// A session is closing.
    SessionEnd,
    /// The user sent a prompt (blocking: a failed hook blocks the prompt).
    UserPrompt,
    /// A tool call is about to be judged and run (blocking: a failed hook
    /// blocks the call).
    BeforeTool,
    /// A tool call produced an output.
    AfterTool,
    /// A tool call produced no output.
    AfterToolFailure,
    /// The history is about to be compacted.
    BeforeCompact,
    /// The model gave its final answer.
    Stop,
    /// A sub-agent finished.
    SubagentStop,
}

impl HookEvent {
    /// Every event, in the order of a session.
    pub const ALL: [HookEvent; 9] = [
        HookEvent::SessionStart,
        HookEvent::UserPrompt,
        HookEvent::BeforeTool,
        HookEvent::AfterTool,
        HookEvent::AfterToolFailure,
        HookEvent::BeforeCompact,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::SessionEnd,
    ];

    /// Its name in the manifest and the log (`before_tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::SessionEnd => "session_end",
            HookEvent::UserPrompt => "user_prompt",
            HookEvent::BeforeTool => "before_tool",
            HookEvent::AfterTool => "after_tool",
            HookEvent::AfterToolFailure => "after_tool_failure",
            HookEvent::BeforeCompact => "before_compact",
            HookEvent::Stop => "stop",
            HookEvent::SubagentStop => "subagent_stop",
        }
    }

    /// Whether a hook that fails (traps, times out, answers what the event
    /// cannot do) blocks what it guards.
    pub fn is_blocking(self) -> bool {
        matches!(self, HookEvent::BeforeTool | HookEvent::UserPrompt)
    }

    /// Whether it concerns one tool call (and `[hooks]` matchers apply).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::BeforeTool | HookEvent::AfterTool | HookEvent::AfterToolFailure
        )
    }
}

/// What a hook decided, as the log records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    /// Go on.
    Continue,
    /// Refused what it guards.
    Block,
    /// Asked for the user's approval of a tool call.
    Ask,
    /// Added context for the model.
    AddContext,
    /// Rewrote a tool call's arguments.
    Rewrite,
    /// Trapped, timed out, or answered what the event cannot do; for a
    /// blocking event, what it guards was blocked.
    Failed,
}
