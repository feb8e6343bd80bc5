//! The one wasmtime configuration of corral.
//!
//! Both the runtime (`corral-runtime`) and the build script of
//! `corral-builtin`, which precompiles the built-in plugins, build their
//! engine with [`config`]: code compiled by the build is only ever loaded by
//! an engine whose [`compatibility_key`] is the one recorded beside it, and
//! keeping a single function is what makes the two agree. A setting added
//! here reaches both; a setting added anywhere else would make every
//! precompiled built-in fall back to compiling at run time.

use std::hash::{Hash as _, Hasher as _};
use wasmtime::{Config, Engine};

/// Stores that may be alive at once (the pooling allocator's slots).
pub const MAX_CONCURRENT_CALLS: u32 = 64;

/// Bytes of a linear memory kept mapped between calls (see [`config`]).
const KEEP_RESIDENT: usize = 4 << 20;

/// The engine configuration: the pooling allocator and epoch interruption.
pub fn config() -> Config {
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
    config
}

/// Creates an engine with [`config`].
pub fn new() -> wasmtime::Result<Engine> {
    Engine::new(&config())
}

/// A digest of `engine`'s [`Engine::precompile_compatibility_hash`]: the
/// wasmtime version and every setting that affects compiled code,
/// including the CPU features code is compiled for. Code compiled by an
/// engine with another key must not be loaded.
///
/// Stable between the build script and the binary it builds (the same
/// compiler builds both, and `DefaultHasher::new` has fixed keys); not
/// meant to be stable across Rust releases, which rebuild the artifacts.
pub fn compatibility_key(engine: &Engine) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.finish()
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
