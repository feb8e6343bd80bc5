//! One tool call's path, the same for every front-end: the agent loop,
//! its subagents, the MCP server and `corral tool call`. A call takes these
//! steps, one file each, each taking the previous step's value and giving
//! the next (or the refusal that ends the call):
//!
//! 1. `check`: the tool exists and the arguments are a JSON object its
//!    schema accepts (nobody is asked about a call that cannot run):
//!    a [`Checked`] call with its [`Target`];
//! 2. `hooks`: the `before_tool` hooks, before every judge, since a
//!    rewrite changes the call every later step judges: a `Hooked` call;
//! 3. `protect`: protected paths (`.git` internals, the manifest);
//! 4. `judge`: the permission policy (on the original arguments too when a
//!    hook rewrote them), a hook's ask, then the exfiltration guard: each
//!    consulted once, in this order, into one `Judged` call;
//! 5. `egress`: a destination its plugin's grant does not name turns the
//!    judgement into an ask about that origin;
//! 6. `approve`: an `ask` becomes an `approval_requested` event answered
//!    by the [`Approver`] (an op, `--yes`, an MCP elicitation, the command
//!    line, or nobody): the admitted call;
//! 7. `run`: a plugin's tool in its sandbox and an MCP tool at its server,
//!    from here; a host tool through the caller's [`Runner`]; what the
//!    call touched comes back with its outcome;
//! 8. `finish`: provenance labels, `after_tool` hooks, truncation (the
//!    whole output saved as an artifact) and the end event that logs it.
//!
//! [`Dispatcher::run_batch`] (`batch`) is the one orchestrator of these
//! steps: every front-end hands it the calls of one turn (the MCP server
//! and `tool call` a turn of one).
//!
//! This module sits below the loop: it must not import `agent`, `mcp`,
//! `session`, `tui` or `cli`.

mod approve;
mod batch;
mod check;
mod egress;
mod finish;
mod hooks;
mod judge;
mod log_sink;
mod origin;
mod protect;
mod run;

pub use approve::{
    Approver, CommandLineApprover, NoApprover, OpApprover, Scope, Unanswerable, YesApprover,
};
pub use batch::{Ended, Ran};
pub use log_sink::LogSink;
pub use run::{PluginRunner, Runner, sandbox};

pub use crate::hooks::Emit;
use crate::policy::Policy;
use crate::protocol::{Effect, Mode, ToolCall, ToolSpec};
use crate::provenance::Tracker;
use crate::runtime::{Plugin, Plugins};
use futures::future::BoxFuture;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Where a call's events go: the session log and the front-end; besides
/// recording them ([`Emit`]), it keeps whole outputs and syncs.
pub trait Sink: Emit {
    /// Saves a long output whole; `None` when there is nowhere to save it.
    fn save_artifact(&self, name: &str, content: &str) -> Option<std::io::Result<PathBuf>>;

    /// Puts what was emitted so far on disk: called before a call with
    /// effects runs, so a crash cannot forget it ran. Nothing by default.
    fn flush(&mut self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// What became of a call, before it is cut for the model.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The tool ran; `is_error` when it reported a failure itself.
    Output {
        /// Its text.
        content: String,
        /// Whether the tool reported a failure.
        is_error: bool,
        /// Its structured result.
        data: Option<serde_json::Value>,
    },
    /// The call cannot run: unknown tool or invalid arguments.
    Invalid(String),
    /// Refused before running: a protected path, the policy or the user.
    Refused {
        /// Why, for the model.
        message: String,
        /// A deny-and-stop rule matched: the run ends.
        stop: bool,
    },
    /// The tool or its sandbox failed (trap, timeout, limit, tool error).
    Failed(String),
    /// The tool failed and asks the agent to stop.
    Fatal(String),
    /// The user interrupted the call.
    Interrupted,
    /// Not run because an earlier call of the turn stopped the run.
    Skipped(String),
}

impl CallOutcome {
    /// The text a result of this outcome carries back from the tool, if
    /// it ran.
    fn text(&self) -> Option<&str> {
        match self {
            CallOutcome::Output { content, .. } => Some(content),
            CallOutcome::Failed(m) | CallOutcome::Fatal(m) => Some(m),
            _ => None,
        }
    }

