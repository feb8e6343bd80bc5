//! What a hook receives and answers, and how a front-end names its
//! decision: plain data shared by the runtime (which hands it to the
//! plugin) and the hooks of the core (which fold the answers).

use super::{Effect, HookDecision, HookEvent, ToolCall};

/// The data of one event, as a hook receives it.
#[derive(Debug, Clone, PartialEq)]
pub enum HookInput {
    /// A session started (`resumed: false`) or was reopened from its log.
    SessionStart {
        /// The session's id.
        session_id: String,
        /// Reopened from its log.
        resumed: bool,
    },
    /// A session is closing.
    SessionEnd {
        /// The session's id.
        session_id: String,
    },
    /// The user sent a prompt.
    UserPrompt {
        /// The prompt.
        text: String,
    },
    /// A validated tool call, before the permission policy.
    BeforeTool {
        /// The call.
        call: ToolCall,
        /// The tool's declared effects.
        effects: Vec<Effect>,
    },
    /// A tool call produced an output.
    AfterTool {
        /// The call as it ran.
        call: ToolCall,
        /// The output.
        content: String,
        /// The tool reported a failure.
        is_error: bool,
    },
    /// A tool call failed without an output.
    AfterToolFailure {
        /// The call.
        call: ToolCall,
        /// What the model reads.
        error: String,
    },
    /// The history is about to be summarised.
    BeforeCompact {
        /// Asked for by the user (else automatic).
        manual: bool,
        /// Messages in the history.
        messages: u32,
    },
    /// The model gave its final answer.
    Stop {
        /// The answer.
        text: String,
    },
    /// A sub-agent finished.
    SubagentStop {
        /// Its task.
        task: String,
        /// Its final answer.
        text: String,
    },
}

impl HookInput {
    /// The event it belongs to.
    pub fn event(&self) -> HookEvent {
        match self {
            HookInput::SessionStart { .. } => HookEvent::SessionStart,
            HookInput::SessionEnd { .. } => HookEvent::SessionEnd,
            HookInput::UserPrompt { .. } => HookEvent::UserPrompt,
            HookInput::BeforeTool { .. } => HookEvent::BeforeTool,
            HookInput::AfterTool { .. } => HookEvent::AfterTool,
            HookInput::AfterToolFailure { .. } => HookEvent::AfterToolFailure,
            HookInput::BeforeCompact { .. } => HookEvent::BeforeCompact,
            HookInput::Stop { .. } => HookEvent::Stop,
            HookInput::SubagentStop { .. } => HookEvent::SubagentStop,
        }
    }

    /// The input with a tool's output or error replaced by a note naming
    /// the `sensitive` sources it carried: what a hook that could send it
    /// out is given instead. Other events are returned as they are.
    pub fn withheld(&self, sensitive: &[String]) -> HookInput {
        let shown: Vec<String> = sensitive.iter().take(3).map(|s| format!("`{s}`")).collect();
        let mut sources = shown.join(", ");
        if sensitive.len() > 3 {
            sources.push_str(&format!(" and {} more", sensitive.len() - 3));
        }
        let note = format!(
            "[withheld by corral's exfiltration guard: this result carries sensitive data \
             ({sources}), and this hook is granted the network, so it gets the call without \
             the content; turn the guard off ([guard] enabled = false) to hand it over]"
        );
        match self {
            HookInput::AfterTool { call, is_error, .. } => HookInput::AfterTool {
                call: call.clone(),
                content: note,
                is_error: *is_error,
            },
            HookInput::AfterToolFailure { call, .. } => HookInput::AfterToolFailure {
                call: call.clone(),
                error: note,
            },
            other => other.clone(),
        }
    }

    /// The tool call it is about, for tool events.
    pub fn call(&self) -> Option<&ToolCall> {
        match self {
            HookInput::BeforeTool { call, .. }
            | HookInput::AfterTool { call, .. }
            | HookInput::AfterToolFailure { call, .. } => Some(call),
            _ => None,
        }
    }
}

/// One hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on.
    Continue,
    /// Refuse, with the reason the model (or the user) reads.
    Block(String),
    /// Ask the user first (before a tool call).
    Ask(String),
    /// Text for the model.
    AddContext(String),
    /// New arguments, as JSON text (before a tool call).
    Rewrite(String),
}

impl Verdict {
    /// The decision as logged, with its text.
    pub fn logged(&self) -> (HookDecision, &str) {
        match self {
            Verdict::Continue => (HookDecision::Continue, ""),
            Verdict::Block(r) => (HookDecision::Block, r),
            Verdict::Ask(r) => (HookDecision::Ask, r),
            Verdict::AddContext(c) => (HookDecision::AddContext, c),
            Verdict::Rewrite(a) => (HookDecision::Rewrite, a),
        }
    }

    /// The decision's name in the WIT interface.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Continue => "continue",
            Verdict::Block(_) => "block",
            Verdict::Ask(_) => "ask",
            Verdict::AddContext(_) => "add-context",
            Verdict::Rewrite(_) => "rewrite",
        }
    }

    /// Whether `event` can carry this decision out.
    pub fn fits(&self, event: HookEvent) -> bool {
        use HookEvent as E;
        match self {
            Verdict::Continue => true,
            Verdict::Block(_) => !matches!(event, E::SessionStart | E::SessionEnd),
            Verdict::Ask(_) | Verdict::Rewrite(_) => event == E::BeforeTool,
            Verdict::AddContext(_) => !matches!(
                event,
                E::SessionEnd | E::BeforeTool | E::Stop | E::SubagentStop
            ),
        }
    }
}

/// One line about a hook's decision, for a front-end: the event, the
/// plugin, the decision, and the first line of its text (not yet made
/// safe for a terminal).
pub fn summary(event: HookEvent, plugin: &str, decision: HookDecision, detail: &str) -> String {
    let what = match decision {
        HookDecision::Continue => "continued",
        HookDecision::Block => "blocked",
        HookDecision::Ask => "asked for approval",
        HookDecision::AddContext => "added context",
        HookDecision::Rewrite => "rewrote the arguments",
        HookDecision::Failed => "failed",
    };
    let first = detail.lines().next().unwrap_or_default();
    let first: String = first.chars().take(160).collect();
    if first.is_empty() {
        format!("hook `{plugin}` ({}) {what}", event.as_str())
    } else {
        format!("hook `{plugin}` ({}) {what}: {first}", event.as_str())
    }
}
