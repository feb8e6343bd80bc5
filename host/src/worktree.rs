//! Git worktrees for agents that must not trample each other: a subagent
//! (`task` with `worktree`) or a whole run (`corral run --worktree`) works
//! in a detached worktree of the workspace's repository, outside the
//! workspace; what it changed comes back as a diff the user approves, and
//! the worktree is removed afterwards. Nothing is merged silently: an
//! unapproved diff is kept as a patch file.
//!
//! Git runs confined like every helper of the host
//! ([`crate::exec::confine_helper_writing`]): a scrubbed environment, no
//! hooks, no fsmonitor, writes only beneath the repository's git directory
//! and the worktree, and a deadline.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one git command may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// A worktree of a workspace's repository, made by [`create`]. Dropped
/// without [`Worktree::remove`] (a cancelled agent), it removes itself.
#[derive(Debug)]
pub struct Worktree {
    workspace: PathBuf,
    common_dir: PathBuf,
    path: PathBuf,
    name: String,
    removed: bool,
}

/// Checks a worktree name: 1 to 64 letters, digits, `-`, `_` or `.`, not
/// starting with `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a worktree name: use 1 to 64 letters, digits, `-`, `_` or `.`",
            name.escape_debug()
        ))
    }
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
pub fn create(workspace: &Path, tag: &str, name: &str) -> Result<Worktree, String> {
    check_name(name)?;
    let workspace = workspace.canonicalize().map_err(|e| {
        format!(
            "the workspace {} cannot be opened: {e}",
            workspace.display()
        )
    })?;
    let top = git(&workspace, &["rev-parse", "--show-toplevel"], &[], None)
        .map_err(|e| format!("worktrees need the workspace to be a git repository: {e}"))?;
    if Path::new(top.trim()) != workspace {
        return Err(format!(
            "worktrees need the workspace to be the top of its git repository ({})",
            top.trim()
        ));
    }
    git(&workspace, &["rev-parse", "--verify", "HEAD"], &[], None).map_err(|_| {
        "worktrees need a commit to start from; commit the workspace first (git commit)".to_owned()
    })?;
    let common = git(
        &workspace,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        &[],
        None,
    )?;
    let common_dir = PathBuf::from(common.trim());
    let root = root().map_err(|e| format!("cannot make the worktrees directory: {e}"))?;
    let path = root.join(format!("{tag}-{name}"));
    if path.exists() {
        return Err(format!("the worktree {} exists already", path.display()));
    }
    let shown = path.display().to_string();
    git(
        &workspace,
        &["worktree", "add", "--detach", "--quiet", &shown, "HEAD"],
        &[&common_dir, &root],
        None,
    )
    .map_err(|e| format!("cannot make the worktree {shown}: {e}"))?;
    Ok(Worktree {
        workspace,
        common_dir,
        path,
        name: name.to_owned(),
        removed: false,
    })
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
    /// when nothing changed.
    pub fn diff(&self) -> Result<String, String> {
        let writable = [self.common_dir.as_path(), self.path.as_path()];
        git(&self.path, &["add", "--all"], &writable, None)?;
        git(
            &self.path,
            &[
                "diff",
                "--cached",
                "--binary",
                "--no-color",
                "--no-ext-diff",
                "HEAD",
            ],
            &writable,
            None,
        )
    }

    /// Removes the worktree and its directory.
    pub fn remove(mut self) -> Result<(), String> {
        self.cleanup()
    }

    fn cleanup(&mut self) -> Result<(), String> {
        self.removed = true;
        let shown = self.path.display().to_string();
        let parent = self.path.parent().unwrap_or(&self.path).to_path_buf();
        let writable = [self.common_dir.as_path(), parent.as_path()];
        let removed = git(
            &self.workspace,
            &["worktree", "remove", "--force", &shown],
            &writable,
            None,
        );
        if removed.is_err() && self.path.exists() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
        git(&self.workspace, &["worktree", "prune"], &writable, None)?;
        removed.map(|_| ())
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
/// changing nothing, when it does not apply cleanly.
pub fn apply(workspace: &Path, patch: &str) -> Result<(), String> {
    git(
        workspace,
        &["apply", "--binary", "--whitespace=nowarn", "-"],
        &[workspace],
        Some(patch.as_bytes()),
    )
    .map(|_| ())
}

/// Runs git in `dir`, confined, and returns its standard output.
fn git(
    dir: &Path,
    args: &[&str],
    writable: &[&Path],
    input: Option<&[u8]>,
) -> Result<String, String> {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C")
        .arg(dir)
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "diff.external=",
            "-c",
            "core.pager=cat",
        ])
        .args(args)
        .stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    crate::exec::confine_helper_writing(&mut cmd, writable)
        .map_err(|e| format!("cannot confine git: {e}"))?;
    let mut child = cmd.spawn().map_err(|e| format!("cannot run git: {e}"))?;
    let pid = child.id();
    // Waited for below: not an escaped process for a program run to kill.
    let _tracked = crate::exec::HostChild::track(pid);
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(DEADLINE) {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return Err(format!("git failed: {e}")),
        Err(_) => {
            // SAFETY: kill(2) on the child we started and have not reaped.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            return Err(format!(
                "git {} took longer than {DEADLINE:?}",
                args.join(" ")
            ));
        }
    };
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "git {}: {}",
            args.first().unwrap_or(&""),
            err.trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
