//! The on-disk cache of compiled components.
//!
//! Entries are keyed by the SHA-256 of the component bytes and by the
//! engine's compatibility hash (wasmtime version and every setting that
//! affects code generation), so a different corral or a changed config never
//! loads a stale artifact. Only artifacts this host serialized are ever
//! deserialized: they live in a directory owned by the current user and
//! closed to others, each beside a checksum written with it; anything that
//! does not check out is recompiled and overwritten.
//!
//! The cache is bounded: compiled components are large (tens of MiB for a
//! Python or JavaScript plugin), so after a compile stores a new entry the
//! least recently used entries are removed until the total fits under
//! [`cache_max_bytes`]. A hit touches its entry's modification time, which is
//! what "recently used" means here. Entries this process loaded or stored
//! are never removed by it.
//!
//! What plugins answer to `describe` is cached in a subdirectory of the
//! same directory, with its own bound (see `descriptions`); clearing the
//! cache clears it too.

use super::hashes::Identity;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;
use wasmtime::Engine;
use wasmtime::component::Component;

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// A built-in plugin, loaded from the code the build compiled; nothing
    /// was compiled or read from the cache.
    Precompiled,
    /// Loaded from the cache; nothing was compiled.
    Hit,
    /// Compiled now (and stored when the cache is writable).
    Compiled,
}

/// The compiled-component cache.
pub(crate) struct Cache {
    dir: Option<PathBuf>,
    engine_key: String,
    max_bytes: u64,
    /// Entries (file stems) this process loaded or stored: never pruned by it.
    in_use: Mutex<HashSet<String>>,
}

/// The environment variable that sets the cache's size cap, in MiB.
pub const CACHE_MAX_MB_VAR: &str = "CORRAL_CACHE_MAX_MB";
/// The size cap when [`CACHE_MAX_MB_VAR`] is not set.
pub const CACHE_DEFAULT_MAX_MB: u64 = 512;

/// The cache's size cap in bytes, from [`CACHE_MAX_MB_VAR`] (default
/// [`CACHE_DEFAULT_MAX_MB`] MiB), or why the variable's value is not one.
pub fn cache_max_bytes() -> Result<u64, CacheSizeError> {
    match std::env::var(CACHE_MAX_MB_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(CACHE_DEFAULT_MAX_MB << 20),
        Err(std::env::VarError::NotUnicode(_)) => Err(CacheSizeError::NotText),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(|mb| mb.saturating_mul(1 << 20))
            .map_err(|_| CacheSizeError::NotANumber(v)),
    }
}

/// Why [`CACHE_MAX_MB_VAR`] does not set the cache's size cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheSizeError {
    /// The variable is not valid Unicode.
    #[error(
        "{} is not valid text; set it to a whole number of MiB such as {}",
        CACHE_MAX_MB_VAR,
        CACHE_DEFAULT_MAX_MB
    )]
    NotText,
    /// The variable's value, which is not a whole number.
    #[error(
        "{}=`{}` is not a whole number of MiB; set it to a number such as {}, or unset it for \
         the default",
        CACHE_MAX_MB_VAR,
        .0,
        CACHE_DEFAULT_MAX_MB
    )]
    NotANumber(String),
}

/// One compiled component in the cache.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheEntry {
    /// SHA-256 of the component it was compiled from.
    pub sha256: String,
    /// The engine configuration it was compiled for (entries of another
    /// corral version or configuration are never loaded, only pruned).
    pub engine: String,
    /// Bytes on disk (the artifact and its checksum).
    pub bytes: u64,
    /// When it was stored or last loaded.
    #[serde(serialize_with = "unix_seconds")]
    pub last_used: SystemTime,
}

/// What the cache directory holds, least recently used first.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CacheReport {
    /// The cache directory.
    pub dir: PathBuf,
    /// Its entries, least recently used first.
    pub entries: Vec<CacheEntry>,
    /// Bytes of all entries.
    pub total_bytes: u64,
    /// The size cap.
    pub max_bytes: u64,
}

fn unix_seconds<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// Lists the entries of the cache in `dir`; a missing directory is an empty
/// cache.
pub fn cache_report(dir: &Path, max_bytes: u64) -> std::io::Result<CacheReport> {
    let entries = list(dir)?;
    Ok(CacheReport {
        dir: dir.to_path_buf(),
        total_bytes: entries.iter().map(|e| e.bytes).sum(),
        entries,
        max_bytes,
    })
}

