//! The sandbox a plugin's export is called in: the host's imports linked
//! once per engine ([`HostLinker`]) and once per component ([`PluginKind`]),
//! and [`Sandbox::call`], the one way an export is called: a fresh store
//! under the plugin's grants and limits, a fresh instance, one call, and an
//! explanation when the sandbox ends it. What the store holds is `store`.

use super::bindings::{
    HookPlugin, HookPluginPre, ProviderPlugin, ProviderPluginPre, ToolPlugin, ToolPluginPre,
};
use super::engine::TICK;
use super::error::ToolError;
use super::store::{CallState, PluginShared};
use super::{admission, budget, effects, http, stdio};
use crate::manifest::PluginDecl;
use crate::protocol::StreamEvent;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{CallHook, Engine, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

/// The host's imports, linked for every call's store of one engine.
pub(crate) struct HostLinker(Linker<CallState>);

/// Why a component could not be linked against the host's imports.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// An import did not match what the host provides.
    #[error("{0}")]
    Unlinkable(String),
    /// It exports none of the worlds corral calls.
    #[error("{0}")]
    NoExport(String),
}

impl HostLinker {
    /// The linker of `engine`'s stores (see `store::linker`).
    pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Self> {
        super::store::linker(engine).map(Self)
    }

    /// Links `component` and tells what kind of plugin it is.
    pub(crate) fn link(&self, component: &Component) -> Result<PluginKind, LinkError> {
        let pre = self
            .0
            .instantiate_pre(component)
            .map_err(|e| LinkError::Unlinkable(format!("{e:#}")))?;
        PluginKind::of(pre).map_err(LinkError::NoExport)
    }
}

/// A tool plugin, linked.
pub(crate) type ToolPre = ToolPluginPre<CallState>;
/// A provider plugin, linked.
pub(crate) type ProviderPre = ProviderPluginPre<CallState>;
/// A hook plugin, linked.
pub(crate) type HookPre = HookPluginPre<CallState>;

/// What a plugin provides, from its exports.
#[derive(Clone)]
pub(crate) enum PluginKind {
    /// Exports `corral:plugin/tool`.
    Tool(ToolPre),
    /// Exports `corral:plugin/provider`.
    Provider(ProviderPre),
    /// Exports `corral:plugin/hook`.
    Hook(HookPre),
}

impl PluginKind {
    /// Whether it exports `corral:plugin/provider`.
    pub(crate) fn is_provider(&self) -> bool {
        matches!(self, PluginKind::Provider(_))
    }

    /// The kind of a linked component, or why it is neither.
    fn of(pre: InstancePre<CallState>) -> Result<Self, String> {
        match ToolPluginPre::new(pre.clone()) {
            Ok(t) => Ok(PluginKind::Tool(t)),
            Err(tool_err) => ProviderPluginPre::new(pre.clone())
                .map(PluginKind::Provider)
                .or_else(|_| HookPluginPre::new(pre).map(PluginKind::Hook))
                .map_err(|_| format!("{tool_err:#}")),
        }
    }
}

/// A linked plugin that can be instantiated in a call's store.
pub(crate) trait Instantiate: Sync {
    /// The instance, through which its exports are called.
    type Instance: Send + Sync;

    /// Instantiates the plugin in `store`.
    fn instantiate(
        &self,
        store: &mut Store<CallState>,
    ) -> impl Future<Output = wasmtime::Result<Self::Instance>> + Send;
}

// The three worlds' pre-instances differ only in their types.
macro_rules! instantiate {
    ($($pre:ident => $instance:ident),* $(,)?) => {$(
        impl Instantiate for $pre<CallState> {
            type Instance = $instance;

            fn instantiate(
                &self,
                store: &mut Store<CallState>,
            ) -> impl Future<Output = wasmtime::Result<$instance>> + Send {
                self.instantiate_async(store)
            }
        }
    )*};
}

instantiate! {
    ToolPluginPre => ToolPlugin,
    ProviderPluginPre => ProviderPlugin,
    HookPluginPre => HookPlugin,
}

/// A call of one export of an instance, borrowing the instance and its store.
pub(crate) type ExportCall<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

/// What a call's sandbox is made from: the engine, the plugin's side of
/// the host's imports, and its manifest entry (grants and limits).
pub(crate) struct Sandbox<'a> {
    /// The engine its code was compiled for.
    pub(crate) engine: &'a Engine,
    /// What the host's imports see of the plugin.
    pub(crate) plugin: &'a Arc<PluginShared>,
    /// Its manifest entry.
    pub(crate) decl: &'a PluginDecl,
}

