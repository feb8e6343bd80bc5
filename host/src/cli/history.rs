//! The prompts sent from the UI, kept per workspace, so that Up recalls
//! them in a later session and after a resume. They live beside the
//! workspace's session logs (the user's data directory, never the
//! repository), one JSON string per line, the newest last.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Prompts kept at most; older ones are dropped when the file is rewritten.
const KEEP: usize = 500;

/// A prompt longer than this is sent but not kept (a pasted file, say).
const MAX_PROMPT: usize = 16 * 1024;

/// The most of the file read: twice [`KEEP`] prompts, each escaped.
const MAX_FILE: u64 = (2 * KEEP * (6 * MAX_PROMPT + 3)) as u64;

/// The history file of `workspace`, when it has a data directory.
fn file(workspace: &Path) -> Option<PathBuf> {
    corral_core::session::sessions_dir(workspace)
        .ok()
        .map(|d| d.join("prompt-history"))
}

/// The workspace's prompts, oldest first, at most [`KEEP`]. A missing or
/// damaged file is an empty history, and a line that does not parse is
/// skipped: the history is a convenience, never a reason to fail.
pub(super) fn load(workspace: &Path) -> Vec<String> {
    let Some(path) = file(workspace) else {
        return Vec::new();
    };
    let (mut prompts, _) = read(&path);
    let cut = prompts.len().saturating_sub(KEEP);
    prompts.drain(..cut);
    prompts
}

/// Every prompt the file at `path` holds, and how many lines it has.
fn read(path: &Path) -> (Vec<String>, usize) {
    let Ok(bytes) = corral_core::native::read_regular(path, MAX_FILE) else {
        return (Vec::new(), 0);
    };
    let text = String::from_utf8_lossy(&bytes);
    let prompts = text
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect();
    (prompts, text.lines().count())
}

/// Adds `prompt` to the workspace's history; rewrites the file without its
/// oldest entries once it holds twice [`KEEP`]. Failures are ignored, for
/// the reason [`load`] gives.
pub(super) fn add(workspace: &Path, prompt: &str) {
    if prompt.trim().is_empty() || prompt.len() > MAX_PROMPT {
        return;
    }
    let Some(path) = file(workspace) else {
        return;
    };
    let Ok(line) = serde_json::to_string(prompt) else {
        return;
    };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // A file grown past what `read` takes (written by hand, say) starts over.
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > MAX_FILE) {
        let _ = std::fs::remove_file(&path);
    }
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if appended.is_err() {
        return;
    }
    let (kept, lines) = read(&path);
    if lines > 2 * KEEP {
        let text: String = kept[kept.len().saturating_sub(KEEP)..]
            .iter()
            .filter_map(|p| serde_json::to_string(p).ok())
            .map(|l| l + "\n")
            .collect();
        let tmp = path.with_extension("tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}
