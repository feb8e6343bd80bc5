//! Checkpoints of a session's file changes, and undoing them.
//!
//! Before a call changes files, `write-files` hands this store each
//! target's before- and after-image ([`crate::runtime::Checkpoint`]); the
//! contents go, named by their SHA-256, to the workspace's `objects/`
//! directory beside the session logs (so a file checkpointed twice is
//! stored once), and one line per file, tagged with the turn, to the
//! session's `checkpoints.jsonl` artifact, synced before the change is
//! made: a crash mid-turn leaves every before-image on disk. What a native
//! program or an MCP server changes, which no `write-files` sees, is found
//! by comparing the workspace before and after its call ([`Watch`]) and
//! recorded the same way, once the call is over.
//!
//! [`plan`] finds the latest turn not undone yet and compares each of its
//! files with the after-image it recorded, so an edit made since is never
//! clobbered unless forced; [`Plan::apply`] restores the before-images
//! beneath the workspace (a symlink planted since is replaced, never
//! followed) and records the undo.

mod watch;

pub use watch::{Before, Limits, Watch};

use crate::runtime::{CheckpointChange, CheckpointImage};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// Files larger than this are recorded by size only: undo says it cannot
/// restore them instead of keeping a copy of every large file a turn wrote.
pub const MAX_CHECKPOINT_BYTES: u64 = 16 * 1024 * 1024;

/// The largest checkpoint record read back (a line per file changed).
const MAX_RECORD_BYTES: u64 = 256 << 20;

/// The name of a session's checkpoint record, in its artifacts directory.
const RECORD: &str = "checkpoints.jsonl";

/// A file's state as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Stored {
    /// It did not exist.
    Absent,
    /// A regular file, its content in `objects/<sha256>`.
    File {
        /// SHA-256 of the content, hex.
        sha256: String,
        /// Permission bits.
        mode: u32,
    },
    /// Too big to keep.
    TooBig {
        /// Its size in bytes.
        size: u64,
    },
}

/// One line of `checkpoints.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    /// A file a turn changed.
    Change {
        turn: u32,
        path: PathBuf,
        before: Stored,
        after: Stored,
    },
    /// The changes of a turn were undone.
    Undo { turn: u32 },
}

/// The checkpoint store of one session.
pub struct Checkpoints {
    record: PathBuf,
    objects: PathBuf,
    turn: AtomicU32,
    /// Appends of concurrent calls do not interleave.
    lock: Mutex<()>,
    /// The files this session changed, as recorded.
    changed: Mutex<std::collections::HashSet<PathBuf>>,
}

impl Checkpoints {
    /// The store of the session whose log is `log`.
    pub fn for_log(log: &Path) -> Self {
        Self {
            record: log.with_extension("artifacts").join(RECORD),
            objects: objects_dir(log),
            turn: AtomicU32::new(0),
            lock: Mutex::new(()),
            changed: Mutex::default(),
        }
    }

    /// Tags the changes from now on with `turn`.
    pub fn set_turn(&self, turn: u32) {
        self.turn.store(turn, Ordering::Relaxed);
    }

    fn store(&self, image: &CheckpointImage) -> std::io::Result<Stored> {
        Ok(match image {
            CheckpointImage::Absent => Stored::Absent,
            CheckpointImage::TooBig { size } => Stored::TooBig { size: *size },
            CheckpointImage::File { content, mode } => Stored::File {
                sha256: put_object(&self.objects, content)?,
                mode: *mode,
            },
        })
    }

