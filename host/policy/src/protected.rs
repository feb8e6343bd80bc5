//! Paths no tool writes whatever the policy says: `.git` internals and
//! corral's own manifest, named in a call's arguments; and the one reading
//! of which paths a call's arguments name, shared with the rules.

/// The argument names that carry a single path.
const PATH_KEYS: [&str; 4] = ["path", "from", "to", "destination"];

/// Every path a call's arguments name, as written, in argument order: the
/// string arguments `path`, `from`, `to` and `destination`, the strings of a
/// `paths` array (`git_add`), and the file headers of an `apply_patch`
/// envelope in `patch` (a file added, updated, deleted or moved to), read
/// by the parser the `fs` plugin applies the patch with. A patch that
/// parser refuses names no path: the tool changes nothing with it.
pub fn path_arguments(args: &serde_json::Value) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for key in PATH_KEYS {
        if let Some(p) = args.get(key).and_then(|v| v.as_str()) {
            paths.push(p.to_owned());
        }
    }
    if let Some(list) = args.get("paths").and_then(|v| v.as_array()) {
        paths.extend(list.iter().filter_map(|v| v.as_str()).map(str::to_owned));
    }
    if let Some(patch) = args.get("patch").and_then(|v| v.as_str()) {
        let as_written = |raw: &str| Ok(raw.to_owned());
        if let Ok(ops) = corral_syntax::patch::parse(patch, &as_written) {
            paths.extend(ops.iter().flat_map(|op| op.paths()).map(str::to_owned));
        }
    }
    paths
}

/// The first path a writing call names that is protected: `.git` and what is
/// inside it, and corral's own manifest (see [`path_arguments`]). This only
/// gives the model an early, clear answer; the host's filesystem layer
/// enforces the protection on what a path resolves to, whatever names it.
pub fn protected_target(args: &serde_json::Value) -> Option<String> {
    path_arguments(args).into_iter().find(|p| is_protected(p))
}

/// As [`protected_target`], each path judged as written and as `resolve`
/// says it leads (symlinks followed, workspace-relative inside it): `g/config`
/// with `g -> .git` is protected. The answer names the path as written and,
/// when only its resolution is protected, where it leads:
/// `` `g/config` (which leads to `.git/config`) ``.
pub fn protected_target_at(
    args: &serde_json::Value,
    resolve: &dyn Fn(&str) -> String,
) -> Option<String> {
    path_arguments(args).into_iter().find_map(|p| {
        if is_protected(&p) {
            return Some(format!("`{p}`"));
        }
        let resolved = resolve(&p);
        is_protected(&resolved).then(|| format!("`{p}` (which leads to `{resolved}`)"))
    })
}

/// `.git` or anything beneath it (any case), or the workspace's
/// `corral.toml`, after lexical normalisation.
fn is_protected(path: &str) -> bool {
    // Cautious on purpose: `\` counts as a separator and a climb above
    // the start is dropped, so `..\.git` and `/.git` are protected too.
    let path = path.replace('\\', "/");
    let lexical = corral_syntax::path::lexical(&path);
    let parts: Vec<&str> = lexical
        .parts
        .into_iter()
        .skip_while(|p| *p == "..")
        .collect();
    parts
        .first()
        .is_some_and(|first| first.eq_ignore_ascii_case(".git"))
        || (parts.len() == 1 && parts[0] == "corral.toml")
}

#[cfg(test)]
mod tests {
    use super::{path_arguments, protected_target, protected_target_at};
    use serde_json::json;

    #[test]
    fn protected_paths() {
        assert_eq!(
            protected_target(&json!({"path": ".git/config"})),
            Some(".git/config".into())
        );
        assert!(protected_target(&json!({"path": "./src/../.git/hooks/pre-commit"})).is_some());
        assert_eq!(
            protected_target(&json!({"path": "corral.toml"})),
            Some("corral.toml".into())
        );
        assert!(protected_target(&json!({"path": ".GIT/HEAD"})).is_some());
        assert!(protected_target(&json!({"patch": "*** Begin Patch\n*** Add File: .git/hooks/post-checkout\n+x\n*** End Patch"})).is_some());
        assert_eq!(protected_target(&json!({"path": "src/.gitignore"})), None);
        assert_eq!(
            protected_target(&json!({"path": ".github/workflows/ci.yml"})),
            None
        );
        assert_eq!(protected_target(&json!({"path": "docs/corral.toml"})), None);
    }

    #[test]
    fn paths_of_a_call() {
        let patch = "*** Begin Patch\n*** Add File: a/x.txt\n+x\n*** Update File: b.txt\n\
                     *** Move to: c/y.txt\n@@\n-a\n+b\n  *** Delete File: d.txt \n*** End Patch";
        assert_eq!(
            path_arguments(&json!({"patch": patch})),
            ["a/x.txt", "b.txt", "c/y.txt", "d.txt"]
        );
        assert_eq!(
            path_arguments(&json!({"paths": ["a", 3, "b"], "path": "p", "rev": "HEAD"})),
            ["p", "a", "b"]
        );
        assert!(path_arguments(&json!({"message": "m"})).is_empty());
    }

    #[test]
    fn protected_paths_judged_where_they_lead() {
        let resolve = |p: &str| p.replacen("g/", ".git/", 1);
        assert_eq!(
            protected_target_at(&json!({"path": "g/config"}), &resolve),
            Some("`g/config` (which leads to `.git/config`)".into())
        );
        assert_eq!(
            protected_target_at(&json!({"paths": ["ok", ".git/HEAD"]}), &resolve),
            Some("`.git/HEAD`".into())
        );
        assert_eq!(
            protected_target_at(&json!({"path": "src/g/x"}), &resolve),
            None
        );
    }
}
