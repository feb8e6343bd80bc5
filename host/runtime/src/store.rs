//! The store of one call: what the host's imports see of the call
//! ([`CallState`]) and of its plugin ([`PluginShared`]), and
//! [`Plugin::call_in_sandbox`], the one way a plugin's export is called:
//! a fresh store under the plugin's grants and limits, a fresh instance,
//! one call, and an explanation when the sandbox ends it.

use super::bindings::{
    HookPlugin, HookPluginPre, ProviderPlugin, ProviderPluginPre, ToolPlugin, ToolPluginPre,
};
use super::engine::TICK;
use super::plugin::{Plugin, ToolError};
use super::{budget, effects, files, fsguard, http, limits, stdio};
use crate::protocol::StreamEvent;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wasmtime::component::ResourceTable;
use wasmtime::{CallHook, Store, Trap};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// What the host-side imports of a call can see of their plugin.
pub(crate) struct PluginShared {
    pub(crate) exec: Option<Arc<crate::exec::Exec>>,
    pub(crate) name: Arc<str>,
    /// Where its manifest entry is (`corral.toml:12`), for the denials of
    /// imports its grants do not cover.
    pub(crate) origin: Arc<str>,
    pub(crate) config: BTreeMap<String, String>,
    /// Its directory grants, shared by every call's `files` interface.
    pub(crate) fs: Arc<[crate::manifest::FsGrant]>,
    /// What its filesystem calls may not touch.
    pub(crate) guard: Arc<fsguard::Guard>,
    /// Where `write-files` keeps its journal; `None` without a workspace.
    pub(crate) journal: Option<std::path::PathBuf>,
    /// Its HTTP connections kept open between requests.
    pub(crate) connections: Arc<super::connections::Pool>,
}

/// The data of one call's store.
pub(crate) struct CallState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    egress: http::Egress,
    pub(super) table: ResourceTable,
    pub(super) plugin: Arc<PluginShared>,
    pub(super) limiter: limits::CallLimiter,
    pub(super) host_calls_left: u64,
    pub(super) host_calls_hit: bool,
    /// The wall-clock deadline ended the call.
    timed_out: bool,
    pub(super) events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
    pub(super) budget: budget::CallBudget,
    /// A provider's answer text, when the host puts it together.
    pub(super) streamed: super::stream::Streamed,
    pub(super) dirs: files::Dirs,
    /// What this call may use of its plugin's grants.
    pub(super) caps: effects::CallCaps,
    /// The plugin asked for its granted directories through
    /// `wasi:filesystem` (set by `fsguard`).
    pub(super) looked_at_files: bool,
    /// What the call touched: files read, hosts reached, programs run.
    pub(super) touched: super::touched::Recording,
    /// Its granted directories as `wasi:filesystem` preopens.
    pub(super) preopens: fsguard::Preopens,
}

