//! The one way into a running session: [`open`] loads the manifest and the
//! plugins, picks the provider, opens or resumes the log, and returns a
//! [`Session`] — a submission sender and an event receiver around a task
//! that runs the loop. Every front-end (the terminal, `run --json`, a UI)
//! goes through it.

use super::open::{choose_provider, find_session, sessions_dir};
use crate::agent::{Agent, AgentOptions, Backlog};
use crate::call::{Approver, NoApprover, OpApprover, YesApprover};
use crate::log::SessionLog;
use crate::manifest::Manifest;
use crate::protocol::{Event, Mode, Op, StopReason};
use crate::runtime::RuntimeOptions;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_util::sync::CancellationToken;

/// Why a session could not be opened; its text is the message for the
/// user: what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Its directory or the log to resume could not be found.
    #[error(transparent)]
    Find(#[from] super::FindError),
    /// The workspace could not be loaded.
    #[error(transparent)]
    Load(#[from] crate::load::LoadError),
    /// No provider could be chosen.
    #[error(transparent)]
    Provider(#[from] super::ProviderError),
    /// The log to resume cannot be read.
    #[error("cannot read {}: {why}", log.display())]
    ReadLog {
        /// The log.
        log: PathBuf,
        /// The reason, in words.
        why: String,
    },
    /// No new log can be made.
    #[error("cannot create the session log in {}: {why}", dir.display())]
    CreateLog {
        /// The sessions' directory.
        dir: PathBuf,
        /// The reason, in words.
        why: String,
    },
    /// The agent could not be made; the text is its chain of causes.
    #[error("{0}")]
    Agent(String),
}

impl From<SessionError> for String {
    fn from(e: SessionError) -> Self {
        e.to_string()
    }
}

/// Which session to reopen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// The most recent session of the workspace.
    Last,
    /// The session whose id starts with this.
    Id(String),
}

/// Who answers calls the permission policy puts to the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Approvals {
    /// Nobody: each becomes a denial the model can read (non-interactive runs).
    #[default]
    Refuse,
    /// Every one is approved (`--yes`); deny rules and read-only mode still hold.
    Approve,
    /// The front-end: an [`Event::ApprovalRequested`] for each, answered with
    /// [`Op::Approval`].
    FrontEnd,
}

/// What a session is opened with. Unset fields come from the manifest.
#[derive(Debug, Clone, Default)]
pub struct SessionConfig {
    /// The workspace root.
    pub workspace: PathBuf,
    /// The directory the user is in (for `AGENTS.md` discovery); default the
    /// process's current directory.
    pub cwd: Option<PathBuf>,
    /// Reopen this session instead of starting one.
    pub resume: Option<Resume>,
    /// The provider plugin; default `[agent] provider`, the logged provider
    /// on resume, else the first built-in provider whose key is set.
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// Provider round trips per turn.
    pub max_iterations: Option<u32>,
    /// The JSON Schema the final answer must fit (`--output-schema`).
    pub output_schema: Option<crate::AnswerSchema>,
    /// US dollars the run may spend (`--max-cost-usd`), counted at the
    /// model's price in the manifest.
    pub max_cost_usd: Option<f64>,
    /// The permission mode.
    pub mode: Option<Mode>,
    /// Who answers approvals.
    pub approvals: Approvals,
    /// Keep the provider's answers for a cassette ([`Finished::recorded`]).
    pub record: bool,
    /// The editor hosting the session (`corral acp`), when it reads or
    /// writes files for the agent.
    pub editor: Option<Arc<dyn crate::editor::EditorFiles>>,
    /// Settings of the runtime; default [`RuntimeOptions::user`].
    pub runtime: Option<RuntimeOptions>,
    /// A manifest already loaded; default: [`crate::manifest::load`] of the
    /// workspace (the user's layers, the project's if trusted, the defaults).
    pub manifest: Option<Manifest>,
    /// Where the workspace's session logs are; default: under the user's
    /// data directory ([`sessions_dir`]).
    pub sessions_dir: Option<PathBuf>,
}

/// How a session ended.
#[derive(Debug)]
pub struct Finished {
    /// The stop reason of the last turn, if a turn ran.
    pub last_stop: Option<StopReason>,
    /// The provider's answers, when recording.
    pub recorded: Vec<corral_sdk::cassette::Turn>,
}

