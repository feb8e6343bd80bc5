//! Helpers shared by the benchmarks.

use corral_manifest::{DEFAULTS, DEFAULTS_NAME, Layer, from_layers};
use corral_runtime::{Plugins, Runtime};
use std::path::Path;

/// Prints one line of the report.
#[expect(clippy::print_stdout, reason = "a benchmark reports on stdout")]
pub fn report(line: &str) {
    println!("{line}");
}

/// Loads the built-in defaults plus `extra` for the workspace `ws`.
pub fn load(rt: &tokio::runtime::Runtime, runtime: &Runtime, ws: &Path, extra: &str) -> Plugins {
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
    let manifest = from_layers(ws, &layers).unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(runtime.load(&manifest))
        .unwrap_or_else(|e| panic!("{e}"))
}
