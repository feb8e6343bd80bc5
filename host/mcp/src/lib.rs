//! # corral-mcp
//!
//! A front-end: depends on corral-core and the protocol only (exports
//! [`Server`] and [`ServeOptions`]).
//!
//! The MCP server: the tool plugins' tools served to an MCP client (Claude
//! Code, Codex, an IDE) over stdio, with the same guarantees the agent loop
//! gives its model.
//!
//! Every `tools/call` takes the one path of [`Dispatcher::run_batch`]: look
//! up → validate against the schema → protected paths → permission policy →
//! approval → sandboxed call → events. The manifest's grants and the
//! permission policy hold for the client as they do for corral's own model;
//! a refusal comes back as a tool result with `isError: true` and a message
//! that says why and what to change.
//!
//! A call the policy puts to the user is asked through the client with
//! `elicitation/create` when the client declared the elicitation capability
//! ([`ElicitApprover`]); otherwise it is refused with a message naming the
//! ways to allow it. Because `elicitation/create` is a request from server to
//! client, which MCP `2026-07-28` no longer allows, the server speaks the
//! protocol versions that have it (up to `2025-11-25`).
//!
//! Calls are taken concurrently, as the client sends them: a call waiting
//! for its approval holds up no other. Calls beyond what the runtime runs at
//! once (its instance slots and its memory budget) wait for a place instead
//! of failing. A request line over [`MAX_REQUEST_BYTES`] is answered with a
//! JSON-RPC error and the server goes on. Logs go to stderr (through
//! `tracing`), each record made inert; stdout carries nothing but the
//! protocol.
//!
//! ```no_run
//! # async fn demo() -> Result<(), String> {
//! let server = corral_mcp::Server::load(corral_mcp::ServeOptions {
//!     workspace: ".".into(),
//!     mode: Some(corral_protocol::Mode::ReadOnly),
//!     ..Default::default()
//! })
//! .await?;
//! server.serve_stdio().await?;
//! # Ok(())
//! # }
//! ```
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

use corral_core::manifest;
use corral_protocol as protocol;
use corral_protocol::terminal;

mod framing;
mod paths;
mod stdio;

pub use framing::MAX_REQUEST_BYTES;

use crate::manifest::Manifest;
use crate::protocol::{
    ApprovalAnswer, ApprovalRequest, Effect, Mode, ToolCall, ToolOutcome, ToolSpec,
};
use corral_core::call::{Approver, Dispatcher};
use corral_core::plugins::RuntimeOptions;
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, Implementation, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
// MCP logging is deprecated after 2025-11-25 (SEP-2577), the newest
// version this server speaks; it is how a server tells the client's user
// about slow start-up work before any request carries a progress token.
#[allow(deprecated, reason = "MCP 2025-11-25 has logging; see above")]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, SetLevelRequestParams};
use rmcp::service::{ElicitationMode, NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt as _};
use std::borrow::Cow;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the server is started with. Unset fields come from the manifest.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The workspace root; tool paths are relative to it.
    pub workspace: PathBuf,
    /// The permission mode (`--mode`); default `[policy] mode`.
    pub mode: Option<Mode>,
    /// Settings of the runtime; default [`RuntimeOptions::user`].
    pub runtime: Option<RuntimeOptions>,
    /// A manifest already loaded; default [`crate::manifest::load`] of the
    /// workspace.
    pub manifest: Option<Manifest>,
}

/// The tool plugins of a workspace, ready to be served.
pub struct Server {
    dispatcher: Arc<Dispatcher>,
    approver: Arc<ElicitApprover>,
    tools: Arc<Vec<Tool>>,
    next_id: Arc<AtomicU64>,
    /// Where a client's absolute paths may lead.
    roots: paths::Roots,
    /// The client's roots, once asked (`None` until then, and again after
    /// the client says they changed).
    client_roots: Arc<tokio::sync::Mutex<Option<Arc<Vec<PathBuf>>>>>,
    /// The plugins whose next instance is made once the answer is out.
    after_answer: AfterAnswer,
}