impl CallState {
    /// Whether the plugin reached for its granted directories in this call,
    /// through `wasi:filesystem` or corral's `files`.
    pub(super) fn touched_files(&self) -> bool {
        self.looked_at_files || self.dirs.used()
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

/// A linked plugin that can be instantiated in a call's store.
pub(super) trait Instantiate: Sync {
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
pub(super) type ExportCall<'a, R> = Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>;

impl Plugin {
    /// Builds a fresh sandboxed store, instantiates `pre` in it, calls one
    /// of its exports with `export` and turns traps and limits into
    /// [`ToolError::Sandbox`]. `caps` narrows the plugin's grants to what
    /// this kind of call may use.
    pub(super) async fn call_in_sandbox<P, R, F>(
        &self,
        pre: &P,
        caps: effects::CallCaps,
        events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
        export: F,
    ) -> Result<R, ToolError>
    where
        P: Instantiate,
        R: Send + 'static,
        F: for<'a> FnOnce(&'a P::Instance, &'a mut Store<CallState>) -> ExportCall<'a, R> + Send,
    {
        self.call_in_sandbox_touched(pre, caps, events, None, export)
            .await
    }

    // The same generic signature as `call_in_sandbox`, with `touched`: the
    // bounds must be spelled out on both.
    /// [`Plugin::call_in_sandbox`], also filling `touched` with what the
    /// call touched (files read, hosts reached, programs run), whether it
    /// succeeded or not.
    pub(super) async fn call_in_sandbox_touched<P, R, F>(
        &self,
        pre: &P,
        caps: effects::CallCaps,
        events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
        touched: Option<&mut super::touched::Touched>,
        export: F,
    ) -> Result<R, ToolError>
    where
        P: Instantiate,
        R: Send + 'static,
        F: for<'a> FnOnce(&'a P::Instance, &'a mut Store<CallState>) -> ExportCall<'a, R> + Send,
    {
        let name = &self.decl.name;
        let limits = self.decl.limits;
        // Waiting for a place comes before the deadline starts.
        let _admitted = super::admission::admit(limits.memory_mb)
            .await
            .ok_or_else(|| {
                ToolError::Sandbox(format!(
                    "plugin `{name}`: the runtime is shutting down and takes no new calls"
                ))
            })?;
        let stdout = stdio::LogPipe::default();
        let stderr = stdio::LogPipe::default();
        let mut store = self.call_store(caps, events, &stdout, &stderr);

        let deadline = Duration::from_millis(limits.timeout_ms);
        let call = async {
            let instance = pre.instantiate(&mut store).await?;
            export(&instance, &mut store).await
        };
        let outcome = tokio::time::timeout(deadline + TICK * 5, call).await;
        if let Some(touched) = touched {
            let state = store.data_mut();
            *touched = std::mem::take(&mut state.touched).finish();
            for (scheme, host, port) in &state.egress.contacted {
                touched.host(scheme, host, *port);
            }
        }
        self.log_call(&store, &stdout, &stderr);

        // A granted directory that moved ends the call, whatever the plugin
        // made of the refusal.
        let state = store.data();
        if let Some(why) = state
            .preopens
            .refused
            .as_ref()
            .or(state.dirs.refused.as_ref())
        {
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

    /// A fresh store for one call: the plugin's grants narrowed to `caps`,
    /// its output into `stdout` and `stderr`, and its limits armed.
    fn call_store(
        &self,
        caps: effects::CallCaps,
        events: Option<tokio::sync::mpsc::Sender<StreamEvent>>,
        stdout: &stdio::LogPipe,
        stderr: &stdio::LogPipe,
    ) -> Store<CallState> {
        let name = &self.decl.name;
        let limits = self.decl.limits;
        let mut http_ctx = WasiHttpCtx::new();
        http_ctx.set_field_size_limit(budget::FIELDS_SIZE_LIMIT);
        let mut table = ResourceTable::new();
        table.set_max_capacity(budget::MAX_HOST_OBJECTS);
        let memory_bytes =
            usize::try_from(limits.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        // The grant, and what the user approved for this one call.
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
            caps.network(name).err()
        };
        let state = CallState {
            wasi: self.wasi_ctx(stdout, stderr),
            http: http_ctx,
            egress: http::Egress {
                plugin: self.shared.name.clone(),
                origin: self.shared.origin.clone(),
                allow,
                secrets: self.decl.secrets.clone().into(),
                refused,
                contacted: Vec::new(),
                connections: self.shared.connections.clone(),
            },
            table,
            budget: budget::CallBudget::new(limits.output_kb.saturating_mul(1024)),
            plugin: self.shared.clone(),
            limiter: limits::CallLimiter::new(memory_bytes),
            streamed: super::stream::Streamed::default(),
            host_calls_left: limits.host_calls,
            host_calls_hit: false,
            timed_out: false,
            events,
            dirs: files::Dirs::new(self.shared.fs.clone()),
            preopens: fsguard::Preopens::new(self.shared.fs.clone(), caps.writes()),
            caps,
            looked_at_files: false,
            touched: Default::default(),
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
            host_calls = self.decl.limits.host_calls - store.data().host_calls_left,
            "call finished"
        );
    }
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
    } else if let Some(why) = &state.streamed.ended {
        why.clone()
    } else if let Some(why) = budget::explain(&state.budget, err, limits.output_kb) {
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
