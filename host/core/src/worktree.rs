//! Git worktrees for agents that must not trample each other: a subagent
//! (`task` with `worktree`) or a whole run (`corral run --worktree`) works
//! in a detached worktree of the workspace's repository, outside the
//! workspace; what it changed comes back as a diff the user approves, and
//! the worktree is removed afterwards. Nothing is merged silently: an
//! unapproved diff is kept as a patch file.
//!
//! Git runs like every program corral starts ([`crate::exec::git::Repo::git`]):
//! confined, writing only beneath the repository's git directory and the
//! worktree (the repository's configuration, hooks and `info` read-only),
//! with `GIT_DIR` and `GIT_WORK_TREE` set by corral, no hooks, fsmonitor,
//! filters or textconv, and a deadline. An agent in the worktree may
//! rewrite the worktree's `.git` file only where its programs' read-only
//! mount does not stop it; corral checks that file says what git wrote
//! there before any git runs in the worktree, and never follows it.

use crate::exec::git::Repo;
use crate::exec::{ExecOutput, Launch};
use crate::words;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// How long one git command may take.
const DEADLINE: Duration = Duration::from_secs(60);
/// The largest diff taken from a worktree (a cut one would be wrong).
const MAX_DIFF: usize = 64 << 20;

/// Why a worktree could not be made, compared, removed or applied; its
/// text says what happened, why, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The name is not one [`check_name`] takes.
    #[error("`{}` is not a worktree name: use 1 to 64 letters, digits, `-`, `_` or `.`", .0.escape_debug())]
    Name(String),
    /// The workspace cannot be opened.
    #[error("the workspace {} cannot be opened: {why}", workspace.display())]
    Workspace {
        /// The workspace.
        workspace: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// The workspace is in no git repository.
    #[error("worktrees need the workspace to be a git repository (no .git found)")]
    NoRepository,
    /// The workspace is inside a repository, below its top.
    #[error("worktrees need the workspace to be the top of its git repository ({})", .0.display())]
    NotTop(PathBuf),
    /// The repository has no commit to start from.
    #[error("worktrees need a commit to start from; commit the workspace first (git commit)")]
    NoCommit,
    /// The repository's git directory cannot be opened.
    #[error("the repository's git directory cannot be opened: {0}")]
    GitDir(String),
    /// The private directory worktrees are made in cannot be made.
    #[error("cannot make the worktrees directory: {0}")]
    Root(String),
    /// A worktree of that name and tag exists already.
    #[error("the worktree {} exists already", .0.display())]
    Exists(PathBuf),
    /// `git worktree add` failed.
    #[error("cannot make the worktree {path}: {why}")]
    NotMade {
        /// Where it was to be made.
        path: String,
        /// Git's failure.
        why: GitFailure,
    },
    /// The new worktree's `.git` file cannot be read or names no git
    /// directory.
    #[error("the new worktree's {0}")]
    DotGit(String),
    /// Git put the new worktree's git directory outside the repository's.
    #[error("git made the worktree {path} with its git directory at {}, outside {}", dir.display(), common.display())]
    Outside {
        /// The worktree.
        path: String,
        /// Its git directory.
        dir: PathBuf,
        /// The repository's git directory.
        common: PathBuf,
    },
    /// The worktree's `.git` file no longer says what git wrote there.
    #[error(
        "the worktree's .git file ({}) was changed after corral made it (it said `{}`); \
         corral runs no git in a worktree whose .git file may point elsewhere, so its \
         changes were not taken",
        dot.display(),
        said.trim().escape_debug()
    )]
    Changed {
        /// The `.git` file.
        dot: PathBuf,
        /// What git wrote in it.
        said: String,
    },
    /// A diff would make a symlink leading out of the workspace.
    #[error(
        "the diff makes `{}` a symlink to `{}`, which is outside the workspace; corral does \
         not apply diffs carrying such symlinks (whatever is later written or read through \
         it would be outside). Remove the symlink from the worktree's changes, or make it \
         yourself if you mean it",
        link.escape_debug(),
        target.escape_debug()
    )]
    EscapingSymlink {
        /// The symlink's path in the diff.
        link: String,
        /// Where it points.
        target: String,
    },
    /// The workspace a diff is applied to is in no git repository.
    #[error("the workspace is not in a git repository")]
    ApplyOutsideRepository,
    /// A git command failed.
    #[error(transparent)]
    Git(#[from] GitFailure),
}

