//! Checkpoints of what a native program or an MCP server changes.
//!
//! `write-files` sees every change a plugin makes itself, but a program a
//! plugin runs (`sed -i`, a formatter, `cargo fix`) and an MCP server
//! write the workspace directly, where the host sees nothing. So before
//! such a call the workspace's regular files are taken ([`Watch::before`]):
//! each one's identity (device, inode, size, mtime, ctime, mode) and its
//! content, put in the session's content-addressed objects. After the call
//! the workspace is walked again ([`Watch::after`]) and each file created,
//! changed or removed is recorded as a change of the turn, from the
//! snapshot to what it holds now, the same line `write-files` records, so
//! `undo` and `/rewind` take both back alike.
//!
//! A stat cache keeps the second call cheap: a file whose identity has not
//! changed since the last walk is not read again. A file modified within
//! [`RACY`] of a walk is read again anyway, since a change made in the same
//! clock tick leaves its identity as it was. The walk is bounded
//! ([`Limits`]); a workspace over the bounds is not taken, and the call
//! runs with a warning that its changes cannot be undone.

use super::{Checkpoints, Line, MAX_CHECKPOINT_BYTES, Stored};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A file modified this close to a walk may change again within the same
/// timestamp tick unseen, so its recorded identity is not trusted.
const RACY: Duration = Duration::from_secs(2);

/// How much of a workspace a snapshot takes at most.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Entries walked (files and directories).
    pub entries: usize,
    /// Bytes of the regular files, in all.
    pub bytes: u64,
    /// A file larger than this is recorded by size only.
    pub file: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            entries: 20_000,
            bytes: 256 << 20,
            file: MAX_CHECKPOINT_BYTES,
        }
    }
}

/// What identifies one state of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    mode: u32,
}

impl Stat {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            mode: m.mode(),
        }
    }

    /// Whether it was modified within [`RACY`] of `walk`.
    fn racy(&self, walk: SystemTime) -> bool {
        let Ok(secs) = u64::try_from(self.mtime.0) else {
            return false;
        };
        let nanos = u32::try_from(self.mtime.1).unwrap_or(0);
        let mtime = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
        mtime + RACY > walk
    }
}

/// One file as a walk found it.
#[derive(Debug, Clone)]
struct Entry {
    stat: Stat,
    stored: Stored,
    /// Modified so close to the walk that its identity is not trusted.
    racy: bool,
}

/// The workspace's regular files before a call, by path relative to it.
pub struct Snapshot {
    files: HashMap<PathBuf, Entry>,
}

/// Whether the call's changes can be recorded: the snapshot, or why not.
pub struct Before(Result<Snapshot, String>);

/// Records what native programs and MCP servers change in one workspace,
/// as changes of the session's turns.
pub struct Watch {
    checkpoints: Arc<Checkpoints>,
    workspace: PathBuf,
    limits: Limits,
    /// The last walk's files, so that one unchanged is not read again.
    cache: Mutex<HashMap<PathBuf, Entry>>,
}

impl Watch {
    /// Records the changes in `workspace` into `checkpoints`.
    pub fn new(checkpoints: Arc<Checkpoints>, workspace: PathBuf) -> Self {
        Self::with_limits(checkpoints, workspace, Limits::default())
    }

    /// The same, within `limits`.
    pub fn with_limits(checkpoints: Arc<Checkpoints>, workspace: PathBuf, limits: Limits) -> Self {
        Self {
            checkpoints,
            workspace,
            limits,
            cache: Mutex::default(),
        }
    }

    /// Takes the workspace before a call that may change it. Blocking work
    /// runs off the async threads.
    pub async fn before(self: &Arc<Self>) -> Before {
        let this = self.clone();
        Before(
            tokio::task::spawn_blocking(move || this.snapshot())
                .await
                .unwrap_or_else(|e| Err(format!("the snapshot stopped: {e}"))),
        )
    }

