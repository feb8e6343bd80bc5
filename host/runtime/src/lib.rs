//! # corral-runtime
//!
//! Above the manifest, below the core: exports [`Runtime`], [`Plugins`],
//! [`Plugin`] and what a call touched ([`Touched`]).
//!
//! The plugin runtime: one wasmtime [`Engine`], components compiled once and
//! cached on disk, their tool descriptions cached beside them, an
//! `InstancePre` per plugin prepared when it is first needed, and a fresh
//! `Store` and instance for every call.
//!
//! Every call runs under the plugin's grants (directories, environment
//! variables, network hosts) and limits (wall-clock deadline through epoch
//! interruption, linear-memory cap, output cap, host-call budget). A trap,
//! a timeout or a limit ends that call with a [`ToolError`]; the instance is
//! dropped with its store, so the next call starts clean.
//!
//! Where things are:
//! - [`Runtime`] (here) owns the engine (`engine`: configuration, epoch
//!   ticker), the linker (`linker`) and the compile cache (`cache`);
//! - `loader` loads a manifest's plugins or inspects a component, refusing
//!   imports corral does not provide (`imports`, which also tells which
//!   imports a plugin's grants leave denied) before anything runs; a
//!   plugin whose tools are in the description cache (`descriptions`) is
//!   compiled only on its first call;
//! - [`Plugin`] (`plugin`, `provider`) is one loaded plugin and its calls,
//!   [`Plugins`] (`registry`) the loaded set and which plugin serves a tool;
//! - `compiler` compiles and links a plugin's component, at load or on its
//!   first call;
//! - `sandbox` calls one export in a fresh store; `store` is that store's
//!   data, each interface's state owned by the module that implements it
//!   and reached through a projection, and the linker that composes them;
//!   what a call may use of its grants is decided by `effects`, and its
//!   limits by `limits` and `budget`;
//! - the host's side of each interface a plugin imports: `host`, `files`,
//!   `process`, `stream`, `http` (egress), `fsguard` (protected paths in
//!   `wasi:filesystem`), `stdio` (a plugin's standard streams), on top of
//!   the code `bindgen!` generates from the WIT (`bindings`);
//! - `error` holds the errors every layer names ([`LoadError`],
//!   [`ToolError`]).
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

use corral_exec as exec;
use corral_exec::fsread;
use corral_manifest as manifest;
use corral_manifest::trust;
#[cfg(test)]
use corral_policy as policy;
use corral_protocol as protocol;
use corral_protocol::terminal;

mod admission;
mod atomic;
mod bindings;
mod budget;
mod cache;
mod checkpoint;
mod checksum;
mod compiler;
mod connections;
mod descriptions;
mod effects;
mod engine;
mod error;
mod files;
mod fsguard;
mod hashes;
mod hook;
mod host;
mod http;
mod imports;
mod limits;
mod loader;
mod plugin;
mod precompiled;
mod process;
pub mod progress;
mod provider;
mod registry;
mod sandbox;
mod stdio;
mod store;
mod stream;
mod touched;
mod vetting;
mod writes;

pub use admission::CALLS_MEMORY_MB;
pub use budget::EVENT_CHANNEL_CAPACITY;
pub use cache::{
    CACHE_DEFAULT_MAX_MB, CACHE_MAX_MB_VAR, CacheEntry, CacheOutcome, CacheReport, CacheSizeError,
    cache_max_bytes, cache_report, clear_cache, prune_cache,
};
pub use checkpoint::{
    Change as CheckpointChange, Checkpoint, Image as CheckpointImage, scope as checkpoint_scope,
};
pub use descriptions::TOOL_CACHE_VAR;
pub use error::{LoadError, ToolError};
pub use fsguard::may_write_git;
pub use imports::{Capability, ImportReview, Status as ImportStatus, classify, review};
pub use loader::{Inspection, ToolsError};
pub use plugin::{Plugin, ToolOutput};
pub use precompiled::PRECOMPILED_VAR;
pub use registry::Plugins;
pub use touched::{ProgramRun, Touched};
pub use vetting::Withheld;
pub use writes::{Restore, RestoreError, restore_files};

use crate::manifest::{Manifest, PluginDecl};
use std::path::PathBuf;
use std::sync::Arc;
use wasmtime::Engine;

/// Settings of the runtime itself.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Where compiled components are cached; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
}

impl RuntimeOptions {
    /// The user's cache, `$XDG_CACHE_HOME/corral/components`.
    pub fn user() -> Self {
        Self {
            cache_dir: dirs::cache_dir().map(|d| d.join("corral").join("components")),
        }
    }
}

/// The engine, the linker, the compile cache and the description cache,
/// shared by every plugin.
pub struct Runtime {
    engine: Engine,
    linker: Arc<sandbox::HostLinker>,
    cache: Arc<cache::Cache>,
    descriptions: descriptions::Descriptions,
    hashes: hashes::Hashes,
}

impl Runtime {
    /// Creates the engine (with the pooling allocator and epoch interruption)
    /// and starts the epoch ticker.
    pub fn new(options: RuntimeOptions) -> anyhow::Result<Self> {
        let engine = engine::new()?;
        let linker = sandbox::HostLinker::new(&engine).map_err(anyhow::Error::from)?;
        engine::start_epoch_ticker(&engine)?;
        let cache = cache::Cache::new(&engine, options.cache_dir);
        let descriptions = descriptions::Descriptions::new(cache.dir());
        let hashes = hashes::Hashes::new(cache.dir());
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            cache: Arc::new(cache),
            descriptions,
            hashes,
        })
    }

    /// Loads the plugins of `manifest`: reads each component and checks it
    /// against its pin and trust record, refuses imports corral does not
    /// provide, learns each plugin's tools and checks that no tool name is
    /// exported twice.
    ///
    /// A plugin's tools come from the description cache when it holds them
    /// for this component and these settings; such a plugin is compiled,
    /// linked and instantiated only when it is first called. The others are
    /// compiled (or loaded from the compile cache) and asked for their tools
    /// now, and what they answer is cached. Entries with the same component
    /// share one compiled copy, and everything that can be checked without
    /// running a plugin is checked for every entry before any is
    /// instantiated.
    pub async fn load(&self, manifest: &Manifest) -> Result<Plugins, LoadError> {
        loader::load(self, manifest).await
    }

    /// Loads one plugin: compiled, linked and described now, without the
    /// description cache.
    pub async fn load_plugin(
        &self,
        decl: &PluginDecl,
        manifest: &Manifest,
    ) -> Result<Plugin, LoadError> {
        loader::load_one(self, decl, manifest).await
    }

    /// Reads a component's imports, exports and tools without granting it
    /// anything: it is described in a store with no directories, no
    /// environment and no network.
    pub async fn inspect(&self, bytes: &[u8]) -> Result<Inspection, LoadError> {
        loader::inspect(self, bytes).await
    }
}
