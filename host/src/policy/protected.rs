//! Paths no tool writes whatever the policy says: `.git` internals and
//! corral's own manifest, named in a call's arguments.

/// The first path a writing call names that is protected: `.git` and what is
/// inside it, and corral's own manifest. Paths come from the usual argument
/// names and from the file headers of an `apply_patch` envelope. This only
/// gives the model an early, clear answer; the host's filesystem layer
/// enforces the protection on what a path resolves to, whatever names it.
pub fn protected_target(args: &serde_json::Value) -> Option<String> {
    let mut paths: Vec<String> = Vec::new();
    for key in ["path", "from", "to", "destination"] {
        if let Some(p) = args.get(key).and_then(|v| v.as_str()) {
            paths.push(p.to_owned());
        }
    }
    if let Some(list) = args.get("paths").and_then(|v| v.as_array()) {
        paths.extend(list.iter().filter_map(|v| v.as_str()).map(str::to_owned));
    }
    if let Some(patch) = args.get("patch").and_then(|v| v.as_str()) {
        for line in patch.lines() {
            for header in [
                "*** Add File:",
                "*** Update File:",
                "*** Delete File:",
                "*** Move to:",
            ] {
                if let Some(p) = line.trim_start().strip_prefix(header) {
                    paths.push(p.trim().to_owned());
                }
            }
        }
    }
    paths.into_iter().find(|p| {
        let mut parts: Vec<&str> = Vec::new();
        for part in p.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                other => parts.push(other),
            }
        }
        parts
            .first()
            .is_some_and(|first| first.eq_ignore_ascii_case(".git"))
            || (parts.len() == 1 && parts[0] == "corral.toml")
    })
}

#[cfg(test)]
mod tests {
    use super::protected_target;
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
}
