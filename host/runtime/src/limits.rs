//! Per-call resource limits enforced by the store.

use wasmtime::ResourceLimiter;

/// Caps linear memory and tables of one call's store, remembering whether a
/// cap was hit so that the resulting trap can be explained.
pub(crate) struct CallLimiter {
    pub(crate) memory_bytes: usize,
    pub(crate) memory_hit: bool,
    /// Bytes the host holds for the plugin in this call (a provider's kept
    /// answer), counted against the same limit as its linear memory.
    pub(crate) held: usize,
    /// The largest linear memory allowed so far in this call.
    pub(crate) largest: usize,
}

impl CallLimiter {
    /// A limit of `memory_bytes` for linear memory and what the host holds
    /// for the plugin, together.
    pub(crate) fn new(memory_bytes: usize) -> Self {
        Self {
            memory_bytes,
            memory_hit: false,
            held: 0,
            largest: 0,
        }
    }

    /// Bytes the host may still hold for the plugin: the limit less its
    /// largest memory and what is held already.
    pub(crate) fn room(&self) -> usize {
        self.memory_bytes
            .saturating_sub(self.largest)
            .saturating_sub(self.held)
    }
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
        if desired.saturating_add(self.held) > self.memory_bytes {
            self.memory_hit = true;
            return Ok(false);
        }
        self.largest = self.largest.max(desired);
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
