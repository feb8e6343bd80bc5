//! Bulk reads through the host, for tools that read many files (search,
//! indexing, summaries): one call lists a directory or reads a batch of
//! files, where `std::fs` in the sandbox takes one host call per directory
//! entry and about a dozen per file.
//!
//! Paths are relative to the workspace root, as tool arguments are, and
//! are served only inside the plugin's `grants.fs`, resolved by the kernel
//! beneath the granted directory (no absolute paths elsewhere, no `..` above
//! it, no symlinks out of it). Everything here reads, except [`write_files`],
//! which replaces or removes files all at once, so that a crash leaves them
//! either as they were or as asked (temporary files beside the targets,
//! synced, then renamed under a journal the host keeps).
//!
//! Outside the sandbox (a plugin's code compiled natively, e.g. for a
//! benchmark) there is no host: use `std::fs` there.
//!
//! ```no_run
//! use corral_sdk::files;
//!
//! let names: Vec<String> = files::list_directory("src")
//!     .map(|entries| entries.into_iter().map(|e| e.name).collect())
//!     .unwrap_or_default();
//! let paths: Vec<String> = names.iter().map(|n| format!("src/{n}")).collect();
//! for (path, content) in paths.iter().zip(files::read_files(&paths, 8 << 20)) {
//!     match content {
//!         Ok(bytes) => corral_sdk::log(corral_sdk::Level::Info, &format!("{path}: {} bytes", bytes.len())),
//!         // Read it alone, or skip it.
//!         Err(files::FileError::OverBudget) => {}
//!         Err(other) => corral_sdk::log(corral_sdk::Level::Warn, &format!("{path}: {other:?}")),
//!     }
//! }
//! ```

pub use crate::__bindings::corral::plugin::files::{
    DirEntry, EntryKind, FileChange, FileError, list_directory, read_files, write_files,
};
