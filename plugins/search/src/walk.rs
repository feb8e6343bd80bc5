//! The file walk behind `grep` and `glob`: depth first in path order, with
//! ripgrep's ignore rules (`.ignore`, `.gitignore`, `.git/info/exclude`,
//! hidden files, include/exclude globs), matched by the `ignore` crate's
//! own matchers.
//!
//! `ignore::Walk` would do the same, but it finds ignore files by trying to
//! open them in every directory and reads each directory through `std::fs`;
//! in the sandbox every such attempt is a WASI call. This walk lists each
//! directory once through [`Fs`] and loads only the ignore files that the
//! listing shows. The rules and their precedence follow `ignore::Walk`
//! (checked against it by the tests below), with one difference: the ignore
//! files of the directories above the search root are read only up to the
//! workspace root, never outside it.

use crate::sys::{Fs, Kind};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use std::path::{Path, PathBuf};

/// The ignore files of one directory on the way down.
struct Level {
    /// `.ignore`
    ignore: Option<Gitignore>,
    /// `.gitignore`
    git_ignore: Option<Gitignore>,
    /// `.git/info/exclude`
    git_exclude: Option<Gitignore>,
}

impl Level {
    /// Loads those ignore files of `dir` that its listing shows.
    fn load(dir: &Path, has_ignore: bool, has_git_ignore: bool, has_git: bool) -> Self {
        let load = |file: PathBuf| {
            let mut builder = GitignoreBuilder::new(dir);
            // A file that cannot be read or parsed in part still gives the
            // rules it could; ripgrep does the same.
            let _ = builder.add(file);
            builder.build().ok().filter(|g| !g.is_empty())
        };
        Self {
            ignore: has_ignore.then(|| load(dir.join(".ignore"))).flatten(),
            git_ignore: has_git_ignore
                .then(|| load(dir.join(".gitignore")))
                .flatten(),
            git_exclude: has_git
                .then(|| load(dir.join(".git/info/exclude")))
                .flatten(),
        }
    }
}

/// A walk in progress.
struct Walker<'a> {
    fs: &'a Fs,
    overrides: Override,
    /// Apply ignore files and skip hidden entries (false for `all`).
    filter: bool,
    levels: Vec<Level>,
    out: Vec<PathBuf>,
}

impl Walker<'_> {
    /// Whether `path` is left out, as `ignore::Walk` decides it.
    fn skip(&self, path: &Path, name: &std::ffi::OsStr, is_dir: bool) -> bool {
        let path = path.strip_prefix("./").unwrap_or(path);
        if !self.overrides.is_empty() {
            let m = self.overrides.matched(path, is_dir);
            if !m.is_none() {
                return m.is_ignore();
            }
        }
        if !self.filter {
            return false;
        }
        let m = self.matched_ignore_files(path, is_dir);
        if !m.is_none() {
            return m.is_ignore();
        }
        name.as_encoded_bytes().starts_with(b".")
    }

    /// The deepest rule of each kind decides for that kind; `.ignore` rules
    /// win over `.gitignore` ones, which win over `.git/info/exclude`. As
    /// in ripgrep without `require_git`, a nested repository does not stop
    /// the rules of the directories above it.
    fn matched_ignore_files(&self, path: &Path, is_dir: bool) -> Match<()> {
        let mut m_ignore = Match::None;
        let mut m_git_ignore = Match::None;
        let mut m_git_exclude = Match::None;
        let decide = |slot: &mut Match<()>, matcher: &Option<Gitignore>| {
            if slot.is_none()
                && let Some(g) = matcher
            {
                *slot = g.matched(path, is_dir).map(|_| ());
            }
        };
        for level in self.levels.iter().rev() {
            decide(&mut m_ignore, &level.ignore);
            decide(&mut m_git_ignore, &level.git_ignore);
            decide(&mut m_git_exclude, &level.git_exclude);
        }
        m_ignore.or(m_git_ignore).or(m_git_exclude)
    }

    fn visit(&mut self, dir: &Path) {
        // An unreadable directory is skipped, as ripgrep skips it.
        let Ok(mut entries) = self.fs.list(dir) else {
            return;
        };
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let pushed = self.filter;
        if pushed {
            let has = |n: &str| entries.iter().any(|e| e.name == n);
            self.levels.push(Level::load(
                dir,
                has(".ignore"),
                has(".gitignore"),
                has(".git"),
            ));
        }
        for entry in &entries {
            if entry.kind == Kind::Other {
                continue;
            }
            let path = dir.join(&entry.name);
            let is_dir = entry.kind == Kind::Dir;
            if self.skip(&path, &entry.name, is_dir) {
                continue;
            }
            if is_dir {
                self.visit(&path);
            } else {
                self.out.push(path);
            }
        }
        if pushed {
            self.levels.pop();
        }
    }
}

