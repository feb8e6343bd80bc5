//! The files of an editor that hosts corral (`corral acp`): its open
//! buffers, unsaved changes included, read and written through the editor
//! when it offers to.
//!
//! A front-end whose client can read or write files gives the session an
//! [`EditorFiles`]; the agent then offers the host tools `editor_read` and
//! `editor_write` (only those the editor offers). Each takes the same call
//! pipeline as any tool — the policy judges `editor_write` as a write, the
//! protected paths hold, the guards and the log see it — and a path must
//! stay inside the workspace, symlinks followed, before the editor is
//! asked. A write keeps its file's before-image in the session's
//! checkpoints first, so `corral undo` puts it back.

use crate::call::{CallOutcome, Checked};
use crate::runtime::{CheckpointChange as Change, CheckpointImage as Image};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};

/// What the editor answered when it could not read or write.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct EditorError(pub String);

/// An editor's files, as its protocol reaches them.
pub trait EditorFiles: Send + Sync + std::fmt::Debug {
    /// Whether the editor reads files for the agent.
    fn can_read(&self) -> bool;
    /// Whether the editor writes files for the agent.
    fn can_write(&self) -> bool;
    /// The text of `path` (absolute) as the editor has it; from line
    /// `line` (1-based), at most `limit` lines.
    fn read<'a>(
        &'a self,
        path: &'a Path,
        line: Option<u64>,
        limit: Option<u64>,
    ) -> BoxFuture<'a, Result<String, EditorError>>;
    /// Replaces the text of `path` (absolute) in the editor, which saves it.
    fn write<'a>(&'a self, path: &'a Path, text: &'a str)
    -> BoxFuture<'a, Result<(), EditorError>>;
}

/// `path` (relative to `workspace`, or absolute) as an absolute path inside
/// the workspace, symlinks of its existing part followed; else why not.
pub(crate) fn inside(workspace: &Path, path: &str) -> Result<PathBuf, String> {
    let shown = crate::terminal::inert_line(path);
    if path.is_empty() {
        return Err("`path` is empty".into());
    }
    let root = workspace
        .canonicalize()
        .map_err(|e| format!("the workspace cannot be read: {e}"))?;
    let given = Path::new(path);
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        root.join(given)
    };
    // `..` is resolved by the kernel after the links before it; refuse it
    // rather than guess.
    if joined.components().any(|c| c == Component::ParentDir) {
        return Err(format!(
            "`{shown}` goes up with `..`; give a path inside the workspace"
        ));
    }
    // The longest part that is there, a link counting as there even when
    // its target is not: a dangling link is refused below, never climbed
    // over (the editor would follow it out of the workspace).
    let mut existing = joined.as_path();
    let mut rest = Vec::new();
    while existing.symlink_metadata().is_err() {
        let Some(name) = existing.file_name() else {
            break;
        };
        rest.push(name.to_owned());
        existing = existing.parent().unwrap_or(Path::new("/"));
    }
    let mut resolved = existing.canonicalize().map_err(|e| {
        format!(
            "`{shown}` cannot be resolved ({e}); a symlink whose target is missing is not \
             followed"
        )
    })?;
    for name in rest.iter().rev() {
        resolved.push(name);
    }
    if !resolved.starts_with(&root) || resolved == root {
        return Err(format!(
            "`{shown}` is outside the workspace {}; the editor's files are read and written \
             only inside it",
            root.display()
        ));
    }
    Ok(resolved)
}

/// Largest text read from or written through the editor.
const MAX_TEXT: usize = 256 * 1024;