    /// The text the model reads and whether it is an error.
    fn into_parts(self) -> (String, bool, Option<serde_json::Value>) {
        match self {
            CallOutcome::Output {
                content,
                is_error,
                data,
            } => (content, is_error, data),
            CallOutcome::Invalid(m) | CallOutcome::Failed(m) => (m, true, None),
            CallOutcome::Refused { message, .. } => (message, true, None),
            CallOutcome::Fatal(m) => (m, true, None),
            CallOutcome::Interrupted => ("interrupted by the user".into(), true, None),
            CallOutcome::Skipped(why) => (format!("not run: {why}"), true, None),
        }
    }
}

/// A tool the host runs itself (the loop's `update_plan`, `task`, …): the
/// pipeline needs only how it is described and what one call of it does;
/// the caller's [`Runner`] runs it.
pub trait HostSpec: Send + Sync {
    /// How the model sees it.
    fn spec(&self) -> ToolSpec;

    /// The effects of one call with `args`, which may depend on them.
    fn effects(&self, args: &serde_json::Value, plugins: &Plugins) -> Vec<Effect>;
}

/// What runs a checked call.
#[derive(Clone)]
pub enum Target {
    /// A plugin's tool, in the plugin's sandbox.
    Plugin(Arc<Plugin>),
    /// A tool of an `[mcp.NAME]` server, at its server.
    Mcp(crate::mcp_client::McpTool),
    /// One of the host's own tools, through the caller's [`Runner`].
    Host,
}

/// A call that passed look-up and validation.
#[derive(Clone)]
pub struct Checked {
    /// The call.
    pub call: ToolCall,
    /// What runs it.
    target: Target,
    spec: ToolSpec,
    args: serde_json::Value,
    /// Keeps the before-images of the files the call changes.
    checkpoint: Option<Arc<dyn crate::runtime::Checkpoint>>,
    /// Records what the call changes behind the host's back (a program,
    /// an MCP server).
    watch: Option<Arc<crate::checkpoint::Watch>>,
    /// The origin the user approved for this call beyond its plugin's
    /// `grants.net` (step 5, `egress`), set when the call is admitted.
    widened: Option<crate::manifest::NetGrant>,
}

impl Checked {
    /// Whether the tool only reads (such calls may run together).
    pub fn is_read_only(&self) -> bool {
        self.spec.is_read_only()
    }

    /// Whether it is one of the host's own tools.
    pub fn is_host_tool(&self) -> bool {
        matches!(self.target, Target::Host)
    }

    /// The validated arguments.
    pub fn args(&self) -> &serde_json::Value {
        &self.args
    }

    /// The session's checkpoints, where a host tool that writes keeps the
    /// before-images of its files; `None` where none are kept.
    pub(crate) fn checkpoint(&self) -> Option<&Arc<dyn crate::runtime::Checkpoint>> {
        self.checkpoint.as_ref()
    }

    /// The plugin that runs it, when a plugin does.
    fn plugin(&self) -> Option<&Arc<Plugin>> {
        match &self.target {
            Target::Plugin(plugin) => Some(plugin),
            _ => None,
        }
    }