impl From<WorktreeError> for String {
    fn from(e: WorktreeError) -> Self {
        e.to_string()
    }
}

/// How one git command failed.
#[derive(Debug, thiserror::Error)]
pub enum GitFailure {
    /// It could not be started.
    #[error("git {what}: {why}")]
    Unstarted {
        /// The git command.
        what: String,
        /// Why.
        why: String,
    },
    /// It ran past its deadline.
    #[error("git {what} took longer than {DEADLINE:?}")]
    TimedOut {
        /// The git command.
        what: String,
    },
    /// Its output was larger than corral takes.
    #[error("git {what}: its output is larger than corral takes ({MAX_DIFF} bytes)")]
    TooLarge {
        /// The git command.
        what: String,
    },
    /// It failed and said why on its standard error.
    #[error("git {what}: {stderr}")]
    Said {
        /// The git command.
        what: String,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// It failed silently with an exit code.
    #[error("git {what} failed (exit code {code})")]
    Exit {
        /// The git command.
        what: String,
        /// The exit code.
        code: i32,
    },
    /// It was killed by a signal.
    #[error("git {what} was killed by a signal")]
    Killed {
        /// The git command.
        what: String,
    },
}

/// A worktree of a workspace's repository, made by [`create`]. Dropped
/// without [`Worktree::remove`] (a cancelled agent), it removes itself.
#[derive(Debug)]
pub struct Worktree {
    workspace: PathBuf,
    /// The workspace's repository.
    repo: Repo,
    common_dir: PathBuf,
    path: PathBuf,
    /// The worktree's own git directory (beneath `common_dir/worktrees`).
    git_dir: PathBuf,
    /// What git wrote in the worktree's `.git` file.
    dot_git: String,
    name: String,
    removed: bool,
}

/// Checks a worktree name: 1 to 64 letters, digits, `-`, `_` or `.`, not
/// starting with `.`.
pub fn check_name(name: &str) -> Result<(), WorktreeError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(WorktreeError::Name(name.to_owned()))
    }
}

/// `workspace`, canonical.
fn canonical(workspace: &Path) -> Result<PathBuf, WorktreeError> {
    workspace
        .canonicalize()
        .map_err(|e| WorktreeError::Workspace {
            workspace: workspace.to_path_buf(),
            why: words::io(&e),
        })
}

/// Where worktrees are made: a private directory under the system's temp
/// directory (outside the workspace, so its plugins never see them).
fn root() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let dir = std::env::temp_dir().join(format!("corral-worktrees-{}", uid()));
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // Another user may have made it first, or put a symlink there.
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid() || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "{} is not a private directory of this user; remove it",
            dir.display()
        )));
    }
    dir.canonicalize()
}

fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// Makes a detached worktree of `workspace`'s `HEAD` called `name` (made
/// unique with `tag`, e.g. the session id). The workspace must be the top
/// of a git repository with at least one commit; uncommitted changes of the
/// workspace are not in the worktree.
pub fn create(workspace: &Path, tag: &str, name: &str) -> Result<Worktree, WorktreeError> {
    check_name(name)?;
    let workspace = canonical(workspace)?;
    let repo = Repo::find(&workspace).ok_or(WorktreeError::NoRepository)?;
    if repo.work_tree != workspace {
        return Err(WorktreeError::NotTop(repo.work_tree));
    }
    git(
        repo.git(&workspace, &["rev-parse", "--verify", "HEAD"]),
        "rev-parse",
    )
    .map_err(|_| WorktreeError::NoCommit)?;
    let common = git(
        repo.git(
            &workspace,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        ),
        "rev-parse",
    )?;
    let common_dir = PathBuf::from(common.trim())
        .canonicalize()
        .map_err(|e| WorktreeError::GitDir(words::io(&e)))?;
    let root = root().map_err(|e| WorktreeError::Root(words::io(&e)))?;
    let path = root.join(format!("{tag}-{name}"));
    if path.exists() {
        return Err(WorktreeError::Exists(path));
    }
    let shown = path.display().to_string();
    git(
        steady(
            repo.git(
                &workspace,
                &["worktree", "add", "--detach", "--quiet", &shown, "HEAD"],
            ),
            &common_dir,
        )
        .writable(&common_dir)
        .writable(&root),
        "worktree add",
    )
    .map_err(|why| WorktreeError::NotMade {
        path: shown.clone(),
        why,
    })?;
    let dot = path.join(".git");
    let made = std::fs::read_to_string(&dot)
        .map_err(|e| {
            WorktreeError::DotGit(format!(
                "{} cannot be read: {}",
                dot.display(),
                words::io(&e)
            ))
        })
        .and_then(|text| {
            let dir = crate::exec::git::gitdir_of(&dot)
                .map_err(|e| WorktreeError::DotGit(e.to_string()))?;
            Ok((dir, text))
        });
    let (git_dir, dot_git) = match made {
        Ok((dir, text)) if dir.starts_with(common_dir.join("worktrees")) => (dir, text),
        Ok((dir, _)) => {
            return Err(WorktreeError::Outside {
                path: shown,
                dir,
                common: common_dir,
            });
        }
        Err(e) => return Err(e),
    };
    Ok(Worktree {
        workspace,
        repo,
        common_dir,
        path,
        git_dir,
        dot_git,
        name: name.to_owned(),
        removed: false,
    })
}

/// `launch` with the repository's configuration, hooks and `info`
/// (attributes, excludes) read-only, so that git writing the repository's
/// objects and worktrees cannot change what the next git runs.
fn steady(mut launch: Launch, common_dir: &Path) -> Launch {
    for name in ["config", "hooks", "info"] {
        let p = common_dir.join(name);
        if p.exists() {
            launch = launch.read_only(p);
        }
    }
    launch
}

impl Worktree {
    /// The worktree's directory (the workspace its agent works in).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Everything changed in the worktree since it was made (new files
    /// included, ignored files not), as a binary-safe unified diff; empty
    /// when nothing changed. Refused when the worktree's `.git` file no
    /// longer says what git wrote there.
    pub fn diff(&self) -> Result<String, WorktreeError> {
        let tree = self.checked()?;
        let at = |args: &[&str]| {
            steady(tree.git(&self.path, args), &self.common_dir)
                .read_only(self.path.join(".git"))
                .writable(&self.common_dir)
                .writable(&self.path)
        };
        git(at(&["add", "--all"]), "add")?;
        Ok(git(
            at(&[
                "diff",
                "--cached",
                "--binary",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "--no-renames",
                "HEAD",
            ])
            .output_cap(MAX_DIFF),
            "diff",
        )?)
    }

    /// The worktree as git must see it, once its `.git` file is checked:
    /// still a regular file saying what git wrote when corral made it.
    fn checked(&self) -> Result<Repo, WorktreeError> {
        let dot = self.path.join(".git");
        let now = std::fs::symlink_metadata(&dot)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|_| std::fs::read_to_string(&dot).ok());
        if now.as_deref() != Some(self.dot_git.as_str()) {
            return Err(WorktreeError::Changed {
                dot,
                said: self.dot_git.clone(),
            });
        }
        Ok(Repo {
            git_dir: self.git_dir.clone(),
            work_tree: self.path.clone(),
        })
    }

    /// Removes the worktree and its directory.
    pub fn remove(mut self) -> Result<(), WorktreeError> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<(), WorktreeError> {
        self.removed = true;
        let shown = self.path.display().to_string();
        let parent = self.path.parent().unwrap_or(&self.path).to_path_buf();
        let at = |args: &[&str]| {
            steady(self.repo.git(&self.workspace, args), &self.common_dir)
                .writable(&self.common_dir)
                .writable(&parent)
        };
        let removed = git(
            at(&["worktree", "remove", "--force", &shown]),
            "worktree remove",
        );
        if removed.is_err() && self.path.exists() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
        git(at(&["worktree", "prune"]), "worktree prune")?;
        Ok(removed.map(|_| ())?)
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        if !self.removed
            && let Err(e) = self.cleanup()
        {
            tracing::warn!(
                "the worktree {} could not be removed: {e}",
                self.path.display()
            );
        }
    }
}

