//! The wasmtime engine, configured by `corral_engine::config` (shared with
//! the build script that precompiles the built-in plugins), and the epoch
//! ticker that drives every call's deadline.

use anyhow::Context as _;
use std::time::Duration;
use wasmtime::Engine;

/// How often the epoch ticks; deadlines are rounded up to it.
pub(super) const TICK: Duration = Duration::from_millis(10);

/// Creates the engine, with the pooling allocator and epoch interruption.
pub(super) fn new() -> anyhow::Result<Engine> {
    corral_engine::new().map_err(anyhow::Error::from)
}

/// Starts the thread that advances `engine`'s epoch every [`TICK`].
pub(super) fn start_epoch_ticker(engine: &Engine) -> anyhow::Result<()> {
    // The ticker lives as long as the engine, not the `Runtime`: loaded
    // plugins hold the engine and outlive the runtime that loaded them,
    // and their deadlines depend on it.
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("corral-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .context("cannot start the epoch thread")?;
    Ok(())
}
