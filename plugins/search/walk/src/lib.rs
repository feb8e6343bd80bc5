//! The directory walk behind corral's file tools (`grep`, `glob`,
//! `list_files`): depth first in path order, with ripgrep's ignore rules
//! (`.ignore`, `.gitignore`, `.git/info/exclude`, hidden files,
//! include/exclude globs), matched by the `ignore` crate's own matchers.
//!
//! `ignore::Walk` would do the same, but in the sandbox it is slow: it reads
//! each directory through `std::fs`, which wasi-libc turns into two host
//! calls per entry (the entry, then a metadata hash it turns into an inode
//! number; the host stats every entry for both), and it finds ignore files
//! by trying to open them in every directory. This walk lists each
//! directory in one call of corral's `files` interface
//! ([`corral_sdk::files::list_directory`], the kernel's own entry types, no
//! stat per entry) and loads only the ignore files that the listing shows.
//! The rules and their precedence follow `ignore::Walk` (checked against it
//! by the tests below), with one difference: the ignore files of the
//! directories above the walk's root are read only up to the workspace
//! root, never outside it. Natively (and for a name the host cannot list),
//! directories are read through `std::fs`.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use std::ffi::OsString;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// What a directory entry is, as far as a walk cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory, to descend into.
    Dir,
    /// A regular file.
    File,
    /// Anything else: symlinks (never followed), devices, sockets.
    Other,
}

/// One entry of a directory listing.
#[derive(Debug)]
struct Entry {
    name: OsString,
    kind: Kind,
}

/// Lists `dir` with `std::fs` (the file type comes from the listing itself,
/// no `stat` per entry).
fn list_std(dir: &Path) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => Kind::Dir,
            Ok(t) if t.is_file() => Kind::File,
            _ => Kind::Other,
        };
        out.push(Entry {
            name: entry.file_name(),
            kind,
        });
    }
    Ok(out)
}

/// The entries of `dir`, in no particular order, without `.` and `..`.
fn list(dir: &Path) -> io::Result<Vec<Entry>> {
    #[cfg(target_family = "wasm")]
    if let Some(entries) = list_host(dir) {
        return Ok(entries);
    }
    list_std(dir)
}

/// Lists `dir` through the host's `files` interface.
#[cfg(target_family = "wasm")]
fn list_host(dir: &Path) -> Option<Vec<Entry>> {
    use corral_sdk::files::{EntryKind, list_directory};
    let entries = list_directory(dir.to_str()?).ok()?;
    Some(
        entries
            .into_iter()
            .map(|e| Entry {
                kind: match e.kind {
                    EntryKind::Directory => Kind::Dir,
                    EntryKind::File => Kind::File,
                    EntryKind::Symlink | EntryKind::Other => Kind::Other,
                },
                name: e.name.into(),
            })
            .collect(),
    )
}

/// What a walk visits and leaves out.
pub struct Options {
    /// Include/exclude globs (an empty `Override` for none).
    pub overrides: Override,
    /// Turns off ignore files and hidden-entry skipping.
    pub all: bool,
    /// Levels below the root to visit (1: only its entries); `None`: all.
    pub max_depth: Option<usize>,
    /// Visit directories too, each before what it holds.
    pub dirs: bool,
    /// Visit entries that are neither files nor directories (symlinks,
    /// devices), without following them.
    pub others: bool,
}

/// The ignore files of one directory on the way down.
struct Level {
    /// `.ignore`
    ignore: Option<Gitignore>,
    /// `.gitignore`
    git_ignore: Option<Gitignore>,
    /// `.git/info/exclude`
    git_exclude: Option<Gitignore>,
    /// The directory as text, without `./`, ending in `/` (empty for the
    /// workspace root), when it is UTF-8: the matchers are then rooted at
    /// `.` and given paths relative to it, cut off as text. `ignore` cuts
    /// its root off with `std::path`'s component walk wherever `cfg(unix)`
    /// does not hold, which in the sandbox cost a tenth of a walk.
    prefix: Option<String>,
}

impl Level {
    /// Loads those ignore files of `dir` that its listing shows.
    fn load(dir: &Path, has_ignore: bool, has_git_ignore: bool, has_git: bool) -> Self {
        let prefix = dir.to_str().map(|d| {
            let d = d.strip_prefix("./").unwrap_or(d);
            match d {
                "." | "" => String::new(),
                _ => format!("{}/", d.trim_end_matches('/')),
            }
        });
        let root = if prefix.is_some() {
            Path::new(".")
        } else {
            dir
        };
        let load = |file: PathBuf| {
            let mut builder = GitignoreBuilder::new(root);
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
            prefix,
        }
    }

