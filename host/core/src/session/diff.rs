//! What the workspace changed, for a front-end's `/diff`.

use std::path::Path;
use std::time::Duration;

/// `git diff` of the workspace for `/diff`, untracked files included, through
/// [`crate::exec::git::Repo::git`]: confined, and nothing the repository
/// holds (fsmonitor, an external diff, a textconv) runs.
pub(super) fn git_diff(workspace: &Path) -> Result<String, String> {
    let repo = crate::exec::git::Repo::find(workspace)
        .ok_or("the workspace is not in a git repository")?;
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
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.timed_out {
        return Err("git diff took longer than 30 s".into());
    }
    if out.exit_code != Some(0) {
        return Err(format!("git diff failed: {}", out.stderr.trim()));
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
fn untracked_diff(repo: &crate::exec::git::Repo, workspace: &Path) -> Result<String, String> {
    let run = |args: &[&str]| {
        repo.git(workspace, args)
            .timeout(Duration::from_secs(30))
            .output_cap(16 << 20)
            .run_blocking()
            .map_err(|e| format!("cannot run git: {e}"))
    };
    let listed = run(&[
        "--no-optional-locks",
        "ls-files",
        "--others",
        "--exclude-standard",
        "-z",
    ])?;
    if listed.exit_code != Some(0) {
        return Err(format!("git ls-files failed: {}", listed.stderr.trim()));
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
