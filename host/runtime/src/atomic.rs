//! Files of the caches (compiled code, tool descriptions, verified hashes)
//! replaced whole or not at all, and the half-written ones a corral that
//! died left behind.

use std::path::Path;
use std::time::{Duration, SystemTime};

/// Writes `data` to `path` through a temporary file renamed over it, so a
/// reader sees the old file or the new one, never part of one.
pub(crate) fn write(path: &Path, data: &[u8]) -> std::io::Result<()> {
    write_with(path, |file| std::io::Write::write_all(file, data))
}

/// Writes `path` through a temporary file renamed over it, with what
/// `fill` writes into the temporary file (removed again when that fails);
/// returns what `fill` returns.
pub(crate) fn write_with<T>(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<T>,
) -> std::io::Result<T> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let made = std::fs::File::create(&tmp).and_then(|mut file| fill(&mut file));
    match made {
        Ok(value) => std::fs::rename(&tmp, path).map(|()| value),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Removes half-written files left by a corral that died while storing an
/// entry; a write in progress is far younger than an hour.
pub(crate) fn remove_stale_temporaries(dir: &Path) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let Some(stale) = SystemTime::now().checked_sub(Duration::from_secs(3600)) else {
        return;
    };
    for item in read.flatten() {
        let name = item.file_name();
        let is_temp = name
            .to_str()
            .and_then(|n| n.rsplit_once('.'))
            .is_some_and(|(_, ext)| ext.starts_with("tmp"));
        let old = item
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < stale);
        if is_temp && old {
            let _ = std::fs::remove_file(item.path());
        }
    }
}
