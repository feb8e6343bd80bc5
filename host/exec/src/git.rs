//! Git as corral runs it for itself (the model's context, the UI's `/diff`,
//! worktrees): through [`Launch`], with an environment and options that
//! nothing in the repository or a worktree can steer. No system or global
//! configuration, `GIT_DIR` and `GIT_WORK_TREE` set explicitly (a `.git`
//! file cannot send git elsewhere), no fsmonitor, hooks, pager or external
//! diff, and attributes read from the empty tree instead of the working
//! tree's `.gitattributes`, so that no filter, textconv or diff driver
//! named there runs. What the repository's own configuration names still
//! runs confined, and programs corral starts cannot write that
//! configuration (see [`super::protected_paths`]).

use super::Launch;
use std::path::{Path, PathBuf};

/// The empty tree, by object format: what `attr.tree` points at.
const EMPTY_TREE_SHA1: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
const EMPTY_TREE_SHA256: &str = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321";

/// A repository as git is pointed at it: its git directory and work tree,
/// both canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// `GIT_DIR`.
    pub git_dir: PathBuf,
    /// `GIT_WORK_TREE`.
    pub work_tree: PathBuf,
}

impl Repo {
    /// The repository `dir` is in, found the way git finds it (the nearest
    /// `.git` directory or `.git` file above it), or `None` outside one.
    pub fn find(dir: &Path) -> Option<Self> {
        let dir = dir.canonicalize().ok()?;
        dir.ancestors().find_map(|top| {
            let dot = top.join(".git");
            let meta = std::fs::symlink_metadata(&dot).ok()?;
            let git_dir = if meta.is_file() {
                gitdir_of(&dot).ok()?
            } else {
                dot.canonicalize().ok().filter(|d| d.is_dir())?
            };
            Some(Self {
                git_dir,
                work_tree: top.to_path_buf(),
            })
        })
    }

    /// git with `args`, run in `cwd` (inside the work tree), steered by
    /// nothing but corral: see the module docs. Nothing is writable:
    /// callers that need git to write say where with [`Launch::writable`].
    pub fn git<S: AsRef<std::ffi::OsStr>>(&self, cwd: &Path, args: &[S]) -> Launch {
        self.launch(cwd)
            .arg("-c")
            .arg(format!("attr.tree={}", self.empty_tree()))
            .args(args)
    }

    /// [`Repo::git`] with the working tree's attributes read as usual, for
    /// `git apply`, which git 2.47 crashes in when attributes come from a
    /// tree. The filters attributes may name are only those the
    /// repository's own configuration defines (no system or global
    /// configuration is read), which programs corral starts cannot write.
    pub fn git_with_attributes<S: AsRef<std::ffi::OsStr>>(&self, cwd: &Path, args: &[S]) -> Launch {
        self.launch(cwd).args(args)
    }

    /// git in `cwd` with everything but the attributes' source set.
    fn launch(&self, cwd: &Path) -> Launch {
        Launch::new("git", cwd)
            .named("git")
            .pass_env(["PATH", "HOME", "LANG", "LC_ALL"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_TERMINAL_PROMPT", "0")
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "diff.external=",
                "-c",
                "core.pager=cat",
                "-c",
                "core.attributesFile=/dev/null",
            ])
    }

    /// The empty tree in this repository's object format.
    fn empty_tree(&self) -> &'static str {
        let common = std::fs::read_to_string(self.git_dir.join("commondir"))
            .map(|rel| self.git_dir.join(rel.trim()))
            .unwrap_or_else(|_| self.git_dir.clone());
        let sha256 = std::fs::read_to_string(common.join("config")).is_ok_and(|config| {
            config.lines().any(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("objectformat") && l.contains("sha256")
            })
        });
        if sha256 {
            EMPTY_TREE_SHA256
        } else {
            EMPTY_TREE_SHA1
        }
    }
}

/// Why the git directory a `.git` file names cannot be found.
#[derive(Debug, thiserror::Error)]
pub enum GitDirError {
    /// The `.git` file cannot be read.
    #[error("{} cannot be read: {error}", dot_git.display())]
    Unreadable {
        /// The `.git` file.
        dot_git: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The file has no `gitdir: PATH` line.
    #[error("{} does not name a git directory", dot_git.display())]
    NoGitDir {
        /// The `.git` file.
        dot_git: PathBuf,
    },
    /// The directory it names cannot be opened.
    #[error("the git directory {named} named by {} cannot be opened: {error}", dot_git.display())]
    Unopenable {
        /// The path as the file writes it.
        named: String,
        /// The `.git` file.
        dot_git: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// For callers whose errors are still text.
impl From<GitDirError> for String {
    fn from(e: GitDirError) -> Self {
        e.to_string()
    }
}

/// The git directory a `.git` file names (`gitdir: PATH`, relative to the
/// file's directory), canonical.
pub fn gitdir_of(dot_git: &Path) -> Result<PathBuf, GitDirError> {
    let text = std::fs::read_to_string(dot_git).map_err(|error| GitDirError::Unreadable {
        dot_git: dot_git.to_path_buf(),
        error,
    })?;
    let named = text
        .strip_prefix("gitdir:")
        .map(str::trim)
        .filter(|p| !p.is_empty() && !p.contains('\n'))
        .ok_or_else(|| GitDirError::NoGitDir {
            dot_git: dot_git.to_path_buf(),
        })?;
    let base = dot_git.parent().unwrap_or(Path::new("/"));
    base.join(named)
        .canonicalize()
        .map_err(|error| GitDirError::Unopenable {
            named: named.to_owned(),
            dot_git: dot_git.to_path_buf(),
            error,
        })
}
