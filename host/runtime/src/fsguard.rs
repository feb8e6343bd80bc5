//! Protected paths and blocking files in `wasi:filesystem`, enforced where
//! the call happens rather than on the text of a tool's arguments.
//!
//! The functions of `wasi:filesystem/types` that create, change or remove a
//! path are redefined in the linker (shadowing wasmtime-wasi's own): each
//! first resolves its path beneath the descriptor it is relative to,
//! following symlinks the way the operation would, and refuses with
//! `not-permitted` when the resolution lands in a `.git` directory, names a
//! `.git` entry, or names `corral.toml` at the workspace root. Only then does
//! it hand the call to wasmtime-wasi. A path is judged by what it resolves
//! to, so `meta/config` with `meta -> .git` is refused like `.git/config`,
//! whichever tool or argument named it. The built-in git plugin
//! (`builtin:git`, by source, never by name) is exempt.
//!
//! `open-at` also refuses anything but regular files, directories and (when
//! not followed) symlinks before opening it: opening a FIFO blocks until a
//! writer appears, and file operations run on the calling thread, where
//! neither the epoch deadline nor a timer can interrupt them. WASI itself
//! cannot create FIFOs or device nodes, so only something outside the
//! sandbox can swap one in between the check and the open.

use super::touched::Recording;
use crate::manifest::Source;
use cap_primitives::fs::FollowSymlinks;
use rustix::fs::{AtFlags, Mode, OFlags};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, LinkerInstance, Resource};
use wasmtime_wasi::FsPerms;
use wasmtime_wasi::filesystem::{Descriptor, Dir, OpenMode, WasiFilesystemCtxView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptor, NewTimestamp, OpenFlags, PathFlags,
};

/// The interface wasmtime-wasi 48 defines; guests importing an earlier
/// 0.2.x version are linked to it too.
const TYPES: &str = "wasi:filesystem/types@0.2.12";
/// The preopens interface of the same version.
const PREOPENS: &str = "wasi:filesystem/preopens@0.2.12";

/// Symlinks followed before giving up, as the kernel's `ELOOP` limit.
const MAX_SYMLINKS: u32 = 40;

/// Directory levels walked up before giving up (fails closed).
const MAX_DEPTH: u32 = 4096;

/// File names (at the workspace root) that no tool may create or change:
/// corral's project files.
const PROTECTED_AT_ROOT: &[&str] = corral_exec::state::PROJECT_FILES;

/// Whether a plugin loaded from `source` may change `.git`: `builtin:git`
/// only, by its source, since any plugin may be named "git". The one place
/// this exemption is decided, for the sandbox and for the call pipeline.
pub fn may_write_git(source: &Source) -> bool {
    matches!(source, Source::Builtin(b) if b == "git")
}

/// What one plugin's calls are checked against.
#[derive(Debug)]
pub(crate) struct Guard {
    /// The workspace root, by path and by identity; `None` when there is
    /// none (`plugin inspect`).
    root: Option<(PathBuf, FileId)>,
    /// `builtin:git` changes `.git` by design.
    exempt: bool,
    /// corral's own state ([`corral_exec::state`]): the user's directories,
    /// by canonical path and identity, which no plugin may read or change.
    kept: Vec<(PathBuf, FileId)>,
    /// Every directory above a kept one, by identity: moving or removing
    /// one would move corral's state away, for a plugin to plant a new one
    /// where corral looks.
    above_kept: Vec<FileId>,
    /// The workspace's `.corral/`, by identity: readable, never changed.
    project_dir: Option<FileId>,
}

/// Why a descriptor opened for a plugin is taken back: it lies in corral's
/// own state, or where it lies cannot be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InKept {
    /// The kernel did not say where the descriptor leads.
    #[error("where it lies cannot be checked")]
    Unknown,
    /// It leads into corral's own state.
    #[error("{}", KEPT)]
    Kept,
}

/// A file's identity: device and inode.
type FileId = (u64, u64);

fn id(st: &rustix::fs::Stat) -> FileId {
    (st.st_dev, st.st_ino)
}

/// Why a path was refused.
#[derive(Debug)]
struct Refusal {
    code: ErrorCode,
    why: String,
}

