//! The plugin runtime: one wasmtime [`Engine`], components compiled once and
//! cached on disk, an `InstancePre` per plugin, and a fresh `Store` and
//! instance for every call.
//!
//! Every call runs under the plugin's grants (directories, environment
//! variables, network hosts) and limits (wall-clock deadline through epoch
//! interruption, linear-memory cap, output cap, host-call budget). A trap,
//! a timeout or a limit ends that call with a [`ToolError`]; the instance is
//! dropped with its store, so the next call starts clean.

mod budget;
mod cache;
mod imports;
mod effects;
mod host;
mod http;
mod limits;
mod loader;
mod stdio;

pub use budget::EVENT_CHANNEL_CAPACITY;
pub use cache::CacheOutcome;
pub use imports::{Capability, classify};

use crate::manifest::{Access, Manifest, PluginDecl, Source};
use anyhow::Context as _;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{CallHook, Config, Engine, Store, Trap};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "tool-plugin",
        imports: {
            "corral:plugin/process.run": async,
            "corral:plugin/files.read-files": trappable,
        },
        exports: { default: async },
    });
}

mod provider_generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "provider-plugin",
        imports: { "corral:plugin/stream.emit": async | trappable },
        exports: { default: async },
        with: {
            "corral:plugin/host": super::generated::corral::plugin::host,
            "corral:plugin/types": super::generated::corral::plugin::types,
        },
    });
}

mod files;
mod fsguard;
mod process;
mod provider;
mod stream;

pub use crate::protocol::{
    AssistantMessage, ChatRequest, ChatResponse, Effect, FinishReason, Message, ProviderError,
    StreamEvent, ToolCall, ToolResult, ToolSpec, Usage,
};

use generated::ToolPluginPre;
use generated::exports::corral::plugin::tool as wit;
use provider_generated::ProviderPluginPre;

/// How often the epoch ticks; deadlines are rounded up to it.
const TICK: Duration = Duration::from_millis(10);
/// Stores that may be alive at once (concurrent calls).
const MAX_CONCURRENT_CALLS: u32 = 64;

/// Bytes of a linear memory kept mapped between calls (see `Runtime::new`).
const KEEP_RESIDENT: usize = 4 << 20;

/// Whether the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7 and later).
fn pagemap_scan_available() -> bool {
    let uname = rustix::system::uname();
    kernel_at_least(uname.release().to_str().unwrap_or(""), (6, 7))
}

/// Whether a kernel release such as `6.18.44-fc-v769` is at least `want`
/// (major, minor).
fn kernel_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= want
}

/// What a successful call returns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolOutput {
    /// Text for the model.
    pub content: String,
    /// The tool reports a failure in `content`.
    pub is_error: bool,
    /// Structured data, if the tool gave any.
    pub data: Option<serde_json::Value>,
}

/// Why a call produced no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum ToolError {
    /// No loaded plugin exports this tool.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The arguments were not valid for the tool.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool failed; the model may try something else.
    #[error("{0}")]
    Failed(String),
    /// The tool failed and asks the agent to stop.
    #[error("fatal: {0}")]
    Fatal(String),
    /// The sandbox ended the call: trap, timeout or limit. The message says which.
    #[error("{0}")]
    Sandbox(String),
}

impl From<wit::ToolError> for ToolError {
    fn from(e: wit::ToolError) -> Self {
        match e {
            wit::ToolError::InvalidArguments(m) => ToolError::InvalidArguments(m),
            wit::ToolError::UnknownTool(m) => ToolError::UnknownTool(m),
            wit::ToolError::Failed(m) => ToolError::Failed(m),
            wit::ToolError::Fatal(m) => ToolError::Fatal(m),
        }
    }
}

impl ToolError {
    /// Whether the agent's run should stop.
    pub fn is_fatal(&self) -> bool {
        matches!(self, ToolError::Fatal(_))
    }
}

/// A plugin that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoadError(pub String);

/// Settings of the runtime itself.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Where compiled components are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
}

impl RuntimeOptions {
    /// The user's cache, `$XDG_CACHE_HOME/corral/components`.
    pub fn user() -> Self {
        Self {
            cache_dir: dirs::cache_dir().map(|d| d.join("corral").join("components")),
        }
    }
}