/// Runs one admitted `editor_read` (or, with `write`, `editor_write`) call.
pub(crate) async fn call(
    write: bool,
    checked: &Checked,
    editor: &dyn EditorFiles,
    workspace: &Path,
) -> CallOutcome {
    let args = checked.args();
    let path = args.get("path").and_then(Value::as_str).unwrap_or_default();
    let target = match inside(workspace, path) {
        Ok(target) => target,
        Err(why) => return tool_error(why),
    };
    if write {
        let text = args
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return write_file(checked, editor, &target, text).await;
    }
    if !editor.can_read() {
        return tool_error("the editor does not read files for corral".into());
    }
    let line = args.get("line").and_then(Value::as_u64);
    let limit = args.get("limit").and_then(Value::as_u64);
    match editor.read(&target, line, limit).await {
        Ok(text) => {
            let cut = text.len() > MAX_TEXT;
            let mut end = MAX_TEXT.min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let first = line.unwrap_or(1);
            let mut content = String::with_capacity(end + 64);
            let mut count = 0;
            for (i, l) in text[..end].lines().enumerate() {
                content.push_str(&format!("{:>6}\t{l}\n", first + i as u64));
                count += 1;
            }
            if cut {
                content.push_str(&format!(
                    "[cut at {MAX_TEXT} bytes of {}; read on with `line`]\n",
                    text.len()
                ));
            }
            CallOutcome::Output {
                content,
                is_error: false,
                data: Some(json!({"path": target.display().to_string(), "lines": count})),
            }
        }
        Err(e) => tool_error(format!(
            "the editor could not read `{}`: {e}",
            target.display()
        )),
    }
}

/// Writes `text` to `target` through the editor, its before-image kept.
async fn write_file(
    checked: &Checked,
    editor: &dyn EditorFiles,
    target: &Path,
    text: &str,
) -> CallOutcome {
    if !editor.can_write() {
        return tool_error("the editor does not write files for corral".into());
    }
    if text.len() > MAX_TEXT {
        return tool_error(format!(
            "the content is {} bytes; editor_write takes at most {MAX_TEXT} (use write_file)",
            text.len()
        ));
    }
    if let Some(checkpoint) = checked.checkpoint() {
        let before = image(target, checkpoint.cap());
        let mode = match &before {
            Image::File { mode, .. } => *mode,
            _ => 0o644,
        };
        let change = Change {
            path: target.to_path_buf(),
            before,
            after: Image::File {
                content: text.as_bytes().to_vec(),
                mode,
            },
        };
        if let Err(why) = checkpoint.keep(&[change]) {
            return tool_error(format!(
                "not written: its before-image could not be kept for undo: {why}"
            ));
        }
    }
    match editor.write(target, text).await {
        Ok(()) => CallOutcome::Output {
            content: format!(
                "wrote `{}` through the editor ({} bytes)",
                target.display(),
                text.len()
            ),
            is_error: false,
            data: Some(json!({"path": target.display().to_string(), "bytes": text.len()})),
        },
        Err(e) => tool_error(format!(
            "the editor could not write `{}`: {e}",
            target.display()
        )),
    }
}

/// What `path` holds now, for the checkpoint: a regular file's bytes (up
/// to `cap`), or that it is absent.
fn image(path: &Path, cap: u64) -> Image {
    match crate::fsread::read_regular(path, cap) {
        Ok(content) => {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(path)
                .map(|m| m.permissions().mode() & 0o7777)
                .unwrap_or(0o644);
            Image::File { content, mode }
        }
        Err(_) => match std::fs::metadata(path) {
            Ok(m) => Image::TooBig { size: m.len() },
            Err(_) => Image::Absent,
        },
    }
}

fn tool_error(message: String) -> CallOutcome {
    CallOutcome::Output {
        content: crate::terminal::inert(&message).into_owned(),
        is_error: true,
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_workspace_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("out"), ws.join("link")).unwrap();
        let root = ws.canonicalize().unwrap();
        assert_eq!(inside(&ws, "src/a.rs").unwrap(), root.join("src/a.rs"));
        assert_eq!(
            inside(&ws, "new/dir/b.rs").unwrap(),
            root.join("new/dir/b.rs")
        );
        assert!(inside(&ws, "link/secret").unwrap_err().contains("outside"));
        assert!(inside(&ws, "../out/x").unwrap_err().contains(".."));
        assert!(inside(&ws, "/etc/passwd").unwrap_err().contains("outside"));
        assert!(inside(&ws, "").is_err());
        // A dangling link to a file outside is not written through.
        std::os::unix::fs::symlink(dir.path().join("out/pwned"), ws.join("innocent.md")).unwrap();
        assert!(inside(&ws, "innocent.md").unwrap_err().contains("missing"));
        assert!(inside(&ws, "innocent.md/x").is_err());
        let abs = root.join("src/a.rs").display().to_string();
        assert_eq!(inside(&ws, &abs).unwrap(), root.join("src/a.rs"));
    }
}
