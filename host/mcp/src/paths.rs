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
//!
//! A client that offers roots (`roots/list`) narrows this further, never
//! widens it: the workspace and its grants stay those the server started
//! with, and a path argument must also lie beneath one of the client's
//! roots that lie in the workspace. A root outside the workspace grants
//! nothing.

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
    /// With `client` (the client's roots, when it offers them) each path
    /// must also lie beneath one of them.
    pub(crate) fn rewrite(
        &self,
        args: &mut serde_json::Map<String, serde_json::Value>,
        client: Option<&[PathBuf]>,
    ) -> Result<(), String> {
        let allowed: Option<Vec<PathBuf>> = client.map(|roots| {
            roots
                .iter()
                .filter_map(|r| self.relative(&r.to_string_lossy()))
                .map(|rel| lexical(Path::new(&rel)))
                .collect()
        });
        let check = |p: &mut String| -> Result<(), String> {
            let rel = self.inside(p)?;
            if let (Some(allowed), Some(roots)) = (&allowed, client)
                && !allowed
                    .iter()
                    .any(|a| lexical(Path::new(&rel)).starts_with(a))
            {
                return Err(outside_roots(p, roots, &self.shown()));
            }
            *p = rel;
            Ok(())
        };
        for key in PATH_KEYS {
            if let Some(serde_json::Value::String(p)) = args.get_mut(*key) {
                check(p)?;
            }
        }
        if let Some(serde_json::Value::Array(list)) = args.get_mut("paths") {
            for item in list {
                if let serde_json::Value::String(p) = item {
                    check(p)?;
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

fn outside_roots(path: &str, roots: &[PathBuf], workspace: &str) -> String {
    let named: Vec<String> = roots
        .iter()
        .map(|r| {
            format!(
                "`{}`",
                corral_protocol::terminal::visible(&r.to_string_lossy())
            )
        })
        .collect();
    let named = if named.is_empty() {
        "none".to_owned()
    } else {
        named.join(", ")
    };
    format!(
        "`{}` is outside the roots this MCP client offered ({named}); the server serves only \
         paths beneath a client root that lies in its workspace `{}`. Open the directory you \
         mean as a root in the client, or start `corral mcp serve --workspace DIR` on it",
        corral_protocol::terminal::visible(path),
        corral_protocol::terminal::visible(workspace),
    )
}

/// The directories of a client's `roots/list` answer: its `file://` URIs,
/// percent-decoded; any other URI names no directory here.
pub(crate) fn root_dirs<'a>(uris: impl IntoIterator<Item = &'a str>) -> Vec<PathBuf> {
    uris.into_iter()
        .filter_map(|uri| {
            let rest = uri.strip_prefix("file://")?;
            // `file://localhost/…` and `file:///…` both name a local path.
            let rest = rest.strip_prefix("localhost").unwrap_or(rest);
            let bytes = percent_decode(rest)?;
            let path = PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(bytes),
            );
            path.is_absolute().then(|| lexical(&path))
        })
        .collect()
}

fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
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

    #[test]
    fn client_roots_narrow_and_never_widen() {
        let r = roots();
        let client = root_dirs(["file:///w/ws/sub%20dir", "file:///elsewhere", "https://x/"]);
        assert_eq!(
            client,
            [PathBuf::from("/w/ws/sub dir"), PathBuf::from("/elsewhere")]
        );
        let args = |p: &str| {
            json!({ "path": p })
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        let mut a = args("/w/ws/sub dir/a.txt");
        r.rewrite(&mut a, Some(&client)).unwrap();
        assert_eq!(a["path"], "sub dir/a.txt");
        let mut a = args("sub dir/b.txt");
        r.rewrite(&mut a, Some(&client)).unwrap();
        for outside in ["other/a.txt", "/w/ws/other", "/elsewhere/x", "."] {
            let err = r.rewrite(&mut args(outside), Some(&client)).unwrap_err();
            assert!(err.contains("outside"), "{outside}: {err}");
        }
        // No root in the workspace: no path at all.
        let err = r.rewrite(&mut args("a"), Some(&[])).unwrap_err();
        assert!(err.contains("(none)"), "{err}");
    }

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
        let err = r.rewrite(&mut args, None).unwrap_err();
        assert!(
            err.contains("`/etc/shadow` is outside the workspace `/w/ws`"),
            "{err}"
        );
        let mut args = json!({"path": "/w/ws/a", "cwd": "/w/ws/d", "paths": ["/w/ws/b"]})
            .as_object()
            .cloned()
            .unwrap_or_default();
        r.rewrite(&mut args, None).unwrap();
        assert_eq!(
            serde_json::Value::Object(args),
            json!({"path": "a", "cwd": "d", "paths": ["b"]})
        );
    }
}
