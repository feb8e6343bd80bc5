//! The linker every plugin is instantiated with: WASI, `wasi:http` and
//! corral's own interfaces, each added by the function of the module that
//! implements it.

use super::store::CallState;
use super::{files, fsguard, host, http, process, stream};
use wasmtime::Engine;
use wasmtime::component::Linker;

/// Builds the linker shared by every plugin of an engine. A component is
/// linked against all of it; what a call may really use is decided per call
/// (see `effects`).
pub(super) fn new(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    add_wasi(&mut linker)?;
    http::add_to_linker(&mut linker)?;
    host::add_to_linker(&mut linker)?;
    process::add_to_linker(&mut linker)?;
    files::add_to_linker(&mut linker)?;
    stream::add_to_linker(&mut linker)?;
    // Last: it replaces functions that `add_wasi` defined.
    fsguard::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// WASI 0.2 as wasmtime-wasi serves it from each call's `WasiCtx`.
fn add_wasi(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}