/// `manifest` for an agent working in `tree` instead of its workspace: the
/// workspace is the tree, and every directory granted inside the workspace
/// is granted at the same place inside the tree (a granted directory the
/// tree lacks, an ignored one say, is not granted at all). Grants outside
/// the workspace stay as they are.
pub fn rebase(manifest: &crate::manifest::Manifest, tree: &Path) -> crate::manifest::Manifest {
    let mut out = manifest.clone();
    out.workspace = tree.to_path_buf();
    for plugin in &mut out.plugins {
        plugin.fs.retain_mut(|grant| {
            let Ok(rel) = grant.host_path.strip_prefix(&manifest.workspace) else {
                return true;
            };
            match tree.join(rel).canonicalize() {
                Ok(moved) if moved.starts_with(tree) && moved.is_dir() => {
                    grant.host_path = moved;
                    true
                }
                _ => false,
            }
        });
    }
    out
}

/// Applies `patch` (from [`Worktree::diff`]) to `workspace`'s files. Fails,
/// changing nothing, when it does not apply cleanly, or when it carries a
/// symlink that points outside the workspace (see [`escaping_symlink`]).
pub fn apply(workspace: &Path, patch: &str) -> Result<(), WorktreeError> {
    let workspace = canonical(workspace)?;
    if let Some((link, target)) = escaping_symlink(&workspace, patch) {
        return Err(WorktreeError::EscapingSymlink { link, target });
    }
    let repo = Repo::find(&workspace).ok_or(WorktreeError::ApplyOutsideRepository)?;
    git(
        repo.git_with_attributes(
            &workspace,
            &["apply", "--binary", "--whitespace=nowarn", "-"],
        )
        .protect(&workspace)
        .writable(&workspace)
        .stdin(patch.as_bytes().to_vec()),
        "apply",
    )?;
    Ok(())
}

/// The first symlink `patch` creates (or turns a file into) whose target
/// leaves `workspace`, as (path, target): an absolute target outside it,
/// one whose `..` climb out of it, or one that resolves out of it through
/// a symlink the workspace has. A symlink whose path or target the patch
/// does not show plainly counts as leaving.
pub fn escaping_symlink(workspace: &Path, patch: &str) -> Option<(String, String)> {
    let mut sections: Vec<Vec<&str>> = Vec::new();
    for line in patch.lines() {
        if line.starts_with("diff --git ") || sections.is_empty() {
            sections.push(Vec::new());
        }
        if let Some(s) = sections.last_mut() {
            s.push(line);
        }
    }
    for section in sections {
        let link = section.iter().any(|l| {
            l.starts_with("new file mode 120000")
                || l.starts_with("new mode 120000")
                || (l.starts_with("index ") && l.ends_with(" 120000"))
        });
        if !link {
            continue;
        }
        let path = section
            .iter()
            .find_map(|l| l.strip_prefix("+++ b/"))
            .or_else(|| {
                section
                    .first()
                    .and_then(|l| l.rsplit_once(" b/"))
                    .map(|(_, p)| p)
            });
        let target = section
            .iter()
            .skip_while(|l| !l.starts_with("@@"))
            .find_map(|l| l.strip_prefix('+').filter(|_| !l.starts_with("+++")));
        let (Some(path), Some(target)) = (path, target) else {
            return Some((
                path.unwrap_or("?").to_owned(),
                "(not shown in the diff)".to_owned(),
            ));
        };
        if path.starts_with('"') || !inside(workspace, path, target) {
            return Some((path.to_owned(), target.to_owned()));
        }
    }
    None
}

