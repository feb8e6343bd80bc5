//! `corral:plugin/files`: bulk reads inside a plugin's granted directories.
//!
//! Every path is resolved beneath the granted directory that holds it by
//! `cap-primitives`, the same resolution `wasi:filesystem` gets (the
//! kernel's `openat2(RESOLVE_BENEATH)` where there is one, a checked walk
//! otherwise): absolute paths, `..` above the grant and symlinks leading out
//! of it fail to open. Files are opened non-blocking and read only when they
//! are regular files, so a FIFO cannot stall the host.

use super::bindings::files::{self, DirEntry, EntryKind, FileChange, FileError, Host};
use super::effects::CallCaps;
use super::fsguard::{self, Guard};
use super::limits::HostCalls;
use super::touched::Recording;
use crate::manifest::{Access, FsGrant};
use cap_primitives::fs::OpenOptionsExt as _;
use rustix::fs::FileType;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use wasmtime::component::{HasData, Linker};

/// What `corral:plugin/files` sees of a call: its granted directories
/// ([`Dirs`], its own state), what guards them, and the parts of the call
/// it shares with the other interfaces.
pub(crate) struct FilesView<'a> {
    /// The call's granted directories.
    pub(crate) dirs: &'a mut Dirs,
    /// What the plugin may not touch.
    pub(crate) guard: &'a Guard,
    /// The plugin's name, for the log.
    pub(crate) plugin: &'a str,
    /// Where `write-files` keeps its journal; `None` without a workspace.
    pub(crate) journal: Option<&'a Path>,
    /// What this call may use of the grants.
    pub(crate) caps: &'a CallCaps,
    /// What the call touched.
    pub(crate) touched: &'a mut Recording,
    /// The call's host-call budget, which a batch draws on per item.
    pub(crate) calls: &'a mut HostCalls,
}

/// The data `corral:plugin/files` is served from: a [`FilesView`].
struct FilesData;

impl HasData for FilesData {
    type Data<'a> = FilesView<'a>;
}

/// Adds `corral:plugin/files`, served from the view `get` projects from a
/// store's data.
pub(super) fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> FilesView<'_>,
) -> wasmtime::Result<()> {
    files::add_to_linker::<T, FilesData>(linker, get)
}

/// Bytes one `read-files` call may return, whatever the plugin asks.
const MAX_BATCH_BYTES: u64 = 32 << 20;

/// A granted directory, opened on first use of this interface in a call.
pub(crate) struct GrantDir {
    /// The path the plugin names it by (`.`, `docs`, or an absolute path).
    guest: String,
    dir: Arc<std::fs::File>,
    /// Its canonical host path, for the journal of `write-files`.
    host_path: std::path::PathBuf,
    /// Granted `rw`.
    writable: bool,
    /// Whether corral's own state may lie beneath it, asked once a call
    /// ([`Guard::may_hold_kept`]).
    may_hold_kept: std::cell::OnceCell<bool>,
}

/// The granted directories of one call, opened lazily.
pub(crate) struct Dirs {
    grants: Arc<[FsGrant]>,
    opened: Option<Result<Vec<GrantDir>, String>>,
    /// Why a granted directory could not be opened: the call ends with
    /// this as its error, whatever the plugin made of the refusal.
    pub(crate) refused: Option<String>,
}

impl Dirs {
    /// The directories of `grants`, not opened yet.
    pub(crate) fn new(grants: Arc<[FsGrant]>) -> Self {
        Self {
            grants,
            opened: None,
            refused: None,
        }
    }

    /// Whether the plugin opened any granted directory through this
    /// interface in this call.
    pub(crate) fn used(&self) -> bool {
        self.opened.is_some() && !self.grants.is_empty()
    }

    fn opened(&mut self) -> Result<&[GrantDir], FileError> {
        let grants = &self.grants;
        let refused = &mut self.refused;
        let opened = self.opened.get_or_insert_with(|| {
            let opened: Result<Vec<GrantDir>, String> = grants
                .iter()
                .map(|g| {
                    fsguard::open_unmoved(&g.host_path)
                        .map(|fd| GrantDir {
                            guest: normalise(&g.guest_path).to_owned(),
                            dir: Arc::new(std::fs::File::from(fd)),
                            host_path: g.host_path.clone(),
                            writable: g.access == Access::Rw,
                            may_hold_kept: std::cell::OnceCell::new(),
                        })
                        .map_err(|e| {
                            if g.path == "." {
                                format!("cannot open granted directory {}: {e}", g.path)
                            } else {
                                fsguard::moved(g, &std::io::Error::from(e))
                            }
                        })
                })
                .collect();
            if let Err(why) = &opened {
                *refused = Some(why.clone());
            }
            opened
        });
        opened.as_deref().map_err(|e| FileError::Other(e.clone()))
    }

