//! The wasmtime engine: its configuration (pooling allocator, stack sizes,
//! epoch interruption), the kernel checks it depends on, and the epoch
//! ticker that drives every call's deadline.

use anyhow::Context as _;
use std::time::Duration;
use wasmtime::{Config, Engine};

/// How often the epoch ticks; deadlines are rounded up to it.
pub(super) const TICK: Duration = Duration::from_millis(10);
use super::admission::MAX_CONCURRENT_CALLS;

/// Bytes of a linear memory kept mapped between calls (see [`new`]).
const KEEP_RESIDENT: usize = 4 << 20;

/// Creates the engine, with the pooling allocator and epoch interruption.
pub(super) fn new() -> anyhow::Result<Engine> {
    let mut pool = wasmtime::PoolingAllocationConfig::default();
    pool.total_component_instances(MAX_CONCURRENT_CALLS)
        .total_core_instances(MAX_CONCURRENT_CALLS * 8)
        .total_memories(MAX_CONCURRENT_CALLS * 2)
        .total_tables(MAX_CONCURRENT_CALLS * 8)
        .total_stacks(MAX_CONCURRENT_CALLS)
        .max_memory_size(4 << 30)
        .max_component_instance_size(1 << 20)
        .max_core_instance_size(1 << 20);
    if pagemap_scan_available() {
        // Reset a used slot by restoring only the pages the last call
        // wrote (found with the PAGEMAP_SCAN ioctl) instead of handing
        // the memory back to the kernel: the next call takes no page
        // faults there and no other core's TLB needs flushing. This
        // halves the cost of a trivial call. Without the ioctl wasmtime
        // would memset the whole kept range on every call, so older
        // kernels keep the default.
        pool.linear_memory_keep_resident(KEEP_RESIDENT)
            .table_keep_resident(64 << 10)
            .pagemap_scan(wasmtime::Enabled::Auto);
    }
    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(anyhow::Error::from)
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

/// Whether the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7 and later).
fn pagemap_scan_available() -> bool {
    let uname = rustix::system::uname();
    kernel_at_least(uname.release().to_str().unwrap_or(""), (6, 7))
}

/// Whether a kernel release such as `6.18.44-fc-v769` is at least `want`
/// (major, minor).
fn kernel_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let major = parts.next().unwrap_or(0);
    let minor = parts.next().unwrap_or(0);
    (major, minor) >= want
}

#[cfg(test)]
mod tests {
    use super::kernel_at_least;

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(kernel_at_least("6.18.44-fc-v769", (6, 7)));
        assert!(kernel_at_least("6.7.0", (6, 7)));
        assert!(kernel_at_least("7.0", (6, 7)));
        assert!(!kernel_at_least("6.6.87-generic", (6, 7)));
        assert!(!kernel_at_least("5.15.0-91-generic", (6, 7)));
        assert!(!kernel_at_least("", (6, 7)));
    }
}