/// The engine, the linker and the compile cache, shared by every plugin.
pub struct Runtime {
    engine: Engine,
    linker: Linker<State>,
    cache: cache::Cache,
}

impl Runtime {
    /// Creates the engine (with the pooling allocator and epoch interruption)
    /// and starts the epoch ticker.
    pub fn new(options: RuntimeOptions) -> anyhow::Result<Self> {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_CONCURRENT_CALLS)
            .total_core_instances(MAX_CONCURRENT_CALLS * 8)
            .total_memories(MAX_CONCURRENT_CALLS * 2)
            .total_tables(MAX_CONCURRENT_CALLS * 8)
            .total_stacks(MAX_CONCURRENT_CALLS)
            .max_memory_size(4 << 30)
            .max_component_instance_size(1 << 20)
            .max_core_instance_size(1 << 20);
        if pagemap_scan_available() {
            // Reset a used slot by restoring only the pages the last call
            // wrote (found with the PAGEMAP_SCAN ioctl) instead of handing
            // the memory back to the kernel: the next call takes no page
            // faults there and no other core's TLB needs flushing. This
            // halves the cost of a trivial call. Without the ioctl wasmtime
            // would memset the whole kept range on every call, so older
            // kernels keep the default.
            pool.linear_memory_keep_resident(KEEP_RESIDENT)
                .table_keep_resident(64 << 10)
                .pagemap_scan(wasmtime::Enabled::Auto);
        }
        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .max_wasm_stack(1 << 20)
            .async_stack_size(2 << 20)
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(anyhow::Error::from)?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(anyhow::Error::from)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)?;
        generated::corral::plugin::host::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
            .map_err(anyhow::Error::from)?;
        generated::corral::plugin::process::add_to_linker::<State, HasSelf<State>>(
            &mut linker,
            |s| s,
        )
        .map_err(anyhow::Error::from)?;
        generated::corral::plugin::files::add_to_linker::<State, HasSelf<State>>(
            &mut linker,
            |s| s,
        )
        .map_err(anyhow::Error::from)?;
        provider_generated::corral::plugin::stream::add_to_linker::<State, HasSelf<State>>(
            &mut linker,
            |s| s,
        )
        .map_err(anyhow::Error::from)?;
        fsguard::add_to_linker(&mut linker).map_err(anyhow::Error::from)?;

        // The ticker lives as long as the engine, not the `Runtime`: loaded
        // plugins hold the engine and outlive the runtime that loaded them,
        // and their deadlines depend on it.
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("corral-epoch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .context("cannot start the epoch thread")?;

        let cache = cache::Cache::new(&engine, options.cache_dir);
        Ok(Self {
            engine,
            linker,
            cache,
        })
    }

    /// Compiles (or loads from the cache) every plugin of `manifest`, checks
    /// its imports against its grants, asks it for its tools and checks that
    /// no tool name is exported twice. Entries with the same component share
    /// one compiled copy, and everything that can be checked without running
    /// a plugin is checked for every entry before any is instantiated.
    pub async fn load(&self, manifest: &Manifest) -> Result<Plugins, LoadError> {
        loader::load(self, manifest).await
    }

    /// Loads one plugin.
    pub async fn load_plugin(
        &self,
        decl: &PluginDecl,
        manifest: &Manifest,
    ) -> Result<Plugin, LoadError> {
        let mut plugin = self.prepare(decl, manifest, &mut loader::Components::default())?;
        plugin.tools = plugin.describe().await?;
        Ok(plugin)
    }

    /// Everything of loading one plugin short of running it: its component
    /// (shared through `components`), checked against its grants and linked.
    fn prepare(
        &self,
        decl: &PluginDecl,
        manifest: &Manifest,
        components: &mut loader::Components,
    ) -> Result<Plugin, LoadError> {
        let name = &decl.name;
        let loaded = components.get(self, decl, manifest)?;
        imports::check(decl, &loaded.imports).map_err(LoadError)?;
        let kind = components.link(self, decl, &loaded)?;
        let (sha256, imports, outcome) = (loaded.sha256, loaded.imports, loaded.outcome);
        Ok(Plugin {
            engine: self.engine.clone(),
            shared: Arc::new(Shared {
                guard: fsguard::Guard::new(Some(&manifest.workspace), &decl.source)
                    .map(Arc::new)
                    .map_err(|e| {
                        LoadError(format!(
                            "plugin `{name}`: the workspace {} cannot be opened: {e}",
                            manifest.workspace.display()
                        ))
                    })?,
                name: name.as_str().into(),
                config: decl.config.clone(),
                fs: decl.fs.clone().into(),
                exec: (!decl.exec.is_empty()).then(|| {
                    Arc::new(crate::exec::Exec {
                        plugin: name.clone(),
                        grants: decl.exec.clone(),
                        workspace: manifest.workspace.clone(),
                        env: decl.env.clone(),
                        // stdout and stderr each get a quarter of the call's output
                        // limit, so a program's capped output plus the tool's own
                        // text still fits in what the plugin may return.
                        output_cap: usize::try_from(decl.limits.output_kb.saturating_mul(1024) / 4)
                            .unwrap_or(usize::MAX),
                        require_os_sandbox: manifest.require_os_sandbox,
                    })
                }),
            }),
            decl: decl.clone(),
            sha256,
            imports,
            cache: outcome,
            kind,
            tools: Vec::new(),
        })
    }

    /// Reads a component's imports, exports and tools without granting it
    /// anything: it is described in a store with no directories, no
    /// environment and no network.
    pub async fn inspect(&self, bytes: &[u8]) -> Result<Inspection, LoadError> {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let (component, _) = self
            .cache
            .load(&self.engine, bytes, &sha256)
            .map_err(|e| LoadError(format!("not a valid WebAssembly component: {e:#}")))?;
        let imports = import_names(&self.engine, &component);
        let exports = component
            .component_type()
            .exports(&self.engine)
            .map(|(n, _)| n.to_owned())
            .collect();
        let decl = PluginDecl {
            name: "inspected".into(),
            source: Source::Builtin("inspected".into()),
            fs: Vec::new(),
            net: Vec::new(),
            env: Vec::new(),
            secrets: Vec::new(),
            exec: Vec::new(),
            limits: Default::default(),
            config: BTreeMap::new(),
            origin: crate::manifest::Origin {
                file: "(inspect)".into(),
                line: 0,
            },
        };
        let tools = match self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| format!("{e:#}"))
            .and_then(Kind::of)
        {
            Ok(Kind::Provider(_)) => Ok(Vec::new()),
            Ok(kind) => {
                let plugin = Plugin {
                    engine: self.engine.clone(),
                    shared: Arc::new(Shared {
                        guard: fsguard::Guard::new(None, &decl.source)
                            .map(Arc::new)
                            .map_err(|e| LoadError(e.to_string()))?,
                        exec: None,
                        name: "inspected".into(),
                        config: BTreeMap::new(),
                        fs: Arc::new([]),
                    }),
                    decl,
                    sha256: sha256.clone(),
                    imports: imports.clone(),
                    cache: CacheOutcome::Compiled,
                    kind,
                    tools: Vec::new(),
                };
                plugin.describe().await.map_err(|e| e.0)
            }
            Err(e) => Err(e),
        };
        Ok(Inspection {
            sha256,
            imports,
            exports,
            tools,
        })
    }
}