    fn append(&self, lines: &[Line]) -> std::io::Result<()> {
        let _held = self
            .lock
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        if let Some(dir) = self.record.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if let Ok(mut changed) = self.changed.lock() {
            for line in lines {
                if let Line::Change { path, .. } = line {
                    changed.insert(path.clone());
                }
            }
        }
        let mut text = String::new();
        for line in lines {
            text.push_str(&serde_json::to_string(line).map_err(std::io::Error::other)?);
            text.push('\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.record)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()
    }
}

impl crate::runtime::Checkpoint for Checkpoints {
    fn keep(&self, changes: &[CheckpointChange]) -> Result<(), String> {
        let turn = self.turn.load(Ordering::Relaxed);
        let mut lines = Vec::with_capacity(changes.len());
        for change in changes {
            let stored = |image| {
                self.store(image)
                    .map_err(|e| format!("{}: {e}", self.objects.display()))
            };
            lines.push(Line::Change {
                turn,
                path: change.path.clone(),
                before: stored(&change.before)?,
                after: stored(&change.after)?,
            });
        }
        self.append(&lines)
            .map_err(|e| format!("{}: {e}", self.record.display()))
    }

    fn cap(&self) -> u64 {
        MAX_CHECKPOINT_BYTES
    }

    /// A poisoned set counts every file as changed.
    fn changed(&self, path: &Path) -> bool {
        self.changed.lock().map_or(true, |c| c.contains(path))
    }
}

/// The content-addressed objects of the sessions beside `log`.
fn objects_dir(log: &Path) -> PathBuf {
    log.parent().unwrap_or(Path::new(".")).join("objects")
}

/// Stores `content` under its hash (once), synced; returns the hash.
fn put_object(dir: &Path, content: &[u8]) -> std::io::Result<String> {
    store_object(dir, content, true)
}

/// Stores `content` under its hash (once), synced to disk when `sync`;
/// returns the hash.
fn store_object(dir: &Path, content: &[u8], sync: bool) -> std::io::Result<String> {
    let sha = hex::encode(Sha256::digest(content));
    let path = dir.join(&sha);
    if path.exists() {
        return Ok(sha);
    }
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(content)?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(sha)
}

fn get_object(dir: &Path, sha: &str) -> Result<Vec<u8>, ObjectError> {
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ObjectError::Malformed(sha.to_owned()));
    }
    // Never through a link, never blocking: the store is corral's own, but
    // what is read back is verified (its hash, below) before it is used.
    let bytes =
        crate::exec::fsread::read_state(&dir.join(sha), MAX_CHECKPOINT_BYTES).map_err(|e| {
            ObjectError::Unreadable {
                sha: sha.to_owned(),
                why: e.to_string(),
            }
        })?;
    if hex::encode(Sha256::digest(&bytes)) != sha {
        return Err(ObjectError::Damaged(sha.to_owned()));
    }
    Ok(bytes)
}

/// Why an undo or a rewind cannot be planned; its text is the message for
/// the user.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// No turn left a change that is not undone yet.
    #[error("nothing to undo: no turn of this session changed a file that is not undone yet")]
    Nothing,
    /// The checkpoints' record cannot be read.
    #[error("cannot read the checkpoints {}: {why}", record.display())]
    Record {
        /// The record's file.
        record: PathBuf,
        /// The reason, in words.
        why: String,
    },
    /// The workspace cannot be opened.
    #[error("the workspace {} cannot be opened: {why}", workspace.display())]
    Workspace {
        /// The workspace.
        workspace: PathBuf,
        /// The reason, in words.
        why: String,
    },
    /// The record names a path outside the workspace.
    #[error(
        "{} is outside the workspace {}; corral undoes only changes inside it",
        shown(path),
        workspace.display()
    )]
    Outside {
        /// The path.
        path: PathBuf,
        /// The workspace.
        workspace: PathBuf,
    },
    /// The record names something that is not a file in the workspace.
    #[error(
        "the checkpoint names `{}`, which is not a file inside the workspace",
        shown(.0)
    )]
    NotAFile(PathBuf),
}

impl From<PlanError> for String {
    fn from(e: PlanError) -> Self {
        e.to_string()
    }
}

