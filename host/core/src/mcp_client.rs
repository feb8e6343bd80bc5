//! corral as an MCP client: the `[mcp.NAME]` servers of the manifest, each
//! started through corral-exec's one confined path ([`launch`]), their
//! tools offered under the server's prefix and called through the one
//! call pipeline (`call`), like a plugin's.
//!
//! Lifecycle: every server starts when the tools are loaded, all of them at
//! once, each with a bounded wait (its `timeout_ms`), and one that fails
//! says why in its warning (the end of its standard error, the likely
//! cause); it is killed, its whole process tree, when the
//! [`McpTools`] drop (with the session); it is restarted once after it
//! crashed; each call has the server's timeout and output cap, and no
//! message longer than the cap is read into memory. Its standard error goes
//! to a file, never the terminal. Names and descriptions the server gives
//! are made inert before anything shows or logs them, and what it says of
//! its tools (annotations) is shown, never trusted: effects come from the
//! manifest (a server its grants let write has `write` tools unless its
//! entry says otherwise), and a hint may only make a tool stricter.

use crate::exec::{Launch, Served};
use crate::manifest::McpServerDecl;
use crate::protocol::ToolSpec;
use crate::protocol::terminal::inert;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceExt as _};
use rmcp::transport::async_rw::AsyncRwTransport;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

mod http;
pub mod install;
mod pin;

pub use pin::{REVIEW_KEY, review_name};

/// The slack over a server's output cap allowed for one message's framing.
const FRAMING_SLACK: usize = 64 << 10;

/// The MCP servers of a session and the tools they offer.
#[derive(Default)]
pub struct McpTools {
    /// Locked only to read or replace, never across an await.
    tools: std::sync::RwLock<Vec<McpTool>>,
    /// Servers that could not start or list their tools, and why.
    failed: Vec<(String, String)>,
    /// Servers that had not answered when a bounded wait
    /// ([`McpTools::start_within`]) ended, and for how long they were
    /// waited for.
    unanswered: Vec<(String, String)>,
    /// Tools of project servers not offered because they are new or
    /// changed since trust (module `pin`): the server, and why.
    withheld: std::sync::Mutex<Vec<(String, String)>>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools().iter().map(|t| t.spec.name.clone()))
            .finish()
    }
}

/// Why a server could not be started ([`launch`]); its text is the
/// message for the user.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The trusted project's server code changed since trust.
    #[error(transparent)]
    Trust(#[from] crate::manifest::trust::TrustError),
    /// Its program is not installed.
    #[error(
        "[mcp.{name}]: `{}` is not installed (not found in PATH)",
        inert(command)
    )]
    NotInstalled {
        /// The entry's name.
        name: String,
        /// Its command.
        command: String,
    },
    /// Its package in corral's store is missing or changed.
    #[error(transparent)]
    Package(#[from] install::McpInstallError),
}

impl From<LaunchError> for String {
    fn from(e: LaunchError) -> Self {
        e.to_string()
    }
}

/// Why a call to an MCP tool got no answer; its text is the message for
/// the user (and the model).
#[derive(Debug, thiserror::Error)]
pub enum McpCallError {
    /// No server offers a tool of that name.
    #[error("no MCP tool named `{0}`")]
    NoTool(String),
    /// The server crashed again after its one restart.
    #[error(
        "the MCP server `{name}` crashed again after its restart; its standard error is in {}",
        log.display()
    )]
    CrashedAgain {
        /// The entry's name.
        name: String,
        /// Its standard error's file.
        log: PathBuf,
    },
    /// The server could not be started; the text says why.
    #[error("{0}")]
    Start(String),
    /// The server is not running.
    #[error("the MCP server `{0}` is not running")]
    NotRunning(String),
    /// The server answered the call with a protocol error.
    #[error("the MCP server `{name}` failed the call: {why}")]
    Failed {
        /// The entry's name.
        name: String,
        /// The client's reason.
        why: String,
    },
    /// The server did not answer in time (or sent too much); it was stopped.
    #[error(
        "the MCP server `{name}` did not answer within {timeout_ms} ms (or sent a message \
         larger than its {cap_kib} KiB cap); it was stopped"
    )]
    Timeout {
        /// The entry's name.
        name: String,
        /// Its timeout.
        timeout_ms: u64,
        /// Its output cap, in KiB.
        cap_kib: usize,
    },
}

