//! The little the search tools need from the file system besides the walk
//! (`corral-walk`): read many whole files.
//!
//! Natively this is `std::fs`. In the sandbox, `std::fs` goes through
//! wasi-libc and `wasi:filesystem`: reading a file costs about a dozen host
//! calls (open, stat, a stream, reads, drops). corral's `files` interface ([`corral_sdk::files`]) reads a
//! batch of files in one call, with the same confinement. Anything it
//! cannot serve (a name that is not UTF-8, a file over the batch budget, a
//! kernel without `openat2`) falls back to `std::fs`.

use std::path::PathBuf;

/// Files read per `read-files` call, and the bytes they may add up to. Small
/// batches keep what was just read in the CPU's cache until it is searched;
/// a batch of 64 files was 20% slower than one of 8 on a tree of 12 KiB files.
#[cfg(target_family = "wasm")]
const BATCH_FILES: usize = 8;
#[cfg(target_family = "wasm")]
const BATCH_BYTES: u64 = 1 << 20;
/// Largest file read whole through the host; larger ones are streamed.
#[cfg(target_family = "wasm")]
const SINGLE_BYTES: u64 = 16 << 20;

/// The file system as the search tools see it.
pub(crate) struct Fs;

impl Fs {
    /// How many paths [`Fs::read_many`] reads at once.
    pub(crate) fn batch(&self) -> usize {
        #[cfg(target_family = "wasm")]
        return BATCH_FILES;
        #[cfg(not(target_family = "wasm"))]
        return 1;
    }

    /// The whole content of each file of `paths`, or `None` for those this
    /// layer has no faster way to read than the caller's own (natively, all
    /// of them: the searcher reads a file best itself).
    pub(crate) fn read_many(&self, paths: &[PathBuf]) -> Vec<Option<Vec<u8>>> {
        #[cfg(target_family = "wasm")]
        {
            let text: Option<Vec<String>> = paths
                .iter()
                .map(|p| p.to_str().map(str::to_owned))
                .collect();
            if let Some(text) = text {
                use corral_sdk::files::{FileError, read_files};
                return read_files(&text, BATCH_BYTES)
                    .into_iter()
                    .zip(&text)
                    .map(|(result, path)| match result {
                        // A large file, or the batch's budget ran out: alone.
                        Err(FileError::OverBudget) => {
                            read_files(std::slice::from_ref(path), SINGLE_BYTES)
                                .pop()
                                .and_then(Result::ok)
                        }
                        other => other.ok(),
                    })
                    .collect();
            }
        }
        paths.iter().map(|_| None).collect()
    }
}