/// What `corral plugins inspect` reports.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// SHA-256 of the component file.
    pub sha256: String,
    /// Every interface it imports.
    pub imports: Vec<String>,
    /// Every interface it exports.
    pub exports: Vec<String>,
    /// Its tools, or why they could not be read.
    pub tools: Result<Vec<ToolSpec>, String>,
}

fn import_names(engine: &Engine, component: &Component) -> Vec<String> {
    let mut names: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(n, _)| n.to_owned())
        .collect();
    names.sort();
    names
}

/// What the host-side imports of a call can see of their plugin.
pub(crate) struct Shared {
    pub(crate) exec: Option<Arc<crate::exec::Exec>>,
    pub(crate) name: Arc<str>,
    pub(crate) config: BTreeMap<String, String>,
    /// Its directory grants, shared by every call's `files` interface.
    pub(crate) fs: Arc<[crate::manifest::FsGrant]>,
    /// What its filesystem calls may not touch.
    pub(crate) guard: Arc<fsguard::Guard>,
}

/// The data of one call's store.
pub(crate) struct State {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    egress: http::Egress,
    table: ResourceTable,
    plugin: Arc<Shared>,
    limiter: limits::CallLimiter,
    host_calls_left: u64,
    host_calls_hit: bool,
    /// The wall-clock deadline ended the call.
    timed_out: bool,
    events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
    budget: budget::CallBudget,
    dirs: files::Dirs,
    /// What this call may use of its plugin's grants.
    caps: effects::CallCaps,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

/// What a plugin provides, from its exports.
#[derive(Clone)]
enum Kind {
    Tool(ToolPluginPre<State>),
    Provider(ProviderPluginPre<State>),
}

impl Kind {
    fn of(pre: wasmtime::component::InstancePre<State>) -> Result<Self, String> {
        match ToolPluginPre::new(pre.clone()) {
            Ok(t) => Ok(Kind::Tool(t)),
            Err(tool_err) => ProviderPluginPre::new(pre)
                .map(Kind::Provider)
                .map_err(|_| format!("{tool_err:#}")),
        }
    }
}

/// A loaded plugin, ready to be called.
pub struct Plugin {
    engine: Engine,
    shared: Arc<Shared>,
    decl: PluginDecl,
    sha256: String,
    imports: Vec<String>,
    cache: CacheOutcome,
    kind: Kind,
    tools: Vec<ToolSpec>,
}

impl Plugin {
    /// Its manifest entry.
    pub fn decl(&self) -> &PluginDecl {
        &self.decl
    }

