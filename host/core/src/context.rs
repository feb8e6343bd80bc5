//! The prompt: a layered system prompt (base instructions; environment;
//! `AGENTS.md` files from the workspace root down to the current directory;
//! the permission summary), then the history and the tool schemas.

use crate::runtime::Plugins;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What every session starts from.
pub const BASE_INSTRUCTIONS: &str = "You are corral, a coding agent working in the user's \
workspace through tools. Read before you change anything; prefer small, exact edits \
(edit_file) over rewriting files; paths are relative to the workspace root. When a tool \
fails, read its message and adjust instead of repeating the same call. When the task is \
done, answer with a short summary of what you did and what you found.";

/// Longest `AGENTS.md` text included, per file.
const MAX_AGENTS_MD: usize = 32 * 1024;

/// Builds the system prompt for `workspace`, seen from `cwd`, with the
/// workspace's `git status` when it has one ([`GitStatus`]).
pub fn system_prompt(
    workspace: &Path,
    cwd: &Path,
    plugins: &Plugins,
    git_status: Option<&str>,
) -> String {
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
    if let Some(status) = git_status {
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

/// The system prompt's lines for the host's own tools (`update_plan`,
/// `read_output`, `task`), appended to [`system_prompt`]'s list.
pub fn host_tools_section(tools: &[crate::protocol::ToolSpec]) -> String {
    let mut out = String::new();
    for tool in tools {
        let effects: Vec<&str> = tool.effects.iter().map(|e| e.as_str()).collect();
        let effects = if effects.is_empty() {
            "no effects".to_owned()
        } else {
            effects.join(", ")
        };
        let _ = writeln!(
            out,
            "- {} ({effects}; provided by corral itself)",
            tool.name
        );
    }
    out
}

/// The system prompt's note for a subagent: which of the tools listed it
/// may call (the others are refused).
pub fn subagent_section(offered: &[String]) -> String {
    let tools = if offered.is_empty() {
        "none of the plugins' tools".to_owned()
    } else {
        offered.join(", ")
    };
    format!(
        "\n# Subagent\nYou are a subagent: another agent gave you this task. Of the plugins' tools          above you may call only: {tools}; the others are refused. Finish with a short answer for          the agent that asked.\n"
    )
}

/// Today's date, UTC, `YYYY-MM-DD`.
fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d, ..) = crate::log::civil(secs);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The workspace's `git status` for the system prompt, taken once per
/// session: started when the session opens, in parallel with loading the
/// plugins, and awaited when the first prompt is built, so the first
/// request does not wait for git. Every turn then gets the same status
/// (and the same system prompt, which keeps a provider's prompt cache
/// matching); the model has tools to look again. Clones share the one
/// status.
#[derive(Clone)]
pub struct GitStatus(Arc<GitStatusState>);

struct GitStatusState {
    workspace: PathBuf,
    running: Mutex<Option<tokio::task::JoinHandle<Option<String>>>>,
    done: tokio::sync::OnceCell<Option<String>>,
}

impl std::fmt::Debug for GitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitStatus")
            .field("workspace", &self.0.workspace)
            .finish_non_exhaustive()
    }
}

impl GitStatus {
    /// Starts `git status` in `workspace` now, in the background (within a
    /// Tokio runtime); outside a repository nothing runs.
    pub fn start(workspace: &Path) -> Self {
        let status = Self::later(workspace);
        let ws = workspace.to_path_buf();
        if let Ok(mut running) = status.0.running.lock() {
            *running = Some(tokio::spawn(async move { git_status(&ws).await }));
        }
        status
    }

    /// A status taken when it is first asked for.
    pub fn later(workspace: &Path) -> Self {
        Self(Arc::new(GitStatusState {
            workspace: workspace.to_path_buf(),
            running: Mutex::new(None),
            done: tokio::sync::OnceCell::new(),
        }))
    }

    /// The workspace it is the status of.
    pub fn workspace(&self) -> &Path {
        &self.0.workspace
    }