/// What a call has beyond its capabilities; none by default.
pub(crate) struct Extras<'c, I> {
    /// Where an instance made ahead ([`Sandbox::make_ahead`]) is taken
    /// from when one is ready.
    pub(crate) ahead: Option<&'c Arc<Ready<I>>>,
    /// Where a provider's stream events go.
    pub(crate) events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
    /// Filled with what the call touched (files read, hosts reached,
    /// programs run), whether it succeeded or not.
    pub(crate) touched: Option<&'c mut super::touched::Touched>,
}

impl<I> Default for Extras<'_, I> {
    fn default() -> Self {
        Self {
            ahead: None,
            events: None,
            touched: None,
        }
    }
}

/// An instance made ahead of its call, in a store of its own under the
/// plugin's grants and limits: armed with the call's own capabilities,
/// events and deadline when the call takes it ([`CallState::arm`]).
pub(crate) struct Prepared<I> {
    store: Store<CallState>,
    instance: I,
    stdout: stdio::LogPipe,
    stderr: stdio::LogPipe,
    /// Its place in the pool, held from the moment it was made.
    reserved: admission::Reserved,
}

/// The instance one plugin keeps ready for its next call, if any.
pub(crate) struct Ready<I> {
    slot: Mutex<Option<Prepared<I>>>,
    /// An instance is being made: calls ending meanwhile make none.
    making: AtomicBool,
}

impl<I> Default for Ready<I> {
    fn default() -> Self {
        Self {
            slot: Mutex::new(None),
            making: AtomicBool::new(false),
        }
    }
}

impl<I> Ready<I> {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Prepared<I>>> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether an instance is ready now.
    pub(crate) fn is_ready(&self) -> bool {
        self.slot().is_some()
    }
}