/// Plugins that served a call, whose next instance is made once the
/// call's answer is written: made while the client reads it, on the
/// thread that wrote it. Made when the call returned, it would wait in
/// the runtime's queue while the answer went out, and wake another worker
/// thread to take it (a thread hop per request).
#[derive(Clone, Default)]
struct AfterAnswer(Arc<Mutex<Vec<Arc<corral_core::plugins::Plugin>>>>);

impl AfterAnswer {
    /// `plugin` makes its next instance after the next answer.
    fn push(&self, plugin: &Arc<corral_core::plugins::Plugin>) {
        if let Ok(mut pending) = self.0.lock()
            && !pending.iter().any(|p| Arc::ptr_eq(p, plugin))
        {
            pending.push(plugin.clone());
        }
    }

    /// An answer is out: each pending plugin makes its next instance.
    fn run(&self) {
        let pending = match self.0.lock() {
            Ok(mut pending) => std::mem::take(&mut *pending),
            Err(_) => return,
        };
        for plugin in pending {
            plugin.make_ahead();
        }
    }
}

/// How long a client that offers roots has to answer `roots/list`.
const ROOTS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads the manifest and the plugins as a session does. The error is a
    /// message for the user: what failed and what to do.
    pub async fn load(options: ServeOptions) -> Result<Self, corral_core::load::LoadError> {
        Self::load_with(options, AfterAnswer::default()).await
    }

    /// [`Server::load`], its instances made ahead after the answers of
    /// `after_answer`'s framing.
    async fn load_with(
        options: ServeOptions,
        after_answer: AfterAnswer,
    ) -> Result<Self, corral_core::load::LoadError> {
        let loaded =
            corral_core::load::load(&options.workspace, options.manifest, options.runtime).await?;
        let approver = Arc::new(ElicitApprover::default());
        let front = loaded
            .front(approver.clone(), Arc::default(), options.mode)
            .await?;
        let manifest = &loaded.manifest;
        // A tool the policy refuses whatever its arguments (any tool that
        // does more than read, in read-only mode) is not listed: a client
        // would offer its model a tool that can only fail.
        let no_arguments = serde_json::Value::Object(Default::default());
        let tools = front
            .plugins
            .tools()
            .into_iter()
            .map(|(_, spec)| spec)
            .filter(|spec| {
                let verdict = front
                    .policy
                    .decide(&spec.name, &spec.effects, &no_arguments);
                let refused = verdict.decision.is_deny();
                if refused {
                    tracing::debug!(tool = %spec.name, "not listed: {}", verdict.reason);
                }
                !refused
            })
            .map(mcp_tool)
            .collect();
        let workspace =
            std::fs::canonicalize(&manifest.workspace).unwrap_or(manifest.workspace.clone());
        let roots = paths::Roots::new(&manifest.workspace, &workspace);
        // The guard holds what it holds for a session: what a client's calls
        // read labels what its later calls may send out.
        let dispatcher = Dispatcher::of(front);
        Ok(Self {
            dispatcher: Arc::new(dispatcher),
            approver,
            tools: Arc::new(tools),
            next_id: Arc::new(AtomicU64::new(1)),
            roots,
            client_roots: Arc::default(),
            after_answer,
        })
    }

    /// The tools as `tools/list` shows them.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Serves MCP on stdin and stdout until the client closes the
    /// connection.
    pub async fn serve_stdio(self) -> Result<(), ServeError> {
        let after_answer = self.after_answer.clone();
        serve_stdio(self, after_answer).await
    }

    /// Serves MCP on stdin and stdout at once while the plugins of
    /// `manifest` load: `initialize` is answered without waiting, and
    /// `tools/list` and `tools/call` wait for the load (a plugin compiled
    /// meanwhile says so in a log notification, as on stderr). A load that
    /// fails answers every such request with its message.
    pub async fn serve_stdio_loading(options: ServeOptions) -> Result<(), ServeError> {
        // The progress line comes from a thread of its own: the
        // notification is sent on this runtime.
        let client = Arc::new(Mutex::new(Client {
            handle: tokio::runtime::Handle::try_current().ok(),
            ..Client::default()
        }));
        let to_client = client.clone();
        corral_core::plugins::progress::set_sink(Arc::new(move |p| {
            let text = p.to_string();
            // stderr as in every other command (the client may show it);
            // the text's names are made visible by its `Display`.
            let _ = writeln!(std::io::stderr(), "corral: {text}");
            if let Ok(mut client) = to_client.lock() {
                client.log(text);
            }
        }));
        let after_answer = AfterAnswer::default();
        let after = after_answer.clone();
        let load =
            tokio::spawn(async move { Server::load_with(options, after).await.map(Arc::new) });
        let loaded = futures::FutureExt::shared(futures::FutureExt::boxed(async move {
            match load.await {
                Ok(Ok(server)) => {
                    tracing::info!(tools = server.tools().len(), "serving MCP on stdio");
                    Ok(server)
                }
                Ok(Err(e)) => {
                    tracing::error!("{e}");
                    Err(e.to_string())
                }
                Err(e) => Err(format!("loading the plugins failed: {e}")),
            }
        }));
        serve_stdio(Loading { loaded, client }, after_answer).await
    }
}

