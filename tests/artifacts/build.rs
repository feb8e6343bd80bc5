//! Builds the test guests (tests/programs, a workspace of its own) and the
//! SDK example plugin for wasm32-wasip2, and writes one path constant per
//! component.

use std::fmt::Write as _;
use std::path::PathBuf;

const GUESTS: &[&str] = &[
    "guest-echo",
    "guest-adversary",
    "guest-http-client",
    "guest-raw-socket",
    "guest-env-provider",
    "guest-trustpin",
    "guest-effects-guest",
    "guest-fsguard",
    "guest-budgets",
    "guest-stubs",
    "guest-stubs-unknown",
    "guest-crash",
    "guest-sneaky",
    "guest-describe-reads",
    "guest-hook",
    "guest-lookalike",
];

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = dir.join("../..");
    let programs = dir.join("../programs");
    let mut built = corral_wasm_build::build(
        &programs,
        GUESTS,
        &[programs.clone(), root.join("sdk/src"), root.join("wit")],
    );
    built.extend(corral_wasm_build::build(
        &root,
        &["corral-plugin-example"],
        &[root.join("plugins/example")],
    ));
    let mut code = String::new();
    for (package, path) in built {
        let konst = package
            .trim_start_matches("guest-")
            .trim_start_matches("corral-plugin-")
            .replace('-', "_")
            .to_uppercase();
        let _ = writeln!(
            code,
            "/// Component built from `{package}`.\npub const {konst}: &str = {:?};",
            path.display().to_string()
        );
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("programs.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