    /// Records what changed since `before`; returns a sentence for the
    /// call's result when its changes could not be kept.
    pub async fn after(self: &Arc<Self>, before: Before) -> Option<String> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.after_blocking(before))
            .await
            .unwrap_or_else(|e| Some(format!("the changes could not be compared: {e}")))
    }

    /// [`Watch::after`] on this thread.
    pub fn after_blocking(&self, before: Before) -> Option<String> {
        let why = match before.0 {
            Ok(snapshot) => match self.compare(snapshot) {
                Ok(()) => return None,
                Err(why) => why,
            },
            Err(why) => why,
        };
        let note = format!(
            "{why}; what this call changed in the workspace cannot be undone with `corral undo` \
             or `/rewind`"
        );
        tracing::warn!("{note}");
        Some(note)
    }

    fn root(&self) -> Result<PathBuf, String> {
        self.workspace.canonicalize().map_err(|e| {
            format!(
                "the workspace {} cannot be opened for a checkpoint ({e})",
                self.workspace.display()
            )
        })
    }

    fn snapshot(&self) -> Result<Snapshot, String> {
        let root = self.root()?;
        let started = SystemTime::now();
        let found = walk(&root, &self.limits)?;
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| "the checkpoint's cache is poisoned".to_owned())?;
        let mut files = HashMap::with_capacity(found.len());
        for (rel, stat) in found {
            let entry = match cache.get(&rel) {
                Some(e) if e.stat == stat && !e.racy => e.clone(),
                _ => match self.read(&root, &rel, started) {
                    Ok(Some(entry)) => entry,
                    // Gone or no longer a regular file since the walk.
                    Ok(None) => continue,
                    Err(e) => return Err(e),
                },
            };
            files.insert(rel, entry);
        }
        cache.clone_from(&files);
        Ok(Snapshot { files })
    }

    /// Walks again and records each file that differs from `before`.
    fn compare(&self, before: Snapshot) -> Result<(), String> {
        let root = self.root()?;
        let started = SystemTime::now();
        let found = walk(&root, &self.limits).map_err(|e| format!("after the call, {e}"))?;
        let mut now = HashMap::with_capacity(found.len());
        let mut changes = Vec::new();
        for (rel, stat) in found {
            let old = before.files.get(&rel);
            let entry = match old {
                Some(e) if e.stat == stat && !e.racy => e.clone(),
                _ => match self.read(&root, &rel, started)? {
                    Some(entry) => entry,
                    None => continue,
                },
            };
            let was = old.map_or(&Stored::Absent, |e| &e.stored);
            if *was != entry.stored {
                changes.push((rel.clone(), was.clone(), entry.stored.clone()));
            }
            now.insert(rel, entry);
        }
        for (rel, old) in &before.files {
            if !now.contains_key(rel) {
                changes.push((rel.clone(), old.stored.clone(), Stored::Absent));
            }
        }
        if let Ok(mut cache) = self.cache.lock() {
            *cache = now;
        }
        if changes.is_empty() {
            return Ok(());
        }
        // The order a reader expects: by path, as a listing shows them.
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        let kept: Vec<&str> = changes
            .iter()
            .flat_map(|(_, before, after)| [before, after])
            .filter_map(|s| match s {
                Stored::File { sha256, .. } => Some(sha256.as_str()),
                _ => None,
            })
            .collect();
        sync_objects(&self.checkpoints.objects, &kept).map_err(|e| {
            format!(
                "the checkpoint objects {} cannot be written ({e})",
                self.checkpoints.objects.display()
            )
        })?;
        let turn = self.checkpoints.turn.load(Ordering::Relaxed);
        let lines: Vec<Line> = changes
            .into_iter()
            .map(|(rel, before, after)| Line::Change {
                turn,
                path: root.join(rel),
                before,
                after,
            })
            .collect();
        self.checkpoints.append(&lines).map_err(|e| {
            format!(
                "the checkpoint {} cannot be written ({e})",
                self.checkpoints.record.display()
            )
        })
    }

    /// Reads `rel` and keeps its content; `None` when it is no longer a
    /// regular file.
    fn read(&self, root: &Path, rel: &Path, walk: SystemTime) -> Result<Option<Entry>, String> {
        // Never through a link planted since the walk, never blocking on a
        // FIFO: the identity recorded is that of the file read.
        let file = match crate::fsread::open_state(&root.join(rel)) {
            Ok(f) => f,
            Err(crate::fsread::ReadError::NotRegular(_)) => return Ok(None),
            Err(e) if e.is_not_found() => return Ok(None),
            // A file corral may not read (mode 000, another user's) is left
            // out rather than costing every call its checkpoint: what the
            // user cannot read, the programs they run cannot change either.
            Err(crate::fsread::ReadError::Io(e))
                if e.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                return Ok(None);
            }
            Err(e) => {
                return Err(format!(
                    "`{}` cannot be read for a checkpoint ({e})",
                    super::shown(rel)
                ));
            }
        };
        let meta = file.metadata().map_err(|e| {
            format!(
                "`{}` cannot be examined for a checkpoint ({e})",
                super::shown(rel)
            )
        })?;
        let stat = Stat::of(&meta);
        let stored = if meta.len() > self.limits.file {
            Stored::TooBig { size: meta.len() }
        } else {
            let content = crate::fsread::read_open(file, self.limits.file).map_err(|e| {
                format!(
                    "`{}` cannot be read for a checkpoint ({e})",
                    super::shown(rel)
                )
            })?;
            let sha256 = put_unsynced(&self.checkpoints.objects, &content).map_err(|e| {
                format!(
                    "the checkpoint objects {} cannot be written ({e})",
                    self.checkpoints.objects.display()
                )
            })?;
            Stored::File {
                sha256,
                mode: stat.mode & 0o7777,
            }
        };
        Ok(Some(Entry {
            stat,
            stored,
            racy: stat.racy(walk),
        }))
    }
}