impl Refusal {
    fn protected(why: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::NotPermitted,
            why: why.into(),
        }
    }

    fn io(e: &io::Error) -> Self {
        Self {
            code: ErrorCode::from(e),
            why: format!("cannot be checked: {e}"),
        }
    }
}

/// Where a directory is, relative to the workspace and its `.git`.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// The workspace root itself.
    Root,
    /// In a `.git` directory, or that directory itself.
    Git,
    /// In one of corral's own state directories (the user's), or it.
    Kept,
    /// In the workspace's `.corral/`, or it.
    Project,
    /// Anywhere else.
    Other,
}

impl Guard {
    /// The guard for a plugin loaded from `source` in `workspace`.
    pub(crate) fn new(workspace: Option<&Path>, source: &Source) -> io::Result<Self> {
        let root = match workspace {
            Some(path) => {
                let st = rustix::fs::stat(path)?;
                Some((path.to_path_buf(), id(&st)))
            }
            None => None,
        };
        let (kept, above_kept) = kept_dirs().clone();
        let project_dir = workspace
            .and_then(|w| rustix::fs::lstat(w.join(".corral")).ok())
            .filter(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
            .map(|st| id(&st));
        Ok(Self {
            root,
            exempt: may_write_git(source),
            kept,
            above_kept,
            project_dir,
        })
    }

    /// The guard of corral's own writes in `workspace` (undo, recovery):
    /// judged like any plugin's, with no exemption.
    pub(crate) fn for_host(workspace: &Path) -> io::Result<Self> {
        Self::new(Some(workspace), &Source::Builtin(String::new()))
    }

    /// Whether `host` (a canonical path, as the kernel resolved it) is in
    /// one of corral's own state directories.
    pub(crate) fn is_kept(&self, host: &Path) -> bool {
        self.kept.iter().any(|(k, _)| host.starts_with(k))
    }

    /// Whether corral's state could be reached beneath `dir` (a granted
    /// directory's canonical host path): some of it lies beneath `dir`, or
    /// `dir` lies in it.
    pub(crate) fn may_hold_kept(&self, dir: &Path) -> bool {
        self.kept
            .iter()
            .any(|(k, _)| k.starts_with(dir) || dir.starts_with(k))
    }

    /// Refuses a descriptor a plugin just opened when it lies in corral's
    /// own state: judged by where the kernel says it is
    /// (`/proc/self/fd`), whatever path and links led there.
    pub(crate) fn refuse_kept_fd(&self, fd: BorrowedFd<'_>) -> Result<(), InKept> {
        if self.kept.is_empty() {
            return Ok(());
        }
        let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
        let Ok(at) = std::fs::read_link(&link) else {
            return Err(InKept::Unknown);
        };
        if self.is_kept(&at) {
            return Err(InKept::Kept);
        }
        Ok(())
    }

    /// Where `dir` is: walks up through `..` (the kernel's parent, which no
    /// symlink can fake) until the workspace root or the filesystem root,
    /// comparing each level with its parent's `.git` entry.
    fn place(&self, dir: BorrowedFd<'_>) -> io::Result<Place> {
        // The directory a `.git` symlink at the root points to is the
        // repository too, wherever it is.
        let root_git = self.root.as_ref().and_then(|(path, _)| {
            rustix::fs::stat(path.join(".git"))
                .ok()
                .filter(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
                .map(|st| id(&st))
        });
        let mut st = rustix::fs::fstat(dir)?;
        let mut owned: Option<OwnedFd> = None;
        for level in 0..MAX_DEPTH {
            let here = id(&st);
            if Some(here) == root_git {
                return Ok(Place::Git);
            }
            if self.kept.iter().any(|(_, k)| *k == here) {
                return Ok(Place::Kept);
            }
            if Some(here) == self.project_dir {
                return Ok(Place::Project);
            }
            if self.root.as_ref().is_some_and(|(_, r)| *r == here) {
                return Ok(if level == 0 {
                    Place::Root
                } else {
                    Place::Other
                });
            }
            let cur = owned.as_ref().map_or(dir, |fd| fd.as_fd());
            let parent = rustix::fs::openat(
                cur,
                "..",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::empty(),
            )?;
            let parent_st = rustix::fs::fstat(&parent)?;
            if id(&parent_st) == here {
                // The filesystem root: outside the workspace.
                return Ok(Place::Other);
            }
            if rustix::fs::statat(&parent, ".git", AtFlags::empty()).is_ok_and(|g| id(&g) == here) {
                return Ok(Place::Git);
            }
            owned = Some(parent);
            st = parent_st;
        }
        Err(io::Error::other("directories nested too deeply to check"))
    }

    /// Why changing `path` (relative to `start`; a symlink at its end is
    /// the thing changed, not followed) is refused, if it is. For the host's
    /// own writes on a plugin's behalf (`write-files`).
    pub(crate) fn refusal(&self, start: &File, path: &str) -> Option<String> {
        if self.exempt {
            return self.check_kept(start, path, false, 0).err().map(|r| r.why);
        }
        self.check(start, path, false, 0).err().map(|r| r.why)
    }

    /// What even `builtin:git` may not change: corral's own state.
    fn check_kept(&self, start: &File, path: &str, follow: bool, hops: u32) -> Result<(), Refusal> {
        match self.check(start, path, follow, hops) {
            Err(r) if r.why == KEPT || r.why == ABOVE_KEPT => Err(r),
            _ => Ok(()),
        }
    }

    /// Refuses `path` (relative to `start`) if it resolves into `.git`, to
    /// a protected file, or into corral's own state. `follow` says whether
    /// the operation follows a symlink in the last component.
    fn check(&self, start: &File, path: &str, follow: bool, hops: u32) -> Result<(), Refusal> {
        if path.starts_with('/') {
            return Err(Refusal::protected("absolute paths are outside every grant"));
        }
        let trimmed = path.trim_end_matches('/');
        // A trailing slash makes the last component a directory to resolve.
        let follow = follow || trimmed.len() != path.len();
        let (parent, name) = match trimmed.rsplit_once('/') {
            Some((p, n)) => (if p.is_empty() { "." } else { p }, n),
            None => (".", trimmed),
        };
        if matches!(name, "" | "." | "..") {
            // The path names a directory by itself; judge that directory.
            let dir = cap_primitives::fs::open_dir(start, Path::new(path))
                .map_err(|e| Refusal::io(&e))?;
            return match self.place(dir.as_fd()).map_err(|e| Refusal::io(&e))? {
                Place::Git => Err(Refusal::protected("it is inside .git")),
                Place::Kept => Err(Refusal::protected(KEPT)),
                Place::Project => Err(Refusal::protected(PROJECT)),
                _ => Ok(()),
            };
        }
        if name.eq_ignore_ascii_case(".git") {
            return Err(Refusal::protected(
                ".git is the repository's own data; use the git tools",
            ));
        }
        let opened;
        let dir: &File = if parent == "." {
            start
        } else {
            opened = cap_primitives::fs::open_dir(start, Path::new(parent))
                .map_err(|e| Refusal::io(&e))?;
            &opened
        };
        match self.place(dir.as_fd()).map_err(|e| Refusal::io(&e))? {
            Place::Git => {
                return Err(Refusal::protected(
                    "it resolves into .git, the repository's own data; use the git tools",
                ));
            }
            Place::Kept => return Err(Refusal::protected(KEPT)),
            Place::Project => return Err(Refusal::protected(PROJECT)),
            Place::Root
                if PROTECTED_AT_ROOT
                    .iter()
                    .any(|p| name.eq_ignore_ascii_case(p)) =>
            {
                return Err(Refusal::protected(format!(
                    "{name} is corral's own project file; edit it yourself and run `corral trust`"
                )));
            }
            _ => {}
        }
        // The last name itself: one of corral's state directories, or one
        // above them (moved away, a plugin could plant a new one).
        if let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            let here = id(&st);
            if self.kept.iter().any(|(_, k)| *k == here) {
                return Err(Refusal::protected(KEPT));
            }
            if self.above_kept.contains(&here) {
                return Err(Refusal::protected(ABOVE_KEPT));
            }
        }
        if follow
            && let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            && rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink
        {
            if hops >= MAX_SYMLINKS {
                return Err(Refusal::io(&io::Error::from_raw_os_error(libc::ELOOP)));
            }
            let target = rustix::fs::readlinkat(dir, name, Vec::new())
                .map_err(|e| Refusal::io(&e.into()))?;
            let target = target.to_str().map_err(|_| Refusal {
                code: ErrorCode::IllegalByteSequence,
                why: "a symlink on the path is not UTF-8".into(),
            })?;
            return self.check(dir, target, true, hops + 1);
        }
        Ok(())
    }
}

/// corral's own state directories by path and identity, and the
/// identities of the directories above them.
type Kept = (Vec<(PathBuf, FileId)>, Vec<FileId>);

/// corral's own state directories by path and identity, and the
/// identities of every directory above them: found (and made) once per
/// process, since the environment that names them does not change.
fn kept_dirs() -> &'static Kept {
    static KEPT: std::sync::OnceLock<Kept> = std::sync::OnceLock::new();
    KEPT.get_or_init(|| {
        let kept: Vec<(PathBuf, FileId)> = corral_exec::state::user_dirs_made()
            .into_iter()
            .filter_map(|p| rustix::fs::stat(&p).ok().map(|st| (p, id(&st))))
            .collect();
        let mut above: Vec<FileId> = kept
            .iter()
            .flat_map(|(p, _)| p.ancestors().skip(1))
            .filter_map(|a| rustix::fs::stat(a).ok().map(|st| id(&st)))
            .collect();
        above.sort_unstable();
        above.dedup();
        (kept, above)
    })
}