impl Sandbox<'_> {
    /// Builds a fresh sandboxed store, instantiates `pre` in it, calls one
    /// of its exports with `export` and turns traps and limits into
    /// [`ToolError::Sandbox`]. `caps` narrows the plugin's grants to what
    /// this kind of call may use; `extras` says what else it has (see
    /// [`Extras`]).
    pub(crate) async fn call<P, R, F>(
        &self,
        pre: &P,
        caps: effects::CallCaps,
        extras: Extras<'_, P::Instance>,
        export: F,
    ) -> Result<R, ToolError>
    where
        P: Instantiate + Clone + Send + 'static,
        P::Instance: 'static,
        R: Send + 'static,
        F: for<'a> FnOnce(&'a P::Instance, &'a mut Store<CallState>) -> ExportCall<'a, R> + Send,
    {
        let Extras {
            ahead,
            events,
            touched,
        } = extras;
        let name = &self.decl.name;
        let limits = self.decl.limits;
        let shutting = || {
            ToolError::Sandbox(format!(
                "plugin `{name}`: the runtime is shutting down and takes no new calls"
            ))
        };
        let prepared = ahead.and_then(|ready| ready.slot().take());
        // Waiting for a place comes before the deadline starts.
        let (_admitted, mut store, made, stdout, stderr) = match prepared {
            Some(p) => {
                let admitted = admission::admit_reserved(limits.memory_mb, p.reserved)
                    .await
                    .ok_or_else(shutting)?;
                tracing::debug!(plugin = %name, "the call takes an instance made ahead");
                let mut store = p.store;
                let http = self.http(&caps);
                store.data_mut().arm(caps, http, events, limits.timeout_ms);
                store.set_epoch_deadline(1);
                (admitted, store, Some(p.instance), p.stdout, p.stderr)
            }
            None => {
                let admitted = admission::admit(limits.memory_mb)
                    .await
                    .ok_or_else(shutting)?;
                let stdout = stdio::LogPipe::default();
                let stderr = stdio::LogPipe::default();
                let store = self.call_store(caps, events, &stdout, &stderr);
                (admitted, store, None, stdout, stderr)
            }
        };

        let deadline = Duration::from_millis(limits.timeout_ms);
        let call = async {
            let instance = match made {
                Some(instance) => instance,
                None => pre.instantiate(&mut store).await?,
            };
            export(&instance, &mut store).await
        };
        let outcome = tokio::time::timeout(deadline + TICK * 5, call).await;
        if let Some(touched) = touched {
            *touched = store.data_mut().take_touched();
        }
        self.log_call(&store, &stdout, &stderr);

        // A granted directory that moved ends the call, whatever the plugin
        // made of the refusal.
        let state = store.data();
        if let Some(why) = state.refused_dir() {
            return Err(ToolError::Sandbox(format!("plugin `{name}`: {why}")));
        }
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
        let why = why_it_ended(state, &err, limits);
        let detail = crash_detail(&stderr);
        Err(ToolError::Sandbox(format!(
            "plugin `{name}`: {why}{detail}"
        )))
    }

    /// Makes the plugin's next instance on a task of its own, unless one
    /// is ready or being made, or no slot is free for it now. A session
    /// asks for it while it waits for the model, so the instance is made
    /// while the machine is idle, never on a call's path; the next call
    /// takes it and runs the plugin's code at once.
    pub(crate) fn make_ahead<P>(&self, pre: &P, ready: &Arc<Ready<P::Instance>>)
    where
        P: Instantiate + Clone + Send + 'static,
        P::Instance: 'static,
    {
        if ready.is_ready() || ready.making.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(reserved) = admission::reserve() else {
            ready.making.store(false, Ordering::Release);
            return;
        };
        let (engine, plugin, decl) = (self.engine.clone(), self.plugin.clone(), self.decl.clone());
        let (pre, ready) = (pre.clone(), ready.clone());
        tokio::spawn(async move {
            let made = make(&engine, &plugin, &decl, &pre, reserved).await;
            let mut slot = ready.slot();
            if slot.is_none() {
                *slot = made;
            }
            // Cleared under the lock that publishes the instance: whoever
            // sees it ready (and takes it) then sees that none is being
            // made, so the next `make_ahead` is not skipped.
            ready.making.store(false, Ordering::Release);
        });
    }

    /// The HTTP side of a call allowed `caps`: the plugin's `grants.net`
    /// and what the user approved for this one call.
    fn http(&self, caps: &effects::CallCaps) -> http::Http {
        let name = &self.decl.name;
        let allow: Arc<[crate::manifest::NetGrant]> = self
            .decl
            .net
            .iter()
            .chain(caps.widened())
            .cloned()
            .collect();
        // Without any destination the missing grant is the reason a request
        // is denied (`Egress::allowed`), so the call's own reason is only
        // worded when there is one.
        let refused = if allow.is_empty() {
            None
        } else {
            caps.network(name).err().map(|e| e.to_string())
        };
        http::Http::new(http::Egress {
            plugin: self.plugin.name.clone(),
            origin: self.plugin.origin.clone(),
            allow,
            secrets: self.decl.secrets.clone().into(),
            refused,
            contacted: Vec::new(),
            connections: self.plugin.connections.clone(),
        })
    }

    /// A fresh store for one call: the plugin's grants narrowed to `caps`,
    /// its output into `stdout` and `stderr`, and its limits armed.
    fn call_store(
        &self,
        caps: effects::CallCaps,
        events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
        stdout: &stdio::LogPipe,
        stderr: &stdio::LogPipe,
    ) -> Store<CallState> {
        let limits = self.decl.limits;
        let http = self.http(&caps);
        let state = CallState::new(
            self.plugin.clone(),
            limits,
            caps,
            self.wasi_ctx(stdout, stderr),
            http,
            events,
        );
        let mut store = Store::new(self.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every tick yields to the executor, so a call in a busy loop can
        // still be cancelled (Ctrl-C drops its future) between ticks; the
        // wall-clock deadline (the call's own, see `CallState::arm`) traps.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            if Instant::now() >= ctx.data().deadline {
                ctx.data_mut().timed_out = true;
                return Err(wasmtime::format_err!("deadline reached"));
            }
            Ok(wasmtime::UpdateDeadline::Yield(1))
        });
        store.call_hook(|mut ctx, hook| {
            if matches!(hook, CallHook::CallingHost) {
                ctx.data_mut().host_calls.take_one()?;
            }
            Ok(())
        });
        store
    }

    /// The call's WASI context: its output piped to the log, its
    /// environment as granted, and no sockets.
    fn wasi_ctx(&self, stdout: &stdio::LogPipe, stderr: &stdio::LogPipe) -> WasiCtx {
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone()).stderr(stderr.clone());
        // File operations are short; running them on this thread instead of
        // hopping to tokio's blocking pool per syscall is what makes a
        // sandboxed grep close to a native one.
        wasi.allow_blocking_current_thread(true);
        // The granted directories are opened when the plugin first asks for
        // them (`fsguard::Preopens`), not for every call.
        // Raw sockets and name lookups are never granted: grants.net names
        // HTTP destinations, checked per request, and a socket would go
        // around that check. wasmtime-wasi denies them by default; saying so
        // here keeps a changed default from opening them. A denied socket is
        // `access-denied` to the plugin, a lookup `permanent-resolver-failure`.
        wasi.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }));
        for var in &self.decl.env {
            if let Ok(value) = std::env::var(var) {
                wasi.env(var, value);
            }
        }
        wasi.build()
    }

    /// Logs what the plugin printed during the call, and how much of its
    /// budgets it used.
    fn log_call(&self, store: &Store<CallState>, stdout: &stdio::LogPipe, stderr: &stdio::LogPipe) {
        let name = &self.decl.name;
        let log_text = |pipe: &stdio::LogPipe, stream: &str| {
            let text = pipe.text();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let line = crate::terminal::inert(line);
                tracing::info!(target: "corral::plugin", plugin = %name, stream, "{line}");
            }
        };
        log_text(stdout, "stdout");
        log_text(stderr, "stderr");
        let state = store.data();
        if state.budget().log_dropped > 0 {
            tracing::warn!(
                target: "corral::plugin",
                plugin = %name,
                "dropped {} bytes of log lines over the budget of {} KiB per call",
                state.budget().log_dropped,
                budget::LOG_BYTES_PER_CALL / 1024
            );
        }

        tracing::debug!(
            plugin = %name,
            host_calls = self.decl.limits.host_calls - state.host_calls.left,
            "call finished"
        );
    }
}

