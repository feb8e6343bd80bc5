//! # corral-acp
//!
//! `corral acp`: corral as an agent of the Agent Client Protocol, which
//! editors (Zed, JetBrains IDEs, Neovim, Emacs) use to run agents over
//! stdio — JSON-RPC 2.0, one message per line; stdout belongs to the
//! protocol, corral's own messages go to stderr.
//!
//! Every session is a corral session opened through the one core API
//! ([`corral_core::session::open`]), so a prompt from an editor takes the
//! same pipeline, policy, guards, hooks and session log as `corral run`.
//! What the protocol asks maps onto it:
//!
//! | ACP | corral |
//! |---|---|
//! | `initialize` | protocol 1; sessions can be loaded; no authentication |
//! | `session/new` `{cwd, mcpServers}` | a session of the workspace `cwd`; the editor's stdio MCP servers as `[mcp.*]` entries with no grants ([`servers`]) |
//! | `session/load` | reopens a corral session of that workspace and plays its history back as updates |
//! | `session/prompt` | one turn; its events stream as `session/update` ([`updates`]) |
//! | `session/request_permission` | a call the policy asks about, whole, with its diff: allow once, allow for the session, reject |
//! | `session/cancel` | interrupts the turn and refuses what waits for approval |
//! | `session/set_mode` | corral's permission modes: read-only, ask, auto-edit, full-auto |
//!
//! When the editor offers its file system (`fs.readTextFile`,
//! `fs.writeTextFile`), the model is also offered `editor_read` and
//! `editor_write` ([`corral_core::editor`]): the editor's text of a file,
//! unsaved changes included, and writes its open buffers show — each call
//! through the same pipeline, inside the workspace only.

mod buffers;
mod live;
mod rpc;
mod servers;
mod updates;

use corral_core::session::{Approvals, Resume, SessionConfig};
use corral_protocol::Mode;
use live::Live;
use rpc::{Incoming, Line, Lines, Peer, RpcError, code};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite};

/// The protocol version corral speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// Most sessions one connection keeps open.
const MAX_SESSIONS: usize = 32;

/// Most requests handled at once; past it a request is refused at once.
const MAX_IN_FLIGHT: usize = 64;

/// How `corral acp` runs.
#[derive(Debug, Clone, Default)]
pub struct AcpOptions {
    /// The permission mode sessions start in; default the manifest's.
    pub mode: Option<Mode>,
}

/// Why the agent stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// The connection could not be written.
    #[error("cannot write to the editor: {0}")]
    Write(String),
}

/// Serves ACP on stdin/stdout until the editor closes stdin.
pub async fn serve_stdio(options: AcpOptions) -> Result<(), AcpError> {
    serve(options, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves ACP on `input`/`output` until `input` ends.
pub async fn serve<R, W>(options: AcpOptions, input: R, output: W) -> Result<(), AcpError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (peer, writer) = Peer::new(output);
    let agent = Arc::new(Agent {
        options,
        peer: peer.clone(),
        sessions: Mutex::new(HashMap::new()),
        in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)),
        fs: Mutex::new(buffers::Offered::default()),
        opening: std::sync::atomic::AtomicUsize::new(0),
    });
    let mut lines = Lines::new(input);
    loop {
        match lines.next().await {
            Line::End => break,
            Line::Refused(error) => peer.answer(Value::Null, Err(error)).await,
            Line::Text(text) if text.trim().is_empty() => {}
            Line::Text(text) => agent.receive(rpc::parse(&text)).await,
        }
    }
    peer.close();
    let sessions: Vec<Arc<Live>> = agent
        .sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .map(|(_, s)| s)
        .collect();
    for session in sessions {
        session.shutdown();
    }
    drop(agent);
    drop(peer);
    writer.await.map_err(|e| AcpError::Write(e.to_string()))
}

