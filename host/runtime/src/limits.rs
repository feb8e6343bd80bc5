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

/// The host-call budget of one call: each call into the host takes one
/// (the store's call hook), and a batch takes one more per item.
pub(crate) struct HostCalls {
    /// Host calls the plugin may still make.
    pub(crate) left: u64,
    /// Set when the budget ran out and ended the call.
    pub(crate) hit: bool,
}

impl HostCalls {
    /// A budget of `limit` host calls.
    pub(crate) fn new(limit: u64) -> Self {
        Self {
            left: limit,
            hit: false,
        }
    }

    /// Takes the host call being made, or traps when none is left.
    pub(crate) fn take_one(&mut self) -> wasmtime::Result<()> {
        if self.left == 0 {
            self.hit = true;
            return Err(wasmtime::format_err!("host-call budget exhausted"));
        }
        self.left -= 1;
        Ok(())
    }

    /// Takes `n` more host calls from the budget, or traps like the call
    /// hook does when it runs out.
    pub(crate) fn charge(&mut self, n: u64) -> wasmtime::Result<()> {
        if self.left < n {
            self.left = 0;
            self.hit = true;
            return Err(wasmtime::format_err!("host-call budget exhausted"));
        }
        self.left -= n;
        Ok(())
    }
}