/// A store and instance of `pre` for a call to come, under the narrowest
/// capabilities until the call arms it, or `None` when instantiating fails
/// or calls the host.
async fn make<P: Instantiate>(
    engine: &Engine,
    plugin: &Arc<PluginShared>,
    decl: &PluginDecl,
    pre: &P,
    reserved: admission::Reserved,
) -> Option<Prepared<P::Instance>> {
    let sandbox = Sandbox {
        engine,
        plugin,
        decl,
    };
    let stdout = stdio::LogPipe::default();
    let stderr = stdio::LogPipe::default();
    let mut store = sandbox.call_store(effects::CallCaps::Describe, None, &stdout, &stderr);
    let instance = pre.instantiate(&mut store).await.ok()?;
    // An instance whose making called the host (a start function that
    // looked at its directories) has state of its own: it is not kept, and
    // the next call makes its instance as before.
    let state = store.data();
    if state.host_calls.left != decl.limits.host_calls || state.touched_files() {
        return None;
    }
    Some(Prepared {
        store,
        instance,
        stdout,
        stderr,
        reserved,
    })
}

/// Which limit or fault ended a call that failed with `err`.
fn why_it_ended(
    state: &CallState,
    err: &wasmtime::Error,
    limits: crate::manifest::Limits,
) -> String {
    if state.timed_out {
        format!(
            "the call timed out after {} ms (limits.timeout_ms)",
            limits.timeout_ms
        )
    } else if let Some(why) = state.stream_ended() {
        why.clone()
    } else if let Some(why) = budget::explain(state.budget(), err, limits.output_kb) {
        why
    } else if state.limiter.memory_hit {
        format!(
            "the call exceeded the memory limit of {} MiB (limits.memory_mb)",
            limits.memory_mb
        )
    } else if state.host_calls.hit {
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
    }
}

/// What the plugin said about its failure on stderr: the exception it
/// reported and its last lines, for the end of the error.
fn crash_detail(stderr: &stdio::LogPipe) -> String {
    let stderr_text = stderr.text();
    let reported = stdio::exception(&stderr_text);
    let tail = budget::without_backtrace_hint(&stderr.tail(4));
    // Lines the report already shows would only repeat it.
    let tail: Vec<&str> = tail
        .lines()
        .filter(|l| {
            reported
                .as_deref()
                .is_none_or(|r| !r.lines().any(|shown| shown.trim() == l.trim()))
        })
        .collect();
    let mut detail = String::new();
    if let Some(reported) = &reported {
        detail.push_str(&format!("; it reported: {reported}"));
    }
    if !tail.is_empty() {
        detail.push_str(&format!("; its last output: {}", tail.join("\n")));
    }
    detail
}