impl From<McpCallError> for String {
    fn from(e: McpCallError) -> Self {
        e.to_string()
    }
}

/// One tool of a server.
#[derive(Clone)]
pub struct McpTool {
    /// How the model sees it: prefixed name, inert description, the
    /// manifest's effects.
    pub spec: ToolSpec,
    /// The server's own name for it.
    remote: String,
    server: Arc<Server>,
}

impl McpTool {
    /// The `[mcp.NAME]` entry serving it.
    pub fn server(&self) -> &str {
        &self.server.decl.name
    }

    /// Calls it with `args` (a JSON object) at its server: its text,
    /// whether the server said it failed, and its structured result; `Err`
    /// when the call could not be made or timed out.
    pub async fn call(
        &self,
        args: &serde_json::Value,
    ) -> Result<(String, bool, Option<serde_json::Value>), McpCallError> {
        self.server.call(&self.remote, args).await
    }

    /// Whether its entry names it a sink (`sinks`): it sends what it is
    /// given out.
    pub fn is_sink(&self) -> bool {
        self.server.decl.sinks.contains(&self.remote)
    }

    /// Whether its entry says its results are private data (`sensitive`).
    pub fn is_sensitive(&self) -> bool {
        self.server.decl.sensitive.contains(&self.remote)
    }

    /// Where a call could carry data to, for the guard: the server is a
    /// program that keeps what it is sent, so whatever the tool's declared
    /// effects, a server with the network could send it anywhere, one
    /// granted a directory outside `workspace` could write it there, and a
    /// `url` server is reached over the network at its origin.
    pub fn reach(&self, workspace: &Path) -> crate::policy::Reach {
        let decl = &self.server.decl;
        // A `url` server is itself a destination: what it is sent leaves.
        let hosts = decl
            .url
            .as_deref()
            .and_then(|u| crate::manifest::mcp_url_origin(u).ok())
            .map(|(origin, _)| {
                let host_port = origin.split_once("://").map_or(origin.as_str(), |(_, r)| r);
                vec![host_port.to_owned()]
            })
            .unwrap_or_default();
        let mut sinks = Vec::new();
        if decl.sinks.contains(&self.remote) {
            sinks.push(format!(
                "`{}` (a sink in [mcp.{}])",
                self.spec.name, decl.name
            ));
        } else if self
            .spec
            .effects
            .contains(&crate::protocol::Effect::Network)
        {
            sinks.push(format!("`{}` (declared network)", self.spec.name));
        }
        crate::policy::Reach {
            sinks,
            hosts,
            networked_programs: if decl.net.reaches() {
                vec![format!("the MCP server `{}`", decl.name)]
            } else {
                Vec::new()
            },
            outside_writes: decl
                .fs
                .iter()
                .filter(|d| !d.starts_with(workspace))
                .map(|d| d.display().to_string())
                .collect(),
        }
    }
}

/// One server: how to start it, and its running instance.
struct Server {
    decl: McpServerDecl,
    /// Where its standard error and its private home and temp directory go.
    dir: PathBuf,
    running: tokio::sync::Mutex<Option<Running>>,
    restarts: AtomicU32,
    /// Set by `notifications/tools/list_changed`.
    changed: Arc<AtomicBool>,
    /// The tools trusted of a project server; `None` for a user's server.
    pinned: std::sync::OnceLock<Option<Vec<crate::manifest::reviewed::Reviewed>>>,
}

/// A started server: dropping it kills its whole process tree (a `url`
/// server has none: dropping it closes the connection).
struct Running {
    client: RunningService<RoleClient, Handler>,
    served: Option<Served>,
    /// A call found the connection gone (the server died or closed it):
    /// the next call restarts the server even if its exit is not seen yet.
    broken: bool,
}

/// What the client answers a server: nothing but noticing a changed list.
#[derive(Clone)]
struct Handler {
    changed: Arc<AtomicBool>,
}

impl rmcp::ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }
}