/// Why a path in corral's own state is refused.
const KEPT: &str = "it is in corral's own state (its configuration, data or cache \
                    directory), which no plugin may read or change";

/// Why a directory above corral's own state may not be moved or removed.
const ABOVE_KEPT: &str = "it holds corral's own state (its configuration, data or cache \
                          directory); it may not be moved or removed";

/// Why a path in the workspace's `.corral/` is refused.
const PROJECT: &str = "it is in .corral/, corral's own project directory; edit it yourself and \
                       run `corral trust`";

/// Refuses to open anything that could block or is not a file: FIFOs,
/// sockets, character and block devices.
fn check_kind(start: &File, path: &str, follow: bool) -> Result<(), Refusal> {
    let follow = if follow {
        FollowSymlinks::Yes
    } else {
        FollowSymlinks::No
    };
    // What does not resolve is left to the open itself to report.
    let Ok(meta) = cap_primitives::fs::stat(start, Path::new(path), follow) else {
        return Ok(());
    };
    let ft = meta.file_type();
    if ft.is_file() || ft.is_dir() || ft.is_symlink() {
        return Ok(());
    }
    use cap_primitives::fs::FileTypeExt as _;
    let kind = corral_exec::fsread::special_kind(
        ft.is_fifo(),
        ft.is_socket(),
        ft.is_char_device(),
        ft.is_block_device(),
    );
    Err(Refusal {
        code: ErrorCode::Unsupported,
        why: format!("it is {kind}; only regular files and directories can be opened"),
    })
}