/// Why serving MCP on stdin and stdout ended in error; its text is the
/// message for the user.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The client did not complete the handshake.
    #[error("the MCP client did not complete the handshake: {0}")]
    Handshake(String),
    /// The service stopped other than by the client closing.
    #[error("the MCP server stopped unexpectedly: {0}")]
    Stopped(String),
}

impl From<ServeError> for String {
    fn from(e: ServeError) -> Self {
        e.to_string()
    }
}

/// Serves `handler` on stdin and stdout until the client closes the
/// connection.
async fn serve_stdio<H: ServerHandler>(
    handler: H,
    after_answer: AfterAnswer,
) -> Result<(), ServeError> {
    {
        // The service takes and gives whole messages; [`framing::guard`]
        // reads and writes them on the real stdin and stdout, so that an
        // oversized or unreadable request gets an answer. Each request is
        // read there once, and handed on when the service is ready for it.
        let (to_service, service_in) = futures::channel::mpsc::channel(0);
        let (service_out, from_service) = futures::channel::mpsc::channel(0);
        let stdio::Stdio {
            input,
            output,
            modes,
        } = stdio::open();
        let framing = tokio::spawn(framing::guard(
            input,
            output,
            to_service,
            from_service,
            move || after_answer.run(),
        ));
        let served = async {
            let running = handler
                .serve((service_out, service_in))
                .await
                .map_err(|e| ServeError::Handshake(e.to_string()))?;
            running
                .waiting()
                .await
                .map_err(|e| ServeError::Stopped(e.to_string()))?;
            Ok(())
        }
        .await;
        // The service's end of the answers is gone: what it gave is
        // written to stdout before the server exits.
        let _ = framing.await;
        drop(modes);
        served
    }
}

impl Server {
    /// One `tools/call`, the whole way through the dispatcher.
    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        self.approver.connect(&context.peer);
        let mut args = request.arguments.unwrap_or_default();
        let checked = match self.client_roots(&context.peer).await {
            Ok(client) => self
                .roots
                .rewrite(&mut args, client.as_ref().map(|c| c.as_slice())),
            Err(why) => Err(why),
        };
        if let Err(why) = checked {
            tracing::warn!(tool = %request.name, "refused: {why}");
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "denied: {why}"
            ))]));
        }
        let arguments = serde_json::to_string(&args)
            .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
        let call = ToolCall {
            id: format!("mcp-{}", self.next_id.fetch_add(1, Ordering::Relaxed)),
            name: request.name.to_string(),
            arguments,
            model_id: None,
        };
        let mut sink = corral_core::call::LogSink;
        let outcome = self
            .dispatcher
            .run_one(&call, &mut sink, &context.ct)
            .await
            .map_err(|e| ErrorData::internal_error(format!("{e:#}"), None))?;
        // The tool's next call starts in an instance made once this answer
        // is written, while the client reads it (each instance still
        // serves one call).
        if let Some(plugin) = self.dispatcher.plugins().plugin_for(&call.name) {
            self.after_answer.push(plugin);
        }
        Ok(call_result(outcome))
    }
}