/// The agent side of one connection.
struct Agent {
    options: AcpOptions,
    peer: Peer,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    in_flight: Arc<tokio::sync::Semaphore>,
    /// The editor's file system as its `initialize` offered it.
    fs: Mutex<buffers::Offered>,
    /// Sessions being opened, which count against the cap.
    opening: std::sync::atomic::AtomicUsize,
}

/// A session being opened, counted until it is open or has failed.
struct Slot<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Checks that `id` names a session of `workspace` exactly (not a prefix),
/// before anything of it is started.
fn exact_session(workspace: &std::path::Path, id: &str) -> Result<(), RpcError> {
    let dir = corral_core::session::sessions_dir(workspace)
        .map_err(|e| RpcError::new(code::NOT_FOUND, e.to_string()))?;
    let found = corral_core::session::find_session(&dir, Some(id))
        .map_err(|e| RpcError::new(code::NOT_FOUND, e.to_string()))?;
    if found.file_stem().and_then(|s| s.to_str()) != Some(id) {
        return Err(RpcError::new(
            code::NOT_FOUND,
            format!("no session `{id}` in this workspace (give its whole id)"),
        ));
    }
    Ok(())
}

impl Agent {
    /// Handles one message of the client.
    async fn receive(self: &Arc<Self>, message: Incoming) {
        match message {
            Incoming::Invalid { id, error } => self.peer.answer(id, Err(error)).await,
            Incoming::Response { id, result } => {
                if !self.peer.resolve(&id, result) {
                    tracing::debug!("an answer to no request of corral's (id {id}) was dropped");
                }
            }
            Incoming::Notification { method, params } => {
                if method == "session/cancel"
                    && let Some(live) = self.session(&params)
                {
                    live.cancel();
                }
            }
            Incoming::Request { id, method, params } => {
                let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                    let busy = RpcError::new(
                        code::INTERNAL,
                        format!("over {MAX_IN_FLIGHT} requests are in flight; wait for answers"),
                    );
                    return self.peer.answer(id, Err(busy)).await;
                };
                let agent = self.clone();
                tokio::spawn(async move {
                    if let Some(answer) = agent.request(id.clone(), &method, params).await {
                        agent.peer.answer(id, answer).await;
                    }
                    drop(permit);
                });
            }
        }
    }

    /// The answer to request `id`, or `None` when it comes later (a
    /// prompt's, when its turn stops).
    async fn request(
        &self,
        id: Value,
        method: &str,
        params: Value,
    ) -> Option<Result<Value, RpcError>> {
        Some(match method {
            "initialize" => {
                *self
                    .fs
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    buffers::Offered::of(&params["clientCapabilities"]);
                Ok(initialize())
            }
            "authenticate" => Ok(json!({})),
            "session/new" => self.open(&params, None).await,
            "session/load" => match params["sessionId"].as_str().filter(|s| valid_id(s)) {
                Some(session) => self.open(&params, Some(session.to_owned())).await,
                None => Err(RpcError::params("`sessionId` is not a corral session id")),
            },
            "session/prompt" => {
                let live = match self.session(&params) {
                    Some(live) => live,
                    None => return Some(Err(no_session(&params))),
                };
                let text = match prompt_text(&params["prompt"]) {
                    Ok(text) => text,
                    Err(e) => return Some(Err(e)),
                };
                return live.prompt(id, text).err().map(Err);
            }
            "session/set_mode" => match (self.session(&params), params["modeId"].as_str()) {
                (None, _) => Err(no_session(&params)),
                (Some(live), Some(mode)) => match mode.parse::<Mode>() {
                    Ok(mode) => {
                        live.set_mode(mode);
                        Ok(json!({}))
                    }
                    Err(e) => Err(RpcError::params(e)),
                },
                (Some(_), None) => Err(RpcError::params("`modeId` is missing")),
            },
            other => Err(RpcError::new(
                code::NO_METHOD,
                format!(
                    "corral does not handle `{}`",
                    corral_protocol::terminal::inert_line(other)
                ),
            )),
        })
    }

    /// The open session `params.sessionId` names.
    fn session(&self, params: &Value) -> Option<Arc<Live>> {
        let id = params["sessionId"].as_str()?;
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// `session/new`, or `session/load` of `resume`.
    async fn open(&self, params: &Value, resume: Option<String>) -> Result<Value, RpcError> {
        // A slot is taken before anything is awaited, so that requests in
        // flight together cannot pass the cap.
        let _slot = self.reserve(resume.as_deref())?;
        let workspace = workspace(&params["cwd"])?;
        if let Some(id) = &resume {
            exact_session(&workspace, id)?;
        }
        let base = corral_core::manifest::load(&workspace)
            .map_err(|e| RpcError::new(code::INTERNAL, e.to_string()))?;
        let added = servers::layer(&workspace, &base, &params["mcpServers"])?;
        for why in &added.skipped {
            tracing::warn!("an MCP server of the editor was not started: {why}");
        }
        let manifest = corral_core::manifest::load_adding(
            &workspace,
            &Default::default(),
            added.layer.into_iter().collect(),
        )
        .map_err(|e| RpcError::new(code::INTERNAL, e.to_string()))?;
        let mode = self.options.mode.unwrap_or(manifest.policy.mode);
        let offered = *self
            .fs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let editor = (offered.read || offered.write)
            .then(|| Arc::new(buffers::Buffers::new(self.peer.clone(), offered)));
        let config = SessionConfig {
            workspace: workspace.clone(),
            cwd: Some(workspace.clone()),
            resume: resume.clone().map(Resume::Id),
            mode: Some(mode),
            approvals: Approvals::FrontEnd,
            manifest: Some(manifest),
            editor: editor
                .clone()
                .map(|e| e as Arc<dyn corral_core::editor::EditorFiles>),
            ..SessionConfig::default()
        };
        let session = corral_core::session::open(config).await.map_err(|e| {
            let code = match e {
                corral_core::session::SessionError::Find(_) => code::NOT_FOUND,
                _ => code::INTERNAL,
            };
            RpcError::new(code, e.to_string())
        })?;
        if let Some(editor) = &editor {
            editor.opened(session.id());
        }
        if let Some(wanted) = &resume {
            if session.id() != wanted {
                return Err(RpcError::new(
                    code::NOT_FOUND,
                    format!("no session `{wanted}` in this workspace"),
                ));
            }
            self.play_back(&session, &workspace).await;
        }
        let live = Live::start(session, workspace, self.peer.clone());
        let id = live.id.clone();
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id.clone(), live);
        let modes = modes(mode);
        Ok(match resume {
            Some(_) => json!({"modes": modes}),
            None => json!({"sessionId": id, "modes": modes}),
        })
    }

    /// Takes a slot for a session being opened (`resume`: the id it
    /// reopens), or says why not: the cap is reached, or that session is
    /// open on this connection already.
    fn reserve(&self, resume: Option<&str>) -> Result<Slot<'_>, RpcError> {
        let sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(id) = resume
            && sessions.contains_key(id)
        {
            return Err(RpcError::new(
                code::INVALID_REQUEST,
                format!("session `{id}` is open on this connection already; prompt it"),
            ));
        }
        let opening = self
            .opening
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if sessions.len() + opening >= MAX_SESSIONS {
            self.opening
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            return Err(RpcError::new(
                code::INTERNAL,
                format!("{MAX_SESSIONS} sessions are open on this connection; close some"),
            ));
        }
        Ok(Slot(&self.opening))
    }

    /// Sends a reopened session's history as updates, before the answer
    /// to `session/load`.
    async fn play_back(
        &self,
        session: &corral_core::session::Session,
        workspace: &std::path::Path,
    ) {
        let records = match corral_core::session::read(session.log_path()) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!("cannot play the session's history back: {e}");
                return;
            }
        };
        let mut updates = updates::Updates::replay(workspace);
        for record in records {
            for update in updates.of(&record.event) {
                self.peer
                    .notify(
                        "session/update",
                        json!({"sessionId": session.id(), "update": update}),
                    )
                    .await;
            }
        }
    }
}

