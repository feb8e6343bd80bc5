//! Absolute paths from MCP clients.
//!
//! Claude Code, Codex and IDEs name files by absolute path (the reference
//! filesystem server accepts them), while corral's tools take paths relative
//! to the workspace root and refuse absolute ones. Before a call reaches the
//! dispatcher, each path argument that is absolute and lies beneath the
//! workspace is rewritten relative to it; one that lies outside is refused
//! here, with a message naming the workspace. Nothing widens: the rewritten
//! path then goes through the same schema check, rules and sandbox as a
//! relative one would, so a symlink inside the workspace leads where it
//! would for corral's own model.

use std::path::{Component, Path, PathBuf};

/// The string arguments that name a path (as the policy reads them, plus
/// `cwd` of `run_command`).
const PATH_KEYS: &[&str] = &["path", "from", "to", "destination", "cwd"];

/// The directories an absolute path may lie beneath, each as the client may
/// spell it: the workspace as given and as the kernel resolves it.
#[derive(Debug, Clone)]
pub(crate) struct Roots {
    spellings: Vec<PathBuf>,
}

impl Roots {
    /// The workspace `given` (as the manifest names it) and `canonical`.
    pub(crate) fn new(given: &Path, canonical: &Path) -> Self {
        let mut spellings = vec![lexical(canonical)];
        let given = lexical(given);
        if given.is_absolute() && !spellings.contains(&given) {
            spellings.push(given);
        }
        Self { spellings }
    }

    /// The workspace as shown in messages.
    fn shown(&self) -> String {
        self.spellings
            .first()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    /// `path` relative to the workspace: as written when it is relative,
    /// rewritten when it is absolute and beneath the workspace, `None` when
    /// it is absolute and outside.
    fn relative(&self, path: &str) -> Option<String> {
        let raw = Path::new(path);
        if !raw.is_absolute() {
            return Some(path.to_owned());
        }
        let beneath = |p: &Path| {
            self.spellings.iter().find_map(|root| {
                p.strip_prefix(root).ok().map(|rel| {
                    if rel.as_os_str().is_empty() {
                        ".".to_owned()
                    } else {
                        rel.display().to_string()
                    }
                })
            })
        };
        // As written first (a symlink inside is the sandbox's to follow);
        // then as the kernel resolves it, for a client that names the
        // workspace through a symlink of its own (`/tmp` → `/private/tmp`).
        beneath(&lexical(raw)).or_else(|| {
            std::fs::canonicalize(raw)
                .ok()
                .and_then(|real| beneath(&real))
        })
    }

    /// Rewrites the absolute path arguments of `args` that lie beneath the
    /// workspace; the error, for the client, names the first that does not.
    pub(crate) fn rewrite(
        &self,
        args: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), String> {
        for key in PATH_KEYS {
            if let Some(serde_json::Value::String(p)) = args.get_mut(*key) {
                *p = self.inside(p)?;
            }
        }
        if let Some(serde_json::Value::Array(list)) = args.get_mut("paths") {
            for item in list {
                if let serde_json::Value::String(p) = item {
                    *p = self.inside(p)?;
                }
            }
        }
        Ok(())
    }

    fn inside(&self, path: &str) -> Result<String, String> {
        self.relative(path).ok_or_else(|| {
            format!(
                "`{}` is outside the workspace `{}`: this server's tools reach only files beneath \
                 it. Name a path inside it (absolute or relative to it), or start `corral mcp \
                 serve --workspace DIR` on the directory you mean",
                corral_protocol::terminal::visible(path),
                corral_protocol::terminal::visible(&self.shown()),
            )
        })
    }
}

/// `path` with `.` dropped and `..` taken back lexically (never above `/`).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn roots() -> Roots {
        Roots::new(Path::new("/w/ws"), Path::new("/w/ws"))
    }

    #[test]
    fn absolute_paths_beneath_the_workspace_become_relative() {
        let r = roots();
        assert_eq!(r.relative("/w/ws/src/a.rs").as_deref(), Some("src/a.rs"));
        assert_eq!(r.relative("/w/ws").as_deref(), Some("."));
        assert_eq!(r.relative("/w/ws/./b/../c").as_deref(), Some("c"));
        assert_eq!(r.relative("src/a.rs").as_deref(), Some("src/a.rs"));
        // Relative paths are the tools' to judge, `..` included.
        assert_eq!(r.relative("../x").as_deref(), Some("../x"));
    }

    #[test]
    fn absolute_paths_outside_are_refused() {
        let r = roots();
        assert_eq!(r.relative("/w/wsx/a"), None);
        assert_eq!(r.relative("/w/ws/../other/a"), None);
        assert_eq!(r.relative("/etc/passwd"), None);
        let mut args = json!({"paths": ["/w/ws/a", "/etc/shadow"]})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let err = r.rewrite(&mut args).unwrap_err();
        assert!(
            err.contains("`/etc/shadow` is outside the workspace `/w/ws`"),
            "{err}"
        );
        let mut args = json!({"path": "/w/ws/a", "cwd": "/w/ws/d", "paths": ["/w/ws/b"]})
            .as_object()
            .cloned()
            .unwrap_or_default();
        r.rewrite(&mut args).unwrap();
        assert_eq!(
            serde_json::Value::Object(args),
            json!({"path": "a", "cwd": "d", "paths": ["b"]})
        );
    }
}
