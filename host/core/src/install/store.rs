//! Installed components, by content: `$XDG_DATA_HOME/corral/plugins/SHA256.wasm`.
//! A file's name is its hash, so two installs of the same bytes share it and
//! `corral plugin verify` can tell a changed file from its name alone.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The directory installed components live in.
pub fn dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("corral").join("plugins"))
}

/// Where the component with this hash is kept.
pub fn path_of(dir: &Path, sha256: &str) -> PathBuf {
    dir.join(format!("{sha256}.wasm"))
}

/// Whether `path` is a file of the store, and the hash its name claims.
pub fn claimed_hash(dir: &Path, path: &Path) -> Option<String> {
    if path.parent()? != dir {
        return None;
    }
    let stem = path.file_name()?.to_str()?.strip_suffix(".wasm")?;
    (stem.len() == 64 && stem.bytes().all(|b| b.is_ascii_hexdigit())).then(|| stem.to_owned())
}

/// What the name of every temporary file of an install starts with,
/// followed by the id of the process writing it.
const PARTIAL: &str = ".corral-partial-";

/// A temporary file in `dir`, to be persisted over its target: named after
/// this process, so that the next install in `dir` can tell a temporary
/// file whose writer was killed (and remove it) from one still being
/// written by another corral.
pub fn temp_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    sweep(dir);
    tempfile::Builder::new()
        .prefix(&format!("{PARTIAL}{}-", std::process::id()))
        .tempfile_in(dir)
}

/// Removes the temporary files of installs whose process is gone.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PARTIAL))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Keeps `bytes` (whose hash is `sha256`) in the store, atomically, and
/// returns its path. An existing file is kept when it already holds them.
pub fn keep(dir: &Path, bytes: &[u8], sha256: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = path_of(dir, sha256);
    if let Ok(existing) = crate::trust::read_plugin_file(&path)
        && crate::trust::sha256_hex(&existing) == sha256
    {
        return Ok(path);
    }
    let mut tmp = temp_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(path)
}
