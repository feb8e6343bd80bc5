//! corral's own state: the one list of the places where corral keeps what
//! decides what runs, and which nothing confined may reach.
//!
//! - The user's directories, each `corral/` beneath its XDG base: the
//!   configuration (`corral.toml`, profiles, commands), the data (session
//!   logs, checkpoints, the trust store and reviewed tools, the write
//!   journal, installed plugins, history) and the cache (compiled
//!   components, descriptions, checksums). No plugin, hook, program or MCP
//!   server may read or write them, even beneath a grant of `~` or `/` or a
//!   workspace that contains them: Landlock leaves them out of every rule
//!   for native programs (`landlock.rs`), and the host's filesystem layer
//!   refuses them for wasm guests (`corral-runtime`'s `fsguard`).
//! - A project's `corral.toml` and `.corral/`: the repository's own text,
//!   so readable, but never writable by anything confined (a read-only bind
//!   mount for programs, a refusal for guests); changing them needs the
//!   user and `corral trust`.
//!
//! The user's directories are made (mode 0700) before anything confined
//! starts, so that a program granted the home directory cannot create one
//! first, as a symlink to a place of its own.

use std::path::{Path, PathBuf};

/// The name of corral's directory beneath each XDG base directory.
const NAME: &str = "corral";

/// The project's files that are corral's own, relative to the workspace root.
pub const PROJECT_FILES: &[&str] = &["corral.toml", ".corral"];

/// One of the user's state directories: what it holds and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserState {
    /// What it holds, for messages (`configuration`, `data`, `cache`).
    pub what: &'static str,
    /// Its path, as the environment names it (not canonicalized).
    pub path: PathBuf,
}

/// The user's state directories that the environment names (configuration,
/// data, cache), whether they exist or not.
pub fn user_dirs() -> Vec<UserState> {
    [
        ("configuration", dirs::config_dir()),
        ("data", dirs::data_dir()),
        ("cache", dirs::cache_dir()),
    ]
    .into_iter()
    .filter_map(|(what, base)| {
        base.map(|b| UserState {
            what,
            path: b.join(NAME),
        })
    })
    .collect()
}

/// The user's state directories by canonical path, each made first (mode
/// 0700) when it is missing: a directory that does not exist cannot be
/// left out of a Landlock rule, and one made later by a confined program
/// would be the program's.
pub fn user_dirs_made() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = user_dirs()
        .into_iter()
        .filter_map(|s| {
            if std::fs::symlink_metadata(&s.path).is_err() {
                use std::os::unix::fs::DirBuilderExt as _;
                let _ = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&s.path);
            }
            s.path.canonicalize().ok()
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The project files of the workspace at `root` that exist, by canonical
/// path, those inside it.
pub fn project_files(root: &Path) -> Vec<PathBuf> {
    let inside = root.canonicalize().ok();
    PROJECT_FILES
        .iter()
        .filter_map(|n| root.join(n).canonicalize().ok())
        .filter(|p| inside.as_ref().is_some_and(|r| p.starts_with(r)))
        .collect()
}

/// The state directory of the user's that lies at or beneath `dir`
/// (canonical), or that `dir` lies beneath: a grant of `dir` would cover
/// it, or be inside it. For the notes shown when such a grant is written.
pub fn covered_by(dir: &Path) -> Vec<UserState> {
    let Ok(dir) = dir.canonicalize() else {
        return Vec::new();
    };
    user_dirs()
        .into_iter()
        .filter(|s| {
            let path = s.path.canonicalize().unwrap_or_else(|_| s.path.clone());
            path.starts_with(&dir) || dir.starts_with(&path)
        })
        .collect()
}

/// A note for a grant of `dir` (as the user wrote it) that covers corral's
/// own state: what stays out of reach anyway. `None` when it covers none.
pub fn grant_note(shown: &str, dir: &Path) -> Option<String> {
    let covered = covered_by(dir);
    if covered.is_empty() {
        return None;
    }
    let list: Vec<String> = covered
        .iter()
        .map(|s| format!("{} ({})", s.path.display(), s.what))
        .collect();
    Some(format!(
        "the grant `{shown}` covers corral's own state: {}; it stays out of reach (neither \
         readable nor writable) for whatever this grant is given to",
        list.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_project_file_outside_the_workspace_is_not_listed() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join(".corral")).expect("mkdir");
        std::fs::write(tmp.path().join("elsewhere.toml"), "").expect("write");
        std::os::unix::fs::symlink("../elsewhere.toml", ws.join("corral.toml")).expect("symlink");
        let got = super::project_files(&ws);
        assert_eq!(got, [ws.canonicalize().expect("canonical").join(".corral")]);
    }
}
