//! `corral:plugin/files.write-files`: file changes that survive a crash.
//!
//! WASI 0.2 gives a guest no way to set a file's mode, so a guest that
//! writes a temporary file and renames it over the target would turn an
//! executable script into a plain file. The write therefore happens here,
//! in the host, beneath the plugin's granted directory (`cap-primitives`,
//! as `wasi:filesystem` resolves) and under the same protected paths
//! ([`super::fsguard`]) judged on the resolved target, every directory it
//! creates and the temporary file's own directory:
//!
//! 1. every target is resolved: a symlink is followed to the file it leads
//!    to inside the grant (a link leading out of it is refused), and that
//!    file is what gets replaced, never the link; its parent directory is
//!    opened once and judged as that descriptor, and everything after
//!    works relative to it by single names, so a directory swapped for a
//!    symlink (into `.git`) by a concurrent call after the check cannot
//!    redirect the write;
//! 2. a journal naming every temporary file and target is written to the
//!    host's data directory (`$XDG_DATA_HOME/corral/journal/<workspace>/`),
//!    outside every grant, so no plugin can write or forge it;
//! 3. each new content goes to `.NAME.corral-tmp-RANDOM` beside its target,
//!    created exclusively, given the old file's permission bits, synced;
//! 4. the journal is marked committed (an atomic rename), the temporary
//!    files are renamed over their targets and the removals made, the
//!    directories synced, and the journal removed.
//!
//! A crash before step 4 leaves a journal that is not committed: the next
//! start in the workspace ([`recover`]) removes its temporary files, and
//! no target was touched. A crash during step 4 leaves a committed one:
//! the next start renames what is left, so every change is made. Either
//! way the targets hold exactly their old or exactly their new content.
//! Each journal is locked (`flock`) while its writer lives, so recovery in
//! a second process never takes back a write still under way.
//!
//! Directories the batch had to create stay if a crash interrupts it
//! (empty); other hard links to a replaced file keep the old content, as
//! with any rename-based save.

use super::bindings::files::FileChange;
use super::fsguard::Guard;
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What every temporary file's name carries, after its target's name.
pub(crate) const TEMP_MARK: &str = ".corral-tmp-";

/// Symlinks followed to find a target, as the kernel's `ELOOP` limit.
const MAX_SYMLINKS: u32 = 40;

/// The journals of the workspace `workspace`: in the host's data
/// directory, one directory per workspace.
pub(crate) fn journal_dir(workspace: &Path) -> Option<PathBuf> {
    use sha2::Digest as _;
    let hash = hex::encode(sha2::Sha256::digest(
        workspace.as_os_str().as_encoded_bytes(),
    ));
    dirs::data_dir().map(|d| d.join("corral").join("journal").join(&hash[..32]))
}

/// Where a batch is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum State {
    /// Temporary files are being written; no target was changed yet.
    Preparing,
    /// Every temporary file is written and synced; targets are being replaced.
    Committed,
}

/// One change of a journal, by paths relative to `root`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    /// The granted directory the paths are beneath.
    root: PathBuf,
    /// The file replaced or removed.
    target: String,
    /// The temporary file renamed over it; `None` removes the target.
    temp: Option<String>,
}

/// A batch on disk.
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    state: State,
    entries: Vec<Entry>,
}

/// One change, resolved and checked, ready to be written.
struct Step {
    root: Arc<File>,
    root_path: PathBuf,
    /// The resolved target, relative to `root`.
    target: String,
    content: Option<Vec<u8>>,
    /// The temporary file's name (beside the target), when writing.
    temp_name: Option<String>,
    /// The target's parent directory, opened once and judged by the
    /// protected paths as that descriptor: every later step works
    /// relative to it by single names, so no directory or symlink swapped
    /// in after the check can redirect the write (into `.git`, say).
    dir: Option<Arc<File>>,
    /// The permission bits to give the file; `None` keeps the target's.
    mode: Option<u32>,
}

impl Step {
    fn parent_and_name(&self) -> (&str, &str) {
        split(&self.target)
    }

    fn temp_path(&self) -> Option<String> {
        let (parent, _) = self.parent_and_name();
        self.temp_name.as_ref().map(|t| join(parent, t))
    }
}

