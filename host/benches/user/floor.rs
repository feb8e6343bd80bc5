//! What a sandboxed call costs at least, measured beside corral's: the same
//! component in an engine of corral's configuration, with nothing of
//! corral's around it.

use common::or_die as ok;
use std::path::{Path, PathBuf};
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::common;

mod tool_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "tool-plugin",
        exports: { default: async },
    });
}

mod hook_world {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "hook-plugin",
        exports: { default: async },
        with: {
            "corral:plugin/host": super::tool_world::corral::plugin::host,
            "corral:plugin/types": super::tool_world::corral::plugin::types,
            "corral:plugin/files": super::tool_world::corral::plugin::files,
            "corral:plugin/process": super::tool_world::corral::plugin::process,
        },
    });
}

use hook_world::HookPluginPre;
use hook_world::exports::corral::plugin::hook;
use tool_world::ToolPluginPre;
use tool_world::corral::plugin::{files, host, process, types};

/// The store of a plain wasmtime-wasi call: its WASI and `wasi:http`
/// contexts, their table, and the plugin's settings for
/// `corral:plugin/host`.
struct Plain {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    config: &'static [(&'static str, &'static str)],
    /// The directory `corral:plugin/files` serves, as `.`.
    root: Option<PathBuf>,
}

/// `err` as `files` reports it.
fn file_error(err: &std::io::Error) -> files::FileError {
    match err.kind() {
        std::io::ErrorKind::NotFound => files::FileError::NotFound,
        std::io::ErrorKind::PermissionDenied => files::FileError::Denied,
        _ => files::FileError::Other(err.to_string()),
    }
}

/// `corral:plugin/files` as plainly as it can be served: `std::fs` on the
/// path joined to the root, with none of corral's resolving beneath the
/// grant, guards or records.
impl files::Host for Plain {
    fn list_directory(&mut self, path: String) -> Result<Vec<files::DirEntry>, files::FileError> {
        let root = self.root.as_ref().ok_or(files::FileError::Denied)?;
        let entries = std::fs::read_dir(root.join(path)).map_err(|e| file_error(&e))?;
        Ok(entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let kind = match e.file_type() {
                    Ok(t) if t.is_dir() => files::EntryKind::Directory,
                    Ok(t) if t.is_file() => files::EntryKind::File,
                    Ok(t) if t.is_symlink() => files::EntryKind::Symlink,
                    _ => files::EntryKind::Other,
                };
                Some(files::DirEntry { name, kind })
            })
            .collect())
    }

    fn read_files(
        &mut self,
        paths: Vec<String>,
        max_bytes: u64,
    ) -> Vec<Result<Vec<u8>, files::FileError>> {
        let Some(root) = self.root.as_ref() else {
            return paths
                .iter()
                .map(|_| Err(files::FileError::Denied))
                .collect();
        };
        let mut left = max_bytes;
        let mut spent = false;
        paths
            .iter()
            .map(|path| {
                if spent {
                    return Err(files::FileError::OverBudget);
                }
                let mut file = std::fs::File::open(root.join(path)).map_err(|e| file_error(&e))?;
                let meta = file.metadata().map_err(|e| file_error(&e))?;
                if !meta.is_file() {
                    return Err(files::FileError::WrongKind);
                }
                if meta.len() > left {
                    spent = true;
                    return Err(files::FileError::OverBudget);
                }
                let mut bytes = Vec::with_capacity(meta.len() as usize);
                std::io::Read::read_to_end(&mut file, &mut bytes).map_err(|e| file_error(&e))?;
                left = left.saturating_sub(bytes.len() as u64);
                Ok(bytes)
            })
            .collect()
    }

    fn write_files(&mut self, _: Vec<files::FileChange>) -> Result<(), String> {
        Err("the floor writes nothing".into())
    }
}

/// No programs: the measured calls run none.
impl process::Host for Plain {
    fn run(&mut self, _: process::Command) -> Result<process::Output, process::ProcessError> {
        Err(process::ProcessError::NotGranted(
            "the floor runs no programs".into(),
        ))
    }
}

impl WasiHttpView for Plain {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: wasmtime_wasi_http::default_hooks(),
        }
    }
}

impl host::Host for Plain {
    fn log(&mut self, _: host::LogLevel, _: String) {}

    fn config(&mut self, key: String) -> Option<String> {
        self.config
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| (*v).to_owned())
    }
}

/// A fresh store of a plain wasmtime-wasi call, `dir` preopened read-only
/// as `.` when given (file operations on the calling thread, as in corral).
fn plain_store(
    engine: &Engine,
    dir: Option<&Path>,
    config: &'static [(&'static str, &'static str)],
) -> Store<Plain> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.allow_blocking_current_thread(true);
    if let Some(dir) = dir {
        ok(wasi.preopened_dir(dir, ".", FsPerms::ReadOnly));
    }
    let state = Plain {
        wasi: wasi.build(),
        http: WasiHttpCtx::new(),
        table: ResourceTable::new(),
        config,
        root: dir.map(Path::to_path_buf),
    };
    let mut store = Store::new(engine, state);
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

/// A linker of WASI, `wasi:http` (which no measured call uses) and
/// corral's `host`, `files` and `process` for the component at `path`.
fn plain_linker(path: &str) -> (Engine, Component, Linker<Plain>) {
    let (engine, component) = component(path);
    let linker = linker_of(&engine);
    (engine, component, linker)
}