/// An open session: submit [`Op`]s, read [`Event`]s. Dropping the handle
/// ends the session after the running turn is interrupted.
pub struct Session {
    id: String,
    /// The workspace, whose changes [`Session::diff`] shows.
    workspace: PathBuf,
    /// The loaded plugins.
    plugins: Arc<crate::runtime::Plugins>,
    /// Every tool the session offers, as loaded at its start.
    tools: Vec<SessionTool>,
    log_path: PathBuf,
    resumed_messages: Option<usize>,
    ops: UnboundedSender<Op>,
    events: UnboundedReceiver<Event>,
    /// Room for deltas, given back as [`Session::next_event`] takes them.
    backlog: BacklogGuard,
    task: tokio::task::JoinHandle<anyhow::Result<Finished>>,
}

/// One tool a session offers, and where it comes from.
#[derive(Debug, Clone)]
pub struct SessionTool {
    /// The plugin that provides it, `mcp:NAME` for a server's, or the
    /// host's own ([`crate::agent::HOST_TOOLS`]).
    pub source: String,
    /// How the model sees it.
    pub spec: crate::protocol::ToolSpec,
}

/// Closes the backlog when the receiving end goes, so that a turn still
/// streaming does not wait for room nobody will give back.
#[derive(Debug)]
struct BacklogGuard(Backlog);