/// Removes the least recently used entries of the cache in `dir` until the
/// rest fit under `max_bytes`, sparing the entries named in `keep` (file
/// stems, `SHA256-ENGINE`). Returns the removed entries.
pub fn prune_cache(
    dir: &Path,
    max_bytes: u64,
    keep: &HashSet<String>,
) -> std::io::Result<Vec<CacheEntry>> {
    super::atomic::remove_stale_temporaries(dir);
    let entries = list(dir)?;
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    let mut removed = Vec::new();
    for entry in entries {
        if total <= max_bytes {
            break;
        }
        if keep.contains(&entry.stem()) {
            continue;
        }
        remove_entry(dir, &entry)?;
        total = total.saturating_sub(entry.bytes);
        removed.push(entry);
    }
    Ok(removed)
}

/// Removes every entry of the cache in `dir`, and every tool description
/// cached beside them. Returns the removed compiled entries.
pub fn clear_cache(dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    let entries = list(dir)?;
    for entry in &entries {
        remove_entry(dir, entry)?;
    }
    super::atomic::remove_stale_temporaries(dir);
    super::descriptions::clear(dir)?;
    super::hashes::clear(dir)?;
    match std::fs::remove_dir_all(dir.join(BUILT_DIR)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    Ok(entries)
}

/// The subdirectory of the compile cache that holds the built-ins' code as
/// the build compiled it (see [`Cache::load_built`]): copies of bytes
/// embedded in the executable, kept apart from what this host compiled.
const BUILT_DIR: &str = "built";

/// What is done instead of loading a compiled entry that does not check out.
const RECOMPILING: &str = "recompiling";

/// What is done instead of mapping a built-in's copy that does not check out.
const EMBEDDED: &str = "using the executable's own copy and storing it again";

impl CacheEntry {
    fn stem(&self) -> String {
        format!("{}-{}", self.sha256, self.engine)
    }
}

/// Entries of `dir`, least recently used first. A checksum without its
/// artifact counts as an entry too, so that pruning removes it.
fn list(dir: &Path) -> std::io::Result<Vec<CacheEntry>> {
    let read = match std::fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut by_stem: std::collections::BTreeMap<String, CacheEntry> = Default::default();
    for item in read {
        let item = item?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((stem, ext)) = name.rsplit_once('.') else {
            continue;
        };
        if ext != "cwasm" && ext != "sum" {
            continue;
        }
        let Some((sha256, engine)) = stem.split_once('-') else {
            continue;
        };
        let Ok(meta) = item.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let entry = by_stem
            .entry(stem.to_owned())
            .or_insert_with(|| CacheEntry {
                sha256: sha256.to_owned(),
                engine: engine.to_owned(),
                bytes: 0,
                last_used: SystemTime::UNIX_EPOCH,
            });
        entry.bytes += meta.len();
        // A hit touches the checksum (the artifact's own times are part of
        // its identity); an entry of an older corral had its artifact
        // touched. The later of the two is its last use.
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        entry.last_used = entry.last_used.max(modified);
    }
    let mut entries: Vec<CacheEntry> = by_stem.into_values().collect();
    entries.sort_by(|a, b| a.last_used.cmp(&b.last_used).then(a.sha256.cmp(&b.sha256)));
    Ok(entries)
}

fn remove_entry(dir: &Path, entry: &CacheEntry) -> std::io::Result<()> {
    let stem = entry.stem();
    // The checksum first: an artifact without one is never loaded.
    for ext in ["sum", "cwasm"] {
        match std::fs::remove_file(dir.join(format!("{stem}.{ext}"))) {
            Ok(()) => {}
            // Another corral may have pruned it first.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Cache {
    /// A cache in `dir`; `None` disables caching.
    pub(crate) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{:016x}", hasher.finish());
        let dir = dir.and_then(|d| match prepare_dir(&d) {
            Ok(()) => Some(d),
            Err(e) => {
                tracing::warn!("compile cache disabled: {}: {e}", d.display());
                None
            }
        });
        let max_bytes = cache_max_bytes().unwrap_or_else(|e| {
            tracing::warn!("{e}; using the default of {CACHE_DEFAULT_MAX_MB} MiB");
            CACHE_DEFAULT_MAX_MB << 20
        });
        Self {
            dir,
            engine_key,
            max_bytes,
            in_use: Mutex::default(),
        }
    }

    /// The cache directory, when caching is on.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The component for `bytes` (whose SHA-256 is `sha256`), from the cache or
    /// freshly compiled.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        sha256: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        self.load_with(engine, sha256, || Ok(std::borrow::Cow::Borrowed(bytes)))
    }

    /// The component whose bytes have the SHA-256 `sha256`, from the cache,
    /// or compiled from what `bytes` returns: it is called only on a miss,
    /// and must return bytes with that hash (the caller checks them).
    pub(crate) fn load_with<'b>(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: impl FnOnce() -> wasmtime::Result<std::borrow::Cow<'b, [u8]>>,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, &*bytes()?)?, CacheOutcome::Compiled));
        };
        let stem = format!("{sha256}-{}", self.engine_key);
        let artifact = dir.join(format!("{stem}.cwasm"));
        let check = artifact.with_extension("sum");
        self.mark_in_use(&stem);
        if let Some(component) = self.try_read(engine, &artifact, &check, RECOMPILING) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = Component::new(engine, &*bytes()?)?;
        match write(&component, &artifact, &check) {
            Ok(()) => self.prune(dir),
            Err(e) => {
                tracing::warn!("cannot store compiled component in {}: {e}", dir.display());
            }
        }
        Ok((component, CacheOutcome::Compiled))
    }

    /// A built-in's code as the build compiled it (`code`, embedded in the
    /// executable, for the component with the SHA-256 `sha256`), mapped from
    /// its copy in the cache instead of copied into fresh memory: the copy
    /// of a 6 MiB component was a quarter of a whole `corral tool call`.
    ///
    /// When there is no copy yet, one is stored and mapped: a first run
    /// holds no more of the code in memory than a later one. `None` when
    /// it cannot be stored or caching is off: the caller deserializes
    /// `code` itself. The copy is checked like a compiled entry (its
    /// checksum once per file identity; a copy stored now is recorded as
    /// checked, its sum taken from the embedded bytes); only the current
    /// build's copies are kept.
    ///
    /// # Safety
    ///
    /// `code` must lie in a read-only private mapping of a file that does
    /// not change while the process runs (the executable's static data, as
    /// `corral_builtin` embeds it): its pages are handed back to the kernel
    /// after the copy is stored ([`release_pages`]), which on any other
    /// memory would lose its contents.
    pub(crate) unsafe fn load_built(
        &self,
        engine: &Engine,
        sha256: &str,
        code: &'static [u8],
        current: &[&str],
    ) -> Option<Component> {
        let dir = self.dir.as_ref()?.join(BUILT_DIR);
        let stem = format!("{sha256}-{}", self.engine_key);
        let artifact = dir.join(format!("{stem}.cwasm"));
        let check = artifact.with_extension("sum");
        if let Some(component) = self.try_read(engine, &artifact, &check, EMBEDDED) {
            return Some(component);
        }
        let stored = prepare_dir(&dir).and_then(|()| {
            // One pass: each piece is summed, written and handed back, so
            // the copy never holds more than a piece of the code in memory.
            let sum = super::atomic::write_with(&artifact, |file| {
                super::checksum::xxh64(Releasing {
                    code,
                    at: 0,
                    to: file,
                })
            })?;
            // The file just written holds `code`, whose sum was taken from
            // the bytes themselves: it is recorded as checked for the
            // file's identity (a later write or replacement changes it).
            // Whoever could swap the file between the rename and this look
            // could as well write its sum file: the sum guards against
            // damage, and the directory against writers (the current
            // user's alone, and out of reach of every plugin and program
            // corral runs).
            let identity = Identity::of(&std::fs::symlink_metadata(&artifact)?);
            let record = format!(
                "{SUM_PREFIX}{sum:016x}\n{VERIFIED_PREFIX}{}\n",
                identity.stamp()
            );
            super::atomic::write(&check, record.as_bytes())
        });
        // Reading the embedded code made its pages part of this process's
        // memory; handed back, they cost nothing more (the copy on disk is
        // what is mapped). The pieces gave back their whole pages; this
        // gives back the pages across their edges, and all of them when
        // the copy stopped midway.
        // SAFETY: `code` is in the executable's static data (this
        // function's contract).
        unsafe { release_pages(code) };
        match stored {
            Ok(()) => remove_other_builds(&dir, &self.engine_key, current),
            Err(e) => {
                tracing::debug!(
                    "cannot keep a copy of the built-in code in {}: {e}",
                    dir.display()
                );
                return None;
            }
        }
        // Mapped from the copy, as later processes map it: a first run
        // holds in memory only the pages of it that run, as they do.
        self.try_read(engine, &artifact, &check, EMBEDDED)
    }

    fn mark_in_use(&self, stem: &str) {
        if let Ok(mut in_use) = self.in_use.lock() {
            in_use.insert(stem.to_owned());
        }
    }

    /// Brings the cache back under its cap after a new entry was stored.
    fn prune(&self, dir: &Path) {
        let keep = self.in_use.lock().map(|k| k.clone()).unwrap_or_default();
        match prune_cache(dir, self.max_bytes, &keep) {
            Ok(removed) if removed.is_empty() => {}
            Ok(removed) => tracing::info!(
                "compile cache: removed {} least recently used entries ({} bytes) to stay under {} MiB ({CACHE_MAX_MB_VAR})",
                removed.len(),
                removed.iter().map(|e| e.bytes).sum::<u64>(),
                self.max_bytes >> 20
            ),
            Err(e) => tracing::warn!("cannot prune the compile cache {}: {e}", dir.display()),
        }
    }

    /// The component stored at `artifact`, if it checks out; `instead` says
    /// in the log what is done when it does not.
    fn try_read(
        &self,
        engine: &Engine,
        artifact: &Path,
        check: &Path,
        instead: &str,
    ) -> Option<Component> {
        let started = std::time::Instant::now();
        // Never through a link, never blocking, regular files only: a FIFO
        // or a link to a device in place of an entry is a miss, not a hang.
        let stored = match crate::fsread::read_state(check, 64 * 1024) {
            Ok(bytes) => String::from_utf8(bytes).ok()?,
            Err(e) if e.is_not_found() => return None,
            Err(e) => {
                tracing::warn!("cache entry {} refused: {e}; {instead}", check.display());
                return None;
            }
        };
        let mut lines = stored.lines();
        let Some(expected) = lines.next().and_then(|l| l.trim().strip_prefix(SUM_PREFIX)) else {
            tracing::debug!(
                "{} has a checksum of an older corral; {instead}",
                artifact.display()
            );
            return None;
        };
        let verified = lines.next().and_then(|l| l.strip_prefix(VERIFIED_PREFIX));
        let file = match crate::fsread::open_state(artifact) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => return None,
            Err(e) => {
                tracing::warn!("cache entry {} refused: {e}; {instead}", artifact.display());
                return None;
            }
        };
        let identity = Identity::of(&file.metadata().ok()?);
        // Pruning removes the entries used longest ago; this use counts. It
        // is recorded on the checksum file: touching the artifact would
        // change its identity and cost the next load a full check.
        touch(check);
        let stamp = identity.stamp();
        let checked = if verified == Some(stamp.as_str()) {
            None
        } else {
            let sum = match super::checksum::xxh64(&file) {
                Ok(sum) => sum,
                Err(e) => {
                    tracing::warn!("cannot read {}: {e}; {instead}", artifact.display());
                    return None;
                }
            };
            if format!("{sum:016x}") != expected {
                tracing::warn!(
                    "cached artifact {} is damaged; {instead}",
                    artifact.display()
                );
                return None;
            }
            // Checked once for this identity: later loads map it unread.
            let record = format!("{SUM_PREFIX}{expected}\n{VERIFIED_PREFIX}{stamp}\n");
            if let Err(e) = super::atomic::write(check, record.as_bytes()) {
                tracing::debug!("cannot record the check of {}: {e}", artifact.display());
            }
            Some(started.elapsed())
        };
        // SAFETY: the file was produced by `Component::serialize` of an
        // engine with the same compatibility hash (it is in the file name),
        // or, in `built/`, is the build's `Engine::precompile_component`
        // output embedded in this executable, checked against that hash
        // before it was written (`precompiled::load`); either way it was
        // written by this host into a directory only the current user can
        // write, and checked against the checksum stored with it, now or
        // by an earlier load of the file with this very identity (device,
        // inode, size, modification and change times: any write since
        // changes the change time). Files there are only ever replaced by a
        // rename or removed, never written in place, so what is mapped does
        // not change under the component. Deserialization re-checks the
        // engine configuration and version.
        let component = match unsafe { Component::deserialize_file(engine, artifact) } {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(
                    "cached artifact {} unusable ({e}); {instead}",
                    artifact.display()
                );
                return None;
            }
        };
        // It was opened again by path: if another corral replaced the file
        // in between, what was mapped is not what was checked.
        let now = std::fs::symlink_metadata(artifact)
            .ok()
            .map(|m| Identity::of(&m));
        if now != Some(identity) {
            tracing::debug!(
                "{} was replaced while it was loaded; {instead}",
                artifact.display()
            );
            return None;
        }
        match checked {
            Some(checked) => tracing::debug!(
                "{}: checked {checked:.1?}, mapped {:.1?}",
                artifact.display(),
                started.elapsed() - checked
            ),
            None => tracing::debug!(
                "{}: checked before with this identity, mapped {:.1?}",
                artifact.display(),
                started.elapsed()
            ),
        }
        Some(component)
    }
}

