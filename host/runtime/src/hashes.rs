//! Verified SHA-256s of plugin files, keyed by file identity.
//!
//! Hashing a plugin file means reading it whole (~18 MB for a Python
//! plugin): a start would pay that for every declared plugin, used or not.
//! After a file has been read and hashed, its hash is recorded here under
//! its identity — device, inode, size, modification and change times in
//! nanoseconds — and a later start that finds the same identity takes the
//! hash without reading the file. Any write to the file, any rename over
//! it, any `touch` or `chmod` changes its change time (which no user can
//! set back), so a swapped file is read and hashed again and checked
//! against its pin and trust record as before.
//!
//! The hash only says which component a file is; the bytes corral compiles
//! are always hashed where they are compiled (see `loader::reread`), and a
//! compiled artifact is found by that hash, so what runs is what the pin and
//! trust record approved even if an entry here were wrong.
//!
//! Entries live in a `hashes` directory inside the compile cache's own
//! (private to the user, like the compiled code they lead to), one small
//! file per identity, each written atomically.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

/// The subdirectory of the compile cache that holds the hashes.
const SUBDIR: &str = "hashes";

/// Entries kept; past this, a new entry clears the older ones.
const MAX_ENTRIES: usize = 4096;

/// Version of the entry format.
const FORMAT: &str = "v1";

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl Identity {
    /// The identity of the file `meta` describes.
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The whole identity as one line of text, to be compared as text.
    pub(crate) fn stamp(&self) -> String {
        format!(
            "{:x}-{:x} {} {} {}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns
        )
    }

    fn file_name(&self) -> String {
        format!("{:x}-{:x}", self.dev, self.ino)
    }

    fn line(&self, sha256: &str) -> String {
        format!(
            "{FORMAT} {} {} {} {sha256}\n",
            self.size, self.mtime_ns, self.ctime_ns
        )
    }
}

/// The verified-hash cache; a `None` directory remembers nothing.
pub(crate) struct Hashes {
    dir: Option<PathBuf>,
}

impl Hashes {
    /// The cache inside the compile cache directory `cache_dir` (already
    /// checked to belong to this user).
    pub(crate) fn new(cache_dir: Option<&Path>) -> Self {
        Self {
            dir: cache_dir.map(|d| d.join(SUBDIR)),
        }
    }

    /// The recorded SHA-256 of the file `path` leads to, if its identity
    /// now is the one it had when it was hashed.
    pub(crate) fn get(&self, path: &Path) -> Option<String> {
        let dir = self.dir.as_ref()?;
        let id = Identity::of(&std::fs::metadata(path).ok()?);
        let bytes = crate::fsread::read_state(&dir.join(id.file_name()), 4096).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let sha256 = text.trim_end().rsplit_once(' ')?.1;
        let valid = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit());
        (valid && text == id.line(sha256)).then(|| sha256.to_owned())
    }

    /// Records that the file with identity `id` has the SHA-256 `sha256`.
    pub(crate) fn put(&self, id: &Identity, sha256: &str) {
        let Some(dir) = &self.dir else { return };
        if let Err(e) = std::fs::create_dir_all(dir) {
            tracing::debug!("cannot create {}: {e}", dir.display());
            return;
        }
        bound(dir);
        let path = dir.join(id.file_name());
        if let Err(e) = super::atomic::write(&path, id.line(sha256).as_bytes()) {
            tracing::debug!("cannot record the hash in {}: {e}", path.display());
        }
    }
}

/// Keeps the directory under [`MAX_ENTRIES`]: identities of files long gone
/// pile up, and re-hashing a file once costs little.
fn bound(dir: &Path) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let entries: Vec<PathBuf> = read.flatten().map(|e| e.path()).collect();
    if entries.len() >= MAX_ENTRIES {
        for path in entries {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Removes every recorded hash under the compile cache directory `cache_dir`.
pub(crate) fn clear(cache_dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(cache_dir.join(SUBDIR)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_is_found_only_while_the_file_keeps_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let hashes = Hashes::new(Some(dir.path()));
        let file = dir.path().join("p.wasm");
        std::fs::write(&file, b"one").unwrap();
        let sha = "ab".repeat(32);
        hashes.put(&Identity::of(&std::fs::metadata(&file).unwrap()), &sha);
        assert_eq!(hashes.get(&file), Some(sha));
        // Same size, same modification time, new content: the change time
        // tells.
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&file, b"two").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(hashes.get(&file), None);
        clear(dir.path()).unwrap();
        assert!(!dir.path().join(SUBDIR).exists());
    }
}