impl Drop for BacklogGuard {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Opens (or, with [`SessionConfig::resume`], reopens) a session and starts
/// its task. The error is a message for the user: what failed and what to do.
pub async fn open(config: SessionConfig) -> Result<Session, SessionError> {
    let resume_path = match &config.resume {
        Some(which) => {
            let dir = log_dir(&config)?;
            let id = match which {
                Resume::Last => None,
                Resume::Id(id) => Some(id.as_str()),
            };
            Some(find_session(&dir, id)?)
        }
        None => None,
    };
    let manifest = crate::load::manifest(&config.workspace, config.manifest.clone())?;
    // git runs while the plugins load; the first prompt waits for it.
    let git_status = crate::context::GitStatus::start(&manifest.workspace);
    let loaded = crate::load::plugins(manifest, config.runtime.clone()).await?;
    let hooks = loaded.hooks().await?;
    let crate::load::Loaded {
        manifest,
        runtime,
        plugins,
    } = loaded;

    let mut policy = manifest.policy.clone();
    if let Some(mode) = config.mode {
        policy.mode = mode;
    }
    let op_approver = OpApprover::default();
    let approver: Arc<dyn Approver> = match config.approvals {
        Approvals::Refuse => Arc::new(NoApprover),
        Approvals::Approve => Arc::new(YesApprover),
        Approvals::FrontEnd => Arc::new(op_approver.clone()),
    };
    let backlog = Backlog::default();
    // The servers start with the session, each within its own timeout.
    let mcp =
        crate::mcp_client::McpTools::start_pinned(&manifest, &log_dir(&config)?.join("mcp")).await;
    let options = AgentOptions {
        mcp: Arc::new(mcp),
        hooks: Arc::new(hooks),
        policy,
        approver,
        model: config
            .model
            .clone()
            .or_else(|| manifest.agent.model.clone())
            .unwrap_or_default(),
        max_iterations: config
            .max_iterations
            .or(manifest.agent.max_iterations)
            .unwrap_or(50),
        max_tokens: manifest.agent.max_tokens,
        temperature: manifest.agent.temperature,
        cwd: config
            .cwd
            .clone()
            .unwrap_or_else(|| std::env::current_dir().unwrap_or_default()),
        record: config.record,
        guard: manifest.guard.clone(),
        subagents: crate::agent::SubagentOptions {
            env: Some(crate::agent::SubagentEnv {
                runtime: runtime.clone(),
                manifest: manifest.clone(),
            }),
            ..crate::agent::SubagentOptions::new(
                manifest.agent.max_subagent_depth.unwrap_or(1),
                manifest.agent.max_parallel_subagents.unwrap_or(4) as usize,
                manifest.agent.subagent_max_iterations.unwrap_or(20),
            )
        },
        compact_at: manifest
            .agent
            .compact_at
            .unwrap_or(crate::agent::DEFAULT_COMPACT_AT),
        models: manifest.agent.models.clone(),
        output_schema: config.output_schema.clone(),
        editor: config.editor.clone(),
        spend_limit: spend_limit(&config, &manifest),
        backlog: Some(backlog.clone()),
        git_status: Some(git_status),
        skills: Arc::new(crate::skills::discover(
            &manifest.workspace,
            crate::skills::user_dir().as_deref(),
        )),
        ..AgentOptions::default()
    };

    let tools = offered(&plugins, &options.mcp);
    let kept = plugins.clone();
    let (agent, resumed_messages) = start_agent(&config, &manifest, plugins, options, resume_path)?;
    let id = agent.session_id().to_owned();
    let log_path = agent.log_path();
    let (ops_tx, ops_rx) = unbounded_channel();
    let (events_tx, events_rx) = unbounded_channel();
    // What the front-end is shown as done is on disk first; the loop does
    // not wait for it.
    let (agent_tx, agent_rx) = unbounded_channel();
    tokio::spawn(crate::log::acknowledge(
        agent_rx,
        events_tx,
        agent.durability(),
    ));
    let task = tokio::spawn(drive(agent, op_approver, ops_rx, agent_tx));
    Ok(Session {
        id,
        workspace: manifest.workspace.clone(),
        plugins: kept,
        tools,
        log_path,
        resumed_messages,
        ops: ops_tx,
        events: events_rx,
        backlog: BacklogGuard(backlog),
        task,
    })
}

/// The tools of `plugins`, of the MCP servers `mcp` and the host's own.
fn offered(
    plugins: &crate::runtime::Plugins,
    mcp: &crate::mcp_client::McpTools,
) -> Vec<SessionTool> {
    let of_plugins = plugins.tools().into_iter().map(|(p, spec)| SessionTool {
        source: p.decl().name.clone(),
        spec: spec.clone(),
    });
    let of_servers = mcp.tools().into_iter().map(|t| SessionTool {
        source: format!("mcp:{}", t.server()),
        spec: t.spec,
    });
    let of_host = crate::agent::HostTool::ALL.iter().map(|t| SessionTool {
        source: crate::agent::HOST_TOOLS.to_owned(),
        spec: t.spec(),
    });
    of_plugins.chain(of_servers).chain(of_host).collect()
}

/// Where `config`'s session logs go.
fn log_dir(config: &SessionConfig) -> Result<PathBuf, super::FindError> {
    match &config.sessions_dir {
        Some(d) => Ok(d.clone()),
        None => sessions_dir(&config.workspace),
    }
}

/// The agent of a new session, or of the one logged at `resume_path` with
/// its history replayed; and, when resumed, how many messages it replayed.
fn start_agent(
    config: &SessionConfig,
    manifest: &Manifest,
    plugins: Arc<crate::runtime::Plugins>,
    options: AgentOptions,
    resume_path: Option<PathBuf>,
) -> Result<(Agent, Option<usize>), SessionError> {
    Ok(match resume_path {
        Some(path) => {
            let (log, records) = SessionLog::open(&path).map_err(|e| SessionError::ReadLog {
                log: path.clone(),
                why: e.to_string(),
            })?;
            let logged_provider = records.iter().find_map(|r| match &r.event {
                Event::SessionStarted { provider, .. } => Some(provider.clone()),
                _ => None,
            });
            let wanted = config.provider.clone().or(logged_provider);
            let provider = choose_provider(manifest, &plugins, wanted.as_deref())?;
            super::open::check_model(&provider, &options.model)?;
            let agent = Agent::resume(
                plugins,
                provider,
                options,
                manifest.workspace.clone(),
                log,
                records,
            )
            .map_err(|e| SessionError::Agent(format!("{e:#}")))?;
            let n = agent.history().len();
            (agent, Some(n))
        }
        None => {
            let provider = choose_provider(manifest, &plugins, config.provider.as_deref())?;
            super::open::check_model(&provider, &options.model)?;
            let dir = log_dir(config)?;
            let log = SessionLog::create(&dir).map_err(|e| SessionError::CreateLog {
                dir: dir.clone(),
                why: e.to_string(),
            })?;
            let agent = Agent::new(plugins, provider, options, manifest.workspace.clone(), log)
                .map_err(|e| SessionError::Agent(format!("{e:#}")))?;
            (agent, None)
        }
    })
}

impl Session {
    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Every tool the session offers, as loaded at its start.
    pub fn tools(&self) -> &[SessionTool] {
        &self.tools
    }