/// A reader of embedded code (`code`, as [`release_pages`] requires it)
/// that writes what it reads to `to` and hands each piece back to the
/// kernel once read.
struct Releasing<'f> {
    code: &'static [u8],
    at: usize,
    to: &'f mut std::fs::File,
}

impl std::io::Read for Releasing<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let piece = &self.code[self.at..];
        let piece = &piece[..piece.len().min(buf.len())];
        buf[..piece.len()].copy_from_slice(piece);
        std::io::Write::write_all(self.to, piece)?;
        // SAFETY: `piece` is part of `code`, which lies where
        // `release_pages` requires (the contract of `load_built`).
        unsafe { release_pages(piece) };
        self.at += piece.len();
        Ok(piece.len())
    }
}

/// Hands the whole pages of `bytes` back to the kernel: they leave the
/// process's resident memory, and a later read maps them again from the
/// file, unchanged.
///
/// # Safety
///
/// `bytes` must lie in a read-only private mapping of a file that does not
/// change while the process runs (the executable's static data). On
/// anonymous or written memory, `MADV_DONTNEED` would replace the contents
/// with zeros or the file's.
unsafe fn release_pages(bytes: &'static [u8]) {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = bytes.as_ptr() as usize;
    let first = start.next_multiple_of(page);
    let end = (start + bytes.len()) / page * page;
    if end <= first {
        return;
    }
    // SAFETY: the range is whole pages inside `bytes`, which by this
    // function's contract lives in a private read-only mapping of an
    // unchanging file (for the executable, the kernel refuses writes to
    // it while it runs): MADV_DONTNEED drops the pages from this process
    // and the next access faults them in again from the file. No Rust
    // reference sees different bytes before and after.
    unsafe {
        libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_DONTNEED);
    }
}