/// [`plain_linker`]'s linker for `engine`.
fn linker_of(engine: &Engine) -> Linker<Plain> {
    let mut linker = Linker::<Plain>::new(engine);
    ok(wasmtime_wasi::p2::add_to_linker_async(&mut linker));
    ok(wasmtime_wasi_http::p2::add_only_http_to_linker_async(
        &mut linker,
    ));
    ok(host::add_to_linker::<
        Plain,
        wasmtime::component::HasSelf<Plain>,
    >(&mut linker, |s| s));
    ok(files::add_to_linker::<
        Plain,
        wasmtime::component::HasSelf<Plain>,
    >(&mut linker, |s| s));
    ok(process::add_to_linker::<
        Plain,
        wasmtime::component::HasSelf<Plain>,
    >(&mut linker, |s| s));
    linker
}

impl WasiView for Plain {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The component at `path` in an engine of corral's configuration.
fn component(path: &str) -> (Engine, Component) {
    let engine = ok(corral_engine::new());
    let component = ok(Component::from_file(&engine, path));
    (engine, component)
}

/// A fresh store and instance of the component at `path`, dropped, with no
/// call (its imports trap; instantiating calls none). A call that must not
/// see what an earlier one left in memory pays at least this.
pub fn bare_instance<'a>(rt: &'a tokio::runtime::Runtime, path: &str) -> impl FnMut() + 'a {
    let (engine, component) = component(path);
    let mut linker = Linker::<()>::new(&engine);
    ok(linker.define_unknown_imports_as_traps(&component));
    let pre = ok(linker.instantiate_pre(&component));
    move || {
        let mut store = Store::new(&engine, ());
        store.set_epoch_deadline(u64::MAX / 2);
        ok(rt.block_on(pre.instantiate_async(&mut store)));
    }
}

/// The tool plugin at `path` called as a plain wasmtime-wasi embedding
/// would call it: a fresh store whose WASI context preopens `dir` read-only
/// as `.` (file operations on the calling thread, as in corral), a fresh instance, one `invoke` of `tool` with `args`, dropped.
/// No grants narrowed to the call, no limits, no log, no provenance: the
/// floor under corral's call of the same tool.
pub fn plain_wasi_call<'a>(
    rt: &'a tokio::runtime::Runtime,
    path: &str,
    dir: &'a Path,
    tool: &'a str,
    args: &'a str,
) -> impl FnMut() -> String + 'a {
    let (engine, component, linker) = plain_linker(path);
    plain_call(rt, engine, component, linker, dir, tool, args)
}

/// The built-in plugin `name` called as [`plain_wasi_call`] calls a
/// plugin: the floor under corral's call of the same built-in tool.
pub fn plain_builtin_call<'a>(
    rt: &'a tokio::runtime::Runtime,
    name: &str,
    dir: &'a Path,
    tool: &'a str,
    args: &'a str,
) -> impl FnMut() -> String + 'a {
    let engine = ok(corral_engine::new());
    let bytes = ok(corral_builtin::get(name).ok_or("no such built-in plugin"));
    let component = ok(Component::new(&engine, bytes));
    let linker = linker_of(&engine);
    plain_call(rt, engine, component, linker, dir, tool, args)
}

/// One fresh store and instance of `component` per call of `tool`.
fn plain_call<'a>(
    rt: &'a tokio::runtime::Runtime,
    engine: Engine,
    component: Component,
    linker: Linker<Plain>,
    dir: &'a Path,
    tool: &'a str,
    args: &'a str,
) -> impl FnMut() -> String + 'a {
    let pre = ok(ToolPluginPre::new(ok(linker.instantiate_pre(&component))));
    move || {
        let mut store = plain_store(&engine, Some(dir), &[]);
        let call = types::ToolCall {
            id: "b".into(),
            name: tool.into(),
            arguments: args.into(),
        };
        rt.block_on(async {
            let plugin = ok(pre.instantiate_async(&mut store).await);
            let out = ok(plugin
                .corral_plugin_tool()
                .call_invoke(&mut store, &call)
                .await);
            match out {
                Ok(o) => o.content,
                Err(e) => panic!("{e:?}"),
            }
        })
    }
}

/// The hook plugin at `path` with `mode = "continue"` handed a
/// `before-tool` event of `read_file` as a plain wasmtime-wasi embedding
/// would hand it: a fresh store (no directories), a fresh instance, one
/// `handle`, dropped. The floor under corral's hook of the same call.
pub fn plain_wasi_hook<'a>(rt: &'a tokio::runtime::Runtime, path: &str) -> impl FnMut() + 'a {
    let (engine, component, linker) = plain_linker(path);
    let pre = ok(HookPluginPre::new(ok(linker.instantiate_pre(&component))));
    move || {
        let mut store = plain_store(&engine, None, &[("mode", "continue")]);
        let event = hook::Event::BeforeTool(hook::BeforeTool {
            call: types::ToolCall {
                id: "b".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"small.txt"}"#.into(),
            },
            effects: vec![types::Effect::Read],
        });
        rt.block_on(async {
            let plugin = ok(pre.instantiate_async(&mut store).await);
            let decision = ok(plugin
                .corral_plugin_hook()
                .call_handle(&mut store, &event)
                .await);
            assert!(matches!(decision, hook::Decision::Continue));
        });
    }
}

/// The CPU (user + system) this process spends in `f`.
pub fn cpu_of(f: impl FnOnce()) -> std::time::Duration {
    fn now() -> std::time::Duration {
        // SAFETY: rusage is plain old data; all-zero is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        let d =
            |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
        d(usage.ru_utime) + d(usage.ru_stime)
    }
    let before = now();
    f();
    now().saturating_sub(before)
}