    /// The session's plugins.
    pub fn plugins(&self) -> &Arc<crate::runtime::Plugins> {
        &self.plugins
    }

    /// `git diff` of the session's workspace, untracked files included,
    /// run confined (nothing the repository holds runs: no fsmonitor,
    /// external diff or textconv). `Err` says why there is none.
    pub fn diff(&self) -> Result<String, super::DiffError> {
        super::diff::git_diff(&self.workspace)
    }

    /// The session log's path.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log_path
    }

    /// For a resumed session, the messages of its history.
    pub fn resumed_messages(&self) -> Option<usize> {
        self.resumed_messages
    }

    /// Submits an op. `false` when the session has ended.
    pub fn submit(&self, op: Op) -> bool {
        self.ops.send(op).is_ok()
    }

    /// A sender for ops, for another task (a key handler, a stdin reader).
    pub fn sender(&self) -> UnboundedSender<Op> {
        self.ops.clone()
    }

    /// The next event; `None` once the session has ended.
    pub async fn next_event(&mut self) -> Option<Event> {
        let event = self.events.recv().await;
        if let Some(e) = &event {
            self.backlog.0.release(e);
        }
        event
    }

    /// The next event if one is waiting, without waiting for one: a
    /// front-end takes everything queued before it draws a frame.
    pub fn try_next_event(&mut self) -> Option<Event> {
        let event = self.events.try_recv().ok();
        if let Some(e) = &event {
            self.backlog.0.release(e);
        }
        event
    }

    /// Waits for the session to end (submit [`Op::Shutdown`] first, or drop
    /// every sender) and says how it ended. `Err` when the session log could
    /// not be written.
    pub async fn finish(self) -> anyhow::Result<Finished> {
        drop(self.ops);
        drop(self.events);
        drop(self.backlog);
        self.task.await?
    }
}

/// Switches the session to the provider plugin `provider`, or says why not
/// (no such provider, or its key is not set) and leaves it unchanged.
fn set_provider(
    agent: &mut Agent,
    provider: &str,
    ui: &UnboundedSender<Event>,
) -> anyhow::Result<()> {
    let found = agent
        .plugins()
        .plugins()
        .iter()
        .find(|p| p.decl().name == provider && p.is_provider())
        .cloned();
    // A provider whose key is not set would fail its first
    // request with an egress denial; the missing variable is
    // the cause the user can fix, so it is said now.
    let missing = found
        .as_ref()
        .and_then(|p| p.decl().secrets.iter().find_map(|s| s.resolve().err()));
    match (found, missing) {
        (Some(_), Some(var)) => {
            let _ = ui.send(Event::Error {
                message: format!(
                    "provider `{provider}` needs the environment variable {var} (its \
                                 API key), which is not set; the provider is unchanged. Export \
                                 {var} and start corral again, or pick another provider"
                ),
            });
        }
        (Some(p), None) => agent.set_provider(p, ui)?,
        (None, _) => {
            let _ = ui.send(Event::Error {
                message: format!(
                    "there is no provider plugin `{provider}`; the provider is unchanged"
                ),
            });
        }
    }
    Ok(())
}

/// What the session does with `op` between turns: an op that runs a turn
/// says which; the others are carried out here.
async fn between_turns(
    op: Op,
    agent: &mut Agent,
    ui: &UnboundedSender<Event>,
) -> anyhow::Result<Next> {
    let mut shell = None;
    let prompt = match op {
        Op::UserTurn { text } => Some(text),
        Op::Continue => None,
        Op::Shell { command } => {
            shell = Some(command);
            None
        }
        Op::Shutdown => return Ok(Next::End),
        Op::Interrupt => return Ok(Next::Wait),
        Op::Approval { call_id, .. } => {
            let _ = ui.send(Event::Error {
                message: format!("no approval is pending for the call `{call_id}`"),
            });
            return Ok(Next::Wait);
        }
        Op::SetMode { mode } => {
            agent.set_mode(mode, ui)?;
            return Ok(Next::Wait);
        }
        Op::SetModel { model } => {
            agent.set_model(model, ui)?;
            return Ok(Next::Wait);
        }
        Op::SetProvider { provider } => {
            set_provider(agent, &provider, ui)?;
            return Ok(Next::Wait);
        }
        Op::Compact => {
            agent.compact_now(ui).await?;
            return Ok(Next::Wait);
        }
        Op::Undo { force } => {
            agent.undo(force, ui).await?;
            return Ok(Next::Wait);
        }
        Op::Rewind {
            turn,
            conversation,
            code,
            force,
        } => {
            agent.rewind(turn, conversation, code, force, ui).await?;
            return Ok(Next::Wait);
        }
        // `Op` is non-exhaustive for the front-ends' sake; every op of
        // this crate's protocol version is handled above.
        _ => {
            let _ = ui.send(Event::Error {
                message: "this session does not know the submitted op".into(),
            });
            return Ok(Next::Wait);
        }
    };
    Ok(Next::Turn { prompt, shell })
}