/// The answer to `initialize`.
fn initialize() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
            "mcpCapabilities": {"http": false, "sse": false},
        },
        "authMethods": [],
        "agentInfo": {"name": "corral", "title": "corral", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The modes an editor may switch between, and the current one.
fn modes(current: Mode) -> Value {
    let available: Vec<Value> = Mode::ALL
        .iter()
        .map(|m| {
            let (name, description) = match m {
                Mode::ReadOnly => ("Read only", "Only calls that read run"),
                Mode::Ask => ("Ask", "Reads run; writes, commands and network access ask"),
                Mode::AutoEdit => (
                    "Auto-edit",
                    "Reads and writes run; commands and network ask",
                ),
                Mode::FullAuto => ("Full auto", "Everything the grants allow runs"),
            };
            json!({"id": m.as_str(), "name": name, "description": description})
        })
        .collect();
    json!({"currentModeId": current.as_str(), "availableModes": available})
}

/// The workspace `cwd` names: an absolute path to an existing directory.
fn workspace(cwd: &Value) -> Result<PathBuf, RpcError> {
    let Some(cwd) = cwd.as_str() else {
        return Err(RpcError::params("`cwd` is missing"));
    };
    let shown = corral_protocol::terminal::inert_line(cwd);
    let path = PathBuf::from(cwd);
    if !path.is_absolute() {
        return Err(RpcError::params(format!(
            "`cwd` {shown} is not an absolute path; ACP paths are absolute"
        )));
    }
    match path.canonicalize() {
        Ok(p) if p.is_dir() => Ok(p),
        Ok(_) => Err(RpcError::params(format!(
            "`cwd` {shown} is not a directory"
        ))),
        Err(e) => Err(RpcError::params(format!("`cwd` {shown}: {e}"))),
    }
}

/// Whether `id` can be a corral session id (no path, no prefix match).
fn valid_id(id: &str) -> bool {
    id.len() >= 8
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn no_session(params: &Value) -> RpcError {
    let id = params["sessionId"].as_str().unwrap_or_default();
    RpcError::new(
        code::NOT_FOUND,
        format!(
            "no open session `{}`; open one with session/new or session/load",
            corral_protocol::terminal::inert_line(id)
        ),
    )
}

/// A prompt's content blocks as the text the model reads. Text is taken
/// as written; a link to a resource is named, never read by corral (the
/// model reads files through its tools, under the policy); an embedded
/// resource is refused, as `initialize` says.
fn prompt_text(blocks: &Value) -> Result<String, RpcError> {
    let Some(blocks) = blocks.as_array() else {
        return Err(RpcError::params(
            "`prompt` must be an array of content blocks",
        ));
    };
    let mut parts = Vec::new();
    for block in blocks {
        match block["type"].as_str() {
            Some("text") => parts.push(block["text"].as_str().unwrap_or_default().to_owned()),
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or_default();
                parts.push(format!("@{}", uri.strip_prefix("file://").unwrap_or(uri)));
            }
            // Not offered (`embeddedContext` is false): a file's text pasted
            // into the prompt would count as the user's own words.
            Some("resource") => {
                return Err(RpcError::params(
                    "corral does not take embedded resources; link the file (`resource_link`) \
                     and the model reads it through its tools",
                ));
            }
            Some(other) => {
                return Err(RpcError::params(format!(
                    "corral takes text prompts; a `{}` block is not supported",
                    corral_protocol::terminal::inert_line(other)
                )));
            }
            None => return Err(RpcError::params("a content block has no `type`")),
        }
    }
    if parts.iter().all(|p| p.trim().is_empty()) {
        return Err(RpcError::params("the prompt is empty"));
    }
    Ok(parts.join("\n"))
}
