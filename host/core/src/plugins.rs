//! What the front-ends' plugin commands (`corral plugin …`, `corral tools`,
//! `corral tool call`, `corral trust`) need of the runtime, and no more: a
//! curated list, so that a front-end never depends on the runtime crate
//! and its internals (sandboxes, linker, stores) stay out of its reach.

pub use crate::runtime::{
    CACHE_MAX_MB_VAR, Capability, ImportReview, ImportStatus, Inspection, Plugin, Plugins, Runtime,
    RuntimeOptions, ToolError, ToolOutput, cache_max_bytes, cache_report, clear_cache, prune_cache,
    review,
};

/// Where the runtime reports slow steps (a plugin being compiled) while a
/// front-end waits.
pub mod progress {
    pub use crate::runtime::progress::{Progress, set_sink};
}
