//! What the workspace changed, for a front-end's `/diff`.

use std::path::Path;
use std::time::Duration;

/// Why there is no diff of the workspace; its text is the message for the
/// user.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The workspace is not in a git repository.
    #[error("the workspace is not in a git repository")]
    NotARepo,
    /// git could not be run.
    #[error("cannot run git: {0}")]
    Run(String),
    /// `git diff` ran out of time.
    #[error("git diff took longer than 30 s")]
    TimedOut,
    /// A git command failed.
    #[error("git {command} failed: {}", stderr.trim())]
    Failed {
        /// `diff`, `ls-files`.
        command: &'static str,
        /// What it wrote to stderr.
        stderr: String,
    },
}

impl From<DiffError> for String {
    fn from(e: DiffError) -> Self {
        e.to_string()
    }
}

/// `git diff` of the workspace for `/diff`, untracked files included, through
/// [`crate::exec::git::Repo::git`]: confined, and nothing the repository
/// holds (fsmonitor, an external diff, a textconv) runs.
pub(super) fn git_diff(workspace: &Path) -> Result<String, DiffError> {
    let repo = crate::exec::git::Repo::find(workspace).ok_or(DiffError::NotARepo)?;
    let out = repo
        .git(
            workspace,
            &[
                "--no-optional-locks",
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
            ],
        )
        .timeout(Duration::from_secs(30))
        .output_cap(16 << 20)
        .run_blocking()
        .map_err(|e| DiffError::Run(e.to_string()))?;
    if out.timed_out {
        return Err(DiffError::TimedOut);
    }
    if out.exit_code != Some(0) {
        return Err(DiffError::Failed {
            command: "diff",
            stderr: out.stderr,
        });
    }
    let mut diff = out.stdout;
    diff.push_str(&untracked_diff(&repo, workspace)?);
    Ok(diff)
}

/// Untracked files shown at most by `/diff`, each as its own `git diff`.
const MAX_UNTRACKED: usize = 100;

/// New files git does not track yet (and does not ignore), as additions:
/// what the model created belongs in `/diff` as much as what it changed.
/// The index is left alone (no `git add -N`), so the user's next commit is
/// what it would have been.
fn untracked_diff(repo: &crate::exec::git::Repo, workspace: &Path) -> Result<String, DiffError> {
    let run = |args: &[&str]| {
        repo.git(workspace, args)
            .timeout(Duration::from_secs(30))
            .output_cap(16 << 20)
            .run_blocking()
            .map_err(|e| DiffError::Run(e.to_string()))
    };
    let listed = run(&[
        "--no-optional-locks",
        "ls-files",
        "--others",
        "--exclude-standard",
        "-z",
    ])?;
    if listed.exit_code != Some(0) {
        return Err(DiffError::Failed {
            command: "ls-files",
            stderr: listed.stderr,
        });
    }
    let files: Vec<&str> = listed
        .stdout
        .split('\0')
        .filter(|f| !f.is_empty())
        .collect();
    let mut text = String::new();
    for file in files.iter().take(MAX_UNTRACKED) {
        // `--no-index` compares two paths; exit 1 means they differ. The
        // name comes after `--`, so no file name reads as an option.
        let out = run(&[
            "--no-optional-locks",
            "diff",
            "--no-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--",
            "/dev/null",
            file,
        ])?;
        if matches!(out.exit_code, Some(0 | 1)) {
            text.push_str(&out.stdout);
        }
    }
    if files.len() > MAX_UNTRACKED {
        text.push_str(&format!(
            "… and {} more untracked files (`git status` lists them)\n",
            files.len() - MAX_UNTRACKED
        ));
    }
    Ok(text)
}