/// The regular files beneath `root` with their identities, by relative
/// path, within `limits`. `.git` directories and corral's own state are
/// left out: nothing confined can change them, and corral's own writes
/// there (the session log of this very call) are not the turn's.
fn walk(root: &Path, limits: &Limits) -> Result<Vec<(PathBuf, Stat)>, String> {
    let skip = own_state(root);
    let mut out = Vec::new();
    let mut bytes = 0u64;
    let mut entries = 0usize;
    let mut dirs = vec![PathBuf::new()];
    while let Some(dir) = dirs.pop() {
        let read = match std::fs::read_dir(root.join(&dir)) {
            Ok(r) => r,
            Err(e) if dir.as_os_str().is_empty() => {
                return Err(format!(
                    "the workspace {} cannot be listed for a checkpoint ({e})",
                    root.display()
                ));
            }
            // A directory nothing may list is one nothing changes through
            // us either; it is left out rather than failing every call.
            Err(_) => continue,
        };
        for item in read.flatten() {
            entries += 1;
            if entries > limits.entries {
                return Err(format!(
                    "the workspace {} holds more than {} files and directories, more than a \
                     checkpoint takes",
                    root.display(),
                    limits.entries
                ));
            }
            let rel = dir.join(item.file_name());
            let Ok(kind) = item.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if item.file_name() != ".git" && !skip.contains(&rel) {
                    dirs.push(rel);
                }
            } else if kind.is_file() && !skip.contains(&rel) {
                let Ok(meta) = item.metadata() else {
                    continue;
                };
                bytes = bytes.saturating_add(meta.len().min(limits.file));
                if bytes > limits.bytes {
                    return Err(format!(
                        "the workspace {} holds more than {} MiB, more than a checkpoint takes",
                        root.display(),
                        limits.bytes >> 20
                    ));
                }
                out.push((rel, Stat::of(&meta)));
            }
        }
    }
    Ok(out)
}