/// `path` split into its parent directory (`.` at the top) and last name.
fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some(("", name)) => (".", name),
        Some((parent, name)) => (parent, name),
        None => (".", path),
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent == "." {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

fn open_dir(root: &File, rel: &str) -> std::io::Result<File> {
    cap_primitives::fs::open_dir(root, Path::new(rel))
}

/// Follows symlinks at the end of `rel` until it names something that is
/// not a link (or nothing), beneath `root`. A link whose target is absolute
/// is refused: it names a place the grant does not.
fn resolve(root: &File, rel: &str, shown: &str) -> Result<String, String> {
    let mut rel = rel.trim_end_matches('/').to_owned();
    for _ in 0..MAX_SYMLINKS {
        let (parent, name) = split(&rel);
        if matches!(name, "" | "." | "..") {
            return Err(format!("`{shown}` names a directory, not a file"));
        }
        let dir = match open_dir(root, parent) {
            Ok(d) => d,
            // Missing parents are created later, and hold no link.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(rel),
            Err(e) => return Err(outside(shown, &e)),
        };
        let Ok(st) = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return Ok(rel);
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
            return Ok(rel);
        }
        let target = rustix::fs::readlinkat(&dir, name, Vec::new())
            .map_err(|e| format!("`{shown}`: cannot read the symlink: {e}"))?;
        let target = target
            .to_str()
            .map_err(|_| format!("`{shown}`: a symlink on the path is not UTF-8"))?;
        if target.starts_with('/') {
            return Err(format!(
                "`{shown}` is a symlink to the absolute path `{}`, outside the workspace; \
                 write the file it names by a workspace path instead",
                crate::terminal::inert(target)
            ));
        }
        rel = join(parent, target.trim_end_matches('/'));
    }
    Err(format!("`{shown}`: too many levels of symlinks"))
}

fn outside(shown: &str, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        format!("`{shown}` leads outside the granted directories (through `..` or a symlink)")
    } else {
        format!("`{shown}`: {e}")
    }
}

/// A fresh temporary name for a file called `name`, short enough for any
/// filesystem's 255-byte limit.
fn temp_name(name: &str) -> String {
    let mut keep = name.len().min(200);
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!(".{}{TEMP_MARK}{:016x}", &name[..keep], fastrand::u64(..))
}

fn errno(e: rustix::io::Errno) -> std::io::Error {
    e.into()
}

/// Writes `bytes` to `dir/name` through a temporary file there, synced and
/// renamed: the journal itself must be whole or absent.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    sync_dir_path(dir)
}

fn sync_dir_path(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A batch's journal and the lock that says its writer is alive.
struct Held {
    dir: PathBuf,
    id: String,
    _lock: OwnedFd,
    /// Leave the journal for the next start to finish.
    keep: bool,
}

impl Held {
    fn create(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let id = format!("{:016x}", fastrand::u64(..));
        let lock = rustix::fs::open(
            dir.join(format!("{id}.lock")),
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(errno)?;
        rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).map_err(errno)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            id,
            _lock: lock,
            keep: false,
        })
    }

    fn write(&self, journal: &Journal) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(journal).map_err(std::io::Error::other)?;
        write_atomically(&self.dir, &format!("{}.json", self.id), &bytes)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let _ = std::fs::remove_file(self.dir.join(format!("{}.json", self.id)));
        let _ = std::fs::remove_file(self.dir.join(format!("{}.json.tmp", self.id)));
        let _ = std::fs::remove_file(self.dir.join(format!("{}.lock", self.id)));
    }
}

/// `write-files` for plugin `plugin`: every change or none, whole across a
/// crash. `writable` finds the read-write granted directory that holds a
/// path (its descriptor, its host path and the path beneath it) or says why
/// there is none; `guard` refuses what the protected paths refuse.
pub(crate) fn write_files(
    changes: Vec<FileChange>,
    mut writable: impl FnMut(&str) -> Result<(Arc<File>, PathBuf, String), String>,
    journal: Option<&Path>,
    guard: &Guard,
    plugin: &str,
) -> Result<(), String> {
    let mut steps = Vec::with_capacity(changes.len());
    for change in changes {
        let shown = crate::terminal::inert(&change.path);
        let (root, root_path, rel) = match writable(&change.path) {
            Ok(found) => found,
            Err(why) => return Err(format!("`{shown}`: {why}")),
        };
        let target = resolve(&root, &rel, &shown)?;
        steps.push(Step {
            root,
            root_path,
            target,
            content: change.content,
            temp_name: None,
            dir: None,
            mode: None,
        });
    }
    // Refuses what the protected paths refuse, in the words of `fsguard`.
    let protected = |root: &File, rel: &str| match guard.refusal(root, rel) {
        None => Ok(()),
        Some(why) => {
            tracing::warn!(
                plugin = %plugin,
                "refused to write `{}`: {why}",
                crate::terminal::inert(rel)
            );
            Err(format!(
                "`{}` is a path the host protects ({why}); it was refused",
                crate::terminal::inert(rel)
            ))
        }
    };
    commit(steps, journal, &protected, &mut || {})
}

