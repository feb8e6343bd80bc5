//! The built-in plugins as the build compiled them.
//!
//! `corral-builtin`'s build script compiles every built-in with
//! `corral_engine::config`, the configuration this runtime's engine is made
//! with, and records the engine's compatibility key (wasmtime's version and
//! every setting that shapes code, CPU features included). Such code is
//! loaded only when this engine's key is the recorded one; otherwise (a CPU
//! without the build machine's features, say) the built-in is compiled as
//! any plugin is, through the compile cache, and the reason is logged.
//!
//! This is code the host compiled itself, embedded in the host's own
//! executable: corral still never loads precompiled code that a plugin or a
//! file supplies.

use wasmtime::Engine;
use wasmtime::component::Component;

/// The environment variable that turns precompiled built-ins off (`off`):
/// they are then compiled at run time through the compile cache, as user
/// plugins are. Meant for measuring and for ruling the build's code out.
pub const PRECOMPILED_VAR: &str = "CORRAL_PRECOMPILED";

/// The SHA-256 of the built-in `name`'s component as recorded by the build,
/// so that the embedded bytes need not be hashed at run time.
pub(super) fn sha256(name: &str) -> Option<&'static str> {
    corral_builtin::precompiled(name).map(|(sha256, _)| sha256)
}

/// The built-in `name`, whose component has the SHA-256 `sha256`, from the
/// code the build compiled; or why that code cannot be used here.
pub(super) fn load(
    engine: &Engine,
    cache: &super::cache::Cache,
    name: &str,
    sha256: &str,
) -> Result<Component, String> {
    if std::env::var(PRECOMPILED_VAR).is_ok_and(|v| v.trim() == "off") {
        return Err(format!("{PRECOMPILED_VAR}=off"));
    }
    let Some(built) = corral_builtin::ENGINE_KEY else {
        return Err("this corral was built without precompiled built-ins".into());
    };
    let Some((recorded, code)) = corral_builtin::precompiled(name) else {
        return Err("the build did not compile it".into());
    };
    if recorded != sha256 {
        return Err("the build compiled another version of it".into());
    }
    let key = corral_engine::compatibility_key(engine);
    if key != built {
        return Err(format!(
            "the build compiled it for another engine (key {built:016x}, this one {key:016x}: \
             another CPU, kernel or wasmtime configuration)"
        ));
    }
    // Mapped from the cache's copy when there is one (checked as compiled
    // entries are); its file name holds this engine's key, and
    // deserialization checks the version and settings again.
    let current: Vec<&str> = corral_builtin::PRECOMPILED
        .iter()
        .map(|(_, sha256, _)| *sha256)
        .collect();
    // SAFETY: `code` is `corral_builtin`'s embedded data (`include_bytes!`
    // of the build's output): static, read-only, in the executable's own
    // file mapping.
    if let Some(component) = unsafe { cache.load_built(engine, sha256, code, &current) } {
        tracing::debug!(
            plugin = name,
            "the build's code, mapped from its copy in the compile cache"
        );
        return Ok(component);
    }
    // SAFETY: `code` is `Engine::precompile_component` output of this
    // host's own build script, embedded in this executable (never bytes a
    // plugin or a file supplied), for an engine with this engine's
    // compatibility key, checked just now. Deserialization checks the
    // wasmtime version and settings in the artifact again.
    unsafe { Component::deserialize(engine, code) }.map_err(|e| format!("{e}"))
}