    /// SHA-256 of its component.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The interfaces it imports.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Whether it was compiled now or loaded from the cache.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.cache
    }

    /// Its tools (none for a provider plugin).
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    /// Whether it is a provider plugin (exports `corral:plugin/provider`).
    pub fn is_provider(&self) -> bool {
        matches!(self.kind, Kind::Provider(_))
    }

    async fn describe(&self) -> Result<Vec<ToolSpec>, LoadError> {
        let name = &self.decl.name;
        let Kind::Tool(pre) = &self.kind else {
            return Ok(Vec::new());
        };
        let pre = pre.clone();
        let specs = self
            .run(effects::CallCaps::Describe, None, move |store| {
                Box::pin(async move {
                    let instance = pre.instantiate_async(&mut *store).await?;
                    instance
                        .corral_plugin_tool()
                        .call_describe(&mut *store)
                        .await
                })
            })
            .await
            .map_err(|e| LoadError(format!("plugin `{name}`: `describe` failed: {e}")))?;
        let mut tools = Vec::new();
        for spec in specs {
            let schema: serde_json::Value =
                serde_json::from_str(&spec.input_schema).map_err(|e| {
                    LoadError(format!(
                        "plugin `{name}`: tool `{}` has an input schema that is not JSON: {e}",
                        spec.name
                    ))
                })?;
            tools.push(ToolSpec {
                name: spec.name,
                description: spec.description,
                input_schema: schema,
                effects: spec
                    .effects
                    .into_iter()
                    .map(|e| match e {
                        generated::corral::plugin::types::Effect::Read => Effect::Read,
                        generated::corral::plugin::types::Effect::Write => Effect::Write,
                        generated::corral::plugin::types::Effect::Execute => Effect::Execute,
                        generated::corral::plugin::types::Effect::Network => Effect::Network,
                    })
                    .collect(),
                warnings: Vec::new(),
            });
        }
        budget::vet_tools(
            name,
            &self.decl.origin.to_string(),
            &mut tools,
            self.decl.limits.output_kb,
        )?;
        Ok(tools)
    }

