//! How the file tools change files: through the host's `write-files`, which
//! writes each new content to a temporary file beside its target, syncs it
//! and renames it over the target under a journal, keeping the target's
//! mode and following its symlinks inside the workspace. A kill at any
//! moment leaves every file of one call with its old content or its new
//! content, never a prefix, and a multi-file change all made or none.
//!
//! The write happens in the host because WASI 0.2 cannot set a file's mode
//! (a guest-side temp and rename would drop an executable bit) and because
//! the journal must live where no plugin can write it.
//!
//! Compiled natively (unit tests, benchmarks) there is no host: the same
//! changes are made with `std::fs`, in place.

#[cfg(not(target_family = "wasm"))]
use corral_sdk::io_error;
use corral_sdk::{Error, Result};

/// One file's new content (`None`: remove it), by workspace path.
pub(crate) type Change<'a> = (&'a str, Option<&'a str>);

/// Makes every change of `changes` or none; the error says what was wrong
/// and that nothing changed.
#[cfg(target_family = "wasm")]
pub(crate) fn commit(changes: &[Change<'_>]) -> Result<()> {
    use corral_sdk::files::{FileChange, write_files};
    let list: Vec<FileChange> = changes
        .iter()
        .map(|(path, content)| FileChange {
            path: (*path).to_owned(),
            content: content.map(|c| c.as_bytes().to_vec()),
        })
        .collect();
    write_files(&list).map_err(Error::Failed)
}

/// Natively: writes and removes in order, no journal.
#[cfg(not(target_family = "wasm"))]
pub(crate) fn commit(changes: &[Change<'_>]) -> Result<()> {
    for (path, content) in changes {
        match content {
            Some(text) => {
                if let Some(parent) = std::path::Path::new(path)
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                {
                    std::fs::create_dir_all(parent).map_err(|e| io_error(path, &e))?;
                }
                std::fs::write(path, text).map_err(|e| io_error(path, &e))?;
            }
            None => match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error(path, &e)),
            },
        }
    }
    Ok::<(), Error>(())
}
