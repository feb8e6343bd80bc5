//! Builds the first-party plugins for wasm32-wasip2, compiles each to
//! native code with the runtime's own engine configuration
//! (`corral_engine::config`), and generates the tables that embed both.
//! This crate is deliberately thin: a plugin edit reruns this script and
//! recompiles only this crate and the final link.

use sha2::{Digest as _, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `(builtin name, package)`
const PLUGINS: &[(&str, &str)] = &[
    ("fs", "corral-plugin-fs"),
    ("search", "corral-plugin-search"),
    ("replay", "corral-plugin-replay"),
    ("openai", "corral-plugin-openai"),
    ("anthropic", "corral-plugin-anthropic"),
    ("shell", "corral-plugin-shell"),
    ("git", "corral-plugin-git"),
    ("hook-block", "corral-plugin-hook-block"),
    ("hook-format", "corral-plugin-hook-format"),
    ("hook-context", "corral-plugin-hook-context"),
    ("web-fetch", "corral-plugin-web-fetch"),
    ("web-search", "corral-plugin-web-search"),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    let root = manifest_dir.join("../..");
    let packages: Vec<&str> = PLUGINS.iter().map(|(_, p)| *p).collect();
    let mut watch = vec![
        root.join("wit"),
        root.join("sdk/src"),
        root.join("sdk/Cargo.toml"),
        root.join("sdk/syntax"),
        root.join("host/engine/src"),
    ];
    for (name, _) in PLUGINS {
        watch.push(root.join("plugins").join(name));
    }
    let built = corral_wasm_build::build(&root, &packages, &watch);
    let paths: Vec<(&str, &Path)> = PLUGINS
        .iter()
        .zip(&built)
        .map(|((name, _), (_, path))| (*name, path.as_path()))
        .collect();
    let precompiled = precompile(&paths, &out_dir);

    let mut code = String::from("/// Every built-in plugin: `(name, component bytes)`.\n");
    code.push_str("pub static PLUGINS: &[(&str, &[u8])] = &[\n");
    for (name, path) in &paths {
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    match precompiled {
        Ok((key, entries)) => {
            let _ = writeln!(
                code,
                "/// `corral_engine::compatibility_key` of the engine that compiled [`PRECOMPILED`].\n\
                 pub const ENGINE_KEY: Option<u64> = Some({key:#x});"
            );
            code.push_str(
                "/// Every built-in plugin compiled by the build: `(name, SHA-256 of its component, code)`.\n\
                 pub static PRECOMPILED: &[(&str, &str, &[u8])] = &[\n",
            );
            for (name, sha256, path) in entries {
                let _ = writeln!(
                    code,
                    "    ({name:?}, {sha256:?}, include_bytes!({:?})),",
                    path.display().to_string()
                );
            }
            code.push_str("];\n");
        }
        Err(why) => {
            // The binary still works: it compiles the built-ins at run time
            // (and caches them), and says why once.
            println!("cargo:warning=the built-in plugins are not precompiled: {why}");
            let _ = writeln!(
                code,
                "/// No engine compiled the built-ins at build time.\n\
                 pub const ENGINE_KEY: Option<u64> = None;\n\
                 /// Empty: {why:?}\n\
                 pub static PRECOMPILED: &[(&str, &str, &[u8])] = &[];"
            );
        }
    }
    let out = out_dir.join("plugins.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}

/// A precompiled plugin: `(name, SHA-256 of its component, artifact path)`.
type Entry = (String, String, PathBuf);

/// Compiles every component in `paths` into `out_dir`, one thread each,
/// with the runtime's engine configuration. Returns the engine's
/// compatibility key and the artifacts, or why they could not be made.
fn precompile(paths: &[(&str, &Path)], out_dir: &Path) -> Result<(u64, Vec<Entry>), String> {
    let engine = corral_engine::new().map_err(|e| format!("cannot create the engine: {e}"))?;
    let key = corral_engine::compatibility_key(&engine);
    let results: Vec<Result<Entry, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = paths
            .iter()
            .map(|(name, path)| {
                let engine = &engine;
                scope.spawn(move || -> Result<Entry, String> {
                    let bytes = std::fs::read(path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    let sha256 = hex(&Sha256::digest(&bytes));
                    let code = engine
                        .precompile_component(&bytes)
                        .map_err(|e| format!("cannot compile `{name}`: {e}"))?;
                    let out = out_dir.join(format!("{name}.cwasm"));
                    std::fs::write(&out, code)
                        .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
                    Ok(((*name).to_owned(), sha256, out))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a compile thread panicked".into()))
            })
            .collect()
    });
    let entries = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((key, entries))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