impl Server {
    /// The client's roots when it offers them, asked once and kept until it
    /// says they changed. A client that offers roots and cannot tell them
    /// gets no call run: which paths it meant to allow is unknown.
    #[allow(
        deprecated,
        reason = "MCP 2025-11-25 has roots (SEP-2577 deprecates them later)"
    )]
    async fn client_roots(
        &self,
        peer: &Peer<RoleServer>,
    ) -> Result<Option<Arc<Vec<PathBuf>>>, String> {
        let offers = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !offers {
            return Ok(None);
        }
        let mut cached = self.client_roots.lock().await;
        if let Some(roots) = cached.as_ref() {
            return Ok(Some(roots.clone()));
        }
        let listed = match tokio::time::timeout(ROOTS_WAIT, peer.list_roots()).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(e)) => {
                return Err(format!(
                    "this MCP client offers roots but its answer to `roots/list` failed ({e}); \
                     corral does not run a call without knowing which directories the client \
                     allows. Fix the client's roots, or use a client that does not offer them"
                ));
            }
            Err(_) => {
                return Err(format!(
                    "this MCP client offers roots but did not answer `roots/list` within {} s; \
                     corral does not run a call without knowing which directories the client \
                     allows",
                    ROOTS_WAIT.as_secs()
                ));
            }
        };
        let dirs = Arc::new(paths::root_dirs(
            listed.roots.iter().map(|r| r.uri.as_str()),
        ));
        let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        tracing::info!("the MCP client's roots: {}", shown.join(", "));
        *cached = Some(dirs.clone());
        Ok(Some(dirs))
    }

    async fn forget_client_roots(&self) {
        *self.client_roots.lock().await = None;
    }
}

/// What the server says about itself in `initialize`: tools, and logging
/// (how slow start-up work is told to the client).
#[allow(
    deprecated,
    reason = "MCP 2025-11-25 has logging (SEP-2577 deprecates it later)"
)]
fn server_info() -> ServerConfig {
    let capabilities = ServerCapabilities::builder()
        .enable_tools()
        .enable_logging()
        .build();
    let mut info = ServerConfig::new(capabilities)
        .with_server_info(Implementation::new("corral", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "corral's tools, each run in a WebAssembly sandbox that grants it only what its \
             manifest entry names. Paths are relative to the workspace root. corral's permission \
             policy decides every call; a refused call says why and how to allow it.",
        );
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info
}

/// The handler methods the server answers alike whether its plugins have
/// loaded or not: its description, and `logging/setLevel`, which changes
/// nothing (log notifications are `info`).
macro_rules! answered_alike {
    () => {
        fn get_info(&self) -> ServerConfig {
            server_info()
        }

        #[allow(
            deprecated,
            reason = "MCP 2025-11-25 has logging (SEP-2577 deprecates it later)"
        )]
        async fn set_level(
            &self,
            _request: SetLevelRequestParams,
            _context: RequestContext<RoleServer>,
        ) -> Result<(), ErrorData> {
            Ok(())
        }
    };
}

impl ServerHandler for Server {
    answered_alike!();

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        self.forget_client_roots().await;
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await.map(Into::into)
    }
}

/// The server while its plugins load: `initialize` needs none of them.
struct Loading {
    loaded:
        futures::future::Shared<futures::future::BoxFuture<'static, Result<Arc<Server>, String>>>,
    client: Arc<Mutex<Client>>,
}

/// Where log notifications go: the client once it has initialized; until
/// then they wait (one or two per plugin compiled, no more).
#[derive(Default)]
struct Client {
    handle: Option<tokio::runtime::Handle>,
    peer: Option<Peer<RoleServer>>,
    pending: Vec<String>,
}

impl Client {
    fn log(&mut self, text: String) {
        match &self.peer {
            Some(peer) => self.notify(peer.clone(), text),
            None => self.pending.push(text),
        }
    }

    fn connect(&mut self, peer: Peer<RoleServer>) {
        for text in std::mem::take(&mut self.pending) {
            self.notify(peer.clone(), text);
        }
        self.peer = Some(peer);
    }