/// Why an undo restored nothing (or, last, could not record itself); its
/// text is the message for the user.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// Files changed since the turn, and `force` was not given.
    #[error(
        "{}\nNothing was restored. Look at the file, then run undo again with --force \
         to overwrite it with the checkpoint.",
        .0.join("\n")
    )]
    Conflicts(Vec<String>),
    /// A directory is where the file would go back.
    #[error(
        "cannot restore `{}`: a directory is there now; move it away and undo \
         again\nNothing was restored.",
        shown(.0)
    )]
    Directory(PathBuf),
    /// The file's name is not UTF-8.
    #[error("cannot restore `{}`: its name is not UTF-8\nNothing was restored.", shown(.0))]
    NotUtf8(PathBuf),
    /// The file was too large to be kept before the turn.
    #[error("{0}\nNothing was restored.")]
    NotKept(String),
    /// The checkpointed copy cannot be used.
    #[error("cannot restore `{path}`: {why}\nNothing was restored.")]
    Copy {
        /// The file, relative to the workspace.
        path: String,
        /// Why.
        why: ObjectError,
    },
    /// The restore itself was refused or failed.
    #[error(transparent)]
    Restore(#[from] crate::runtime::RestoreError),
    /// The files were restored, the undo not recorded.
    #[error("the files were restored but the undo cannot be recorded: {0}")]
    Record(String),
}

impl From<UndoError> for String {
    fn from(e: UndoError) -> Self {
        e.to_string()
    }
}

/// Why a checkpointed copy cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The record names no valid object.
    #[error("the checkpoint names a malformed object `{0}`")]
    Malformed(String),
    /// The copy cannot be read.
    #[error("the checkpointed copy {sha} cannot be read: {why}")]
    Unreadable {
        /// Its SHA-256.
        sha: String,
        /// The reason, in words.
        why: String,
    },
    /// The copy's content does not match its hash.
    #[error("the checkpointed copy {0} is damaged")]
    Damaged(String),
}

/// One file of an undo.
#[derive(Debug, Clone)]
pub struct FileUndo {
    /// Relative to the workspace.
    pub path: PathBuf,
    /// What it goes back to.
    before: Stored,
    /// Its content now (`None`: absent), for the diff.
    now: Option<Vec<u8>>,
    /// What it holds now differs from what the turn left.
    pub conflict: Option<String>,
}

/// What undoing the latest turn would do.
#[derive(Debug)]
pub struct Plan {
    /// The turn undone (the latest, when several are).
    pub turn: u32,
    /// Every turn undone, oldest first.
    pub turns: Vec<u32>,
    /// Its files, in the order they were first changed.
    pub files: Vec<FileUndo>,
    workspace: PathBuf,
    objects: PathBuf,
    record: PathBuf,
}

/// The undo of the latest turn of the session logged at `log` whose
/// changes are not undone yet, checked against `workspace` as it is now.
pub fn plan(log: &Path, workspace: &Path) -> Result<Plan, PlanError> {
    plan_turns(log, workspace, |turns| turns.iter().max().map(|t| vec![*t]))
        .map_err(|e| e.unwrap_or(PlanError::Nothing))
}

/// The undo of every turn from `first` on whose changes are not undone
/// yet (a rewind to before `first`'s prompt), as one plan: each file goes
/// back to its image before the earliest of them that changed it, and is
/// compared with what the latest left. `Ok(None)`: none of them changed a
/// file.
pub fn plan_from(log: &Path, workspace: &Path, first: u32) -> Result<Option<Plan>, PlanError> {
    match plan_turns(log, workspace, |turns| {
        let mut from: Vec<u32> = turns.iter().copied().filter(|t| *t >= first).collect();
        from.sort_unstable();
        (!from.is_empty()).then_some(from)
    }) {
        Ok(p) => Ok(Some(p)),
        Err(None) => Ok(None),
        Err(Some(e)) => Err(e),
    }
}