/// corral's own state inside `root`, relative to it: the project's files
/// and the user's directories when the workspace holds them.
fn own_state(root: &Path) -> Vec<PathBuf> {
    let project = crate::exec::state::PROJECT_FILES.iter().map(PathBuf::from);
    let user = crate::exec::state::user_dirs()
        .into_iter()
        .filter_map(|s| s.path.canonicalize().ok())
        .filter_map(|p| p.strip_prefix(root).ok().map(Path::to_path_buf));
    project.chain(user).collect()
}

/// Stores `content` under its hash (once), not synced: a snapshot keeps
/// every file of the workspace, but only the few a call changes are ever
/// named by the record, and those are synced before it names them
/// ([`sync_objects`]), so a snapshot costs no sync per file.
fn put_unsynced(dir: &Path, content: &[u8]) -> std::io::Result<String> {
    super::store_object(dir, content, false)
}

/// Puts the objects `shas` and their names on disk.
fn sync_objects(dir: &Path, shas: &[&str]) -> std::io::Result<()> {
    if shas.is_empty() {
        return Ok(());
    }
    for sha in shas {
        std::fs::File::open(dir.join(sha))?.sync_all()?;
    }
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest as _, Sha256};

    /// A workspace with two files, and a watch recording into a session
    /// log beside it.
    fn setup(limits: Limits) -> (tempfile::TempDir, PathBuf, Watch) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).expect("mkdir");
        std::fs::create_dir_all(ws.join(".git")).expect("mkdir");
        std::fs::write(ws.join("a.txt"), "one\n").expect("write");
        std::fs::write(ws.join("sub/b.txt"), "b\n").expect("write");
        std::fs::write(ws.join(".git/index"), "i\n").expect("write");
        let log = tmp.path().join("sessions/s.jsonl");
        let checkpoints = Arc::new(Checkpoints::for_log(&log));
        checkpoints.set_turn(3);
        let watch = Watch::with_limits(checkpoints, ws.clone(), limits);
        (tmp, ws, watch)
    }

    /// The change lines recorded: (turn, path relative to `ws`, before, after).
    fn recorded(watch: &Watch, ws: &Path) -> Vec<(u32, PathBuf, Stored, Stored)> {
        let root = ws.canonicalize().expect("ws");
        super::super::read_lines(&watch.checkpoints.record)
            .expect("record")
            .into_iter()
            .filter_map(|l| match l {
                Line::Change {
                    turn,
                    path,
                    before,
                    after,
                } => Some((
                    turn,
                    path.strip_prefix(&root).expect("inside").to_path_buf(),
                    before,
                    after,
                )),
                Line::Undo { .. } => None,
            })
            .collect()
    }

    fn file(content: &str, mode: u32) -> Stored {
        Stored::File {
            sha256: hex::encode(Sha256::digest(content.as_bytes())),
            mode,
        }
    }

    #[test]
    fn what_a_call_created_changed_and_removed_is_recorded_and_nothing_else() {
        let (_tmp, ws, watch) = setup(Limits::default());
        let before = Before(watch.snapshot());
        // Replaced whole, as `sed -i` does; made; removed; `.git` left out.
        std::fs::write(ws.join("a.tmp"), "two\n").expect("write");
        std::fs::rename(ws.join("a.tmp"), ws.join("a.txt")).expect("rename");
        std::fs::write(ws.join("new.txt"), "new\n").expect("write");
        std::fs::remove_file(ws.join("sub/b.txt")).expect("rm");
        std::fs::write(ws.join(".git/index"), "changed\n").expect("write");
        assert_eq!(watch.after_blocking(before), None);
        let mode = |rel: &str| std::fs::metadata(ws.join(rel)).expect("stat").mode() & 0o7777;
        assert_eq!(
            recorded(&watch, &ws),
            [
                (
                    3,
                    PathBuf::from("a.txt"),
                    file("one\n", mode("a.txt")),
                    file("two\n", mode("a.txt"))
                ),
                (
                    3,
                    PathBuf::from("new.txt"),
                    Stored::Absent,
                    file("new\n", mode("new.txt"))
                ),
                (
                    3,
                    PathBuf::from("sub/b.txt"),
                    file("b\n", mode("a.txt")),
                    Stored::Absent
                ),
            ]
        );
        // The before-image is kept, for undo to put back.
        let objects = &watch.checkpoints.objects;
        let Stored::File { sha256, .. } = file("b\n", 0) else {
            unreachable!()
        };
        assert_eq!(
            super::super::get_object(objects, &sha256).expect("kept"),
            b"b\n"
        );

        // A call that changes nothing records nothing more.
        let before = Before(watch.snapshot());
        assert_eq!(watch.after_blocking(before), None);
        assert_eq!(recorded(&watch, &ws).len(), 3);
    }

    #[test]
    fn a_same_size_rewrite_within_the_clock_tick_is_seen() {
        let (_tmp, ws, watch) = setup(Limits::default());
        let before = Before(watch.snapshot());
        // In place, same size, same inode, and its old mtime put back: only
        // the content tells; a file this recent is read again anyway.
        let old = std::fs::metadata(ws.join("a.txt")).expect("stat");
        std::fs::write(ws.join("a.txt"), "two\n").expect("write");
        let f = std::fs::File::options()
            .write(true)
            .open(ws.join("a.txt"))
            .expect("open");
        f.set_modified(old.modified().expect("mtime"))
            .expect("set mtime");
        assert_eq!(watch.after_blocking(before), None);
        assert_eq!(recorded(&watch, &ws).len(), 1);
    }

    #[test]
    fn a_workspace_over_the_bounds_is_not_taken_and_the_call_is_told() {
        let (_tmp, ws, watch) = setup(Limits {
            entries: 2,
            ..Limits::default()
        });
        let before = Before(watch.snapshot());
        std::fs::write(ws.join("a.txt"), "two\n").expect("write");
        let note = watch.after_blocking(before).expect("a note");
        assert!(note.contains("more than 2 files and directories"), "{note}");
        assert!(note.contains("cannot be undone"), "{note}");
        assert!(recorded(&watch, &ws).is_empty());

        let (_tmp, _ws, watch) = setup(Limits {
            bytes: 3,
            ..Limits::default()
        });
        let note = watch
            .after_blocking(Before(watch.snapshot()))
            .expect("a note");
        assert!(note.contains("more than 0 MiB"), "{note}");
    }

    #[test]
    #[expect(clippy::print_stderr, reason = "a test that cannot run says so")]
    fn a_file_that_cannot_be_read_is_left_out_and_the_rest_recorded() {
        use std::os::unix::fs::PermissionsExt as _;
        let (_tmp, ws, watch) = setup(Limits::default());
        let locked = ws.join("locked.txt");
        std::fs::write(&locked, "secret\n").expect("write");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        if std::fs::read(&locked).is_ok() {
            eprintln!("skipped: this user reads a file of mode 000 anyway (root)");
            return;
        }
        let before = Before(watch.snapshot());
        std::fs::write(ws.join("a.txt"), "two\n").expect("write");
        assert_eq!(watch.after_blocking(before), None);
        let got = recorded(&watch, &ws);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, PathBuf::from("a.txt"));
    }

    #[test]
    fn a_file_over_the_cap_is_recorded_by_size() {
        let (_tmp, ws, watch) = setup(Limits {
            file: 3,
            ..Limits::default()
        });
        let before = Before(watch.snapshot());
        std::fs::write(ws.join("a.txt"), "three\n").expect("write");
        assert_eq!(watch.after_blocking(before), None);
        let got = recorded(&watch, &ws);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].2, Stored::TooBig { size: 4 });
    }
}