    /// Runs one call of `tool` with JSON `arguments` in a fresh sandbox.
    pub async fn call(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
    ) -> Result<ToolOutput, ToolError> {
        let spec = self
            .tools
            .iter()
            .find(|t| t.name == tool)
            .ok_or_else(|| ToolError::UnknownTool(tool.to_owned()))?;
        let call = wit::ToolCall {
            id: call_id.to_owned(),
            name: tool.to_owned(),
            arguments: arguments.to_owned(),
        };
        let output_cap = self.decl.limits.output_kb.saturating_mul(1024);
        tracing::debug!(plugin = %self.decl.name, tool, "call started");
        let Kind::Tool(pre) = &self.kind else {
            return Err(ToolError::UnknownTool(tool.to_owned()));
        };
        let pre = pre.clone();
        // The same declared effects the permission policy judged this call by.
        let caps = effects::CallCaps::Invoke {
            tool: tool.to_owned(),
            effects: spec.effects.clone(),
        };
        let result = self
            .run(caps, None, move |store| {
                Box::pin(async move {
                    let instance = pre.instantiate_async(&mut *store).await?;
                    instance
                        .corral_plugin_tool()
                        .call_invoke(&mut *store, &call)
                        .await
                })
            })
            .await?;
        match result {
            Ok(out) => {
                let size = out.content.len() + out.data.as_ref().map_or(0, String::len);
                if size as u64 > output_cap {
                    return Err(ToolError::Sandbox(format!(
                        "plugin `{}`: the output of `{tool}` ({size} bytes) exceeds the limit of {} KiB; \
                         ask for less output or raise limits.output_kb",
                        self.decl.name, self.decl.limits.output_kb
                    )));
                }
                let data = match out.data {
                    Some(d) => Some(serde_json::from_str(&d).map_err(|e| {
                        ToolError::Failed(format!("`{tool}` returned data that is not JSON: {e}"))
                    })?),
                    None => None,
                };
                Ok(ToolOutput {
                    content: out.content,
                    is_error: out.is_error,
                    data,
                })
            }
            Err(e) => Err(self.capped(e.into())),
        }
    }

    /// The unified diff `tool` would apply with these arguments, computed by
    /// the plugin before anything is approved: with its directories mounted
    /// read-only, no programs and no network, so a preview can change nothing
    /// and send nothing anywhere. `None` when the tool changes no file or
    /// cannot tell.
    pub async fn preview(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
    ) -> Result<Option<String>, ToolError> {
        let Kind::Tool(pre) = &self.kind else {
            return Err(ToolError::UnknownTool(tool.to_owned()));
        };
        let pre = pre.clone();
        let call = wit::ToolCall {
            id: call_id.to_owned(),
            name: tool.to_owned(),
            arguments: arguments.to_owned(),
        };
        let caps = effects::CallCaps::Preview {
            tool: tool.to_owned(),
        };
        let result = self
            .run(caps, None, move |store| {
                Box::pin(async move {
                    let instance = pre.instantiate_async(&mut *store).await?;
                    instance
                        .corral_plugin_tool()
                        .call_preview(&mut *store, &call)
                        .await
                })
            })
            .await?;
        match result {
            Ok(Some(diff))
                if diff.len() as u64 > self.decl.limits.output_kb.saturating_mul(1024) =>
            {
                Err(ToolError::Sandbox(format!(
                    "plugin `{}`: the preview of `{tool}` ({} bytes) exceeds the limit of {} KiB; \
                     raise limits.output_kb to review such a change",
                    self.decl.name,
                    diff.len(),
                    self.decl.limits.output_kb
                )))
            }
            Ok(preview) => Ok(preview),
            Err(e) => Err(self.capped(e.into())),
        }
    }

    /// `err` with its text cut to the output limit: error text reaches the
    /// terminal, the model and the session log like output does.
    fn capped(&self, err: ToolError) -> ToolError {
        let cap = self.decl.limits.output_kb.saturating_mul(1024);
        let cut = |m: String| budget::cap_text(m, cap, "error text");
        match err {
            ToolError::UnknownTool(m) => ToolError::UnknownTool(cut(m)),
            ToolError::InvalidArguments(m) => ToolError::InvalidArguments(cut(m)),
            ToolError::Failed(m) => ToolError::Failed(cut(m)),
            ToolError::Fatal(m) => ToolError::Fatal(cut(m)),
            ToolError::Sandbox(m) => ToolError::Sandbox(cut(m)),
        }
    }