/// The plan for the turns `pick` chooses among those not undone yet;
/// `Err(None)` when it chooses none.
fn plan_turns(
    log: &Path,
    workspace: &Path,
    pick: impl FnOnce(&HashSet<u32>) -> Option<Vec<u32>>,
) -> Result<Plan, Option<PlanError>> {
    let record = log.with_extension("artifacts").join(RECORD);
    let lines = read_lines(&record)?;
    let undone: HashSet<u32> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Undo { turn } => Some(*turn),
            Line::Change { .. } => None,
        })
        .collect();
    let open: HashSet<u32> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Change { turn, .. } if !undone.contains(turn) => Some(*turn),
            _ => None,
        })
        .collect();
    let turns = pick(&open).ok_or(None)?;
    let turn = turns.iter().copied().max().ok_or(None)?;
    let workspace = workspace
        .canonicalize()
        .map_err(|e| unopened(workspace, &e))?;
    let root = open_root(&workspace)?;
    let mut files: Vec<(PathBuf, Stored, Stored)> = Vec::new();
    for line in lines {
        let Line::Change {
            turn: t,
            path,
            before,
            after,
        } = line
        else {
            continue;
        };
        if !turns.contains(&t) {
            continue;
        }
        match files.iter_mut().find(|(p, _, _)| *p == path) {
            Some(entry) => entry.2 = after,
            None => files.push((path, before, after)),
        }
    }
    let objects = objects_dir(log);
    let mut out = Vec::with_capacity(files.len());
    for (path, before, after) in files {
        out.push(compare(&root, &workspace, &path, before, &after)?);
    }
    Ok(Plan {
        turn,
        turns,
        files: out,
        workspace,
        objects,
        record,
    })
}

fn read_lines(record: &Path) -> Result<Vec<Line>, PlanError> {
    let text = match crate::exec::fsread::read_state(record, MAX_RECORD_BYTES) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.is_not_found() => String::new(),
        Err(e) => {
            return Err(PlanError::Record {
                record: record.to_path_buf(),
                why: e.to_string(),
            });
        }
    };
    // A line torn by a crash is skipped, as the session log does.
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn open_root(workspace: &Path) -> Result<cap_std::fs::Dir, PlanError> {
    cap_std::fs::Dir::open_ambient_dir(workspace, cap_std::ambient_authority())
        .map_err(|e| unopened(workspace, &e))
}

fn unopened(workspace: &Path, e: &std::io::Error) -> PlanError {
    PlanError::Workspace {
        workspace: workspace.to_path_buf(),
        why: e.to_string(),
    }
}

/// `path` relative to `workspace`, refused when it leaves it.
fn relative(workspace: &Path, path: &Path) -> Result<PathBuf, PlanError> {
    let rel = path
        .strip_prefix(workspace)
        .map_err(|_| PlanError::Outside {
            path: path.to_path_buf(),
            workspace: workspace.to_path_buf(),
        })?;
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(PlanError::NotAFile(path.to_path_buf()));
    }
    Ok(rel.to_path_buf())
}

/// The undo of one file: what it holds now against what the turn left.
fn compare(
    root: &cap_std::fs::Dir,
    workspace: &Path,
    path: &Path,
    before: Stored,
    after: &Stored,
) -> Result<FileUndo, PlanError> {
    let rel = relative(workspace, path)?;
    let shown = shown(&rel);
    let (now, kind) = match root.symlink_metadata(&rel) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
        Err(e) => (None, Some(format!("it cannot be examined ({e})"))),
        Ok(m) if m.is_symlink() => (None, Some("it is now a symlink".to_owned())),
        Ok(m) if m.is_dir() => (None, Some("it is now a directory".to_owned())),
        Ok(m) if !m.is_file() => (None, Some("it is no longer a regular file".to_owned())),
        Ok(m) if m.len() > MAX_CHECKPOINT_BYTES => (
            None,
            Some(format!(
                "it is now {} bytes, more than undo compares",
                m.len()
            )),
        ),
        Ok(_) => match root.read(&rel) {
            Ok(bytes) => (Some(bytes), None),
            Err(e) => (None, Some(format!("it cannot be read ({e})"))),
        },
    };
    let matches = |stored: &Stored| match (stored, &now) {
        (Stored::Absent, None) => kind.is_none(),
        (Stored::File { sha256, .. }, Some(bytes)) => hex::encode(Sha256::digest(bytes)) == *sha256,
        _ => false,
    };
    let conflict = if let Stored::TooBig { size } = &before {
        Some(format!(
            "`{shown}` was {size} bytes before the turn, more than the {MAX_CHECKPOINT_BYTES} \
             bytes a checkpoint keeps; it cannot be restored"
        ))
    } else if matches(after) || matches(&before) {
        None
    } else {
        Some(format!(
            "`{shown}` changed since the turn wrote it ({}); undo would overwrite that",
            kind.as_deref().unwrap_or("its content differs")
        ))
    };
    Ok(FileUndo {
        path: rel,
        before,
        now,
        conflict,
    })
}

