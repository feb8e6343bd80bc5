//! What a sandboxed call costs at least, measured beside corral's: the same
//! component in an engine of corral's configuration, with nothing of
//! corral's around it.

use common::or_die as ok;
use std::path::Path;
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
use tool_world::corral::plugin::{host, types};

/// The store of a plain wasmtime-wasi call: its WASI and `wasi:http`
/// contexts, their table, and the plugin's settings for
/// `corral:plugin/host`.
struct Plain {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    config: &'static [(&'static str, &'static str)],
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
    };
    let mut store = Store::new(engine, state);
    store.set_epoch_deadline(u64::MAX / 2);
    store
}

/// A linker of WASI, `wasi:http` (which no measured call uses) and
/// `corral:plugin/host` for the component at `path`, which may import
/// nothing else.
fn plain_linker(path: &str) -> (Engine, Component, Linker<Plain>) {
    let (engine, component) = component(path);
    let mut linker = Linker::<Plain>::new(&engine);
    ok(wasmtime_wasi::p2::add_to_linker_async(&mut linker));
    ok(wasmtime_wasi_http::p2::add_only_http_to_linker_async(
        &mut linker,
    ));
    ok(host::add_to_linker::<
        Plain,
        wasmtime::component::HasSelf<Plain>,
    >(&mut linker, |s| s));
    (engine, component, linker)
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
