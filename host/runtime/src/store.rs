//! The data of one call's store ([`CallState`]): each interface's own state,
//! owned by the module that implements it (`files`, `fsguard`, `http`,
//! `stream`), and what they share (the resource table, the budgets, the
//! record of what the call touched). Each interface reaches its part
//! through a projection here, wasmtime's `HasData` pattern, so no module
//! that implements one names the whole store; [`linker`] composes them.
//! The sandbox that runs a call in such a store is `sandbox`.

use super::budget::CallBudget;
use super::effects::CallCaps;
use super::files::{self, Dirs, FilesView};
use super::fsguard::{self, GuardView, Preopens};
use super::host::{self, HostView};
use super::http::{self, Http};
use super::limits::{CallLimiter, HostCalls};
use super::process::{self, ProcessView};
use super::stream::{self, StreamView, Streamed};
use super::touched::{Recording, Touched};
use crate::manifest::Limits;
use crate::protocol::StreamEvent;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::Sender;
use wasmtime::Engine;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtxView, WasiHttpView};

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
    /// Resources of every interface: files, streams, HTTP objects.
    table: ResourceTable,
    wasi: WasiCtx,
    http: Http,
    /// `corral:plugin/files`'s granted directories.
    dirs: Dirs,
    /// `wasi:filesystem`'s granted directories.
    preopens: Preopens,
    /// `corral:plugin/stream`'s kept answer.
    streamed: Streamed,
    events: Option<Sender<StreamEvent>>,
    plugin: Arc<PluginShared>,
    /// What this call may use of its plugin's grants.
    caps: CallCaps,
    /// What the call touched: files read, hosts reached, programs run.
    touched: Recording,
    budget: CallBudget,
    pub(super) limiter: CallLimiter,
    pub(super) host_calls: HostCalls,
    /// The wall-clock deadline ended the call.
    pub(super) timed_out: bool,
    /// When the call's wall-clock deadline passes.
    pub(super) deadline: Instant,
}

impl CallState {
    /// The state of a call of `plugin` under `limits`, allowed `caps`: its
    /// WASI context `wasi`, its requests sent through `http`, its stream
    /// events to `events`.
    pub(super) fn new(
        plugin: Arc<PluginShared>,
        limits: Limits,
        caps: CallCaps,
        wasi: WasiCtx,
        http: Http,
        events: Option<Sender<StreamEvent>>,
    ) -> Self {
        let mut table = ResourceTable::new();
        table.set_max_capacity(super::budget::MAX_HOST_OBJECTS);
        let memory_bytes =
            usize::try_from(limits.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        Self {
            table,
            wasi,
            http,
            dirs: Dirs::new(plugin.fs.clone()),
            preopens: Preopens::new(plugin.fs.clone(), caps.writes()),
            streamed: Streamed::default(),
            events,
            budget: CallBudget::new(limits.output_kb.saturating_mul(1024)),
            limiter: CallLimiter::new(memory_bytes),
            host_calls: HostCalls::new(limits.host_calls),
            timed_out: false,
            deadline: Instant::now() + Duration::from_millis(limits.timeout_ms),
            caps,
            touched: Recording::default(),
            plugin,
        }
    }

    /// Gives a store made ahead of its call ([`super::sandbox::Ready`]) the
    /// call's own `caps`, `http` and `events`, and starts its deadline of
    /// `timeout_ms` now. Only a store whose instantiation called none of
    /// the host's imports is armed, so nothing else in it has moved.
    pub(super) fn arm(
        &mut self,
        caps: CallCaps,
        http: Http,
        events: Option<Sender<StreamEvent>>,
        timeout_ms: u64,
    ) {
        self.preopens = Preopens::new(self.plugin.fs.clone(), caps.writes());
        self.caps = caps;
        self.http = http;
        self.events = events;
        self.deadline = Instant::now() + Duration::from_millis(timeout_ms);
    }

    /// Whether the plugin reached for its granted directories in this call,
    /// through `wasi:filesystem` or corral's `files`.
    pub(crate) fn touched_files(&self) -> bool {
        self.preopens.asked || self.dirs.used()
    }

    /// The answer text the host kept for a provider, if it asked.
    pub(crate) fn kept_answer(&mut self) -> Option<String> {
        self.streamed.take()
    }

    /// What the call touched, taken out of the store.
    pub(super) fn take_touched(&mut self) -> Touched {
        let mut touched = std::mem::take(&mut self.touched).finish();
        for (scheme, host, port) in &self.http.egress.contacted {
            touched.host(scheme, host, *port);
        }
        touched
    }

    /// Why a granted directory could not be opened, which ends the call.
    pub(super) fn refused_dir(&self) -> Option<&String> {
        self.preopens
            .refused
            .as_ref()
            .or(self.dirs.refused.as_ref())
    }

    /// Why a module that implements an interface ended the call, when one
    /// did: the answer kept past the memory limit, or a misused `answer`.
    pub(super) fn stream_ended(&self) -> Option<&String> {
        self.streamed.ended.as_ref()
    }

    /// The call's host-side budgets.
    pub(super) fn budget(&self) -> &CallBudget {
        &self.budget
    }

    /// `corral:plugin/host`'s part.
    fn host(&mut self) -> HostView<'_> {
        HostView {
            plugin: &self.plugin.name,
            config: &self.plugin.config,
            budget: &mut self.budget,
        }
    }

    /// `corral:plugin/files`'s part.
    fn files(&mut self) -> FilesView<'_> {
        let plugin = &*self.plugin;
        FilesView {
            dirs: &mut self.dirs,
            guard: &plugin.guard,
            plugin: &plugin.name,
            journal: plugin.journal.as_deref(),
            caps: &self.caps,
            touched: &mut self.touched,
            calls: &mut self.host_calls,
        }
    }

    /// `corral:plugin/process`'s part.
    fn process(&mut self) -> ProcessView<'_> {
        let plugin = &*self.plugin;
        ProcessView {
            exec: plugin.exec.as_ref(),
            plugin: &plugin.name,
            origin: &plugin.origin,
            caps: &self.caps,
            touched: &mut self.touched,
        }
    }

    /// `corral:plugin/stream`'s and `corral:plugin/answer`'s part.
    fn stream(&mut self) -> StreamView<'_> {
        StreamView {
            events: self.events.as_ref(),
            streamed: &mut self.streamed,
            budget: &mut self.budget,
            limiter: &mut self.limiter,
            caps: &self.caps,
        }
    }

    /// The guarded part of `wasi:filesystem`.
    fn guard(&mut self) -> GuardView<'_> {
        let plugin = &*self.plugin;
        GuardView {
            fs: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
            preopens: &mut self.preopens,
            guard: &plugin.guard,
            plugin: &plugin.name,
            touched: &mut self.touched,
        }
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
        self.http.view(&mut self.table)
    }
}

/// Builds the linker shared by every plugin of an engine: WASI,
/// `wasi:http` and corral's own interfaces, each added by the module that
/// implements it with its projection of [`CallState`]. A component is
/// linked against all of it; what a call may really use is decided per call
/// (see `effects`).
pub(super) fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    // WASI 0.2 as wasmtime-wasi serves it from each call's `WasiCtx`.
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    http::add_to_linker(&mut linker)?;
    host::add_to_linker(&mut linker, CallState::host)?;
    process::add_to_linker(&mut linker, CallState::process)?;
    files::add_to_linker(&mut linker, CallState::files)?;
    stream::add_to_linker(&mut linker, CallState::stream)?;
    // Last: it replaces functions that wasmtime-wasi defined.
    fsguard::add_to_linker(&mut linker, CallState::guard)?;
    Ok(linker)
}