/// Opens `path` beneath `dir` for reading in one system call when it is a
/// plain case: a regular file reached without any symlink (`..` may not
/// leave `dir`). Returns the file and its path relative to `dir`, which is
/// then exact: with no symlink on the way, the path as written is where
/// the kernel went, so the provenance record needs no `readlink`; and its
/// size when opened, from the `fstat` that checked its kind. `None`
/// for everything else (a symlink anywhere on the path, a directory, a
/// FIFO, an error), which the caller hands to the full checks and
/// wasmtime-wasi's own open, so their errors and refusals are unchanged.
///
/// The file is opened non-blocking (a FIFO swapped in cannot stall the
/// open); for a regular file that flag changes nothing.
pub(crate) fn open_plain_file(dir: &File, path: &str) -> Option<(File, PathBuf, u64)> {
    let fd = rustix::fs::openat2(
        dir,
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::BENEATH
            | rustix::fs::ResolveFlags::NO_SYMLINKS
            | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return None;
    }
    let rel = lexical(path)?;
    Some((File::from(fd), rel, u64::try_from(st.st_size).unwrap_or(0)))
}

/// `path` with `.` and `..` resolved by its text: exact for a path the
/// kernel resolved beneath its directory without following a symlink.
/// `None` if it is absolute or climbs above its start (`RESOLVE_BENEATH`
/// refused both already).
fn lexical(path: &str) -> Option<PathBuf> {
    let lexical = corral_syntax::path::lexical(path);
    (!lexical.absolute && !lexical.climbs()).then(|| lexical.parts.iter().collect())
}

