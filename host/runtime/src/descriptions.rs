//! The on-disk cache of what plugins answered to `describe`, so that a
//! command learns every plugin's tools without compiling, linking and
//! instantiating each of them: `tools list` and the tool specs of a session
//! come from here, and `tool call X` loads only the plugin serving `X`.
//!
//! An entry is keyed by the SHA-256 of the component and of everything about
//! its manifest entry that a guest can observe while it describes itself or
//! that shapes what the host keeps of the answer: the whole entry (name,
//! where it is declared, source, config, grants, limits), the workspace,
//! the values of the environment variables it is granted, and corral's
//! version and build (the executable's size and modification time). Any change there is a miss, and the plugin is described again.
//! What `describe` could also see is the content of its granted
//! directories; a plugin that asked for them while describing itself is not
//! cached at all, so its tools always follow the files (see
//! [`Plugin::describe`](super::Plugin)).
//!
//! Entries live in a `tools` directory inside the compile cache's own
//! directory (so they share its ownership and permission checks and
//! `corral plugin cache --clear` removes them). Each is written atomically
//! (a temporary file renamed over it) and holds a checksum of its body and
//! its own key: a damaged, truncated or foreign entry is ignored and the
//! plugin described again, never trusted. The directory is bounded by a
//! number of entries; the least recently written are removed first.

use crate::manifest::{Manifest, PluginDecl};
use crate::protocol::ToolSpec;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The environment variable that turns the description cache off (`off`):
/// every command then compiles and describes every plugin, as corral did
/// before it had this cache. Meant for measuring and for ruling the cache
/// out when something looks stale.
pub const TOOL_CACHE_VAR: &str = "CORRAL_TOOL_CACHE";

/// Version of the entry format; part of every key.
const FORMAT: u32 = 1;

/// Entries kept before the least recently written are removed.
const MAX_ENTRIES: usize = 1024;

/// The subdirectory of the compile cache that holds the descriptions.
const SUBDIR: &str = "tools";

/// What a plugin's entry needs from a load without running the plugin.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Described {
    /// SHA-256 of the component.
    pub(crate) sha256: String,
    /// Whether it exports `corral:plugin/provider` rather than the tool interface.
    pub(crate) provider: bool,
    /// The interfaces it imports, sorted.
    pub(crate) imports: Vec<String>,
    /// Its tools, as vetted when it was described.
    pub(crate) tools: Vec<ToolSpec>,
}

/// What an entry file holds after its checksum line.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stored {
    format: u32,
    key: String,
    described: Described,
}

/// The description cache; a `None` directory caches nothing.
pub(crate) struct Descriptions {
    dir: Option<PathBuf>,
}

impl Descriptions {
    /// The cache inside the compile cache directory `cache_dir` (already
    /// checked to belong to this user), unless [`TOOL_CACHE_VAR`] is `off`.
    pub(crate) fn new(cache_dir: Option<&Path>) -> Self {
        let off = std::env::var(TOOL_CACHE_VAR).is_ok_and(|v| v.trim() == "off");
        if off {
            tracing::debug!("tool description cache off ({TOOL_CACHE_VAR}=off)");
        }
        Self {
            dir: cache_dir.filter(|_| !off).map(|d| d.join(SUBDIR)),
        }
    }

    /// The key of `decl`'s description when its component has the SHA-256
    /// `sha256`.
    pub(crate) fn key(decl: &PluginDecl, manifest: &Manifest, sha256: &str) -> String {
        let mut h = Sha256::new();
        let mut field = |bytes: &[u8]| {
            // Length-prefixed, so that no two different inputs hash alike.
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field(format!("corral-tools/{FORMAT}").as_bytes());
        field(env!("CARGO_PKG_VERSION").as_bytes());
        // The host's build too: how answers are vetted can change between
        // builds of one version.
        field(build_id().as_bytes());
        field(sha256.as_bytes());
        field(format!("{decl:?}").as_bytes());
        field(manifest.workspace.as_os_str().as_encoded_bytes());
        field(&[u8::from(manifest.require_os_sandbox)]);
        for var in &decl.env {
            field(var.as_bytes());
            match std::env::var_os(var) {
                Some(v) => {
                    field(b"=");
                    field(v.as_encoded_bytes());
                }
                None => field(b"unset"),
            }
        }
        hex::encode(h.finalize())
    }

    /// The description stored under `key` for the component `sha256`, if
    /// there is one and it checks out.
    pub(crate) fn get(&self, key: &str, sha256: &str) -> Option<Described> {
        let path = self.dir.as_ref()?.join(format!("{key}.json"));
        // A link, a FIFO or a device in place of an entry is refused, not
        // followed or waited on.
        let text = match crate::fsread::read_state(&path, 16 << 20)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
        {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return None,
            Err(e) => {
                tracing::warn!("cannot read cached tools {}: {e}", path.display());
                return None;
            }
        };
        match parse(&text, key, sha256) {
            Ok(d) => Some(d),
            Err(why) => {
                tracing::warn!(
                    "cached tools {} ignored ({why}); describing the plugin again",
                    path.display()
                );
                None
            }
        }
    }

    /// Stores `described` under `key`; a failure only costs a describe next
    /// time.
    pub(crate) fn put(&self, key: &str, described: &Described) {
        let Some(dir) = &self.dir else { return };
        if let Err(e) = store(dir, key, described) {
            tracing::warn!("cannot cache tool descriptions in {}: {e}", dir.display());
        }
    }
}

/// The size and modification time of the running executable, or nothing
/// when they cannot be read.
fn build_id() -> String {
    std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{}:{modified}", m.len())
        })
        .unwrap_or_default()
}