    /// Builds a fresh sandboxed store, instantiates the plugin, runs `f` and
    /// turns traps and limits into [`ToolError::Sandbox`]. `caps` narrows the
    /// plugin's grants to what this kind of call may use.
    async fn run<R, F>(
        &self,
        caps: effects::CallCaps,
        events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
        f: F,
    ) -> Result<R, ToolError>
    where
        R: Send + 'static,
        F: for<'a> FnOnce(
                &'a mut Store<State>,
            ) -> std::pin::Pin<
                Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
            > + Send,
    {
        let name = &self.decl.name;
        let limits = self.decl.limits;
        let stdout = stdio::LogPipe::default();
        let stderr = stdio::LogPipe::default();
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone()).stderr(stderr.clone());
        // File operations are short; running them on this thread instead of
        // hopping to tokio's blocking pool per syscall is what makes a
        // sandboxed grep close to a native one.
        wasi.allow_blocking_current_thread(true);
        for grant in &self.decl.fs {
            // The path was canonical when the manifest loaded; if a directory
            // on it has since become a symlink (a program run by a plugin can
            // do that inside the workspace), it may lead anywhere. The
            // workspace root itself is out of their reach.
            if grant.path != "." {
                files::check_unmoved(&grant.host_path).map_err(|e| {
                ToolError::Sandbox(format!(
                    "plugin `{name}`: granted directory {} ({}) is no longer what the manifest granted: {e}; \
                     restore it or reload corral",
                    grant.path,
                    grant.host_path.display()
                ))
                })?;
            }
            let perms = if !caps.writes() || grant.access == Access::Ro {
                FsPerms::ReadOnly
            } else {
                FsPerms::ReadWrite
            };
            wasi.preopened_dir(&grant.host_path, &grant.guest_path, perms)
                .map_err(|e| {
                    ToolError::Sandbox(format!(
                        "plugin `{name}`: cannot open granted directory {}: {e}",
                        grant.host_path.display()
                    ))
                })?;
        }
        for var in &self.decl.env {
            if let Ok(value) = std::env::var(var) {
                wasi.env(var, value);
            }
        }
        let mut http_ctx = WasiHttpCtx::new();
        http_ctx.set_field_size_limit(budget::FIELDS_SIZE_LIMIT);
        let mut table = ResourceTable::new();
        table.set_max_capacity(budget::MAX_HOST_OBJECTS);
        let state = State {
            wasi: wasi.build(),
            http: http_ctx,
            egress: http::Egress {
                plugin: self.shared.name.clone(),
                allow: self.decl.net.clone().into(),
                secrets: self.decl.secrets.clone().into(),
                refused: caps.network(name).err(),
            },
            table,
            budget: budget::CallBudget::new(limits.output_kb.saturating_mul(1024)),
            plugin: self.shared.clone(),
            limiter: limits::CallLimiter {
                memory_bytes: usize::try_from(limits.memory_mb.saturating_mul(1 << 20))
                    .unwrap_or(usize::MAX),
                memory_hit: false,
            },
            host_calls_left: limits.host_calls,
            host_calls_hit: false,
            timed_out: false,
            events,
            dirs: files::Dirs::new(self.shared.fs.clone()),
            caps,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every tick yields to the executor, so a call in a busy loop can
        // still be cancelled (Ctrl-C drops its future) between ticks; the
        // wall-clock deadline traps.
        let deadline = Instant::now() + Duration::from_millis(limits.timeout_ms);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            if Instant::now() >= deadline {
                ctx.data_mut().timed_out = true;
                return Err(wasmtime::format_err!("deadline reached"));
            }
            Ok(wasmtime::UpdateDeadline::Yield(1))
        });
        store.call_hook(|mut ctx, hook| {
            if matches!(hook, CallHook::CallingHost) {
                let state = ctx.data_mut();
                if state.host_calls_left == 0 {
                    state.host_calls_hit = true;
                    return Err(wasmtime::format_err!("host-call budget exhausted"));
                }
                state.host_calls_left -= 1;
            }
            Ok(())
        });

        let deadline = Duration::from_millis(limits.timeout_ms);
        let outcome = tokio::time::timeout(deadline + TICK * 5, f(&mut store)).await;

        let log_text = |pipe: &stdio::LogPipe, stream: &str| {
            let text = pipe.text();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let line = crate::terminal::inert(line);
                tracing::info!(target: "corral::plugin", plugin = %name, stream, "{line}");
            }
        };
        log_text(&stdout, "stdout");
        log_text(&stderr, "stderr");
        if store.data().budget.log_dropped > 0 {
            tracing::warn!(
                target: "corral::plugin",
                plugin = %name,
                "dropped {} bytes of log lines over the budget of {} KiB per call",
                store.data().budget.log_dropped,
                budget::LOG_BYTES_PER_CALL / 1024
            );
        }

        tracing::debug!(
            plugin = %name,
            host_calls = limits.host_calls - store.data().host_calls_left,
            "call finished"
        );
        let err = match outcome {
            Err(_elapsed) => {
                return Err(ToolError::Sandbox(format!(
                    "plugin `{name}`: the call timed out after {} ms (limits.timeout_ms)",
                    limits.timeout_ms
                )));
            }
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(err)) => err,
        };
        let state = store.data();
        let why = if state.timed_out {
            format!(
                "the call timed out after {} ms (limits.timeout_ms)",
                limits.timeout_ms
            )
        } else if let Some(why) = budget::explain(&state.budget, &err, limits.output_kb) {
            why
        } else if state.limiter.memory_hit {
            format!(
                "the call exceeded the memory limit of {} MiB (limits.memory_mb)",
                limits.memory_mb
            )
        } else if state.host_calls_hit {
            format!(
                "the call exceeded its budget of {} host calls (limits.host_calls)",
                limits.host_calls
            )
        } else {
            match err.downcast_ref::<Trap>() {
                Some(Trap::Interrupt) => format!(
                    "the call timed out after {} ms (limits.timeout_ms)",
                    limits.timeout_ms
                ),
                Some(Trap::StackOverflow) => {
                    "the call overflowed its stack (deep recursion)".to_owned()
                }
                Some(trap) => format!("the plugin crashed ({trap})"),
                None => format!("the call failed: {err:#}"),
            }
        };
        let tail = budget::without_backtrace_hint(&stderr.tail(4));
        let detail = if tail.is_empty() {
            String::new()
        } else {
            format!("; its last output: {tail}")
        };
        Err(ToolError::Sandbox(format!(
            "plugin `{name}`: {why}{detail}"
        )))
    }
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|p| &p.decl.name))
            .finish()
    }
}

