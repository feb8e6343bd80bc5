//! Links the `corral` binary with packed relative relocations
//! (`DT_RELR`) where the toolchain and C library support them.
//!
//! A position-independent executable carries one relocation per pointer in
//! its static data (vtables, tables of strings): about 87,000 here, 2 MB of
//! `.rela.dyn` that the dynamic loader reads and applies on every start.
//! Packed, the same relocations take a few kilobytes, so each `corral`
//! process starts with fewer pages to map and less for the loader to do,
//! and stays a PIE (its address still randomised).
//!
//! Supported since binutils 2.38 and glibc 2.36. The probe links and runs
//! a tiny program with the flag; where either fails, the binary is linked
//! as before.

use std::path::Path;
use std::process::Command;

/// The linker flag.
const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    // Probed only for a native Linux/glibc build, with the default linker.
    if os != "linux" || env != "gnu" || host != target || linker_configured(&target) {
        return;
    }
    let Some(out) = std::env::var_os("OUT_DIR") else {
        return;
    };
    if probe(Path::new(&out)) {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
}

/// Whether the build names its own linker for `target`, which this probe
/// of `cc` would not speak for.
fn linker_configured(target: &str) -> bool {
    let key = format!(
        "CARGO_TARGET_{}_LINKER",
        target.to_uppercase().replace(['-', '.'], "_")
    );
    std::env::var_os(key).is_some() || std::env::var_os("RUSTC_LINKER").is_some()
}

/// Links a tiny program with [`FLAG`] and runs it: `true` when both work.
fn probe(out: &Path) -> bool {
    let source = out.join("relr-probe.c");
    let program = out.join("relr-probe");
    let table = "static const char *names[] = {\"a\", \"b\"};\n\
                 int main(void) { return names[1][0] == 'b' ? 0 : 1; }\n";
    if std::fs::write(&source, table).is_err() {
        return false;
    }
    let linked = Command::new("cc")
        .args(["-fPIE", "-pie", FLAG, "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}