fn parse(text: &str, key: &str, sha256: &str) -> Result<Described, String> {
    let (sum, body) = text.split_once('\n').ok_or("no checksum line")?;
    if hex::encode(Sha256::digest(body.as_bytes())) != sum {
        return Err("checksum mismatch".into());
    }
    let stored: Stored = serde_json::from_str(body).map_err(|e| format!("not an entry: {e}"))?;
    if stored.format != FORMAT {
        return Err(format!("format {} instead of {FORMAT}", stored.format));
    }
    if stored.key != key || stored.described.sha256 != sha256 {
        return Err("stored under another key".into());
    }
    Ok(stored.described)
}

fn store(dir: &Path, key: &str, described: &Described) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let body = serde_json::to_string(&Stored {
        format: FORMAT,
        key: key.to_owned(),
        described: described.clone(),
    })
    .map_err(std::io::Error::other)?;
    let text = format!("{}\n{body}", hex::encode(Sha256::digest(body.as_bytes())));
    super::atomic::write(&dir.join(format!("{key}.json")), text.as_bytes())?;
    bound(dir);
    Ok(())
}

/// Removes the least recently written entries beyond [`MAX_ENTRIES`].
fn bound(dir: &Path) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(SystemTime, PathBuf)> = read
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json")))
        .map(|e| {
            let when = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            (when, e.path())
        })
        .collect();
    if entries.len() <= MAX_ENTRIES {
        return;
    }
    super::atomic::remove_stale_temporaries(dir);
    entries.sort();
    let excess = entries.len() - MAX_ENTRIES;
    for (_, path) in entries.into_iter().take(excess) {
        let _ = std::fs::remove_file(path);
    }
}

/// Removes every description cached in the compile cache directory
/// `cache_dir`.
pub(crate) fn clear(cache_dir: &Path) -> std::io::Result<()> {
    let dir = cache_dir.join(SUBDIR);
    let read = match std::fs::read_dir(&dir) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for item in read {
        let item = item?;
        let name = item.file_name();
        let ours = name
            .to_str()
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(_, ext)| ext == "json" || ext.starts_with("tmp"));
        if ours {
            match std::fs::remove_file(item.path()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    match std::fs::remove_dir(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        // Something else lives there; what is ours is gone.
        Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described() -> Described {
        Described {
            sha256: "ab".repeat(32),
            provider: false,
            imports: vec!["corral:plugin/host@0.1.0".into()],
            tools: Vec::new(),
        }
    }

    #[test]
    fn an_entry_is_read_back_only_under_its_key_and_hash() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cache = Descriptions {
            dir: Some(dir.path().join(SUBDIR)),
        };
        let d = described();
        cache.put("k1", &d);
        assert_eq!(cache.get("k1", &d.sha256), Some(d.clone()));
        assert_eq!(cache.get("k1", &"cd".repeat(32)), None);
        assert_eq!(cache.get("k2", &d.sha256), None);
        // Renamed under another key: refused.
        let from = dir.path().join(SUBDIR).join("k1.json");
        std::fs::copy(&from, dir.path().join(SUBDIR).join("k2.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cache.get("k2", &d.sha256), None);
        // One changed byte in the body: refused.
        let text = std::fs::read_to_string(&from).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&from, text.replace("host@0.1.0", "host@0.1.1"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cache.get("k1", &d.sha256), None);
        clear(dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!dir.path().join(SUBDIR).exists());
    }
}