/// Removes from `dir` (the built-ins' copies) every file that is not a
/// copy of this build's code: one for each SHA-256 of `current` with this
/// engine's key. Another corral's copies are stored again when it runs.
fn remove_other_builds(dir: &Path, engine_key: &str, current: &[&str]) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for item in read.flatten() {
        let name = item.file_name();
        let keep = name
            .to_str()
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(stem, ext)| {
                (ext == "cwasm" || ext == "sum")
                    && stem
                        .split_once('-')
                        .is_some_and(|(sha, key)| key == engine_key && current.contains(&sha))
            });
        if !keep {
            let _ = std::fs::remove_file(item.path());
        }
    }
}

/// Sets the modification time of `path` to now.
fn touch(path: &Path) {
    let set = std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = set {
        tracing::debug!("cannot record the use of {}: {e}", path.display());
    }
}

/// How a checksum file starts: the algorithm. Those of older corrals
/// (SHA-256 in hex) do not, and their entries are compiled again.
const SUM_PREFIX: &str = "xxh64 ";

/// How the checksum file's second line starts, when there is one: the
/// identity of the artifact as it was when it matched the checksum.
const VERIFIED_PREFIX: &str = "verified ";

fn write(component: &Component, artifact: &Path, check: &Path) -> wasmtime::Result<()> {
    let data = component.serialize()?;
    let sum = format!("{SUM_PREFIX}{:016x}", super::checksum::xxh64(&data[..])?);
    super::atomic::write(artifact, &data)?;
    // Not marked verified: the next load reads what the disk holds and
    // checks it once.
    super::atomic::write(check, sum.as_bytes())?;
    Ok(())
}

/// Creates the cache directory closed to other users, and refuses one that
/// someone else could have written into.
fn prepare_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::metadata(dir)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(std::io::Error::other("owned by another user"));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(std::io::Error::other(
            "writable by group or others; run `chmod go-w` on it",
        ));
    }
    Ok(())
}