impl Plan {
    /// A unified diff of every file from what it holds now to what it
    /// goes back to.
    pub fn diff(&self) -> String {
        let mut text = String::new();
        for file in &self.files {
            let shown = shown(&file.path);
            let before = match &file.before {
                Stored::File { sha256, .. } => get_object(&self.objects, sha256).ok(),
                _ => None,
            };
            let old = file
                .now
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            let new = before
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            if file.now.is_none() && before.is_none() {
                continue;
            }
            let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
            let a = if file.now.is_some() {
                format!("a/{shown}")
            } else {
                "/dev/null".into()
            };
            let b = if before.is_some() {
                format!("b/{shown}")
            } else {
                "/dev/null".into()
            };
            text.push_str(&crate::protocol::terminal::inert(
                &diff.unified_diff().header(&a, &b).to_string(),
            ));
        }
        text
    }

    /// The files that changed since the turn, one sentence each.
    pub fn conflicts(&self) -> Vec<&str> {
        self.files
            .iter()
            .filter_map(|f| f.conflict.as_deref())
            .collect()
    }

    /// Restores every file (over the conflicts too when `force`) and
    /// records the undo; returns the files restored.
    pub fn apply(&self, force: bool) -> Result<Vec<PathBuf>, UndoError> {
        let conflicts = self.conflicts();
        if !conflicts.is_empty() && !force {
            return Err(UndoError::Conflicts(
                conflicts.into_iter().map(str::to_owned).collect(),
            ));
        }
        // A restore is a write: the same resolution beneath the workspace,
        // protected paths and journal as a tool's `write-files`, all of
        // the files or none.
        let mut files = Vec::with_capacity(self.files.len());
        for file in &self.files {
            // Said in the words of an undo, before the write's own refusal.
            if std::fs::symlink_metadata(self.workspace.join(&file.path)).is_ok_and(|m| m.is_dir())
            {
                return Err(UndoError::Directory(file.path.clone()));
            }
            let path = file
                .path
                .to_str()
                .ok_or_else(|| UndoError::NotUtf8(file.path.clone()))?;
            let (content, mode) = match &file.before {
                Stored::TooBig { .. } => {
                    return Err(UndoError::NotKept(
                        file.conflict.clone().unwrap_or_default(),
                    ));
                }
                Stored::Absent => (None, None),
                Stored::File { sha256, mode } => (
                    Some(
                        get_object(&self.objects, sha256).map_err(|why| UndoError::Copy {
                            path: path.to_owned(),
                            why,
                        })?,
                    ),
                    Some(*mode),
                ),
            };
            files.push(crate::runtime::Restore {
                path: path.to_owned(),
                content,
                mode,
            });
        }
        crate::runtime::restore_files(&self.workspace, files)?;
        let restored: Vec<PathBuf> = self.files.iter().map(|f| f.path.clone()).collect();
        let store = Checkpoints {
            record: self.record.clone(),
            objects: self.objects.clone(),
            turn: AtomicU32::new(self.turn),
            lock: Mutex::new(()),
            changed: Mutex::default(),
        };
        let undone: Vec<Line> = self.turns.iter().map(|&turn| Line::Undo { turn }).collect();
        store
            .append(&undone)
            .map_err(|e| UndoError::Record(e.to_string()))?;
        Ok(restored)
    }
}

/// A path as a terminal may show it.
fn shown(path: &Path) -> String {
    crate::protocol::terminal::inert(&path.display().to_string()).into_owned()
}
