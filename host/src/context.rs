//! The prompt: a layered system prompt (base instructions; environment;
//! `AGENTS.md` files from the workspace root down to the current directory;
//! the permission summary), then the history and the tool schemas.

use crate::runtime::Plugins;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// What every session starts from.
pub const BASE_INSTRUCTIONS: &str = "You are corral, a coding agent working in the user's \
workspace through tools. Read before you change anything; prefer small, exact edits \
(edit_file) over rewriting files; paths are relative to the workspace root. When a tool \
fails, read its message and adjust instead of repeating the same call. When the task is \
done, answer with a short summary of what you did and what you found.";

/// Longest `AGENTS.md` text included, per file.
const MAX_AGENTS_MD: usize = 32 * 1024;

/// Builds the system prompt for `workspace`, seen from `cwd`.
pub fn system_prompt(workspace: &Path, cwd: &Path, plugins: &Plugins) -> String {
    let mut out = String::from(BASE_INSTRUCTIONS);
    out.push_str("\n\n# Environment\n");
    let _ = writeln!(out, "- workspace: {}", workspace.display());
    let _ = writeln!(
        out,
        "- os: {} ({})",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    let _ = writeln!(out, "- date: {}", today());
    if let Some(status) = git_status(workspace) {
        let _ = writeln!(out, "- git status:\n```\n{status}```");
    }
    for (path, text) in agents_md(workspace, cwd) {
        let _ = write!(out, "\n# Instructions from {}\n{text}\n", path);
    }
    out.push_str("\n# Tools and permissions\n");
    for (plugin, tool) in plugins.tools() {
        let effects: Vec<String> = tool
            .effects
            .iter()
            .map(|e| format!("{e:?}").to_lowercase())
            .collect();
        let _ = writeln!(
            out,
            "- {} ({}; plugin `{}`)",
            tool.name,
            effects.join(", "),
            plugin.decl().name
        );
    }
    for plugin in plugins.plugins().iter().filter(|p| !p.tools().is_empty()) {
        let grants: Vec<String> = plugin
            .decl()
            .fs
            .iter()
            .map(|g| {
                format!(
                    "{} {}",
                    g.path,
                    if g.access == crate::manifest::Access::Rw {
                        "read-write"
                    } else {
                        "read-only"
                    }
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "- plugin `{}` may access: {}",
            plugin.decl().name,
            if grants.is_empty() {
                "no files".to_owned()
            } else {
                grants.join(", ")
            }
        );
        let programs: Vec<String> = plugin
            .decl()
            .exec
            .iter()
            .map(|g| {
                if g.program == crate::exec::ANY_PROGRAM {
                    "any program in PATH".to_owned()
                } else {
                    format!("`{} {}`", g.program, g.args.join(" "))
                }
            })
            .collect();
        if !programs.is_empty() {
            let _ = writeln!(
                out,
                "- plugin `{}` may run: {} (confined by the OS: writes only in the workspace, no network unless granted)",
                plugin.decl().name,
                programs.join(", ")
            );
        }
    }
    out
}

/// Today's date, UTC, `YYYY-MM-DD`.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d, ..) = crate::session::civil(secs);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `git status --short --branch`, at most 20 lines, when the workspace is a
/// repository and git answers within two seconds. Git runs confined (see
/// [`crate::exec::confine_helper`]), without fsmonitor or hooks and without
/// taking the index lock, since the repository's configuration may have
/// been written by a tool.
fn git_status(workspace: &Path) -> Option<String> {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("-C")
        .arg(workspace)
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "--no-optional-locks",
            "status",
            "--short",
            "--branch",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    crate::exec::confine_helper(&mut cmd).ok()?;
    let mut child = cmd.spawn().ok()?;
    // Waited for below: not an escaped process for a program run to kill.
    let _tracked = crate::exec::HostChild::track(child.id());
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return None,
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let mut text = String::new();
    use std::io::Read;
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    let lines: Vec<&str> = text.lines().collect();
    let mut out: String = lines.iter().take(20).map(|l| format!("{l}\n")).collect();
    if lines.len() > 20 {
        let _ = writeln!(out, "... {} more", lines.len() - 20);
    }
    Some(out)
}

/// `AGENTS.md` files from the workspace root down to `cwd` (root first), as
/// (workspace-relative path, text). Files that resolve outside the
/// workspace (symlinks) are skipped.
pub fn agents_md(workspace: &Path, cwd: &Path) -> Vec<(String, String)> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let rel = cwd
        .strip_prefix(workspace)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let mut dirs = vec![workspace.to_path_buf()];
    let mut acc = workspace.to_path_buf();
    for part in rel.components() {
        acc.push(part);
        dirs.push(acc.clone());
    }
    let mut out = Vec::new();
    for dir in dirs {
        let file = dir.join("AGENTS.md");
        // A symlinked AGENTS.md must not pull a file from outside the
        // workspace into the prompt.
        let inside = file
            .canonicalize()
            .is_ok_and(|real| real.starts_with(workspace));
        if !inside {
            continue;
        }
        if let Ok(mut text) = std::fs::read_to_string(&file) {
            if text.len() > MAX_AGENTS_MD {
                let mut cut = MAX_AGENTS_MD;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
                text.push_str("\n[AGENTS.md cut at 32 KiB]");
            }
            let shown = file
                .strip_prefix(workspace)
                .unwrap_or(&file)
                .display()
                .to_string();
            out.push((shown, text));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::agents_md;

    #[test]
    fn agents_md_from_root_to_cwd_and_never_outside() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("ws/sub/deeper")).unwrap();
        let ws = root.path().join("ws").canonicalize().unwrap();
        std::fs::write(ws.join("AGENTS.md"), "root rules").unwrap();
        std::fs::write(ws.join("sub/AGENTS.md"), "sub rules").unwrap();
        std::fs::write(root.path().join("secret.txt"), "do not read").unwrap();
        std::os::unix::fs::symlink(
            root.path().join("secret.txt"),
            ws.join("sub/deeper/AGENTS.md"),
        )
        .unwrap();
        let found = agents_md(&ws, &ws.join("sub/deeper"));
        let texts: Vec<&str> = found.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["root rules", "sub rules"]);
        assert_eq!(found[1].0, "sub/AGENTS.md");
    }
}
