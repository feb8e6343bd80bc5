//! Per-call resource limits enforced by the store.

use wasmtime::ResourceLimiter;

/// Caps linear memory and tables of one call's store, remembering whether a
/// cap was hit so that the resulting trap can be explained.
pub(crate) struct CallLimiter {
    pub(crate) memory_bytes: usize,
    pub(crate) memory_hit: bool,
}

/// Table elements allowed per table; generous for real programs.
const MAX_TABLE_ELEMENTS: usize = 100_000;

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