/// The files to search under `root` (a workspace-relative path, `.` for the
/// root) in path order. A file given as `root` is returned as is.
/// `overrides` holds the include/exclude globs; `all` turns off ignore
/// files and hidden-file skipping.
pub(crate) fn files(
    fs: &Fs,
    root: &Path,
    root_is_dir: bool,
    overrides: Override,
    all: bool,
) -> Vec<PathBuf> {
    if !root_is_dir {
        return vec![root.to_path_buf()];
    }
    let mut walker = Walker {
        fs,
        overrides,
        filter: !all,
        levels: Vec::new(),
        out: Vec::new(),
    };
    if walker.filter && root.is_relative() && root != Path::new(".") {
        // The directories from the workspace root down to the search root's
        // parent: their rules apply below them too.
        walker.levels.push(load_probing(Path::new(".")));
        let mut above = PathBuf::new();
        for part in root.parent().into_iter().flat_map(Path::components) {
            above.push(part);
            walker.levels.push(load_probing(&above));
        }
    }
    walker.visit(root);
    walker.out
}

/// The ignore files of a directory above the search root, found by trying
/// to open them (its listing would cost more).
fn load_probing(dir: &Path) -> Level {
    Level::load(
        dir,
        dir.join(".ignore").is_file(),
        dir.join(".gitignore").is_file(),
        dir.join(".git").exists(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ignore::overrides::OverrideBuilder;

    /// A tree that exercises every rule: nested `.gitignore` and `.ignore`
    /// files with negations, anchored and unanchored patterns, hidden files
    /// and directories, a nested repository with `.git/info/exclude`, a
    /// symlink, and names whose order depends on byte comparison.
    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = [
            (".gitignore", "*.log\n!keep.log\n/build/\ntarget\n*.md\n"),
            (".ignore", "secret.txt\n"),
            (".env", "KEY=1\n"),
            (".hidden/inside.rs", "x\n"),
            ("a.rs", "x\n"),
            ("a-b.rs", "x\n"),
            ("B.rs", "x\n"),
            ("a/z.rs", "x\n"),
            ("debug.log", "x\n"),
            ("keep.log", "x\n"),
            ("notes.md", "x\n"),
            ("secret.txt", "x\n"),
            ("build/out.rs", "x\n"),
            ("target/t.rs", "x\n"),
            ("sub/.gitignore", "*.tmp\n!important.tmp\n!notes.md\n"),
            ("sub/.ignore", "!secret.txt\n"),
            ("sub/a.tmp", "x\n"),
            ("sub/important.tmp", "x\n"),
            ("sub/notes.md", "x\n"),
            ("sub/secret.txt", "x\n"),
            ("sub/build/kept.rs", "x\n"),
            ("sub/deep/er/file.rs", "x\n"),
            ("sub/deep/er/trace.log", "x\n"),
            ("nested/.git/info/exclude", "excluded.rs\n"),
            ("nested/.git/HEAD", "ref: refs/heads/main\n"),
            ("nested/excluded.rs", "x\n"),
            ("nested/readme.md", "x\n"),
            ("nested/kept.rs", "x\n"),
            ("nested/app.log", "x\n"),
        ];
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("a.rs"), dir.path().join("link.rs"))
            .expect("symlink");
        dir
    }

    fn overrides(root: &Path, include: &[&str], exclude: &[&str]) -> Override {
        let mut b = OverrideBuilder::new(root);
        for g in include {
            b.add(g).expect("glob");
        }
        for g in exclude {
            b.add(&format!("!{g}")).expect("glob");
        }
        b.build().expect("overrides")
    }

    /// What `ignore::Walk`, configured as the search tools were before this
    /// walk existed, yields for the same question.
    fn reference(root: &Path, include: &[&str], exclude: &[&str], all: bool) -> Vec<PathBuf> {
        ignore::WalkBuilder::new(root)
            .hidden(!all)
            .git_ignore(!all)
            .git_exclude(!all)
            .git_global(false)
            .ignore(!all)
            .require_git(false)
            .parents(false)
            .overrides(overrides(root, include, exclude))
            .sort_by_file_path(|a, b| a.cmp(b))
            .build()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
            .map(ignore::DirEntry::into_path)
            .collect()
    }

    fn ours(root: &Path, include: &[&str], exclude: &[&str], all: bool) -> Vec<PathBuf> {
        files(&Fs, root, true, overrides(root, include, exclude), all)
    }

    fn names(root: &Path, paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| {
                p.strip_prefix(root)
                    .expect("under root")
                    .display()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn same_files_as_ignore_walk() {
        let dir = tree();
        let root = dir.path();
        let cases: &[(&[&str], &[&str], bool)] = &[
            (&[], &[], false),
            (&[], &[], true),
            (&["*.rs"], &[], false),
            (&[], &["sub/**"], false),
            (&["sub/**"], &[], false),
            (&["*.md", "*.log"], &[], false),
            (&["*.rs"], &["nested/**"], true),
            (&["*.env"], &[], false),
        ];
        for (include, exclude, all) in cases {
            let want = reference(root, include, exclude, *all);
            let got = ours(root, include, exclude, *all);
            assert_eq!(
                names(root, &got),
                names(root, &want),
                "include {include:?} exclude {exclude:?} all {all}"
            );
        }
    }

    #[test]
    fn rules_hold_as_documented() {
        let dir = tree();
        let root = dir.path();
        let got = names(root, &ours(root, &[], &[], false));
        let has = |p: &str| got.iter().any(|g| g == p);
        // Ignored by the root's rules, kept by a negation.
        assert!(!has("debug.log") && has("keep.log"), "{got:?}");
        // Anchored `/build/` only at the root; `target` anywhere.
        assert!(!has("build/out.rs") && has("sub/build/kept.rs"), "{got:?}");
        assert!(!has("target/t.rs"), "{got:?}");
        // A deeper file's negation wins; `.ignore` beats `.gitignore`.
        assert!(has("sub/notes.md") && !has("notes.md"), "{got:?}");
        assert!(has("sub/secret.txt") && !has("secret.txt"), "{got:?}");
        assert!(!has("sub/a.tmp") && has("sub/important.tmp"), "{got:?}");
        assert!(
            !has("sub/deep/er/trace.log") && has("sub/deep/er/file.rs"),
            "{got:?}"
        );
        // Hidden entries and symlinks are left out.
        assert!(
            !has(".env") && !has(".hidden/inside.rs") && !has("link.rs"),
            "{got:?}"
        );
        // A nested repository: its exclude file applies, and so does the
        // outer `.gitignore`.
        assert!(
            !has("nested/excluded.rs") && has("nested/kept.rs"),
            "{got:?}"
        );
        assert!(
            !has("nested/readme.md") && !has("nested/app.log"),
            "{got:?}"
        );
        // Path order, component by component, bytewise: `a/z.rs` before
        // `a-b.rs` because `a` sorts before `a-b.rs`.
        let top: Vec<&String> = got.iter().take(5).collect();
        assert_eq!(
            top,
            ["B.rs", "a/z.rs", "a-b.rs", "a.rs", "keep.log"],
            "{got:?}"
        );
    }

    #[test]
    fn a_file_root_is_searched_even_when_ignored() {
        let dir = tree();
        let file = dir.path().join("debug.log");
        let got = files(&Fs, &file, false, Override::empty(), false);
        assert_eq!(got, [file]);
    }
}