/// The granted directories of one call as `wasi:filesystem` preopens,
/// opened when the plugin first asks for them: a call that never looks at
/// its files pays nothing for them.
pub(crate) struct Preopens {
    grants: Arc<[crate::manifest::FsGrant]>,
    /// The call may write where its grant does.
    writes: bool,
    opened: Option<Vec<(Dir, String, PathBuf)>>,
    /// Why a granted directory could not be opened, for the call's error.
    pub(crate) refused: Option<String>,
    /// The plugin asked for its granted directories (`get-directories`
    /// answered with some).
    pub(crate) asked: bool,
}

impl Preopens {
    /// The preopens of `grants`, not opened yet; `writes` is whether this
    /// call may write where a grant is `rw`.
    pub(crate) fn new(grants: Arc<[crate::manifest::FsGrant]>, writes: bool) -> Self {
        Self {
            grants,
            writes,
            opened: None,
            refused: None,
            asked: false,
        }
    }

    /// Each granted directory with the path the plugin names it by and its
    /// host path, opened on the first call.
    fn opened(&mut self) -> wasmtime::Result<&[(Dir, String, PathBuf)]> {
        if self.opened.is_none() {
            let mut dirs = Vec::with_capacity(self.grants.len());
            for grant in self.grants.iter() {
                match open_grant(grant) {
                    Ok(fd) => {
                        let perms = if !self.writes || grant.access == crate::manifest::Access::Ro {
                            FsPerms::ReadOnly
                        } else {
                            FsPerms::ReadWrite
                        };
                        let mode = match perms {
                            FsPerms::ReadOnly => OpenMode::READ,
                            FsPerms::ReadWrite => OpenMode::READ | OpenMode::WRITE,
                        };
                        let dir = Dir::new(File::from(fd), perms, mode, true);
                        dirs.push((dir, grant.guest_path.clone(), grant.host_path.clone()));
                    }
                    Err(why) => {
                        self.refused = Some(why.clone());
                        return Err(wasmtime::format_err!("{why}"));
                    }
                }
            }
            self.opened = Some(dirs);
        }
        Ok(self.opened.as_deref().unwrap_or_default())
    }

    /// The host path of `dir` if it is one of these preopens.
    fn host_path(&self, dir: &Arc<File>) -> Option<&Path> {
        self.opened
            .as_deref()?
            .iter()
            .find(|(d, ..)| Arc::ptr_eq(&d.dir, dir))
            .map(|(.., host)| host.as_path())
    }
}

/// Why a granted directory that no longer opens by its canonical path
/// without a symlink is refused.
pub(crate) fn moved(grant: &crate::manifest::FsGrant, e: &io::Error) -> String {
    format!(
        "granted directory {} ({}) is no longer what the manifest granted: {e}; \
         restore it or reload corral",
        grant.path,
        grant.host_path.display()
    )
}

/// Opens a granted directory by its canonical path, refusing it if a
/// symlink now stands anywhere on that path.
pub(crate) fn open_unmoved(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(
        rustix::fs::CWD,
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        rustix::fs::ResolveFlags::NO_SYMLINKS,
    )
}

/// Opens a granted directory again by its canonical path, as a call does
/// (for finishing a journal after a crash).
pub(crate) fn open_root(path: &Path) -> io::Result<OwnedFd> {
    open_unmoved(path).map_err(io::Error::from)
}