    /// `path` (relative to the workspace, without `./`) as this level's
    /// matchers take it.
    fn relative<'p>(&self, path: &'p Path) -> &'p Path {
        match (&self.prefix, path.to_str()) {
            (Some(prefix), Some(text)) => {
                Path::new(text.strip_prefix(prefix.as_str()).unwrap_or(text))
            }
            // A name that is not UTF-8 below a directory that is.
            (Some(prefix), None) => path.strip_prefix(prefix.as_str()).unwrap_or(path),
            (None, _) => path,
        }
    }
}

/// A walk in progress.
struct Walker<'a> {
    options: &'a Options,
    levels: Vec<Level>,
    visit: &'a mut dyn FnMut(&Path, Kind) -> ControlFlow<()>,
}

impl Walker<'_> {
    /// Whether `path` is left out, as `ignore::Walk` decides it.
    fn skip(&self, path: &Path, name: &std::ffi::OsStr, is_dir: bool) -> bool {
        let overrides = &self.options.overrides;
        if self.options.all && overrides.is_empty() {
            return false;
        }
        let path = without_dot(path);
        if !overrides.is_empty() {
            let m = overrides.matched(path, is_dir);
            if !m.is_none() {
                return m.is_ignore();
            }
        }
        if self.options.all {
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
        let decide = |slot: &mut Match<()>, matcher: &Option<Gitignore>, path: &Path| {
            if slot.is_none()
                && let Some(g) = matcher
            {
                *slot = g.matched(path, is_dir).map(|_| ());
            }
        };
        for level in self.levels.iter().rev() {
            let path = level.relative(path);
            decide(&mut m_ignore, &level.ignore, path);
            decide(&mut m_git_ignore, &level.git_ignore, path);
            decide(&mut m_git_exclude, &level.git_exclude, path);
        }
        m_ignore.or(m_git_ignore).or(m_git_exclude)
    }

    /// Walks the entries of `dir`, which is `depth` levels below the root.
    fn walk_dir(&mut self, dir: &Path, depth: usize) -> ControlFlow<()> {
        // An unreadable directory is skipped, as ripgrep skips it.
        let Ok(mut entries) = list(dir) else {
            return ControlFlow::Continue(());
        };
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let filter = !self.options.all;
        if filter {
            let has = |n: &str| entries.iter().any(|e| e.name == n);
            self.levels.push(Level::load(
                dir,
                has(".ignore"),
                has(".gitignore"),
                has(".git"),
            ));
        }
        let flow = self.entries(dir, depth + 1, &entries);
        if filter {
            self.levels.pop();
        }
        flow
    }

    fn entries(&mut self, dir: &Path, depth: usize, entries: &[Entry]) -> ControlFlow<()> {
        let deeper = self.options.max_depth.is_none_or(|max| depth < max);
        for entry in entries {
            if entry.kind == Kind::Other && !self.options.others {
                continue;
            }
            let path = dir.join(&entry.name);
            let is_dir = entry.kind == Kind::Dir;
            if self.skip(&path, &entry.name, is_dir) {
                continue;
            }
            if entry.kind != Kind::Dir || self.options.dirs {
                (self.visit)(&path, entry.kind)?;
            }
            if is_dir && deeper {
                self.walk_dir(&path, depth)?;
            }
        }
        ControlFlow::Continue(())
    }
}

/// Visits what lies under `root` (a workspace-relative path, `.` for the
/// root) in path order, directories before what they hold, until `visit`
/// breaks. A file given as `root` is visited as is, even if ignored.
pub fn walk(
    root: &Path,
    root_is_dir: bool,
    options: &Options,
    visit: &mut dyn FnMut(&Path, Kind) -> ControlFlow<()>,
) {
    if !root_is_dir {
        let _ = visit(root, Kind::File);
        return;
    }
    if options.max_depth == Some(0) {
        return;
    }
    let mut walker = Walker {
        options,
        levels: Vec::new(),
        visit,
    };
    if !options.all && root.is_relative() && root != Path::new(".") {
        // The directories from the workspace root down to the walk root's
        // parent: their rules apply below them too.
        walker.levels.push(load_probing(Path::new(".")));
        let mut above = PathBuf::new();
        for part in root.parent().into_iter().flat_map(Path::components) {
            above.push(part);
            walker.levels.push(load_probing(&above));
        }
    }
    let _ = walker.walk_dir(root, 0);
}