    /// The granted directory that holds `path` (the longest grant that is a
    /// prefix of it, as wasi-libc picks a preopen) and the rest of the path.
    fn holder<'a>(&mut self, path: &'a str) -> Result<(&GrantDir, &'a str), FileError> {
        let path = normalise(path);
        let dirs = self.opened()?;
        let (dir, rel) = dirs
            .iter()
            .filter_map(|d| beneath(&d.guest, path).map(|rel| (d, rel)))
            .max_by_key(|(d, _)| if d.guest == "." { 0 } else { d.guest.len() })
            .ok_or(FileError::Denied)?;
        Ok((dir, if rel.is_empty() { "." } else { rel }))
    }

    /// The read-write granted directory that holds `path`, its host path,
    /// and the path beneath it; `Err` says why there is none.
    pub(crate) fn writable(
        &mut self,
        path: &str,
    ) -> Result<(Arc<std::fs::File>, std::path::PathBuf, String), String> {
        match self.holder(path) {
            Ok((dir, _)) if !dir.writable => {
                Err("its granted directory is read-only (`access = \"ro\"`)".into())
            }
            Ok((dir, rel)) => Ok((dir.dir.clone(), dir.host_path.clone(), rel.to_owned())),
            Err(FileError::Denied) => Err("it is outside every granted directory".into()),
            Err(FileError::Other(e)) => Err(e),
            Err(_) => Err("it cannot be opened".into()),
        }
    }

    /// Opens `path` for reading beneath the granted directory that holds
    /// it when it is a regular file reached without a symlink, with its
    /// exact host path and its size; `None` for the rest, which
    /// [`Dirs::open`] handles.
    fn open_plain(&mut self, path: &str) -> Option<(OwnedFd, std::path::PathBuf, u64)> {
        let (dir, rel) = self.holder(path).ok()?;
        let (file, rel, size) = fsguard::open_plain_file(&dir.dir, rel)?;
        Some((OwnedFd::from(file), dir.host_path.join(rel), size))
    }

    /// Opens `path` beneath the granted directory that holds it.
    fn open(&mut self, path: &str, directory: bool) -> Result<OwnedFd, FileError> {
        let (dir, rel) = self.holder(path)?;
        let mut flags = crate::fsread::OPEN_FLAGS;
        if directory {
            flags |= libc::O_DIRECTORY;
        }
        let mut options = cap_primitives::fs::OpenOptions::new();
        options.read(true).custom_flags(flags);
        cap_primitives::fs::open(&dir.dir, std::path::Path::new(rel), &options)
            .map(OwnedFd::from)
            .map_err(|e| io_error(&e))
    }
}

/// `path` without a leading `./` or a trailing `/`; `.` for the root.
///
/// Deliberately not [`corral_syntax::path::normalize`]: this only picks the
/// granted directory by the path's text, as wasi-libc picks a preopen, and
/// the kernel then resolves the rest beneath it. Resolving `..` here by
/// text would name another file than the kernel does when a symlink
/// stands before it (`link/..` is the parent of the link's target).
fn normalise(path: &str) -> &str {
    let mut p = path;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    let p = p.trim_end_matches('/');
    if p.is_empty() { "." } else { p }
}

/// The part of `path` below the grant `guest`, if the grant holds it.
fn beneath<'a>(guest: &str, path: &'a str) -> Option<&'a str> {
    if guest == "." {
        // The workspace root holds every relative path; the kernel refuses
        // the absolute ones and any `..` above it.
        return Some(if path == "." { "" } else { path });
    }
    match path.strip_prefix(guest)? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

fn error(e: rustix::io::Errno) -> FileError {
    use rustix::io::Errno;
    match e {
        Errno::NOENT => FileError::NotFound,
        // EXDEV: the path left the directory while resolving; ELOOP: a
        // magic link or too many symlinks; EACCES/EPERM: the system said no.
        Errno::XDEV | Errno::LOOP | Errno::ACCESS | Errno::PERM => FileError::Denied,
        Errno::NOTDIR | Errno::ISDIR => FileError::WrongKind,
        other => FileError::Other(std::io::Error::from(other).to_string()),
    }
}

/// An error of `cap-primitives`: an OS error, or one of its own (a path
/// that escapes the directory is `PermissionDenied` without an errno).
fn io_error(e: &std::io::Error) -> FileError {
    match rustix::io::Errno::from_io_error(e) {
        Some(errno) => error(errno),
        None => match e.kind() {
            std::io::ErrorKind::NotFound => FileError::NotFound,
            std::io::ErrorKind::PermissionDenied => FileError::Denied,
            _ => FileError::Other(e.to_string()),
        },
    }
}