impl McpTools {
    /// Starts the servers of `servers` (each with its bounded wait) and lists
    /// their tools; `dir` holds their logs and private directories. A server
    /// that fails is reported by [`McpTools::failed`], not fatal. Every tool
    /// listed is offered (this is what `corral trust` reviews).
    pub async fn start(servers: &[McpServerDecl], dir: &Path) -> Self {
        Self::start_with(servers, dir, None, None).await
    }

    /// Starts the servers of `manifest` as [`McpTools::start`] does, but the
    /// project's servers offer only the tools trusted: one new or changed
    /// since `corral trust` is reported by [`McpTools::withheld`] instead.
    pub async fn start_pinned(manifest: &crate::manifest::Manifest, dir: &Path) -> Self {
        let pin = manifest
            .tool_reviews
            .clone()
            .map(|reviews| pin::Pin { reviews });
        Self::start_with(&manifest.mcp, dir, pin.as_ref(), None).await
    }

    /// Starts the servers of `manifest` as [`McpTools::start_pinned`] does,
    /// but waits at most `wait` for all of them (never more than a server's
    /// own `timeout_ms`): one that has not answered by then is stopped and
    /// reported by [`McpTools::unanswered`], so a server that never answers
    /// costs a listing `wait`, not its whole timeout.
    pub async fn start_within(
        manifest: &crate::manifest::Manifest,
        dir: &Path,
        wait: Duration,
    ) -> Self {
        let pin = manifest
            .tool_reviews
            .clone()
            .map(|reviews| pin::Pin { reviews });
        Self::start_with(&manifest.mcp, dir, pin.as_ref(), Some(wait)).await
    }

    async fn start_with(
        servers: &[McpServerDecl],
        dir: &Path,
        pin: Option<&pin::Pin>,
        wait: Option<Duration>,
    ) -> Self {
        let mut out = McpTools::default();
        let servers: Vec<Arc<Server>> = servers
            .iter()
            .map(|decl| {
                Arc::new(Server {
                    decl: decl.clone(),
                    dir: dir.join(&decl.name),
                    running: tokio::sync::Mutex::new(None),
                    restarts: AtomicU32::new(0),
                    changed: Arc::default(),
                    pinned: std::sync::OnceLock::new(),
                })
            })
            .collect();
        // All at once, each on a task of its own (starting one is mostly
        // synchronous work: the confinement, the fork, the exec): one server
        // that never answers costs the command its own wait, not the sum of
        // everyone's, and with `wait` not even that.
        let tasks: Vec<tokio::task::JoinHandle<Result<Vec<rmcp::model::Tool>, String>>> = servers
            .iter()
            .map(|s| {
                let s = s.clone();
                tokio::spawn(async move { s.list().await })
            })
            .collect();
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let mut listed = Vec::with_capacity(tasks.len());
        for (server, mut task) in servers.iter().zip(tasks) {
            let name = &server.decl.name;
            let joined = match deadline {
                None => Some((&mut task).await),
                Some(at) => tokio::time::timeout_at(at, &mut task).await.ok(),
            };
            listed.push(match joined {
                Some(result) => result.unwrap_or_else(|e| {
                    Err(format!("the MCP server `{name}` could not be started: {e}"))
                }),
                None => {
                    // Stopping the task drops the server it was starting,
                    // and with it the server's whole process tree.
                    task.abort();
                    let waited = wait.unwrap_or_default().as_millis();
                    out.unanswered.push((
                        name.clone(),
                        format!(
                            "the MCP server `{name}` had not answered within {waited} ms; a \
                             session waits up to its `timeout_ms` ({} ms) for it, and so does \
                             `corral tools list --wait`",
                            server.decl.timeout_ms
                        ),
                    ));
                    continue;
                }
            });
        }
        let servers: Vec<Arc<Server>> = servers
            .into_iter()
            .filter(|s| !out.unanswered.iter().any(|(n, _)| *n == s.decl.name))
            .collect();
        let mut all = Vec::new();
        for (server, listed) in servers.iter().zip(listed) {
            let decl = &server.decl;
            match listed {
                Ok(tools) => {
                    let tools: Vec<McpTool> = tools
                        .into_iter()
                        .map(|t| McpTool {
                            spec: spec_of(decl, &t),
                            remote: t.name.to_string(),
                            server: server.clone(),
                        })
                        .collect();
                    let specs: Vec<ToolSpec> = tools.iter().map(|t| t.spec.clone()).collect();
                    let pinned = pin.and_then(|p| p.pinned(&decl.name, decl.project, &specs));
                    let _ = server.pinned.set(pinned);
                    all.extend(tools.into_iter().filter(|t| out.offered(t)));
                }
                Err(why) => {
                    tracing::warn!("{why}");
                    out.failed.push((decl.name.clone(), why));
                }
            }
        }
        all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        out.tools = std::sync::RwLock::new(all);
        out
    }