/// One file corral puts back on its own behalf (undo, `/rewind`).
#[derive(Debug, Clone)]
pub struct Restore {
    /// Relative to the workspace root.
    pub path: String,
    /// What it goes back to; `None` removes it.
    pub content: Option<Vec<u8>>,
    /// Its permission bits; `None` keeps those of the file it replaces.
    pub mode: Option<u32>,
}

/// Puts `files` back in `workspace` exactly as a tool's `write-files`
/// would write them: each path resolved beneath the workspace (a symlink
/// followed only to a file inside it), judged by the protected paths and
/// corral's own state with no exemption, written through the directory
/// that was judged, all of them or none, whole across a crash (the
/// workspace's journal). A restore is a write: it may go nowhere a write
/// may not.
pub fn restore_files(workspace: &Path, files: Vec<Restore>) -> Result<(), RestoreError> {
    let unopened = |workspace: &Path, e: &std::io::Error| RestoreError::Unopened {
        workspace: workspace.to_path_buf(),
        why: in_words(e),
    };
    let workspace = workspace
        .canonicalize()
        .map_err(|e| unopened(workspace, &e))?;
    let root = Arc::new(File::from(
        super::fsguard::open_root(&workspace).map_err(|e| unopened(&workspace, &e))?,
    ));
    let guard = Guard::for_host(&workspace).map_err(|e| RestoreError::Unexamined {
        workspace: workspace.clone(),
        why: in_words(&e),
    })?;
    let mut steps = Vec::with_capacity(files.len());
    for file in files {
        let shown = crate::terminal::inert(&file.path);
        let target = resolve(&root, &file.path, &shown).map_err(RestoreError::NotWritten)?;
        steps.push(Step {
            root: root.clone(),
            root_path: workspace.clone(),
            target,
            content: file.content,
            temp_name: None,
            dir: None,
            mode: file.mode,
        });
    }
    let protected = |dir: &File, rel: &str| match guard.refusal(dir, rel) {
        None => Ok(()),
        Some(why) => Err(format!(
            "`{}` cannot be restored: it is a path no write may take ({why})",
            crate::terminal::inert(rel)
        )),
    };
    commit(
        steps,
        journal_dir(&workspace).as_deref(),
        &protected,
        &mut || {},
    )
    .map_err(RestoreError::NotWritten)
}

/// Why [`restore_files`] put nothing back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// The workspace could not be opened.
    #[error("the workspace {} cannot be opened: {why}", workspace.display())]
    Unopened {
        /// The workspace.
        workspace: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// Where corral's own state and protected paths lie in the workspace
    /// could not be told.
    #[error("the workspace {} cannot be examined: {why}", workspace.display())]
    Unexamined {
        /// The workspace.
        workspace: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// A file could not be put back, as a write would be refused or fail;
    /// the text names the file and the reason.
    #[error("{0}")]
    NotWritten(String),
}

/// An I/O error as a sentence, without the `(os error N)` of its display.
fn in_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound => "it does not exist".into(),
        K::PermissionDenied => "the system refused access to it".into(),
        K::AlreadyExists => "something is already there".into(),
        _ => {
            let text = e.to_string();
            match text.find(" (os error") {
                Some(at) => text[..at].to_lowercase(),
                None => text,
            }
        }
    }
}

/// What judges a path (relative to a directory) by the protected paths.
type Protected<'a> = dyn Fn(&File, &str) -> Result<(), String> + 'a;