    /// The watch that records this call's changes, when it may change the
    /// workspace where `write-files` does not see it: an MCP tool that is
    /// not read-only, or a plugin tool that runs programs. Every other call
    /// costs nothing more.
    fn watched(&self) -> Option<&Arc<crate::checkpoint::Watch>> {
        let unseen = match &self.target {
            Target::Mcp(_) => !self.is_read_only(),
            Target::Plugin(_) => self.spec.effects.contains(&Effect::Execute),
            Target::Host => false,
        };
        self.watch.as_ref().filter(|_| unseen)
    }
}

/// What a [`Dispatcher`] is made of. Every front-end builds its pipeline
/// from one ([`Dispatcher::of`]): the loop and its subagents from the
/// session's options, the MCP server and `corral tool call` from the loaded
/// manifest (`Loaded::front`, in the load module).
pub struct Front {
    /// The loaded plugins.
    pub plugins: Arc<Plugins>,
    /// The permission policy, its mode included.
    pub policy: Policy,
    /// Who answers an `ask`.
    pub approver: Arc<dyn Approver>,
    /// Output longer than this many bytes is cut for the model and saved
    /// whole; `None` cuts nothing.
    pub output_limit: Option<usize>,
    /// The `[hooks]` run around every call.
    pub hooks: Arc<crate::hooks::Hooks>,
    /// The `[mcp.NAME]` servers' tools, after the plugins'.
    pub mcp: Arc<crate::mcp_client::McpTools>,
    /// Provenance labels and the exfiltration guard; `None` labels nothing.
    pub tracker: Option<Arc<Tracker>>,
    /// The host's own tools (none but in a session).
    pub host_tools: Vec<Arc<dyn HostSpec>>,
}

/// Takes tool calls through their path; holds what the session approved.
/// Calls may be dispatched concurrently (the MCP server takes each client
/// request as it comes): one call waiting for its approval holds up no other.
pub struct Dispatcher {
    plugins: Arc<Plugins>,
    policy: Policy,
    approver: Arc<dyn Approver>,
    /// What the user approved for the rest of the session. Locked only to
    /// look up or insert, never across an await.
    approved: Mutex<HashSet<Scope>>,
    output_limit: Option<usize>,
    /// Provenance labels and the exfiltration guard; `None` labels nothing.
    tracker: Option<Arc<Tracker>>,
    /// The host's own tools this dispatcher takes (none for the MCP server).
    host_tools: Vec<Arc<dyn HostSpec>>,
    /// The session's hooks (`[hooks]`): before a call's policy check, after it.
    hooks: Arc<crate::hooks::Hooks>,
    /// The canonical workspace root, against which a `path` argument is
    /// resolved for the rules; `None` judges the path as written only.
    workspace: Option<PathBuf>,
    /// The session's checkpoints; `None` keeps none (the MCP server).
    checkpoint: Option<Arc<dyn crate::runtime::Checkpoint>>,
    /// Records what programs and MCP servers change; `None` records none.
    watch: Option<Arc<crate::checkpoint::Watch>>,
    /// The `[mcp.NAME]` servers' tools, after the plugins'.
    mcp: Arc<crate::mcp_client::McpTools>,
    /// Each tool's input schema, compiled on its first call.
    schemas: crate::schema::Validators,
}

impl Dispatcher {
    /// The dispatcher `front` describes.
    pub fn of(front: Front) -> Self {
        let Front {
            plugins,
            policy,
            approver,
            output_limit,
            hooks,
            mcp,
            tracker,
            host_tools,
        } = front;
        let mut dispatcher = Self::new(plugins, policy, approver, output_limit)
            .with_hooks(hooks)
            .with_mcp(mcp)
            .with_host_tools(host_tools);
        if let Some(tracker) = tracker {
            dispatcher.set_tracker(tracker);
        }
        dispatcher
    }

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
            host_tools: Vec::new(),
            hooks: Arc::default(),
            workspace: None,
            checkpoint: None,
            watch: None,
            mcp: Arc::default(),
            schemas: crate::schema::Validators::default(),
        }
    }

    /// Keeps the before-image of every file a call changes in `checkpoint`.
    pub fn set_checkpoint(&mut self, checkpoint: Arc<dyn crate::runtime::Checkpoint>) {
        self.checkpoint = Some(checkpoint);
    }

    /// Records in `watch` what the calls that run programs or MCP servers'
    /// tools change in the workspace, which `write-files` does not see.
    pub fn set_watch(&mut self, watch: Arc<crate::checkpoint::Watch>) {
        self.watch = Some(watch);
    }

    /// Takes the tools of `mcp`'s servers besides the plugins'.
    pub fn with_mcp(mut self, mcp: Arc<crate::mcp_client::McpTools>) -> Self {
        self.mcp = mcp;
        self
    }

    /// The MCP servers' tools this dispatcher takes.
    pub fn mcp(&self) -> &Arc<crate::mcp_client::McpTools> {
        &self.mcp
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

    /// Takes `text` (from `source`) as untrusted content for the injection
    /// guard: an MCP server's description of its tools. Nothing without a
    /// tracker.
    pub fn taint(&self, text: &str, source: &str) {
        if let Some(tracker) = &self.tracker {
            tracker.taint(text, source);
        }
    }

    /// Takes `text`, which the user wrote (a prompt, the project's
    /// instructions), as trusted: the values it names pass the injection
    /// guard. Nothing without a tracker.
    pub fn trust(&self, text: &str) {
        if let Some(tracker) = &self.tracker {
            tracker.trust(text);
        }
    }

    /// Takes `tools`, the host's own, besides the plugins' (a host tool's
    /// name shadows a plugin tool of the same name).
    pub fn with_host_tools(mut self, tools: Vec<Arc<dyn HostSpec>>) -> Self {
        self.host_tools = tools;
        self
    }

    /// The specs of the host tools this dispatcher takes.
    pub fn host_specs(&self) -> Vec<ToolSpec> {
        self.host_tools.iter().map(|t| t.spec()).collect()
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
}
