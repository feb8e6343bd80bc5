//! The on-disk cache of compiled components.
//!
//! Entries are keyed by the SHA-256 of the component bytes and by the
//! engine's compatibility hash (wasmtime version and every setting that
//! affects code generation), so a different corral or a changed config never
//! loads a stale artifact. Only artifacts this host serialized are ever
//! deserialized: they live in a directory owned by the current user and
//! closed to others, each beside a checksum written with it; anything that
//! does not check out is recompiled and overwritten.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the cache; nothing was compiled.
    Hit,
    /// Compiled now (and stored when the cache is writable).
    Compiled,
}

/// The compiled-component cache.
pub(crate) struct Cache {
    dir: Option<PathBuf>,
    engine_key: String,
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
        Self { dir, engine_key }
    }

    /// The component for `bytes` (whose SHA-256 is `sha256`), from the cache or
    /// freshly compiled.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        sha256: &str,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, bytes)?, CacheOutcome::Compiled));
        };
        let artifact = dir.join(format!("{sha256}-{}.cwasm", self.engine_key));
        let check = artifact.with_extension("sum");
        if let Some(component) = self.try_read(engine, &artifact, &check) {
            return Ok((component, CacheOutcome::Hit));
        }
        let component = Component::new(engine, bytes)?;
        if let Err(e) = write(&component, &artifact, &check) {
            tracing::warn!("cannot store compiled component in {}: {e}", dir.display());
        }
        Ok((component, CacheOutcome::Compiled))
    }

    fn try_read(&self, engine: &Engine, artifact: &Path, check: &Path) -> Option<Component> {
        let expected = std::fs::read_to_string(check).ok()?;
        let data = std::fs::read(artifact).ok()?;
        if hex::encode(Sha256::digest(&data)) != expected.trim() {
            tracing::warn!(
                "cached artifact {} is damaged; recompiling",
                artifact.display()
            );
            return None;
        }
        // SAFETY: the bytes were produced by `Component::serialize` of an
        // engine with the same compatibility hash (it is in the file name),
        // written by this host into a directory only the current user can
        // write, and checked against the checksum stored with them.
        // Deserialization re-checks the engine configuration and version.
        match unsafe { Component::deserialize(engine, &data) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    "cached artifact {} unusable ({e}); recompiling",
                    artifact.display()
                );
                None
            }
        }
    }
}

fn write(component: &Component, artifact: &Path, check: &Path) -> wasmtime::Result<()> {
    let data = component.serialize()?;
    let sum = hex::encode(Sha256::digest(&data));
    atomic_write(artifact, &data)?;
    atomic_write(check, sum.as_bytes())?;
    Ok(())
}

fn atomic_write(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, data)?;
    std::fs::rename(&tmp, path)
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
