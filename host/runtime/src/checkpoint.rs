//! Before-images of the files a call changes, kept before the change.
//!
//! `write-files` is where every file change of a plugin happens, so it is
//! where the images are taken: once a batch's targets are resolved and
//! checked, and before any temporary file is written, each target's
//! current content and mode (or that it did not exist) and its new
//! content go to the [`Checkpoint`] the caller put in scope with
//! [`scope`]. A checkpoint that cannot be kept refuses the batch: a
//! change that could not be undone is not made behind the user's back.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

/// A file as it was, or will be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    /// It did not exist.
    Absent,
    /// A regular file with this content and these permission bits.
    File {
        /// The bytes.
        content: Vec<u8>,
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
    },
    /// Larger than the checkpoint cap: only its size is known.
    TooBig {
        /// Its size in bytes.
        size: u64,
    },
}

/// One file a batch is about to change.
#[derive(Debug, Clone)]
pub struct Change {
    /// The target as the host resolved it (symlinks followed), absolute.
    pub path: PathBuf,
    /// What it holds now.
    pub before: Image,
    /// What it will hold (its mode kept when it existed).
    pub after: Image,
}

/// Keeps the before-images of a batch; called before anything is written.
pub trait Checkpoint: Send + Sync {
    /// Keeps `changes` durably; an error refuses the whole batch.
    fn keep(&self, changes: &[Change]) -> Result<(), String>;

    /// Files larger than this many bytes are recorded as too big.
    fn cap(&self) -> u64;

    /// Whether this session changed the file at `path` (absolute): what
    /// it reads back is not the user's own.
    fn changed(&self, path: &std::path::Path) -> bool {
        let _ = path;
        false
    }
}

tokio::task_local! {
    static CURRENT: Arc<dyn Checkpoint>;
}

/// Runs `fut` with `checkpoint` keeping the before-images of every file
/// change its calls make.
pub async fn scope<F: Future>(checkpoint: Arc<dyn Checkpoint>, fut: F) -> F::Output {
    CURRENT.scope(checkpoint, fut).await
}

/// The checkpoint in scope, if any.
pub(crate) fn current() -> Option<Arc<dyn Checkpoint>> {
    CURRENT.try_with(Arc::clone).ok()
}