/// Opens a granted directory by its canonical path. The path was canonical
/// when the manifest loaded; if a directory on it has since become a
/// symlink (a program run by a plugin can do that inside the workspace),
/// it may lead anywhere, so it is refused. The workspace root itself is
/// out of their reach.
fn open_grant(grant: &crate::manifest::FsGrant) -> Result<OwnedFd, String> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if grant.path != "." {
        match rustix::fs::openat2(
            rustix::fs::CWD,
            &grant.host_path,
            flags,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS,
        ) {
            Ok(fd) => return Ok(fd),
            // No openat2 (Linux before 5.6): nothing to check with.
            Err(rustix::io::Errno::NOSYS) => {}
            Err(e) => return Err(moved(grant, &io::Error::from(e))),
        }
    }
    rustix::fs::open(&grant.host_path, flags, Mode::empty()).map_err(|e| {
        format!(
            "cannot open granted directory {}: {}",
            grant.host_path.display(),
            io::Error::from(e)
        )
    })
}

/// What a guarded call needs from its directory descriptor.
struct Target {
    dir: Arc<File>,
    perms: FsPerms,
    writable: bool,
}

/// What the guarded functions of `wasi:filesystem` see of a call:
/// wasmtime-wasi's own view, the call's preopens ([`Preopens`], this
/// module's state), what guards them, and where reads are recorded.
pub(crate) struct GuardView<'a> {
    /// wasmtime-wasi's filesystem context and the call's resource table.
    pub(crate) fs: WasiFilesystemCtxView<'a>,
    /// The call's granted directories.
    pub(crate) preopens: &'a mut Preopens,
    /// What the plugin may not touch.
    pub(crate) guard: &'a Guard,
    /// The plugin's name, for the log.
    pub(crate) plugin: &'a str,
    /// What the call touched.
    pub(crate) touched: &'a mut Recording,
}

impl GuardView<'_> {
    /// The directory `fd` is, when it is one.
    fn target(&mut self, fd: &Resource<Descriptor>) -> wasmtime::Result<Option<Target>> {
        Ok(match self.fs.table.get(fd)? {
            Descriptor::Dir(d) => Some(Target {
                dir: d.dir.clone(),
                perms: d.perms,
                writable: d.perms == FsPerms::ReadWrite,
            }),
            // Not a directory: wasmtime-wasi answers with its own error.
            Descriptor::File(_) => None,
        })
    }

    /// Checks a path-changing call of this plugin; `Some` refuses it.
    fn guard_write(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        op: &str,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let guard = self.guard;
        let Some(t) = self.target(fd)? else {
            return Ok(None);
        };
        if !t.writable {
            // wasmtime-wasi refuses every change under a read-only grant.
            return Ok(None);
        }
        let judged = if guard.exempt {
            guard.check_kept(&t.dir, path, follow, 0)
        } else {
            guard.check(&t.dir, path, follow, 0)
        };
        Ok(judged.err().map(|r| self.refuse(op, path, r)))
    }

    /// Refuses a descriptor just opened for the plugin when it lies in
    /// corral's own state, taking it back from the plugin's table.
    fn refuse_kept_open(
        &mut self,
        new: &Resource<Descriptor>,
        path: &str,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let guard = self.guard;
        let why = match self.fs.table.get(new)? {
            Descriptor::File(f) => guard.refuse_kept_fd(f.file.as_fd()),
            Descriptor::Dir(d) => guard.refuse_kept_fd(d.dir.as_fd()),
        };
        let Err(why) = why else {
            return Ok(None);
        };
        let taken = Resource::<Descriptor>::new_own(new.rep());
        self.fs.table.delete(taken)?;
        Ok(Some(self.refuse(
            "open",
            path,
            Refusal::protected(why.to_string()),
        )))
    }

    fn refuse(&self, op: &str, path: &str, r: Refusal) -> ErrorCode {
        if r.code == ErrorCode::NotPermitted || r.code == ErrorCode::Unsupported {
            tracing::warn!(
                plugin = %self.plugin,
                "refused to {op} `{path}`: {}",
                r.why
            );
        }
        r.code
    }
}

/// The answer of a shadowed function: the guest's error, or wasmtime-wasi's.
fn answer<T>(r: FsResult<T>) -> wasmtime::Result<(Result<T, ErrorCode>,)> {
    match r {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(e.downcast()?),)),
    }
}