/// Every loaded plugin, and which one serves each tool.
pub struct Plugins {
    plugins: Vec<Arc<Plugin>>,
    by_tool: HashMap<String, usize>,
}

impl Plugins {
    fn new(plugins: Vec<Arc<Plugin>>) -> Result<Self, LoadError> {
        let mut by_tool: HashMap<String, usize> = HashMap::new();
        for (i, plugin) in plugins.iter().enumerate() {
            for tool in &plugin.tools {
                if let Some(&j) = by_tool.get(&tool.name) {
                    return Err(loader::clash(&tool.name, &plugins[j], plugin));
                }
                by_tool.insert(tool.name.clone(), i);
            }
        }
        Ok(Self { plugins, by_tool })
    }

    /// The loaded plugins, by name.
    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    /// Every tool with the plugin that serves it, sorted by tool name.
    pub fn tools(&self) -> Vec<(&Plugin, &ToolSpec)> {
        let mut all: Vec<(&Plugin, &ToolSpec)> = self
            .plugins
            .iter()
            .flat_map(|p| p.tools.iter().map(move |t| (&**p, t)))
            .collect();
        all.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        all
    }

    /// The plugin serving `tool`.
    pub fn plugin_for(&self, tool: &str) -> Option<&Arc<Plugin>> {
        self.by_tool.get(tool).map(|&i| &self.plugins[i])
    }

    /// Runs one tool call in its plugin's sandbox.
    pub async fn call(
        &self,
        tool: &str,
        arguments: &str,
        call_id: &str,
    ) -> Result<ToolOutput, ToolError> {
        let plugin = self
            .plugin_for(tool)
            .ok_or_else(|| ToolError::UnknownTool(tool.to_owned()))?;
        plugin.call(tool, arguments, call_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::kernel_at_least;

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(kernel_at_least("6.18.44-fc-v769", (6, 7)));
        assert!(kernel_at_least("6.7.0", (6, 7)));
        assert!(kernel_at_least("7.0", (6, 7)));
        assert!(!kernel_at_least("6.6.87-generic", (6, 7)));
        assert!(!kernel_at_least("5.15.0-91-generic", (6, 7)));
        assert!(!kernel_at_least("", (6, 7)));
    }
}
