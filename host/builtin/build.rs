//! Builds the first-party plugins for wasm32-wasip2 and generates a table
//! that embeds them. This crate is deliberately thin: a plugin edit reruns
//! this script and recompiles only this crate and the final link.

use std::fmt::Write as _;
use std::path::PathBuf;

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
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest_dir.join("../..");
    let packages: Vec<&str> = PLUGINS.iter().map(|(_, p)| *p).collect();
    let mut watch = vec![
        root.join("wit"),
        root.join("sdk/src"),
        root.join("sdk/Cargo.toml"),
    ];
    for (name, _) in PLUGINS {
        watch.push(root.join("plugins").join(name));
    }
    let built = corral_wasm_build::build(&root, &packages, &watch);

    let mut code = String::from("/// Every built-in plugin: `(name, component bytes)`.\n");
    code.push_str("pub static PLUGINS: &[(&str, &[u8])] = &[\n");
    for ((name, _), (_, path)) in PLUGINS.iter().zip(&built) {
        let _ = writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        );
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("plugins.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
