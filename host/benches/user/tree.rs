//! Real trees for the search and listing rows, three of them, each of at
//! least 20,000 files and each from a package registry:
//! - the `.crate` archives of the cargo registry cache unpacked into a
//!   temporary directory (Rust sources, READMEs, licences, tests, the odd
//!   binary file), as many copies as it takes to reach the wanted number of
//!   files;
//! - a `node_modules` of common JavaScript packages, installed by npm into
//!   the bench's cache once;
//! - the C sources and documentation of the Linux kernel (Debian's
//!   `linux-source-6.1`), unpacked into the bench's cache once.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tree to search: a temporary one is removed on drop, a cached one kept.
pub struct Tree {
    /// Its root.
    root: PathBuf,
    /// The temporary directory it lives in, if it is one.
    _temp: Option<tempfile::TempDir>,
    /// Regular files in it.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Where it came from, in words.
    pub source: String,
}

impl Tree {
    /// Its root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }
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
    /// A package manager could not make a cached tree.
    #[error("{0}")]
    Install(String),
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
                    root: dir.path().to_path_buf(),
                    _temp: Some(dir),
                    files,
                    bytes,
                    source: format!("{crates} crate archives of the cargo registry cache"),
                });
            }
        }
    }
    Err(TreeError::TooFew {
        archives: archives.len(),
        files,
    })
}

/// The JavaScript packages of the `node_modules` tree: a bundler, a linter,
/// a compiler, a test runner, a UI kit and the libraries they pull in.
const NODE_PACKAGES: &[&str] = &[
    "typescript@5",
    "date-fns@3",
    "rxjs@7",
    "lodash@4",
    "eslint@9",
    "webpack@5",
    "@babel/core@7",
    "@babel/preset-env@7",
    "jest@29",
    "@mui/material@5",
    "react@18",
    "react-dom@18",
];

/// A `node_modules` of [`NODE_PACKAGES`], installed into the bench's cache
/// by npm (without their install scripts) the first time.
pub fn node_modules() -> Result<Tree, TreeError> {
    let dir = crate::mcp::cache().join("trees/node");
    let source = format!("npm: {}", NODE_PACKAGES.join(" "));
    let doing = format!("installing {} npm packages", NODE_PACKAGES.len());
    cached(&dir, dir.join("node_modules"), source, &doing, || {
        crate::mcp::npm_install(&dir, &["--ignore-scripts"], NODE_PACKAGES)
            .map_err(TreeError::Install)
    })
}

/// The tree at `root`, made by `make` in `dir` unless a finished one is
/// there already (marked by `dir/.complete`); `doing` says what `make` does.
fn cached(
    dir: &Path,
    root: PathBuf,
    source: String,
    doing: &str,
    make: impl FnOnce() -> Result<(), TreeError>,
) -> Result<Tree, TreeError> {
    let done = dir.join(".complete");
    if !done.is_file() {
        crate::note(&format!("  {doing} into {} (once)", dir.display()));
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(|e| TreeError::Io(e.to_string()))?;
        make()?;
        std::fs::write(&done, b"").map_err(|e| TreeError::Io(e.to_string()))?;
    }
    let (files, bytes) = count(&root);
    Ok(Tree {
        root,
        _temp: None,
        files,
        bytes,
        source,
    })
}

/// Debian's package of the kernel's sources.
const LINUX_PACKAGE: &str = "linux-source-6.1";

/// The parts of the kernel's tree taken: documentation, headers, and the
/// sources of the file systems, networking, the core, its library and sound
/// (about 22,500 files), separated by spaces.
const LINUX_PARTS: &str = "Documentation include fs net kernel lib sound";

/// The kernel's sources ([`LINUX_PARTS`] of [`LINUX_PACKAGE`]), fetched by
/// `apt-get download` and unpacked into the bench's cache the first time.
pub fn linux() -> Result<Tree, TreeError> {
    let dir = crate::mcp::cache().join("trees/linux");
    let source = format!(
        "{} of Debian's {LINUX_PACKAGE}",
        LINUX_PARTS.replace(' ', ", ")
    );
    let doing = format!("fetching {LINUX_PACKAGE} and unpacking part of it");
    cached(&dir, dir.join(LINUX_PACKAGE), source, &doing, || {
        unpack_linux(&dir)
    })
}

/// Fetches [`LINUX_PACKAGE`] into `dir` and unpacks [`LINUX_PARTS`] of it
/// there.
fn unpack_linux(dir: &Path) -> Result<(), TreeError> {
    let fetched = Command::new("apt-get")
        .args(["download", "-q", LINUX_PACKAGE])
        .current_dir(dir)
        .status()
        .map_err(|e| TreeError::Install(format!("no apt-get ({e})")))?;
    let deb = std::fs::read_dir(dir)
        .map_err(|e| TreeError::Io(e.to_string()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"));
    let Some(deb) = deb.filter(|_| fetched.success()) else {
        return Err(TreeError::Install(format!(
            "apt-get download {LINUX_PACKAGE} failed ({fetched})"
        )));
    };
    // The package holds one archive of the whole tree; only the parts are
    // unpacked from it.
    let parts: Vec<String> = LINUX_PARTS
        .split(' ')
        .map(|p| format!("{LINUX_PACKAGE}/{p}"))
        .collect();
    let script = format!(
        "dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/src/{LINUX_PACKAGE}.tar.xz \
         | tar -xJ -C \"$2\" {}",
        parts.join(" ")
    );
    let unpacked = Command::new("sh")
        .args(["-c", &script, "sh"])
        .arg(&deb)
        .arg(dir)
        .status()
        .map_err(|e| TreeError::Install(format!("cannot run sh ({e})")))?;
    let _ = std::fs::remove_file(&deb);
    if unpacked.success() {
        Ok(())
    } else {
        Err(TreeError::Install(format!(
            "unpacking {} failed ({unpacked})",
            deb.display()
        )))
    }
}
