//! How many calls run at once, and how much memory they may hold together.
//!
//! The pooling allocator has [`MAX_CONCURRENT_CALLS`] instance slots; a call
//! beyond them used to fail at once ("all instances in use"), and 64 calls of
//! a plugin capped at `memory_mb` could together hold 64 × that. Every
//! sandboxed call now first takes a slot and its plugin's `memory_mb` from
//! a budget of [`CALLS_MEMORY_MB`], waiting in line when either is spent:
//! a burst of calls (an MCP client firing a hundred reads) queues instead
//! of failing, and the host's memory stays bounded by the budget.
//!
//! Both are process-wide, like the memory they guard; a call waiting here
//! has not started its deadline yet.

use std::sync::LazyLock;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Stores that may be alive at once (the pooling allocator's slots).
pub(super) const MAX_CONCURRENT_CALLS: u32 = corral_engine::MAX_CONCURRENT_CALLS;

/// The `memory_mb` that running calls may hold together. A plugin whose
/// own cap is larger runs alone.
pub const CALLS_MEMORY_MB: u32 = 2048;

static SLOTS: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(MAX_CONCURRENT_CALLS as usize));
static MEMORY: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(CALLS_MEMORY_MB as usize));

/// A running call's place; given back when dropped.
#[derive(Debug)]
pub(super) struct Admitted {
    _slot: SemaphorePermit<'static>,
    _memory: SemaphorePermit<'static>,
}

/// Waits for a slot and for `memory_mb` of the budget. `None` only if the
/// semaphores were closed, which nothing does.
pub(super) async fn admit(memory_mb: u64) -> Option<Admitted> {
    let mb = u32::try_from(memory_mb)
        .unwrap_or(u32::MAX)
        .clamp(1, CALLS_MEMORY_MB);
    // Memory first: a call waiting for memory must not sit on a slot that a
    // smaller call could use.
    let memory = MEMORY.acquire_many(mb).await.ok()?;
    let slot = SLOTS.acquire().await.ok()?;
    Some(Admitted {
        _slot: slot,
        _memory: memory,
    })
}