    /// The status, waiting for git if it is still running.
    pub async fn get(&self) -> Option<&str> {
        self.0
            .done
            .get_or_init(|| async {
                let running = self.0.running.lock().ok().and_then(|mut r| r.take());
                match running {
                    Some(task) => task.await.ok().flatten(),
                    None => git_status(&self.0.workspace).await,
                }
            })
            .await
            .as_deref()
    }
}

/// `git status --short --branch`, at most 20 lines, when the workspace is in
/// a repository and git answers within two seconds. Git runs through
/// [`crate::exec::git::Repo::git`] (confined, no fsmonitor, hooks or
/// in-tree attributes), without taking the index lock, since the
/// repository's configuration may have been written by a tool. Waited for
/// without polling, its output read while it runs.
async fn git_status(workspace: &Path) -> Option<String> {
    let repo = crate::exec::git::Repo::find(workspace)?;
    let out = repo
        .git(
            workspace,
            &["--no-optional-locks", "status", "--short", "--branch"],
        )
        .timeout(Duration::from_secs(2))
        .output_cap(64 * 1024)
        .run()
        .await
        .ok()
        .filter(|o| o.exit_code == Some(0))?;
    let lines: Vec<&str> = out.stdout.lines().collect();
    let mut out: String = lines.iter().take(20).map(|l| format!("{l}\n")).collect();
    if lines.len() > 20 {
        let _ = writeln!(out, "... {} more", lines.len() - 20);
    }
    Some(out)
}

/// `AGENTS.md` files (else `CLAUDE.md`) from the workspace root down to
/// `cwd` (root first), as (workspace-relative path, text). Each is opened beneath the workspace
/// (a symlink leading out of it is not followed), without blocking, and
/// read only if it is a regular UTF-8 file; the rest are skipped with a
/// warning.
pub fn agents_md(workspace: &Path, cwd: &Path) -> Vec<(String, String)> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let rel = cwd
        .strip_prefix(workspace)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let Ok(root) = cap_std::fs::Dir::open_ambient_dir(workspace, cap_std::ambient_authority())
    else {
        return Vec::new();
    };
    let mut dirs = vec![std::path::PathBuf::new()];
    let mut acc = std::path::PathBuf::new();
    for part in rel.components() {
        acc.push(part);
        dirs.push(acc.clone());
    }
    let mut out = Vec::new();
    for dir in dirs {
        // A project set up for Claude Code keeps its instructions in
        // `CLAUDE.md`; it is read where the directory has no `AGENTS.md`,
        // so a project with both is not told the same thing twice.
        for name in INSTRUCTION_FILES {
            let file = dir.join(name);
            let shown = file.display().to_string();
            match read_agents_md(&root, &file) {
                Ok(Some(text)) => {
                    out.push((shown, text));
                    break;
                }
                Ok(None) => {}
                Err(why) => tracing::warn!("{shown} skipped: {why}"),
            }
        }
    }
    out
}

/// The files of instructions for agents a directory may hold, the first
/// found read.
const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// One `AGENTS.md` (or `CLAUDE.md`), cut at [`MAX_AGENTS_MD`]; `None` if
/// there is none.
fn read_agents_md(root: &cap_std::fs::Dir, file: &Path) -> Result<Option<String>, String> {
    use cap_std::fs::OpenOptionsExt as _;
    let opened = root.open_with(
        file,
        cap_std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(crate::fsread::OPEN_FLAGS),
    );
    let opened = match opened {
        Ok(f) => f.into_std(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let meta = opened.metadata().map_err(|e| e.to_string())?;
    if let Some(kind) = crate::fsread::kind(&meta.file_type()) {
        return Err(format!("it is {kind}, not a regular file"));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(opened, MAX_AGENTS_MD as u64 + 1),
        &mut bytes,
    )
    .map_err(|e| e.to_string())?;
    let cut = bytes.len() > MAX_AGENTS_MD;
    bytes.truncate(MAX_AGENTS_MD);
    let mut text = match String::from_utf8(bytes) {
        Ok(t) => t,
        // The cut may split a character; keep what precedes it.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?
        }
        Err(_) => return Err("it is not UTF-8 text".into()),
    };
    if cut {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        text.push_str(&format!("\n[{name} cut at 32 KiB]"));
    }
    Ok(Some(text))
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