/// Writes `steps` through the journal in `journal_dir`. `after_check` runs
/// once every step is checked, before anything is written: a seam for the
/// tests that swap a directory there.
fn commit(
    mut steps: Vec<Step>,
    journal_dir: Option<&Path>,
    protected: &Protected<'_>,
    after_check: &mut dyn FnMut(),
) -> Result<(), String> {
    let mut made_dirs: Vec<(Arc<File>, String)> = Vec::new();
    let mut temps: Vec<(Arc<File>, String)> = Vec::new();
    // Nothing is replaced before the journal says committed; until
    // then a failure takes back what was made, the journal last, so a
    // kill in between still finds every temporary file in it.
    let undo = |temps: &[(Arc<File>, String)], dirs: &[(Arc<File>, String)], why: String| {
        for (dir, temp) in temps.iter().rev() {
            let _ = rustix::fs::unlinkat(&**dir, temp.as_str(), AtFlags::empty());
        }
        for (root, dir) in dirs.iter().rev() {
            let _ = cap_primitives::fs::remove_dir(root, Path::new(dir));
        }
        if dirs.is_empty() {
            Err(format!("{why}\nNo file was changed."))
        } else {
            Err(format!(
                "{why}\nNo file was changed; the directories it had created removed again."
            ))
        }
    };
    if let Err(why) = check(&mut steps, &mut made_dirs, protected) {
        return undo(&temps, &made_dirs, why);
    }
    after_check();
    if let Err(why) = keep_checkpoint(&steps) {
        return undo(&temps, &made_dirs, why);
    }
    let mut held = match journal_dir.map(|dir| start_journal(dir, &steps)) {
        Some(Ok(held)) => Some(held),
        Some(Err(e)) => {
            // Without a journal each file is still replaced whole; only
            // the all-or-none of several files across a crash is lost.
            tracing::warn!("file changes go on without a journal: {e}");
            None
        }
        None => None,
    };
    let written = write_temps(&steps, &mut temps).and_then(|()| match &held {
        Some(held) => held
            .write(&Journal {
                state: State::Committed,
                entries: steps.iter().map(entry_of).collect(),
            })
            .map_err(|e| format!("cannot write the journal: {e}")),
        None => Ok(()),
    });
    if let Err(why) = written {
        let r = undo(&temps, &made_dirs, why);
        drop(held);
        return r;
    }
    let mut failed = Vec::new();
    for step in &steps {
        if let Err(e) = apply_step(step) {
            failed.push(format!("`{}` ({e})", crate::terminal::inert(&step.target)));
        }
    }
    if failed.is_empty() {
        return Ok(());
    }
    // The journal stays, committed: the next start finishes it.
    if let Some(held) = &mut held {
        held.keep = true;
    }
    Err(format!(
        "these changes could not be made now and will be retried when corral next starts \
         in this workspace: {}",
        failed.join(", ")
    ))
}

/// Resolves parents and kinds: creates missing directories (each judged
/// by the protected paths), refuses protected targets and anything but
/// regular files, and names each temporary file.
fn check(
    steps: &mut [Step],
    made_dirs: &mut Vec<(Arc<File>, String)>,
    protected: &Protected<'_>,
) -> Result<(), String> {
    for step in steps.iter_mut() {
        let shown = crate::terminal::inert(&step.target);
        if step.content.is_some() {
            create_parents(protected, &step.root, &step.target, made_dirs)?;
        }
        protected(&step.root, &step.target)?;
        let (parent, name) = step.parent_and_name();
        let dir = open_dir(&step.root, parent).map_err(|e| outside(&shown, &e))?;
        // The path was judged above, but its parent may have been swapped
        // (for a symlink into `.git`) since: judge the directory actually
        // opened, by its descriptor, and use only it from here on.
        protected(&dir, name).map_err(|_| {
            format!(
                "`{shown}` was refused: its directory changed while it was checked and now \
                 resolves to a place the host protects (.git, or corral.toml at the \
                 workspace root)"
            )
        })?;
        match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let kind = FileType::from_raw_mode(st.st_mode);
                if kind != FileType::RegularFile {
                    return Err(format!(
                        "`{shown}` is not a regular file ({}); only files can be written",
                        kind_name(kind)
                    ));
                }
            }
            // Removing what is not there leaves it not there.
            Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(format!("`{shown}`: {}", errno(e))),
        }
        if step.content.is_some() {
            step.temp_name = Some(temp_name(name));
        }
        step.dir = Some(Arc::new(dir));
    }
    Ok(())
}

