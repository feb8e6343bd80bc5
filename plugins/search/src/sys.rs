//! The little the search tools need from the file system: list a directory
//! and read many whole files.
//!
//! Natively this is `std::fs`. In the sandbox, `std::fs` goes through
//! wasi-libc and `wasi:filesystem`: a directory listing costs two host calls
//! per entry (the entry, then a metadata hash wasi-libc turns into an inode
//! number) and reading a file about a dozen (open, stat, a stream, reads,
//! drops). corral's `files` interface ([`corral_sdk::files`]) lists a
//! directory in one call and reads a batch of files in another, with the
//! same confinement. Anything it cannot serve (a name that is not UTF-8, a
//! file over the batch budget, a kernel without `openat2`) falls back to
//! `std::fs`.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

/// What a directory entry is, as far as a walk cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A directory, to descend into.
    Dir,
    /// A regular file, to search.
    File,
    /// Anything else: symlinks (never followed), devices, sockets.
    Other,
}

/// One entry of a directory listing.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) name: OsString,
    pub(crate) kind: Kind,
}

/// Lists `dir` with `std::fs` (the file type comes from the listing itself,
/// no `stat` per entry).
fn list_std(dir: &Path) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => Kind::Dir,
            Ok(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        out.push(Entry {
            name: entry.file_name(),
            kind,
        });
    }
    Ok(out)
}

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
    /// The entries of `dir`, in no particular order, without `.` and `..`.
    pub(crate) fn list(&self, dir: &Path) -> io::Result<Vec<Entry>> {
        #[cfg(target_family = "wasm")]
        if let Some(entries) = list_host(dir) {
            return Ok(entries);
        }
        list_std(dir)
    }

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

/// Lists `dir` through the host's `files` interface.
#[cfg(target_family = "wasm")]
fn list_host(dir: &Path) -> Option<Vec<Entry>> {
    use corral_sdk::files::{EntryKind, list_directory};
    let entries = list_directory(dir.to_str()?).ok()?;
    Some(
        entries
            .into_iter()
            .map(|e| Entry {
                kind: match e.kind {
                    EntryKind::Directory => Kind::Dir,
                    EntryKind::File => Kind::File,
                    EntryKind::Symlink | EntryKind::Other => Kind::Other,
                },
                name: e.name.into(),
            })
            .collect(),
    )
}
