//! Compiles crates to `wasm32-wasip2` components from a build script.
//!
//! Used by `corral-builtin` (the first-party plugins embedded in `corral`) and
//! by `corral-test-programs` (the guests of the integration tests). It
//! installs the `wasm32-wasip2` target when it is missing, runs a nested
//! `cargo build --release` in its own target directory (sharing the outer one
//! deadlocks) with the outer build's environment scrubbed, and reports where
//! each component landed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target every corral plugin is built for.
pub const TARGET: &str = "wasm32-wasip2";

/// Builds `packages` of the Cargo workspace at `workspace_dir` for
/// [`TARGET`] and returns `(package, path to its .wasm)` in the same order.
///
/// `watch` lists the directories whose changes should rerun the calling build
/// script. Panics with an actionable message on failure, as build scripts do.
pub fn build(workspace_dir: &Path, packages: &[&str], watch: &[PathBuf]) -> Vec<(String, PathBuf)> {
    ensure_target();
    for dir in watch {
        if dir.exists() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
    let target_dir = wasm_target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_dir)
        .arg("build")
        .arg("--release")
        .arg("--target")
        .arg(TARGET)
        .arg("--target-dir")
        .arg(&target_dir);
    for p in packages {
        cmd.arg("-p").arg(p);
    }
    scrub_env(&mut cmd);
    // Plugins are embedded and compiled by the host: debug info only makes
    // them larger and slower to compile; keep the name section for traps.
    // wasmtime runs wasm SIMD; with it, memchr and regex use vector code.
    cmd.env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+simd128");
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the wasm plugins: {e}"));
    if !status.success() {
        panic!("building {packages:?} for {TARGET} failed; see the cargo output above");
    }
    packages
        .iter()
        .map(|p| {
            let file = target_dir
                .join(TARGET)
                .join("release")
                .join(format!("{}.wasm", p.replace('-', "_")));
            assert!(
                file.exists(),
                "cargo built {p} but {} is missing",
                file.display()
            );
            (p.to_string(), file)
        })
        .collect()
}

/// Installs the `wasm32-wasip2` standard library through rustup when the
/// active toolchain lacks it (`RUSTUP_AUTO_INSTALL=0` means a toolchain file
/// alone would not).
fn ensure_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot
        .as_ref()
        .is_some_and(|s| s.join("lib/rustlib").join(TARGET).join("lib").is_dir());
    if installed {
        return;
    }
    let ok = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        panic!(
            "the {TARGET} target is not installed and could not be added automatically; \
             run `rustup target add {TARGET}` and build again"
        );
    }
}

/// `<cargo target dir>/corral-wasm`, found from `OUT_DIR`; a stable place so
/// that a build-script rerun rebuilds only what changed.
fn wasm_target_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_else(|_| "target".to_owned()));
    out.ancestors()
        .find(|dir| dir.join("CACHEDIR.TAG").exists())
        .map(|target| target.join("corral-wasm"))
        .unwrap_or_else(|| out.join("corral-wasm"))
}

/// Removes what the outer cargo sets for its own build and would confuse or
/// deadlock the nested one.
fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let drop = matches!(
            key,
            "CARGO_ENCODED_RUSTFLAGS"
                | "RUSTFLAGS"
                | "CARGO_BUILD_RUSTFLAGS"
                | "CARGO_TARGET_DIR"
                | "CARGO_BUILD_TARGET"
                | "RUSTC_WORKSPACE_WRAPPER"
                | "RUSTC_WRAPPER"
                | "CARGO_MAKEFLAGS"
                | "CARGO_MANIFEST_DIR"
                | "CARGO_PKG_NAME"
                | "OUT_DIR"
                | "TARGET"
                | "HOST"
                | "PROFILE"
                | "OPT_LEVEL"
                | "DEBUG"
                | "NUM_JOBS"
        ) || key.starts_with("CARGO_PROFILE_")
            || key.starts_with("CARGO_FEATURE_")
            || key.starts_with("CARGO_CFG_");
        if drop {
            cmd.env_remove(key);
        }
    }
}