    /// Whether `tool` may be offered: a project server's tool must be as
    /// trusted; one that is not is reported as withheld.
    fn offered(&self, tool: &McpTool) -> bool {
        let Some(Some(pinned)) = tool.server.pinned.get() else {
            return true;
        };
        let Some(why) = pin::refused(pinned, &tool.spec) else {
            return true;
        };
        tracing::warn!("[mcp.{}]: {why}", tool.server.decl.name);
        if let Ok(mut w) = self.withheld.lock() {
            let entry = (tool.server.decl.name.clone(), why);
            if !w.contains(&entry) {
                w.push(entry);
            }
        }
        false
    }

    /// Tools of project servers not offered because they are new or
    /// changed since `corral trust`: the server, and why.
    pub fn withheld(&self) -> Vec<(String, String)> {
        self.withheld.lock().map(|w| w.clone()).unwrap_or_default()
    }

    /// Whether a server sent `notifications/tools/list_changed` since its
    /// list was last read ([`McpTools::refresh`] reads it again).
    pub fn list_changed(&self) -> bool {
        self.tools()
            .iter()
            .any(|t| t.server.changed.load(Ordering::SeqCst))
    }

    /// The tools, sorted by name.
    pub fn tools(&self) -> Vec<McpTool> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// The tool named `name` (as the model sees it).
    pub fn get(&self, name: &str) -> Option<McpTool> {
        self.tools
            .read()
            .ok()
            .and_then(|t| t.iter().find(|t| t.spec.name == name).cloned())
    }

    /// Reads again the tools of the servers that sent
    /// `notifications/tools/list_changed`: a tool that is new or whose
    /// description or schema changed since the session started is offered
    /// with a warning saying so (a project server's only when it is as
    /// trusted: otherwise it is withheld); a removed one is gone.
    pub async fn refresh(&self) {
        let before = self.tools();
        let mut servers: Vec<Arc<Server>> = Vec::new();
        for t in &before {
            if !servers.iter().any(|s| Arc::ptr_eq(s, &t.server))
                && t.server.changed.swap(false, Ordering::SeqCst)
            {
                servers.push(t.server.clone());
            }
        }
        if servers.is_empty() {
            return;
        }
        let mut after: Vec<McpTool> = before
            .iter()
            .filter(|t| !servers.iter().any(|s| Arc::ptr_eq(s, &t.server)))
            .cloned()
            .collect();
        for server in servers {
            let Ok(listed) = server.list().await else {
                continue;
            };
            for t in listed {
                let mut spec = spec_of(&server.decl, &t);
                match before.iter().find(|b| b.spec.name == spec.name) {
                    None => spec
                        .warnings
                        .push("new: the server added it during the session (not reviewed)".into()),
                    Some(old)
                        if old.spec.description != spec.description
                            || old.spec.input_schema != spec.input_schema =>
                    {
                        spec.warnings.push(
                            "changed: the server changed its description or schema during the session"
                                .into(),
                        );
                    }
                    Some(_) => {}
                }
                let tool = McpTool {
                    spec,
                    remote: t.name.to_string(),
                    server: server.clone(),
                };
                if !self.offered(&tool) {
                    continue;
                }
                if !tool.spec.warnings.is_empty() {
                    tracing::warn!(
                        "MCP tool `{}` of [mcp.{}]: {}",
                        tool.spec.name,
                        server.decl.name,
                        tool.spec.warnings.join("; ")
                    );
                }
                after.push(tool);
            }
        }
        after.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        if let Ok(mut tools) = self.tools.write() {
            *tools = after;
        }
    }