/// What [`drive`] does next.
enum Next {
    /// Run a turn: the prompt (none: go on) or a `!` command line.
    Turn {
        prompt: Option<String>,
        shell: Option<String>,
    },
    /// Wait for the next op.
    Wait,
    /// End the session.
    End,
}

/// The session's task: runs turns one at a time; while one runs, routes
/// interrupts and approval answers to it and queues the rest.
async fn drive(
    mut agent: Agent,
    approvals: OpApprover,
    mut ops: UnboundedReceiver<Op>,
    ui: UnboundedSender<Event>,
) -> anyhow::Result<Finished> {
    let mut queue: VecDeque<Op> = VecDeque::new();
    let mut last_stop = None;
    loop {
        let op = match queue.pop_front() {
            Some(op) => op,
            None => match ops.recv().await {
                Some(op) => op,
                None => break,
            },
        };
        let (prompt, shell) = match between_turns(op, &mut agent, &ui).await? {
            Next::Turn { prompt, shell } => (prompt, shell),
            Next::Wait => continue,
            Next::End => break,
        };
        let cancel = CancellationToken::new();
        let mut shutdown = false;
        let result = {
            let turn = async {
                match &shell {
                    Some(command) => agent.run_shell(command, &ui, &cancel).await,
                    None => agent.run(prompt.as_deref(), &ui, &cancel).await,
                }
            };
            tokio::pin!(turn);
            loop {
                tokio::select! {
                    r = &mut turn => break r,
                    op = ops.recv(), if !shutdown => match op {
                        Some(Op::Interrupt) => cancel.cancel(),
                        Some(Op::Approval { call_id, answer }) => {
                            if let Err(e) = approvals.answer(&call_id, answer) {
                                let _ = ui.send(Event::Error { message: e.to_string() });
                            }
                        }
                        Some(Op::Shutdown) | None => {
                            shutdown = true;
                            cancel.cancel();
                        }
                        Some(other) => queue.push_back(other),
                    },
                }
            }
        };
        match result {
            Ok(stop) => last_stop = Some(stop),
            Err(e) => {
                let _ = ui.send(Event::Error {
                    message: format!("{e:#}"),
                });
                return Err(e);
            }
        }
        if shutdown {
            break;
        }
    }
    if let Err(e) = agent.end(&ui).await {
        let _ = ui.send(Event::Error {
            message: format!("{e:#}"),
        });
    }
    let _ = ui.send(Event::ShutdownComplete);
    Ok(Finished {
        last_stop,
        recorded: agent.recorded().to_vec(),
    })
}

/// The run's spending ceiling, with the price of its model: the model
/// named, else the one the provider's entry configures.
fn spend_limit(
    config: &SessionConfig,
    manifest: &crate::manifest::Manifest,
) -> Option<crate::agent::SpendLimit> {
    let limit_usd = config.max_cost_usd?;
    let provider = config
        .provider
        .clone()
        .or_else(|| manifest.agent.provider.clone());
    let model = config
        .model
        .clone()
        .or_else(|| manifest.agent.model.clone())
        .or_else(|| {
            let name = provider?;
            let decl = manifest.plugins.iter().find(|p| p.name == name)?;
            decl.config.get("model").cloned()
        })
        .unwrap_or_default();
    let price = manifest.agent.models.get(&model).and_then(|m| m.price);
    Some(crate::agent::SpendLimit {
        limit_usd,
        price,
        model,
    })
}