    /// Sends `text` to the client as an `info` log notification.
    #[allow(
        deprecated,
        reason = "MCP 2025-11-25 has logging (SEP-2577 deprecates it later)"
    )]
    fn notify(&self, peer: Peer<RoleServer>, text: String) {
        let Some(handle) = &self.handle else { return };
        handle.spawn(async move {
            let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, text.into())
                .with_logger("corral");
            let _ = peer.notify_logging_message(param).await;
        });
    }
}

impl Loading {
    async fn server(&self) -> Result<Arc<Server>, ErrorData> {
        self.loaded
            .clone()
            .await
            .map_err(|e| ErrorData::internal_error(e, None))
    }
}

impl ServerHandler for Loading {
    answered_alike!();

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Ok(mut client) = self.client.lock() {
            client.connect(context.peer);
        }
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.server().await?.list_tools(request, context).await
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        // Before the load ends no roots were asked for.
        if let Some(Ok(server)) = futures::FutureExt::now_or_never(self.loaded.clone()) {
            server.forget_client_roots().await;
        }
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        // Before the load ends nothing is known; `call_tool` waits for it.
        futures::FutureExt::now_or_never(self.loaded.clone())
            .and_then(Result::ok)
            .and_then(|s| s.get_tool(name))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.server().await?.call_tool(request, context).await
    }
}

/// A tool spec as MCP lists it, its effects as annotations (hints for the
/// client; corral's policy decides what runs).
pub fn mcp_tool(spec: &ToolSpec) -> Tool {
    let schema = match &spec.input_schema {
        serde_json::Value::Object(o) => o.clone(),
        // A plugin's schema is checked at load; an empty object schema
        // keeps `tools/list` valid should one ever be something else.
        _ => serde_json::Map::from_iter([("type".to_owned(), "object".into())]),
    };
    let has = |e: Effect| spec.effects.contains(&e);
    // A tool that runs programs and declares only that (`run_command`) says
    // nothing about what they touch, so it may change anything; one that
    // declares reading beside it and no writing (`git_status`) runs its
    // program to read, as its grants hold it to.
    let may_change = has(Effect::Write) || (has(Effect::Execute) && !has(Effect::Read));
    let annotations = ToolAnnotations::new()
        .read_only(!may_change)
        .destructive(may_change)
        .open_world(has(Effect::Network));
    Tool::new(spec.name.clone(), spec.description.clone(), schema).with_annotations(annotations)
}

/// A dispatched call's outcome as a `tools/call` result: the text once, in
/// `content`, and `isError` for a refusal, invalid arguments or a failure.
/// No tool corral serves declares an `outputSchema`, so no
/// `structuredContent` is sent: a client that prefers it to `content`
/// (Codex) reads `content` when it is absent, and sending the text in both
/// doubled every read on the wire. A tool's data (`read_file`'s line count)
/// is about its text, which says the same in words.
pub fn call_result(outcome: ToolOutcome) -> CallToolResult {
    let content = vec![ContentBlock::text(outcome.content)];
    if outcome.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// The property of the approval form that widens an approval to the rest of
/// the session.
const FOR_SESSION: &str = "for_session";

/// Puts `ask` decisions to the MCP client's user with `elicitation/create`:
/// accept runs the call (ticking `for_session` also approves what the
/// request's `session_covers` names, until the server stops), decline or
/// cancel refuses it. A client that did not declare the elicitation
/// capability cannot ask anyone, so the call is refused with a message that
/// names the ways to allow it.
#[derive(Default)]
pub struct ElicitApprover {
    /// The client, known from its first request (one client per stdio server).
    peer: Mutex<Option<Peer<RoleServer>>>,
}

impl std::fmt::Debug for ElicitApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitApprover").finish_non_exhaustive()
    }
}

impl ElicitApprover {
    fn connect(&self, peer: &Peer<RoleServer>) {
        if let Ok(mut slot) = self.peer.lock()
            && slot.is_none()
        {
            *slot = Some(peer.clone());
        }
    }

    fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.lock().ok().and_then(|p| p.clone())
    }
}

impl Approver for ElicitApprover {
    fn wants_preview(&self) -> bool {
        self.peer().is_some_and(|p| {
            p.supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        })
    }

