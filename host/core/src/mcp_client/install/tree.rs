//! What an installed package is, checked before each start: the sha256 of
//! its tree (paths, contents, link targets) must be the one its install
//! recorded in the entry. Reading every file at each start would cost a
//! large package (node_modules of thousands of files) its whole size, so
//! the hash is kept with the tree's identity (each entry's path, inode,
//! size, mode, mtime and ctime): while the identity is unchanged the
//! content is too. The ctime is what makes this hold: a write, a chmod, a
//! rename or a restored mtime all set it to now, and nothing but the clock
//! can set it back. The kept hashes are in corral's data directory, which
//! no confined program can read or write.

use sha2::{Digest as _, Sha256};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A file or directory of an installed tree that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {why}", path.display())]
pub struct TreeError {
    /// The file or directory.
    pub path: PathBuf,
    /// The system's reason, in words.
    pub why: String,
}

impl TreeError {
    fn new(path: &Path, e: &std::io::Error) -> Self {
        Self {
            path: path.to_path_buf(),
            why: e.to_string(),
        }
    }
}

/// Every entry beneath `root` (not `root` itself), sorted by path, with
/// its metadata (links not followed).
fn walk(root: &Path) -> Result<Vec<(PathBuf, std::fs::Metadata)>, TreeError> {
    let mut stack = vec![root.to_path_buf()];
    let mut out = Vec::new();
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| TreeError::new(&dir, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| TreeError::new(&dir, &e))?;
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).map_err(|e| TreeError::new(&path, &e))?;
            if meta.is_dir() {
                stack.push(path.clone());
            }
            out.push((path, meta));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The sha256 of the tree at `root`: each file's and link's path relative
/// to it, in order, with its content or link target.
pub fn tree_hash(root: &Path) -> Result<String, TreeError> {
    let mut hasher = Sha256::new();
    for (path, meta) in walk(root)? {
        if meta.is_dir() {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path);
        hasher.update(rel.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| TreeError::new(&path, &e))?;
            hasher.update(b"link:");
            hasher.update(target.as_os_str().as_encoded_bytes());
        } else {
            let bytes = std::fs::read(&path).map_err(|e| TreeError::new(&path, &e))?;
            hasher.update(bytes.len().to_le_bytes());
            hasher.update(&bytes);
        }
        hasher.update([0]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// A change this recent may share its timestamps with what was hashed
/// (file times tick coarsely, by milliseconds): such a tree's hash is not
/// kept, and the next start hashes it again.
const RACY: Duration = Duration::from_secs(2);

/// The identity of the tree at `root`: a digest of every entry's path,
/// device, inode, mode, size, mtime and ctime, read without opening a file;
/// and whether an entry changed within [`RACY`] of now.
fn identity(root: &Path) -> Result<(String, bool), TreeError> {
    // In nanoseconds since the epoch, as the file times are.
    let recent = SystemTime::now()
        .checked_sub(RACY)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(i128::MAX, |d| d.as_nanos().cast_signed());
    let nanos = |secs: i64, nsec: i64| i128::from(secs) * 1_000_000_000 + i128::from(nsec);
    let mut hasher = Sha256::new();
    let mut racy = false;
    for (path, m) in walk(root)? {
        let rel = path.strip_prefix(root).unwrap_or(&path);
        hasher.update(rel.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        racy |= nanos(m.ctime(), m.ctime_nsec()) >= recent
            || nanos(m.mtime(), m.mtime_nsec()) >= recent;
        for n in [
            m.dev(),
            m.ino(),
            u64::from(m.mode()),
            m.size(),
            m.mtime().cast_unsigned(),
            m.mtime_nsec().cast_unsigned(),
            m.ctime().cast_unsigned(),
            m.ctime_nsec().cast_unsigned(),
        ] {
            hasher.update(n.to_le_bytes());
        }
    }
    Ok((format!("{:x}", hasher.finalize()), racy))
}

/// The sha256 of the tree at `dir` (see [`tree_hash`]): what is kept for
/// it in the directory `kept` when the tree's identity has not changed
/// since, else computed (and kept there, unless a change is too recent to
/// tell apart).
pub fn current_hash(dir: &Path, kept: &Path) -> Result<String, TreeError> {
    let key = format!("{:x}", Sha256::digest(dir.as_os_str().as_encoded_bytes()));
    let file = kept.join(&key[..32]);
    let (id, _) = identity(dir)?;
    let kept_hash = std::fs::read_to_string(&file).ok().and_then(|text| {
        let (kept_id, hash) = text.trim().split_once('\n')?;
        (kept_id == id).then(|| hash.to_owned())
    });
    if let Some(hash) = kept_hash {
        return Ok(hash);
    }
    let hash = tree_hash(dir)?;
    // Changed while it was hashed, or too recently: what was hashed may not
    // be what the identity says.
    if identity(dir)? == (id.clone(), false) {
        // Not kept is only a cost: the next start hashes again.
        let _ = std::fs::create_dir_all(kept);
        let _ = std::fs::write(&file, format!("{id}\n{hash}\n"));
    }
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_changes_the_hash_even_with_its_size_and_mtime_restored() {
        let dir = tempfile::tempdir().unwrap();
        let kept = tempfile::tempdir().unwrap();
        let file = dir.path().join("index.js");
        std::fs::write(&file, "good").unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        std::os::unix::fs::symlink("../index.js", dir.path().join("lib/link")).unwrap();
        let fresh = current_hash(dir.path(), kept.path()).unwrap();
        assert_eq!(fresh, tree_hash(dir.path()).unwrap());
        assert_eq!(
            std::fs::read_dir(kept.path()).unwrap().count(),
            0,
            "a tree changed just now is not kept"
        );
        std::thread::sleep(RACY + Duration::from_millis(100));
        assert_eq!(current_hash(dir.path(), kept.path()).unwrap(), fresh);
        assert_eq!(std::fs::read_dir(kept.path()).unwrap().count(), 1);
        assert_eq!(current_hash(dir.path(), kept.path()).unwrap(), fresh);
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, "evil").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_ne!(current_hash(dir.path(), kept.path()).unwrap(), fresh);
    }
}