/// Gives the checkpoint in scope (the session's) the before- and
/// after-image of every target, read through the directory its check
/// opened, so what is kept is the file that is about to be replaced.
fn keep_checkpoint(steps: &[Step]) -> Result<(), String> {
    let Some(checkpoint) = super::checkpoint::current() else {
        return Ok(());
    };
    let cap = checkpoint.cap();
    let mut changes = Vec::with_capacity(steps.len());
    for step in steps {
        let (_, name) = step.parent_and_name();
        let shown = crate::terminal::inert(&step.target);
        let dir = step
            .dir
            .as_ref()
            .ok_or_else(|| format!("cannot checkpoint `{shown}`: its directory was not checked"))?;
        let before = image_at(dir, name, cap)
            .map_err(|e| format!("cannot keep a checkpoint of `{shown}` to undo: {e}"))?;
        let after = match &step.content {
            None => super::checkpoint::Image::Absent,
            Some(c) if c.len() as u64 > cap => super::checkpoint::Image::TooBig {
                size: c.len() as u64,
            },
            Some(c) => super::checkpoint::Image::File {
                content: c.clone(),
                mode: match &before {
                    super::checkpoint::Image::File { mode, .. } => *mode,
                    _ => 0o644,
                },
            },
        };
        changes.push(super::checkpoint::Change {
            path: step.root_path.join(&step.target),
            before,
            after,
        });
    }
    checkpoint.keep(&changes).map_err(|e| {
        format!("cannot keep the checkpoint that would let this change be undone: {e}")
    })
}

/// What `name` in `dir` holds now: never through a symlink (the check
/// refused anything but a regular file), at most `cap` bytes read.
fn image_at(dir: &File, name: &str, cap: u64) -> std::io::Result<super::checkpoint::Image> {
    use std::io::Read as _;
    let fd = match rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(super::checkpoint::Image::Absent),
        Err(e) => return Err(errno(e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(errno)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    if size > cap {
        return Ok(super::checkpoint::Image::TooBig { size });
    }
    let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    File::from(fd).take(cap + 1).read_to_end(&mut content)?;
    if content.len() as u64 > cap {
        return Ok(super::checkpoint::Image::TooBig {
            size: content.len() as u64,
        });
    }
    Ok(super::checkpoint::Image::File {
        content,
        mode: st.st_mode & 0o7777,
    })
}

/// Starts the journal of `steps`: locked, then written as preparing.
fn start_journal(dir: &Path, steps: &[Step]) -> Result<Held, String> {
    let held = Held::create(dir)
        .map_err(|e| format!("cannot start a journal in {}: {e}", dir.display()))?;
    held.write(&Journal {
        state: State::Preparing,
        entries: steps.iter().map(entry_of).collect(),
    })
    .map_err(|e| format!("cannot write the journal in {}: {e}", dir.display()))?;
    Ok(held)
}

/// Writes each new content to its temporary file: created exclusively,
/// given the target's permission bits, synced.
fn write_temps(steps: &[Step], temps: &mut Vec<(Arc<File>, String)>) -> Result<(), String> {
    for step in steps {
        let (Some(content), Some(temp)) = (&step.content, step.temp_path()) else {
            continue;
        };
        let shown = crate::terminal::inert(&step.target);
        let (_, name) = step.parent_and_name();
        let dir = step
            .dir
            .as_ref()
            .ok_or_else(|| format!("cannot write `{shown}`: its directory was not checked"))?;
        let mode = match step.mode {
            Some(mode) => Some(Mode::from_raw_mode(mode & 0o7777)),
            None => rustix::fs::statat(&**dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|st| Mode::from_raw_mode(st.st_mode & 0o7777)),
        };
        let (_, temp_file_name) = split(&temp);
        let fd = rustix::fs::openat(
            &**dir,
            temp_file_name,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o666),
        )
        .map_err(|e| format!("cannot write `{shown}`: {}", errno(e)))?;
        temps.push((dir.clone(), temp_file_name.to_owned()));
        let mut file = File::from(fd);
        file.write_all(content)
            .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
        if let Some(mode) = mode {
            rustix::fs::fchmod(&file, mode)
                .map_err(|e| format!("cannot keep the mode of `{shown}`: {}", errno(e)))?;
        }
        file.sync_all()
            .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    }
    Ok(())
}

fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        _ => "not a regular file",
    }
}