/// Whether a symlink at `path` (relative to `workspace`) pointing at
/// `target` stays inside `workspace`.
fn inside(workspace: &Path, path: &str, target: &str) -> bool {
    let base = workspace.join(Path::new(path).parent().unwrap_or(Path::new("")));
    let joined = base.join(target);
    let mut resolved = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir => {}
            other => resolved.push(other),
        }
    }
    if !resolved.starts_with(workspace) {
        return false;
    }
    // Through the workspace's own symlinks: the longest prefix that exists.
    let existing = resolved
        .ancestors()
        .find_map(|a| a.canonicalize().ok())
        .unwrap_or_else(|| workspace.to_path_buf());
    existing.starts_with(workspace)
}

/// Runs a git launch and returns its standard output, or why it failed.
fn git(launch: Launch, what: &str) -> Result<String, GitFailure> {
    let what = what.to_owned();
    let out: ExecOutput =
        launch
            .timeout(DEADLINE)
            .run_blocking()
            .map_err(|e| GitFailure::Unstarted {
                what: what.clone(),
                why: e.to_string(),
            })?;
    if out.timed_out {
        return Err(GitFailure::TimedOut { what });
    }
    if out.truncated {
        return Err(GitFailure::TooLarge { what });
    }
    if out.exit_code != Some(0) {
        let stderr = out.stderr.trim().to_owned();
        return Err(match out.exit_code {
            Some(code) if stderr.is_empty() => GitFailure::Exit { what, code },
            None if stderr.is_empty() => GitFailure::Killed { what },
            _ => GitFailure::Said { what, stderr },
        });
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::escaping_symlink;

    fn link(path: &str, target: &str) -> String {
        format!(
            "diff --git a/{path} b/{path}\nnew file mode 120000\nindex 0000000..1111111\n\
             --- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
        )
    }

    #[test]
    fn a_patch_applies() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ws = ws.path().canonicalize().expect("canonical");
        let git = |args: &[&str]| {
            let o = crate::exec::Launch::new("git", &ws)
                .pass_env(["PATH", "HOME"])
                .writable(&ws)
                .args(args)
                .run_blocking()
                .expect("git");
            assert_eq!(o.exit_code, Some(0), "{}", o.stderr);
        };
        git(&["init", "-q"]);
        std::fs::write(ws.join("a.txt"), "a\n").expect("a");
        let patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n";
        super::apply(&ws, patch).expect("applies");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).expect("a"), "b\n");
    }

    #[test]
    fn symlinks_leading_out_of_the_workspace_are_found() {
        let ws = tempfile::tempdir().expect("tempdir");
        let ws = ws.path().canonicalize().expect("canonical");
        std::fs::create_dir(ws.join("sub")).expect("sub");
        std::os::unix::fs::symlink("/etc", ws.join("etc-alias")).expect("symlink");
        let text = "diff --git a/a.txt b/a.txt\nindex 1..2 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+/etc/passwd\n";
        assert_eq!(escaping_symlink(&ws, text), None);
        assert_eq!(escaping_symlink(&ws, &link("sub/in", "../a.txt")), None);
        assert_eq!(escaping_symlink(&ws, &link("in", "sub")), None);
        for (path, target) in [
            ("leak", "/etc/passwd"),
            ("sub/up", "../../x"),
            ("via", "etc-alias/passwd"),
        ] {
            let patch = format!("{text}{}", link(path, target));
            assert_eq!(
                escaping_symlink(&ws, &patch),
                Some((path.to_owned(), target.to_owned())),
                "{patch}"
            );
        }
        // A file turned into a symlink whose target the diff does not show.
        let hidden = "diff --git a/f b/f\nold mode 100644\nnew mode 120000\n";
        assert!(escaping_symlink(&ws, hidden).is_some());
    }
}
