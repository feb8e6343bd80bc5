//! A real source tree for the search and listing rows: the `.crate`
//! archives of the cargo registry cache unpacked into a temporary directory
//! (Rust sources, READMEs, licences, tests, the odd binary file), as many
//! copies as it takes to reach the wanted number of files.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An unpacked tree, removed on drop.
pub struct Tree {
    /// Its root.
    pub dir: tempfile::TempDir,
    /// Regular files in it.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Crate archives unpacked (with repeats).
    pub crates: usize,
}

/// Why no tree could be unpacked.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// No cargo home to find the registry cache in.
    #[error("neither CARGO_HOME nor HOME is set")]
    NoHome,
    /// The registry cache cannot be listed.
    #[error("cannot read {}: {why}", cache.display())]
    Cache {
        /// The registry cache.
        cache: PathBuf,
        /// The system's reason.
        why: String,
    },
    /// The registry cache holds no archive.
    #[error("no .crate archives under {} (a `cargo fetch` in this repository fills it)", .0.display())]
    NoArchives(PathBuf),
    /// `tar` cannot be run.
    #[error("cannot run tar (needed to unpack the crates): {0}")]
    NoTar(String),
    /// `tar` failed on an archive.
    #[error("tar xzf {} failed: {stderr}", archive.display())]
    Tar {
        /// The archive.
        archive: PathBuf,
        /// What tar wrote to stderr.
        stderr: String,
    },
    /// The temporary directory cannot be made or written in.
    #[error("{0}")]
    Io(String),
    /// Every copy of every archive gave fewer files than wanted.
    #[error("16 copies of the {archives} crate archives gave only {files} files")]
    TooFew {
        /// Archives in the cache.
        archives: usize,
        /// Files unpacked.
        files: usize,
    },
}

fn registry_cache() -> Result<PathBuf, TreeError> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".cargo")))
        .ok_or(TreeError::NoHome)?;
    Ok(home.join("registry/cache"))
}

/// Every `.crate` archive in the registry cache, in name order.
fn archives() -> Result<Vec<PathBuf>, TreeError> {
    let cache = registry_cache()?;
    let mut out = Vec::new();
    let indexes = std::fs::read_dir(&cache).map_err(|e| TreeError::Cache {
        cache: cache.clone(),
        why: e.to_string(),
    })?;
    for index in indexes.flatten() {
        let Ok(entries) = std::fs::read_dir(index.path()) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "crate") {
                out.push(p);
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(TreeError::NoArchives(cache));
    }
    Ok(out)
}

/// Regular files and their bytes under `dir`.
fn count(dir: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                files += 1;
                bytes += e.metadata().map_or(0, |m| m.len());
            }
        }
    }
    (files, bytes)
}

fn unpack(archive: &Path, into: &Path) -> Result<(), TreeError> {
    let o = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(into)
        .output()
        .map_err(|e| TreeError::NoTar(e.to_string()))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(TreeError::Tar {
            archive: archive.to_path_buf(),
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        })
    }
}

/// Unpacks the registry's crates until the tree holds `min_files` files.
pub fn crates(min_files: usize) -> Result<Tree, TreeError> {
    let archives = archives()?;
    let dir = tempfile::Builder::new()
        .prefix("corral-bench-tree-")
        .tempdir()
        .map_err(|e| TreeError::Io(e.to_string()))?;
    let (mut files, mut bytes, mut crates) = (0, 0, 0);
    for copy in 0..16 {
        let into = dir.path().join(format!("copy-{copy}"));
        std::fs::create_dir_all(&into).map_err(|e| TreeError::Io(e.to_string()))?;
        for a in &archives {
            unpack(a, &into)?;
            crates += 1;
            // A crate archive unpacks into NAME-VERSION/, its file stem.
            let stem = a.file_stem().map(PathBuf::from).unwrap_or_default();
            let (f, b) = count(&into.join(stem));
            files += f;
            bytes += b;
            if files >= min_files {
                return Ok(Tree {
                    dir,
                    files,
                    bytes,
                    crates,
                });
            }
        }
    }
    Err(TreeError::TooFew {
        archives: archives.len(),
        files,
    })
}