fn entry_of(step: &Step) -> Entry {
    Entry {
        root: step.root_path.clone(),
        target: step.target.clone(),
        temp: step.temp_path(),
    }
}

/// Creates the missing directories above `target`, outermost first, each
/// judged by the protected paths before it is made.
fn create_parents(
    protected: &Protected<'_>,
    root: &Arc<File>,
    target: &str,
    made: &mut Vec<(Arc<File>, String)>,
) -> Result<(), String> {
    let (parent, _) = split(target);
    if parent == "." || open_dir(root, parent).is_ok() {
        return Ok(());
    }
    let mut at = 0;
    for part in parent.split('/') {
        at += part.len();
        let dir = &parent[..at];
        at += 1;
        if matches!(part, "" | ".") || open_dir(root, dir).is_ok() {
            continue;
        }
        protected(root, dir)?;
        let options = cap_primitives::fs::DirOptions::new();
        match cap_primitives::fs::create_dir(root, Path::new(dir), &options) {
            Ok(()) => made.push((root.clone(), dir.to_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(format!(
                    "cannot create `{}`: `{}` is a file, not a directory",
                    crate::terminal::inert(target),
                    crate::terminal::inert(dir)
                ));
            }
            Err(e) => return Err(outside(&crate::terminal::inert(dir), &e)),
        }
    }
    Ok(())
}

/// Makes one committed change; done already (the temporary file gone, the
/// removed file absent) counts as made, so a journal can be replayed.
fn apply(entry: &Entry) -> std::io::Result<()> {
    let root = File::from(super::fsguard::open_root(&entry.root)?);
    let (parent, name) = split(&entry.target);
    let temp = match &entry.temp {
        Some(temp) => {
            let (temp_parent, temp_name) = split(temp);
            if temp_parent != parent || !temp_name.contains(TEMP_MARK) {
                return Err(std::io::Error::other("the journal names a foreign file"));
            }
            Some(temp_name)
        }
        None => None,
    };
    apply_at(&open_dir(&root, parent)?, name, temp)
}

/// Makes the change of a step just written, in the directory its check
/// opened and judged.
fn apply_step(step: &Step) -> std::io::Result<()> {
    let dir = step
        .dir
        .as_ref()
        .ok_or_else(|| std::io::Error::other("its directory was not checked"))?;
    apply_at(dir, step.parent_and_name().1, step.temp_name.as_deref())
}

/// Renames `temp` over `name` in `dir`, or removes `name` when there is no
/// `temp`: single names only, so nothing is resolved again.
fn apply_at(dir: &File, name: &str, temp: Option<&str>) -> std::io::Result<()> {
    match temp {
        Some(temp_name) => {
            match rustix::fs::renameat(dir, temp_name, dir, name) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOENT) => return Ok(()),
                Err(e) => return Err(errno(e)),
            }
            rustix::fs::fsync(dir_fd(dir)?.as_fd()).map_err(errno)
        }
        None => {
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(errno(e)),
            }
            rustix::fs::fsync(dir_fd(dir)?.as_fd()).map_err(errno)
        }
    }
}

/// A descriptor of `dir` that `fsync` accepts (`cap-primitives` may hand
/// out `O_PATH` ones).
fn dir_fd(dir: &File) -> std::io::Result<OwnedFd> {
    rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

/// Finishes or takes back the batches a crash left in `workspace`'s
/// journal, and says what it did, one sentence per batch, for the user and
/// for the model on `resume`.
pub(crate) fn recover(workspace: &Path) -> Vec<String> {
    let Some(dir) = journal_dir(workspace) else {
        return Vec::new();
    };
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = read
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            name.strip_suffix(".json")
                .or_else(|| name.strip_suffix(".lock"))
                .map(str::to_owned)
        })
        .collect();
    ids.sort();
    ids.dedup();
    let mut notes = Vec::new();
    for id in ids {
        if let Some(note) = recover_one(&dir, &id, workspace) {
            tracing::warn!("{note}");
            notes.push(note);
        }
    }
    notes
}

