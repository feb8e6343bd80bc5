//! Helpers shared by the benchmarks.

// Each bench compiles this module on its own and uses a part of it.
#![allow(dead_code, reason = "each bench uses a part of the shared helpers")]

use corral_core::call::{Dispatcher, NoApprover};
use corral_core::hooks::Hooks;
use corral_manifest::{DEFAULTS, DEFAULTS_NAME, Layer, Manifest, from_layers};
use corral_policy::Policy;
use corral_protocol::{Mode, ToolCall};
use corral_runtime::{Plugins, Runtime, RuntimeOptions};
use std::path::Path;
use std::sync::Arc;

/// The events of a dispatched call, dropped.
pub struct Discard;

impl corral_core::hooks::Emit for Discard {
    fn emit(&mut self, _: corral_protocol::Event) -> anyhow::Result<()> {
        Ok(())
    }
}

impl corral_core::call::Sink for Discard {
    fn save_artifact(&self, _: &str, _: &str) -> Option<std::io::Result<std::path::PathBuf>> {
        None
    }
}

/// The value, or the benchmark stops with the error.
pub fn or_die<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// A tokio runtime and a corral runtime whose compile cache is a fresh
/// temporary directory (kept alive by the returned guard).
pub fn engine() -> (tokio::runtime::Runtime, tempfile::TempDir, Runtime) {
    let rt = or_die(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    );
    let cache = or_die(tempfile::tempdir());
    let runtime = or_die(Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.path().to_path_buf()),
    }));
    (rt, cache, runtime)
}

/// A workspace holding `small.txt`, five words: the cheapest call's input.
pub fn small_workspace() -> tempfile::TempDir {
    let ws = or_die(tempfile::tempdir());
    or_die(std::fs::write(
        ws.path().join("small.txt"),
        "one two three four five\n",
    ));
    ws
}

/// The built-in defaults plus `extra`, as the manifest of the workspace `ws`.
pub fn manifest(ws: &Path, extra: &str) -> Manifest {
    let layers = [
        Layer {
            name: DEFAULTS_NAME.into(),
            text: DEFAULTS.into(),
            base: ws.to_path_buf(),
        },
        Layer {
            name: "bench.toml".into(),
            text: extra.into(),
            base: ws.to_path_buf(),
        },
    ];
    or_die(from_layers(ws, &layers))
}

/// Prints one line of the report.
#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
pub fn report(line: &str) {
    println!("{line}");
}

/// Loads the built-in defaults plus `extra` for the workspace `ws`.
pub fn load(rt: &tokio::runtime::Runtime, runtime: &Runtime, ws: &Path, extra: &str) -> Plugins {
    or_die(rt.block_on(runtime.load(&manifest(ws, extra))))
}

/// Two dispatchers over `plugins` that allow everything, the second with
/// `hooks`: the pair the hook-cost rows compare.
pub fn plain_and_hooked(plugins: Arc<Plugins>, hooks: Arc<Hooks>) -> (Dispatcher, Dispatcher) {
    let policy = Policy {
        mode: Mode::FullAuto,
        rules: Vec::new(),
    };
    let plain = Dispatcher::new(plugins.clone(), policy.clone(), Arc::new(NoApprover), None);
    let hooked = Dispatcher::new(plugins, policy, Arc::new(NoApprover), None).with_hooks(hooks);
    (plain, hooked)
}

/// `read_file` of [`small_workspace`]'s file: the cheapest call.
pub fn read_small() -> ToolCall {
    ToolCall {
        id: "b".into(),
        name: "read_file".into(),
        arguments: r#"{"path":"small.txt"}"#.into(),
        model_id: None,
    }
}