    /// Servers that could not start or list their tools, and why.
    pub fn failed(&self) -> &[(String, String)] {
        &self.failed
    }

    /// Servers stopped because a bounded wait ended before they answered
    /// ([`McpTools::start_within`]), and what was waited.
    pub fn unanswered(&self) -> &[(String, String)] {
        &self.unanswered
    }

    /// Calls `name` with `args` (a JSON object): its text, whether the
    /// server said it failed, and its structured result; `Err` when the call
    /// could not be made or timed out.
    pub async fn call(
        &self,
        name: &str,
        args: &serde_json::Value,
    ) -> Result<(String, bool, Option<serde_json::Value>), McpCallError> {
        let tool = self
            .get(name)
            .ok_or_else(|| McpCallError::NoTool(name.to_owned()))?;
        tool.server.call(&tool.remote, args).await
    }
}

impl Server {
    /// The running instance, started (or restarted once after a crash) if
    /// needed.
    async fn ensure(&self) -> Result<tokio::sync::MutexGuard<'_, Option<Running>>, McpCallError> {
        let mut running = self.running.lock().await;
        let dead = match running.as_mut() {
            Some(r) => {
                r.broken || r.served.as_mut().is_some_and(Served::exited) || r.client.is_closed()
            }
            None => true,
        };
        if dead {
            let crashed = running.take().is_some();
            if crashed && self.restarts.fetch_add(1, Ordering::SeqCst) >= 1 {
                return Err(McpCallError::CrashedAgain {
                    name: self.decl.name.clone(),
                    log: self.stderr_path(),
                });
            }
            *running = Some(self.spawn().await.map_err(McpCallError::Start)?);
        }
        Ok(running)
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.join("stderr.log")
    }

    /// Starts the server and completes the MCP handshake, within its timeout.
    async fn spawn(&self) -> Result<Running, String> {
        let name = &self.decl.name;
        let handler = Handler {
            changed: self.changed.clone(),
        };
        if let Some(url) = &self.decl.url {
            let client = http::connect(&self.decl, url, handler).await?;
            return Ok(Running {
                client,
                served: None,
                broken: false,
            });
        }
        let home = self.dir.join("home");
        std::fs::create_dir_all(&home).map_err(|e| {
            format!(
                "cannot make the MCP server `{name}`'s directory {}: {e}",
                home.display()
            )
        })?;
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stderr_path())
            .map_err(|e| format!("cannot open the MCP server `{name}`'s log: {e}"))?;
        // What this start writes begins here: the log keeps earlier starts.
        let logged = stderr.metadata().map(|m| m.len()).unwrap_or(0);
        let mut served = launch(&self.decl, &home)?
            .serve(stderr)
            .map_err(|e| format!("the MCP server `{name}` did not start: {e}"))?;
        let Some((stdout, stdin)) = served.take_pipes() else {
            return Err(format!("the MCP server `{name}` started without its pipes"));
        };
        let transport = AsyncRwTransport::new_client(stdout, stdin)
            .with_max_line_length(self.decl.output_cap.saturating_add(FRAMING_SLACK));
        let wait = Duration::from_millis(self.decl.timeout_ms);
        let client = match tokio::time::timeout(wait, handler.serve(transport)).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => {
                let exit = exit_of(&mut served).await;
                let what = match &exit {
                    Some(status) => format!("exited ({status}) before it answered `initialize`"),
                    None => format!(
                        "did not complete the MCP handshake ({})",
                        handshake_error(&e)
                    ),
                };
                return Err(self.failure(&what, logged, exit.is_none()));
            }
            Err(_) => {
                let what = format!(
                    "did not answer `initialize` within {} ms",
                    self.decl.timeout_ms
                );
                return Err(self.failure(&what, logged, true));
            }
        };
        Ok(Running {
            client,
            served: Some(served),
            broken: false,
        })
    }

    /// Why the server failed to start, in words: `what` happened, the last
    /// lines it wrote to its standard error since `logged`, and the likely
    /// cause read from them and its entry. `running` says whether it was
    /// still running (then `timeout_ms` may be the fix).
    fn failure(&self, what: &str, logged: u64, running: bool) -> String {
        let name = &self.decl.name;
        let tail = stderr_tail(&self.stderr_path(), logged);
        let mut out = format!("the MCP server `{name}` {what}");
        match &tail {
            Some(tail) => out.push_str(&format!(
                "; the end of its standard error:\n{}",
                tail.lines()
                    .map(|l| format!("    {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )),
            None => out.push_str("; it wrote nothing to its standard error"),
        }
        match likely_cause(&self.decl, tail.as_deref().unwrap_or_default()) {
            Some(cause) => out.push_str(&format!("\nlikely cause: {cause}")),
            None if running => out.push_str(&format!(
                "\nif it is only slow to start, raise `timeout_ms` of [mcp.{name}]"
            )),
            None => {}
        }
        out.push_str(&format!(
            "\n(its whole log: {})",
            self.stderr_path().display()
        ));
        out
    }

    /// The server's tools, as it lists them.
    async fn list(&self) -> Result<Vec<rmcp::model::Tool>, String> {
        let running = self.ensure().await?;
        let Some(r) = running.as_ref() else {
            return Err(McpCallError::NotRunning(self.decl.name.clone()).into());
        };
        let wait = Duration::from_millis(self.decl.timeout_ms);
        match tokio::time::timeout(wait, r.client.peer().list_all_tools()).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(e)) => Err(format!(
                "the MCP server `{}` could not list its tools: {e}",
                self.decl.name
            )),
            Err(_) => Err(format!(
                "the MCP server `{}` did not list its tools within {} ms",
                self.decl.name, self.decl.timeout_ms
            )),
        }
    }

    /// One `tools/call`, within the server's timeout, its text cut to the cap.
    async fn call(
        &self,
        remote: &str,
        args: &serde_json::Value,
    ) -> Result<(String, bool, Option<serde_json::Value>), McpCallError> {
        let name = &self.decl.name;
        let params = CallToolRequestParams::new(remote.to_owned())
            .with_arguments(args.as_object().cloned().unwrap_or_default());
        let wait = Duration::from_millis(self.decl.timeout_ms);
        let mut running = self.ensure().await?;
        let Some(r) = running.as_ref() else {
            return Err(McpCallError::NotRunning(name.clone()));
        };
        let result = match tokio::time::timeout(wait, r.client.peer().call_tool(params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => {
                // A dead server is restarted at the next call: one whose
                // connection is gone is dead though its exit may not be
                // seen yet.
                let broken = !matches!(
                    e,
                    rmcp::service::ServiceError::McpError(_)
                        | rmcp::service::ServiceError::UnexpectedResponse
                );
                let message = McpCallError::Failed {
                    name: name.clone(),
                    why: e.to_string(),
                };
                if let Some(r) = running.as_mut().filter(|_| broken) {
                    r.broken = true;
                }
                return Err(message);
            }
            Err(_) => {
                // A server that does not answer in time may be stuck or
                // flooding: kill it; the next call starts it again.
                running.take();
                return Err(McpCallError::Timeout {
                    name: name.clone(),
                    timeout_ms: self.decl.timeout_ms,
                    cap_kib: self.decl.output_cap / 1024,
                });
            }
        };
        let mut text = String::new();
        for block in &result.content {
            if let Some(t) = block.as_text() {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
        }
        if text.is_empty()
            && let Some(data) = &result.structured_content
        {
            text = data.to_string();
        }
        let cap = self.decl.output_cap;
        if text.len() > cap {
            let mut end = cap;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str(&format!(
                "\n[corral: cut at the server's {} KiB output cap]",
                cap / 1024
            ));
        }
        Ok((
            text,
            result.is_error.unwrap_or(false),
            result.structured_content,
        ))
    }
}

/// How many of the last lines of a failed server's standard error its
/// warning shows.
const TAIL_LINES: usize = 8;

/// The exit status of a server whose connection closed, once it is seen:
/// the kernel may report the exit a moment after the pipe closed.
async fn exit_of(served: &mut Served) -> Option<std::process::ExitStatus> {
    for _ in 0..20 {
        if let Some(status) = served.exit_status() {
            return Some(status);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The handshake's error in words: the transport's own message names its
/// Rust type, which says nothing to a user.
fn handshake_error(e: &rmcp::service::ClientInitializeError) -> String {
    let text = e.to_string();
    if text.contains("Broken pipe") {
        "it closed its input before reading `initialize`".to_owned()
    } else if text.contains("connection closed") {
        "it closed its output before answering `initialize`".to_owned()
    } else {
        inert(&text).into_owned()
    }
}

/// The last [`TAIL_LINES`] non-empty lines written to `log` after its first
/// `from` bytes (at most 64 KiB of them read), made inert; `None` when
/// there are none.
fn stderr_tail(log: &Path, from: u64) -> Option<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    const MOST: u64 = 64 << 10;
    let mut file = std::fs::File::open(log).ok()?;
    let len = file.metadata().ok()?.len();
    let start = from.max(len.saturating_sub(MOST));
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(MOST).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| {
            let l = inert(l).into_owned();
            // One line of a minified stack can be kilobytes long.
            match l.char_indices().nth(300) {
                Some((at, _)) => format!("{}…", &l[..at]),
                None => l,
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    (!tail.is_empty()).then_some(tail)
}

/// The likely cause of a failed start, from what the server wrote and its
/// entry: no network (npm's ENOTFOUND and EAI_AGAIN, a resolver failing, a
/// socket refused), a path it may not read or write, or a launcher that
/// fetches its package at each start without the network to do it.
fn likely_cause(decl: &McpServerDecl, stderr: &str) -> Option<String> {
    let name = &decl.name;
    let has = |words: &[&str]| words.iter().any(|w| stderr.contains(w));
    let launcher = Path::new(&decl.command)
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| ["npx", "uvx", "pipx", "bunx", "pnpx", "uv"].contains(n));
    let offline = !matches!(decl.net, crate::exec::Network::Any);
    if offline
        && has(&[
            "ENOTFOUND",
            "EAI_AGAIN",
            "getaddrinfo",
            "Temporary failure in name resolution",
            "Name or service not known",
            "Network is unreachable",
            "npm error network",
            "npm ERR! network",
            "ECONNREFUSED",
            "Failed to fetch",
            "failed to fetch",
        ])
    {
        return Some(match launcher {
            Some(l) => format!(
                "it has no network: `{l}` fetches the package at start, and [mcp.{name}] \
                 grants no network to reach its registry; add the server with `corral mcp add` \
                 (which installs the package once) or install it and name its program"
            ),
            None => format!(
                "it has no network where it needed one: [mcp.{name}] grants {}; grant the \
                 destination it needs in `grants.net`",
                if decl.net.reaches() {
                    "only some destinations"
                } else {
                    "none"
                }
            ),
        });
    }
    if has(&[
        "EACCES",
        "Permission denied",
        "EPERM",
        "Operation not permitted",
    ]) {
        return Some(format!(
            "it was refused a path: it may read only its own install, the system's \
             directories and `grants.fs` of [mcp.{name}], and write only those grants; grant \
             the directory it needs (`grants.fs`) or install it where it can read its files"
        ));
    }
    if has(&[
        "Cannot find module",
        "ModuleNotFoundError",
        "No module named",
    ]) {
        return Some(
            "a module it imports is missing, or is outside the install it may read".to_owned(),
        );
    }
    match launcher {
        Some(l) if stderr.is_empty() && !decl.net.reaches() => Some(format!(
            "`{l}` fetches the package from its registry at start, and [mcp.{name}] grants no \
             network: it waits for a registry it cannot reach; add the server with `corral mcp \
             add` (which installs the package once) or install it and name its program"
        )),
        _ => None,
    }
}

/// How the server `decl` is started: the one place its confinement is
/// chosen. It reads and writes only beneath its `grants.fs` directories and
/// its private `home` (also its `HOME` and `TMPDIR`), reads the system's
/// directories and its own install (its package, and the script its
/// arguments name), gets only its `env` and `grants.env`
/// variables (and a system `PATH` unless given one, so `#!/usr/bin/env
/// node` works), and the network of `grants.net`: none, any, or only the destinations it
/// names, through corral's proxy (`Launch::network`). A server of the
/// trusted project whose code changed since trust is refused here, and so
/// is one whose package in corral's store changed since its install
/// ([`install::check`]), whose directory it may read.
pub fn launch(decl: &McpServerDecl, home: &Path) -> Result<Launch, LaunchError> {
    crate::manifest::trust::check_server_code(decl)?;
    // As written, not resolved: `node_modules/.bin/x` says where the install is.
    let program = if decl.command.contains('/') {
        decl.cwd.join(&decl.command)
    } else {
        crate::exec::resolve(&decl.command).ok_or_else(|| LaunchError::NotInstalled {
            name: decl.name.clone(),
            command: decl.command.clone(),
        })?
    };
    let mut dirs = decl.fs.clone();
    dirs.push(home.to_path_buf());
    if let Some(package) = &decl.package {
        dirs.push(install::check(decl, package)?);
    }
    let mut launch = Launch::new(&program, &decl.cwd)
        .named(format!("mcp.{}", decl.name))
        .args(&decl.args)
        .env("HOME", home)
        .env("TMPDIR", home)
        .pass_env(&decl.env_grants)
        .strict(
            &dirs,
            Some(&program),
            decl.named_files().first().map(PathBuf::as_path),
            &decl.workspace,
        )
        .network(decl.net.clone())
        .writable(home);
    if !decl.env.contains_key("PATH") && !decl.env_grants.iter().any(|v| v == "PATH") {
        launch = launch.env("PATH", "/usr/local/bin:/usr/bin:/bin");
    }
    for (key, value) in &decl.env {
        launch = launch.env(key, value);
    }
    for dir in &decl.fs {
        launch = launch.writable(dir).protect(dir);
    }
    Ok(launch)
}

/// The spec the model sees of the server's `tool`: a name of safe
/// characters under the prefix, an inert description, the manifest's
/// effects (made `write` when the server itself says the tool changes
/// things: a hint may tighten, never loosen), and what the server claims
/// of it as warnings, not as facts.
fn spec_of(decl: &McpServerDecl, tool: &rmcp::model::Tool) -> ToolSpec {
    let safe: String = tool
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut warnings = Vec::new();
    if safe != tool.name {
        warnings.push(format!(
            "the server names it `{}`, which holds characters a tool name may not",
            inert(&tool.name)
        ));
    }
    if let Some(a) = &tool.annotations {
        let mut claims = Vec::new();
        if let Some(v) = a.read_only_hint {
            claims.push(format!("readOnlyHint={v}"));
        }
        if let Some(v) = a.destructive_hint {
            claims.push(format!("destructiveHint={v}"));
        }
        if let Some(v) = a.open_world_hint {
            claims.push(format!("openWorldHint={v}"));
        }
        if !claims.is_empty() {
            warnings.push(format!(
                "the server says {} (not trusted: its effects come from [mcp.{}])",
                claims.join(", "),
                decl.name
            ));
        }
    }
    let description = tool.description.as_deref().unwrap_or_default();
    ToolSpec {
        name: format!("{}{safe}", decl.tool_prefix),
        description: format!("[MCP server `{}`] {}", decl.name, inert(description)),
        input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
        effects: stricter(decl.effects_of(&tool.name), tool.annotations.as_ref()),
        warnings,
    }
}

/// `effects` with `write` added when the server says the tool is not
/// read-only or is destructive; `readOnlyHint = true` removes nothing.
fn stricter(
    mut effects: Vec<crate::protocol::Effect>,
    hints: Option<&rmcp::model::ToolAnnotations>,
) -> Vec<crate::protocol::Effect> {
    use crate::protocol::Effect;
    let changes =
        hints.is_some_and(|h| h.read_only_hint == Some(false) || h.destructive_hint == Some(true));
    if changes
        && !effects
            .iter()
            .any(|e| matches!(e, Effect::Write | Effect::Execute))
    {
        effects.push(Effect::Write);
    }
    effects
}