fn recover_one(dir: &Path, id: &str, workspace: &Path) -> Option<String> {
    let lock = rustix::fs::openat(
        rustix::fs::CWD,
        dir.join(format!("{id}.lock")),
        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o600),
    )
    .ok()?;
    // Its writer still runs (another corral in this workspace).
    rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).ok()?;
    let mut held = Held {
        dir: dir.to_path_buf(),
        id: id.to_owned(),
        _lock: lock,
        keep: false,
    };
    // A writer killed before its first journal leaves only its lock, which
    // dropping `held` removes.
    let path = dir.join(format!("{id}.json"));
    let bytes = match corral_exec::fsread::read_state(&path, MAX_JOURNAL_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.is_not_found() => return None,
        Err(e) => {
            held.keep = true;
            return Some(format!(
                "the file-change journal {} was refused and left in place: {e}; corral writes \
                 only regular files there. Remove it once you have looked at it",
                path.display()
            ));
        }
    };
    let Ok(journal) = serde_json::from_slice::<Journal>(&bytes) else {
        return Some(format!(
            "an unreadable file-change journal {} was removed",
            path.display()
        ));
    };
    if let Err(why) = verify(&journal, workspace) {
        held.keep = true;
        return Some(format!(
            "the file-change journal {} was refused and left in place: {why}. corral obeys a \
             journal only for changes a tool could have made in this workspace; remove it once \
             you have looked at it",
            path.display()
        ));
    }
    let names: Vec<String> = journal
        .entries
        .iter()
        .map(|e| format!("`{}`", crate::terminal::inert(&e.target)))
        .collect();
    let names = names.join(", ");
    match journal.state {
        State::Preparing => {
            for entry in &journal.entries {
                if let Some(temp) = &entry.temp
                    && let Ok(root) = super::fsguard::open_root(&entry.root)
                {
                    let _ = cap_primitives::fs::remove_file(&File::from(root), Path::new(temp));
                }
            }
            drop(held);
            Some(format!(
                "a file change interrupted by a crash was rolled back: none of its changes \
                 were made, and {names} hold their content from before it"
            ))
        }
        State::Committed => {
            let failed: Vec<String> = journal
                .entries
                .iter()
                .filter_map(|e| {
                    apply(e)
                        .err()
                        .map(|err| format!("`{}` ({err})", crate::terminal::inert(&e.target)))
                })
                .collect();
            if failed.is_empty() {
                drop(held);
                Some(format!(
                    "a file change interrupted by a crash was completed: every one of its \
                     changes was made ({names})"
                ))
            } else {
                held.keep = true;
                Some(format!(
                    "a file change interrupted by a crash could not be completed yet; corral \
                     will try again at its next start: {}",
                    failed.join(", ")
                ))
            }
        }
    }
}

/// The largest journal corral reads back: far more than any batch writes.
const MAX_JOURNAL_BYTES: u64 = 16 << 20;