/// The projection from a store's data to the view these functions use.
type Get<T> = fn(&mut T) -> GuardView<'_>;

/// Redefines the path-changing functions of `wasi:filesystem/types` so that
/// they check their paths first, and `wasi:filesystem/preopens` so that a
/// call's state records that the plugin asked for its directories. Call
/// after wasmtime-wasi's `add_to_linker`.
pub(crate) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: Get<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    link_preopens(linker, get)?;
    let mut inst = linker.instance(TYPES)?;
    link_open_at(&mut inst, get)?;
    link_one_path_calls(&mut inst, get)?;
    link_two_path_calls(&mut inst, get)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `get-directories`, recording that the plugin asked for its directories.
fn link_preopens<T: Send + 'static>(linker: &mut Linker<T>, get: Get<T>) -> wasmtime::Result<()> {
    // Every file a plugin reaches through `wasi:filesystem` is reached from
    // a directory this returns; a `describe` that asked for a non-empty list
    // may have read files, so its answer is not cached.
    linker.instance(PREOPENS)?.func_wrap(
        "get-directories",
        move |mut store: StoreContextMut<'_, T>, (): ()| {
            let state = get(store.data_mut());
            let opened = state.preopens.opened()?;
            let mut dirs = Vec::with_capacity(opened.len());
            for (dir, guest, _) in opened {
                let fd = state.fs.table.push(Descriptor::Dir(dir.clone()))?;
                dirs.push((fd, guest.clone()));
            }
            if !dirs.is_empty() {
                state.preopens.asked = true;
            }
            Ok((dirs,))
        },
    )?;
    Ok(())
}

/// `open-at`: a plain read opened directly (and recorded for provenance);
/// anything that may write judged first.
// Each wrapper below spells out its WIT function's parameters: where they
// look alike, the interface's functions do.
fn link_open_at<T: Send + 'static>(
    inst: &mut LinkerInstance<'_, T>,
    get: Get<T>,
) -> wasmtime::Result<()> {
    inst.func_wrap_async(
        "[method]descriptor.open-at",
        move |mut store: StoreContextMut<'_, T>,
              (fd, pf, path, of, fl): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let mut state = get(store.data_mut());
                let follow = pf.contains(PathFlags::SYMLINK_FOLLOW);
                if let Some(t) = state.target(&fd)? {
                    if of == OpenFlags::empty()
                        && fl == DescriptorFlags::READ
                        && let Some(root) = state.preopens.host_path(&t.dir)
                        && let Some((file, rel, _)) = open_plain_file(&t.dir, &path)
                    {
                        let read = root.join(rel);
                        if state.guard.is_kept(&read) {
                            let r = Refusal::protected(KEPT);
                            return Ok((Err(state.refuse("open", &path, r)),));
                        }
                        state.touched.read_path(read);
                        let file = wasmtime_wasi::filesystem::File::new(
                            file,
                            t.perms,
                            wasmtime_wasi::filesystem::OpenMode::READ,
                            true,
                        );
                        let new = state.fs.table.push(Descriptor::File(file))?;
                        return Ok((Ok(new),));
                    }
                    if let Err(r) = check_kind(&t.dir, &path, follow) {
                        return Ok((Err(state.refuse("open", &path, r)),));
                    }
                    let writes = of.contains(OpenFlags::CREATE)
                        || of.contains(OpenFlags::TRUNCATE)
                        || fl.contains(DescriptorFlags::WRITE);
                    if writes && let Some(code) = state.guard_write(&fd, &path, follow, "write")? {
                        return Ok((Err(code),));
                    }
                }
                let reads = fl.contains(DescriptorFlags::READ);
                let opened = answer(
                    HostDescriptor::open_at(&mut state.fs, fd, pf, path.clone(), of, fl).await,
                )?;
                if let (Ok(new),) = &opened
                    && let Some(code) = state.refuse_kept_open(new, &path)?
                {
                    return Ok((Err(code),));
                }
                // What the call read, for its provenance labels.
                if reads
                    && let (Ok(new),) = &opened
                    && let Descriptor::File(f) = state.fs.table.get(new)?
                {
                    let file = f.file.clone();
                    state.touched.read_fd(&*file);
                }
                Ok(opened)
            })
        },
    )?;
    Ok(())
}