/// `path` without a leading `./`, cut as text when it is UTF-8 (`std::path`
/// walks components to do it).
fn without_dot(path: &Path) -> &Path {
    match path.to_str() {
        Some(text) => Path::new(text.strip_prefix("./").unwrap_or(text)),
        None => path.strip_prefix("./").unwrap_or(path),
    }
}

/// `path` relative to `root`, which it lies beneath, cut as text when both
/// are UTF-8 (`std::path` walks components to do it); `path` itself when it
/// does not lie there.
pub fn below<'p>(path: &'p Path, root: &Path) -> &'p Path {
    if let (Some(text), Some(prefix)) = (path.to_str(), root.to_str())
        && let Some(rest) = text.strip_prefix(prefix)
    {
        if rest.is_empty() {
            return Path::new(rest);
        }
        if let Some(rest) = rest.strip_prefix('/') {
            return Path::new(rest);
        }
    }
    path.strip_prefix(root).unwrap_or(path)
}

/// The files under `root` in path order, honouring ignore files and the
/// globs of `overrides`; `all` turns off ignore files and hidden-file
/// skipping. A file given as `root` is returned as is.
pub fn files(root: &Path, root_is_dir: bool, overrides: Override, all: bool) -> Vec<PathBuf> {
    let options = Options {
        overrides,
        all,
        max_depth: None,
        dirs: false,
        others: false,
    };
    let mut out = Vec::new();
    walk(root, root_is_dir, &options, &mut |path, _| {
        out.push(path.to_path_buf());
        ControlFlow::Continue(())
    });
    out
}

/// The ignore files of a directory above the walk's root, found by trying
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
            (
                "sub/.gitignore",
                "*.tmp\n!important.tmp\n!notes.md\n/anchored/x.rs\n/anchored/*.bin\n",
            ),
            ("sub/anchored/x.rs", "x\n"),
            ("sub/anchored/y.rs", "x\n"),
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
        // Names that are not UTF-8, matched by a nested anchored rule and
        // not.
        #[cfg(unix)]
        for name in [&b"\xff.bin"[..], b"\xfe.rs"] {
            use std::os::unix::ffi::OsStrExt;
            let path = dir
                .path()
                .join("sub/anchored")
                .join(std::ffi::OsStr::from_bytes(name));
            std::fs::write(path, "x\n").expect("write");
        }
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
        files(root, true, overrides(root, include, exclude), all)
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

    /// What `ignore::Walk` lists as `list_files` configured it before this
    /// walk existed: every entry up to `depth`, directories included.
    fn reference_listing(root: &Path, depth: usize, all: bool) -> Vec<(PathBuf, bool)> {
        ignore::WalkBuilder::new(root)
            .max_depth(Some(depth))
            .hidden(!all)
            .git_ignore(!all)
            .git_exclude(!all)
            .git_global(false)
            .ignore(!all)
            .parents(false)
            .require_git(false)
            .sort_by_file_path(|a, b| a.cmp(b))
            .build()
            .filter_map(|e| e.ok())
            .filter(|e| e.depth() > 0)
            .map(|e| {
                let is_dir = e.file_type().is_some_and(|t| t.is_dir());
                (e.into_path(), is_dir)
            })
            .collect()
    }

    #[test]
    fn same_listing_as_ignore_walk_at_every_depth() {
        let dir = tree();
        let root = dir.path();
        for all in [false, true] {
            for depth in 1..=5 {
                let options = Options {
                    overrides: Override::empty(),
                    all,
                    max_depth: Some(depth),
                    dirs: true,
                    others: true,
                };
                let mut got = Vec::new();
                walk(root, true, &options, &mut |path, kind| {
                    got.push((path.to_path_buf(), kind == Kind::Dir));
                    ControlFlow::Continue(())
                });
                assert_eq!(
                    got,
                    reference_listing(root, depth, all),
                    "depth {depth} all {all}"
                );
            }
        }
    }

    #[test]
    fn a_walk_stops_when_told() {
        let dir = tree();
        let options = Options {
            overrides: Override::empty(),
            all: true,
            max_depth: None,
            dirs: true,
            others: true,
        };
        let mut seen = 0;
        walk(dir.path(), true, &options, &mut |_, _| {
            seen += 1;
            if seen == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert_eq!(seen, 3);
    }

    #[test]
    fn a_file_root_is_searched_even_when_ignored() {
        let dir = tree();
        let file = dir.path().join("debug.log");
        let got = files(&file, false, Override::empty(), false);
        assert_eq!(got, [file]);
    }
}