/// Whether every entry of `journal` is a change a tool could have made in
/// `workspace`: its root the workspace or a directory beneath it, its
/// target a relative path that the protected paths and corral's own state
/// do not refuse, and its temporary file one of corral's beside it. A
/// journal is corral's own file, but one planted or changed by something
/// else must not become a way to delete or replace files anywhere.
fn verify(journal: &Journal, workspace: &Path) -> Result<(), String> {
    let workspace = workspace
        .canonicalize()
        .map_err(|e| format!("the workspace cannot be opened ({e})"))?;
    let guard = Guard::for_host(&workspace)
        .map_err(|e| format!("the workspace cannot be examined ({e})"))?;
    for entry in &journal.entries {
        let shown = crate::terminal::inert(&entry.target);
        if entry.root != workspace && !entry.root.starts_with(&workspace) {
            return Err(format!(
                "it names `{}`, outside this workspace ({})",
                crate::terminal::inert(&entry.root.display().to_string()),
                workspace.display()
            ));
        }
        let lexical = corral_syntax::path::lexical(&entry.target);
        if lexical.absolute || lexical.climbs() || entry.target.is_empty() {
            return Err(format!(
                "its target `{shown}` is not a path beneath its directory"
            ));
        }
        if let Some(temp) = &entry.temp {
            let (temp_parent, temp_name) = split(temp);
            if temp_parent != split(&entry.target).0 || !temp_name.contains(TEMP_MARK) {
                return Err(format!(
                    "its temporary file for `{shown}` is not one corral makes beside it"
                ));
            }
        }
        let root = super::fsguard::open_root(&entry.root)
            .map(File::from)
            .map_err(|e| format!("its directory for `{shown}` cannot be opened ({e})"))?;
        if let Some(why) = guard.refusal(&root, &entry.target) {
            return Err(format!("its target `{shown}` is refused: {why}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsguard::Guard;
    use crate::manifest::Source;

    /// A workspace with `.git/hooks/` and a plain directory `d/`.
    fn workspace() -> (tempfile::TempDir, Arc<File>, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir(ws.join("d")).unwrap();
        let root = Arc::new(File::from(super::super::fsguard::open_root(&ws).unwrap()));
        (tmp, root, ws)
    }

    fn step(root: &Arc<File>, ws: &Path, target: &str, content: Option<&[u8]>) -> Step {
        Step {
            root: root.clone(),
            root_path: ws.to_path_buf(),
            target: target.into(),
            content: content.map(<[u8]>::to_vec),
            temp_name: None,
            dir: None,
            mode: None,
        }
    }

    /// Replaces `d/` by a symlink into `.git/hooks`, keeping the old
    /// directory as `d.old/`: the move a racing call would make.
    fn swap(ws: &Path) {
        std::fs::rename(ws.join("d"), ws.join("d.old")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", ws.join("d")).unwrap();
    }

    fn run(ws: &Path, steps: Vec<Step>) -> Result<(), String> {
        let guard = Guard::new(Some(ws), &Source::Builtin("fs".into())).unwrap();
        let protected = |root: &File, rel: &str| match guard.refusal(root, rel) {
            None => Ok(()),
            Some(why) => Err(why),
        };
        commit(steps, None, &protected, &mut || swap(ws))
    }

    #[test]
    fn a_parent_swapped_for_a_link_into_git_after_the_check_is_not_followed() {
        let (_tmp, root, ws) = workspace();
        let hook = b"#!/bin/sh\necho pwned\n";
        let r = run(&ws, vec![step(&root, &ws, "d/pre-commit", Some(hook))]);
        assert!(
            !ws.join(".git/hooks/pre-commit").exists(),
            "the write went into .git: {r:?}"
        );
        // The write stays in the directory that was checked.
        assert_eq!(std::fs::read(ws.join("d.old/pre-commit")).unwrap(), hook);
        let left: Vec<_> = std::fs::read_dir(ws.join(".git/hooks")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_parent_swapped_between_the_path_check_and_its_open_is_refused() {
        let (_tmp, root, ws) = workspace();
        let guard = Guard::new(Some(&ws), &Source::Builtin("fs".into())).unwrap();
        let swapped = std::cell::Cell::new(false);
        // The path passes its check; the swap lands right after it, before
        // the parent is opened: the descriptor's own judgement must refuse.
        let protected = |dir: &File, rel: &str| {
            if !swapped.replace(true) {
                assert_eq!(rel, "d/pre-commit");
                swap(&ws);
                return Ok(());
            }
            match guard.refusal(dir, rel) {
                None => Ok(()),
                Some(why) => Err(why),
            }
        };
        let steps = vec![step(&root, &ws, "d/pre-commit", Some(b"#!/bin/sh\n"))];
        let err = commit(steps, None, &protected, &mut || {}).unwrap_err();
        assert!(err.contains("its directory changed"), "{err}");
        assert!(err.contains("No file was changed"), "{err}");
        let left: Vec<_> = std::fs::read_dir(ws.join(".git/hooks")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_removal_whose_parent_is_swapped_after_the_check_spares_git() {
        let (_tmp, root, ws) = workspace();
        std::fs::write(ws.join("d/config"), "mine").unwrap();
        std::fs::write(ws.join(".git/hooks/config"), "git's").unwrap();
        let r = run(&ws, vec![step(&root, &ws, "d/config", None)]);
        assert_eq!(
            std::fs::read_to_string(ws.join(".git/hooks/config")).unwrap(),
            "git's",
            "{r:?}"
        );
        assert!(!ws.join("d.old/config").exists());
    }
}