/// The calls that take one path and change it.
fn link_one_path_calls<T: Send + 'static>(
    inst: &mut LinkerInstance<'_, T>,
    get: Get<T>,
) -> wasmtime::Result<()> {
    // Judged, then handed on.
    macro_rules! guarded_path_call {
        ($name:literal, $verb:literal, $method:ident) => {
            inst.func_wrap_async(
                $name,
                move |mut store: StoreContextMut<'_, T>,
                      (fd, path): (Resource<Descriptor>, String)| {
                    Box::new(async move {
                        let mut state = get(store.data_mut());
                        if let Some(code) = state.guard_write(&fd, &path, false, $verb)? {
                            return Ok((Err(code),));
                        }
                        answer(HostDescriptor::$method(&mut state.fs, fd, path).await)
                    })
                },
            )?;
        };
    }
    guarded_path_call!(
        "[method]descriptor.create-directory-at",
        "create",
        create_directory_at
    );
    guarded_path_call!(
        "[method]descriptor.remove-directory-at",
        "remove",
        remove_directory_at
    );
    guarded_path_call!(
        "[method]descriptor.unlink-file-at",
        "remove",
        unlink_file_at
    );
    inst.func_wrap_async(
        "[method]descriptor.symlink-at",
        move |mut store: StoreContextMut<'_, T>,
              (fd, old, new): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let mut state = get(store.data_mut());
                // Where the link points is judged when something writes
                // through it; the link itself must not land in `.git`.
                if let Some(code) = state.guard_write(&fd, &new, false, "create")? {
                    return Ok((Err(code),));
                }
                answer(HostDescriptor::symlink_at(&mut state.fs, fd, old, new).await)
            })
        },
    )?;
    Ok(())
}

/// Rename and hard link, which name two paths, and `set-times-at`, which
/// may follow a link.
fn link_two_path_calls<T: Send + 'static>(
    inst: &mut LinkerInstance<'_, T>,
    get: Get<T>,
) -> wasmtime::Result<()> {
    inst.func_wrap_async(
        "[method]descriptor.rename-at",
        move |mut store: StoreContextMut<'_, T>,
              (fd, old, new_fd, new): (
            Resource<Descriptor>,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let mut state = get(store.data_mut());
                if let Some(code) = state.guard_write(&fd, &old, false, "move")? {
                    return Ok((Err(code),));
                }
                if let Some(code) = state.guard_write(&new_fd, &new, false, "replace")? {
                    return Ok((Err(code),));
                }
                answer(HostDescriptor::rename_at(&mut state.fs, fd, old, new_fd, new).await)
            })
        },
    )?;
    inst.func_wrap_async(
        "[method]descriptor.link-at",
        move |mut store: StoreContextMut<'_, T>,
              (fd, pf, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let mut state = get(store.data_mut());
                // A second name for a protected file is a way to write it.
                let follow = pf.contains(PathFlags::SYMLINK_FOLLOW);
                if let Some(code) = state.guard_write(&fd, &old, follow, "link")? {
                    return Ok((Err(code),));
                }
                if let Some(code) = state.guard_write(&new_fd, &new, false, "create")? {
                    return Ok((Err(code),));
                }
                answer(HostDescriptor::link_at(&mut state.fs, fd, pf, old, new_fd, new).await)
            })
        },
    )?;
    inst.func_wrap_async(
        "[method]descriptor.set-times-at",
        move |mut store: StoreContextMut<'_, T>,
              (fd, pf, path, atim, mtim): (
            Resource<Descriptor>,
            PathFlags,
            String,
            NewTimestamp,
            NewTimestamp,
        )| {
            Box::new(async move {
                let mut state = get(store.data_mut());
                let follow = pf.contains(PathFlags::SYMLINK_FOLLOW);
                if let Some(code) = state.guard_write(&fd, &path, follow, "change")? {
                    return Ok((Err(code),));
                }
                answer(HostDescriptor::set_times_at(&mut state.fs, fd, pf, path, atim, mtim).await)
            })
        },
    )?;
    Ok(())
}
