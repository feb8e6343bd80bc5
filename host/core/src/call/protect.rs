//! Step 3, `protect`: protected paths. A call that writes may not name `.git`
//! internals or corral's manifest, judged on every path argument as written
//! and as it resolves through symlinks beneath the workspace; the built-in
//! git plugin is exempt ([`crate::runtime::may_write_git`]).

use super::hooks::Hooked;
use super::{CallOutcome, Dispatcher, Sink};
use crate::protocol::{Effect, Event, PermissionDecision};
use std::path::PathBuf;

impl Dispatcher {
    /// `hooked` on to the policy, or its refusal when it would write a
    /// protected path, the denial logged.
    pub(super) fn protect(
        &self,
        hooked: Hooked,
        sink: &mut dyn Sink,
    ) -> anyhow::Result<Result<Hooked, CallOutcome>> {
        let checked = &hooked.checked;
        if !checked.spec.effects.contains(&Effect::Write) {
            return Ok(Ok(hooked));
        }
        let exempt = checked
            .plugin()
            .is_some_and(|p| crate::runtime::may_write_git(&p.decl().source));
        if exempt {
            return Ok(Ok(hooked));
        }
        let resolve = |p: &str| self.resolve(p);
        let Some(path) = crate::policy::protected_target_at(&checked.args, &resolve) else {
            return Ok(Ok(hooked));
        };
        let reason = format!(
            "{path} is protected: .git internals (use the git tools) and corral's manifest are read-only to tools"
        );
        sink.emit(Event::Permission {
            call_id: checked.call.id.clone(),
            tool: checked.call.name.clone(),
            decision: PermissionDecision::Deny,
            reason: reason.clone(),
        })?;
        Ok(Err(CallOutcome::Refused {
            message: format!("denied: {reason}"),
            stop: false,
        }))
    }

    /// `path` as the rules judge it: resolved beneath the workspace when
    /// there is one, else as written.
    pub(super) fn resolve(&self, path: &str) -> String {
        match &self.workspace {
            Some(workspace) => resolve_beneath(workspace, path),
            None => path.to_owned(),
        }
    }
}

/// Where `path` (an argument, relative to `workspace` or absolute) leads
/// once symlinks are followed as the kernel would: each existing component
/// resolved in turn (a link's target spliced in, at most 40 links), the
/// components that do not exist yet appended as written. Inside the
/// workspace it is named relative to it (`protected/keep.txt`), outside by
/// its absolute path.
fn resolve_beneath(workspace: &std::path::Path, path: &str) -> String {
    use std::collections::VecDeque;
    use std::path::{Component, Path};
    fn parts(path: &Path) -> impl Iterator<Item = std::ffi::OsString> + '_ {
        path.components().filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
    }
    let path = Path::new(path);
    let mut out = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        workspace.to_path_buf()
    };
    let mut todo: VecDeque<std::ffi::OsString> = parts(path).collect();
    let mut existing = true;
    let mut links = 0;
    while let Some(part) = todo.pop_front() {
        // `out` holds no symlink, so `..` is its parent, as for the kernel.
        if part == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&part);
        if existing {
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() && links < 40 => {
                    links += 1;
                    if let Ok(target) = std::fs::read_link(&next) {
                        if target.is_absolute() {
                            out = PathBuf::from("/");
                        }
                        for (i, p) in parts(&target).enumerate() {
                            todo.insert(i, p);
                        }
                        continue;
                    }
                    existing = false;
                }
                Ok(_) => {}
                Err(_) => existing = false,
            }
        }
        out = next;
    }
    match out.strip_prefix(workspace) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => out.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::resolve_beneath;
    use std::os::unix::fs::symlink;

    #[test]
    fn paths_resolve_through_symlinks_beneath_the_workspace() {
        let root = tempfile::tempdir().unwrap();
        let ws = root.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(ws.join("protected/sub")).unwrap();
        std::fs::create_dir_all(root.path().join("elsewhere")).unwrap();
        symlink("protected", ws.join("alias")).unwrap();
        symlink("../alias/sub", ws.join("protected/up")).unwrap();
        symlink("../elsewhere", ws.join("out")).unwrap();
        symlink("protected/new.txt", ws.join("dangling")).unwrap();
        symlink("loop", ws.join("loop")).unwrap();
        let r = |p: &str| resolve_beneath(&ws, p);
        assert_eq!(r("alias/keep.txt"), "protected/keep.txt");
        assert_eq!(r("./alias//x/../keep.txt"), "protected/keep.txt");
        assert_eq!(r("alias/up/a/b"), "protected/sub/a/b");
        assert_eq!(r("dangling"), "protected/new.txt");
        assert_eq!(r("src/new/file.rs"), "src/new/file.rs");
        assert_eq!(r("."), ".");
        let outside = root.path().canonicalize().unwrap().join("elsewhere/x");
        assert_eq!(r("out/x"), outside.display().to_string());
        assert_eq!(r(&ws.join("alias/k").display().to_string()), "protected/k");
        // A loop ends (at the link limit) instead of spinning.
        assert!(r("loop/x").ends_with("loop/x"));
    }
}