fn kind(t: FileType) -> EntryKind {
    match t {
        FileType::Directory => EntryKind::Directory,
        FileType::RegularFile => EntryKind::File,
        FileType::Symlink => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

impl Host for FilesView<'_> {
    fn list_directory(&mut self, path: String) -> Result<Vec<DirEntry>, FileError> {
        let fd = self.dirs.open(&path, true)?;
        self.refuse_kept(&fd, &path)?;
        let mut dir = rustix::fs::Dir::new(fd).map_err(error)?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(error)?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let Ok(name) = std::str::from_utf8(name) else {
                continue;
            };
            let t = match entry.file_type() {
                FileType::Unknown => dir
                    .fd()
                    .and_then(|fd| {
                        rustix::fs::statat(fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                    })
                    .map(|st| FileType::from_raw_mode(st.st_mode))
                    .unwrap_or(FileType::Unknown),
                t => t,
            };
            out.push(DirEntry {
                name: name.to_owned(),
                kind: kind(t),
            });
        }
        Ok(out)
    }

    fn read_files(
        &mut self,
        paths: Vec<String>,
        max_bytes: u64,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, FileError>>> {
        // The call hook counted the call itself.
        self.calls.charge((paths.len() as u64).saturating_sub(1))?;
        let mut left = max_bytes.min(MAX_BATCH_BYTES);
        let mut out = Vec::with_capacity(paths.len());
        for path in &paths {
            out.push(self.read_one(path, &mut left));
        }
        Ok(out)
    }

    /// Every change or none, whole across a crash (see `writes`).
    fn write_files(&mut self, changes: Vec<FileChange>) -> wasmtime::Result<Result<(), String>> {
        // The call hook counted the call itself.
        self.calls
            .charge((changes.len() as u64).saturating_sub(1))?;
        if !self.caps.writes() {
            return Ok(Err(
                "this call may not change files: only a tool that declares the `write` effect \
                 may, and not in a preview"
                    .into(),
            ));
        }
        let dirs = &mut *self.dirs;
        let written = super::writes::write_files(
            changes,
            |path| dirs.writable(path),
            self.journal,
            self.guard,
            self.plugin,
        );
        Ok(written)
    }
}

impl FilesView<'_> {
    /// Refuses a descriptor opened for the plugin that lies in corral's own
    /// state, wherever the path and its links led.
    ///
    /// What was opened lies beneath the granted directory that holds
    /// `path`; when none of corral's state lies beneath that directory
    /// (the usual workspace), nothing opened there can be in it and the
    /// kernel is not asked where each descriptor is.
    fn refuse_kept(&mut self, fd: &OwnedFd, path: &str) -> Result<(), FileError> {
        use std::os::fd::AsFd as _;
        if !self.may_hold_kept(path) {
            return Ok(());
        }
        match self.guard.refuse_kept_fd(fd.as_fd()) {
            Ok(()) => Ok(()),
            Err(why) => {
                tracing::warn!(
                    plugin = %self.plugin,
                    "refused to read `{}`: {why}",
                    crate::terminal::inert(path)
                );
                Err(FileError::Denied)
            }
        }
    }

    /// Whether corral's state may lie beneath the granted directory that
    /// holds `path` (known once a call for each): when not, nothing opened
    /// for `path` can be in it, links or not.
    fn may_hold_kept(&mut self, path: &str) -> bool {
        let guard = self.guard;
        match self.dirs.holder(path) {
            Ok((grant, _)) => *grant
                .may_hold_kept
                .get_or_init(|| guard.may_hold_kept(&grant.host_path)),
            Err(_) => true,
        }
    }

    fn read_one(&mut self, path: &str, left: &mut u64) -> Result<Vec<u8>, FileError> {
        if *left == 0 {
            return Err(FileError::OverBudget);
        }
        // A plain file was checked to be regular by the `fstat` of its
        // open; only the rest needs another one.
        let (fd, size) = match self.dirs.open_plain(path) {
            Some((fd, read, size)) => {
                if self.may_hold_kept(path) && self.guard.is_kept(&read) {
                    tracing::warn!(
                        plugin = %self.plugin,
                        "refused to read `{}`: it is in corral's own state",
                        crate::terminal::inert(path)
                    );
                    return Err(FileError::Denied);
                }
                self.touched.read_path(read);
                (fd, size)
            }
            None => {
                let fd = self.dirs.open(path, false)?;
                self.refuse_kept(&fd, path)?;
                self.touched.read_fd(&fd);
                let stat = rustix::fs::fstat(&fd).map_err(error)?;
                if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                    return Err(FileError::WrongKind);
                }
                (fd, u64::try_from(stat.st_size).unwrap_or(0))
            }
        };
        if size > *left {
            return Err(FileError::OverBudget);
        }
        let file = std::fs::File::from(fd);
        // The file as large as it was when opened, into spare capacity (no
        // zeroing first) and with no read past it to find the end; size 0
        // (unknown, as for some special files) reads to the end, one byte
        // past the budget telling a file too large.
        let limit = if size > 0 { size } else { *left + 1 };
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| FileError::Other(e.to_string()))?;
        let n = bytes.len() as u64;
        if n > *left {
            return Err(FileError::OverBudget);
        }
        *left -= n;
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_the_grant_that_holds_them() {
        assert_eq!(normalise("./src/"), "src");
        assert_eq!(normalise("././"), ".");
        assert_eq!(normalise(""), ".");
        assert_eq!(beneath(".", "."), Some(""));
        assert_eq!(beneath(".", "src/a.rs"), Some("src/a.rs"));
        assert_eq!(beneath("docs", "docs"), Some(""));
        assert_eq!(beneath("docs", "docs/a.md"), Some("a.md"));
        // A longer name that starts with the grant's is not inside it.
        assert_eq!(beneath("docs", "docs2/a.md"), None);
        assert_eq!(beneath("docs", "src/a.rs"), None);
    }
}