    fn approve(&self, request: &ApprovalRequest) -> BoxFuture<'static, ApprovalAnswer> {
        let peer = self.peer().filter(|p| {
            p.supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
        });
        let Some(peer) = peer else {
            let why = cannot_ask(request);
            return Box::pin(async move { ApprovalAnswer::Deny { reason: Some(why) } });
        };
        let params = elicitation(request);
        let tool = request.call.name.clone();
        Box::pin(async move {
            match peer.create_elicitation(params).await {
                Ok(result) => match result.action {
                    ElicitationAction::Accept => {
                        let for_session = result
                            .content
                            .as_ref()
                            .and_then(|c| c.get(FOR_SESSION))
                            .and_then(serde_json::Value::as_bool)
                            .unwrap_or(false);
                        if for_session {
                            ApprovalAnswer::ApproveForSession
                        } else {
                            ApprovalAnswer::Approve
                        }
                    }
                    ElicitationAction::Decline => ApprovalAnswer::Deny {
                        reason: Some(format!(
                            "the user declined this `{tool}` call when the MCP client asked"
                        )),
                    },
                    // Cancel, and any answer a later protocol adds: not a yes.
                    _ => ApprovalAnswer::Deny {
                        reason: Some(format!(
                            "the user dismissed the approval request for this `{tool}` call without approving it"
                        )),
                    },
                },
                Err(e) if client_went_away(&e) => ApprovalAnswer::Deny {
                    reason: Some(format!(
                        "this `{tool}` call was not run: it needs the user's approval, and the \
                         MCP client went away before answering the approval request, so the \
                         elicitation got no answer"
                    )),
                },
                Err(e) => ApprovalAnswer::Deny {
                    reason: Some(format!(
                        "this `{tool}` call needs the user's approval and the MCP client could not ask \
                         ({e}); {}",
                        HOW_TO_ALLOW
                    )),
                },
            }
        })
    }

    fn approved_by(&self) -> &'static str {
        "approved by the user through the MCP client"
    }
}

/// Whether `error` means the client is gone: it closed its input with the
/// request unanswered (answered for it by the framing), or the connection
/// ended before the request was sent.
fn client_went_away(error: &rmcp::ServiceError) -> bool {
    match error {
        rmcp::ServiceError::TransportClosed => true,
        rmcp::ServiceError::McpError(e) => e.code.0 == framing::CLIENT_GONE,
        _ => false,
    }
}

/// The ways to let a call run without asking, for refusals.
const HOW_TO_ALLOW: &str = "to let such calls run without asking, restart `corral mcp serve` with \
     --mode auto-edit (writes) or --mode full-auto (commands and network too), or add an allow rule \
     to [policy] allow in corral.toml, e.g. allow = [\"write_file(docs/**)\"]";

fn cannot_ask(request: &ApprovalRequest) -> String {
    format!(
        "`{}` needs the user's approval ({}) and this MCP client cannot ask for it (it did not \
         declare the elicitation capability); {HOW_TO_ALLOW}",
        request.call.name, request.reason
    )
}

/// The approval form: what would run (the whole call, made visible, never
/// cut: what is approved is what was shown), why corral asks, the diff, and
/// one checkbox to approve for the session.
fn elicitation(request: &ApprovalRequest) -> ElicitRequestParams {
    let mut message = format!(
        "corral asks before running `{}` ({}).\nThe whole call:\n{}\n",
        crate::terminal::visible(&request.call.name),
        crate::terminal::visible(&request.reason),
        crate::terminal::visible_arguments(&request.call.arguments)
    );
    if let Some(diff) = &request.preview {
        message.push_str("\nIt would change:\n");
        message.push_str(&crate::terminal::visible(diff));
        if !diff.ends_with('\n') {
            message.push('\n');
        }
    }
    message.push_str("\nAccept to run it, decline to refuse it.");
    let schema = ElicitationSchema::builder()
        .optional_bool_with(FOR_SESSION, |b| {
            b.title(format!(
                "Also allow {} for this session",
                request.session_covers
            ))
            .with_default(false)
        })
        .build()
        .unwrap_or_else(|_| ElicitationSchema::new(Default::default()));
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    }
}
