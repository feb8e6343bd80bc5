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

/// Instances made ahead of their calls ([`reserve`]) that may wait at
/// once: a quarter of the slots, so calls always find most of them free.
const MAX_AHEAD: usize = (MAX_CONCURRENT_CALLS / 4) as usize;
static AHEAD: LazyLock<Semaphore> = LazyLock::new(|| Semaphore::new(MAX_AHEAD));

/// A running call's place; given back when dropped.
#[derive(Debug)]
pub(super) struct Admitted {
    _slot: Reserved,
    _memory: SemaphorePermit<'static>,
}

/// A slot taken for a store, with or without a call yet; given back when
/// dropped.
#[derive(Debug)]
pub(super) struct Reserved {
    _slot: SemaphorePermit<'static>,
    /// Held while the store waits for its call, made ahead of it.
    _ahead: Option<SemaphorePermit<'static>>,
}

/// A slot for an instance made ahead of its call, if one is free now: it
/// never waits, and never takes one of the last three quarters of the
/// slots. Its memory is admitted when the call comes ([`admit_reserved`]).
pub(super) fn reserve() -> Option<Reserved> {
    let ahead = AHEAD.try_acquire().ok()?;
    let slot = SLOTS.try_acquire().ok()?;
    Some(Reserved {
        _slot: slot,
        _ahead: Some(ahead),
    })
}

/// [`admit`] for a call whose store already holds `reserved`: it waits
/// only for `memory_mb`.
pub(super) async fn admit_reserved(memory_mb: u64, reserved: Reserved) -> Option<Admitted> {
    let memory = MEMORY.acquire_many(megabytes(memory_mb)).await.ok()?;
    Some(Admitted {
        _slot: reserved,
        _memory: memory,
    })
}

/// `memory_mb` as a count of the budget's permits.
fn megabytes(memory_mb: u64) -> u32 {
    u32::try_from(memory_mb)
        .unwrap_or(u32::MAX)
        .clamp(1, CALLS_MEMORY_MB)
}

/// Waits for a slot and for `memory_mb` of the budget. `None` only if the
/// semaphores were closed, which nothing does.
pub(super) async fn admit(memory_mb: u64) -> Option<Admitted> {
    let mb = megabytes(memory_mb);
    // Memory first: a call waiting for memory must not sit on a slot that a
    // smaller call could use.
    let memory = MEMORY.acquire_many(mb).await.ok()?;
    let slot = SLOTS.acquire().await.ok()?;
    Some(Admitted {
        _slot: Reserved {
            _slot: slot,
            _ahead: None,
        },
        _memory: memory,
    })
}
