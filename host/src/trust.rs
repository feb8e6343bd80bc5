//! Project trust. A project's `corral.toml` comes with the code, so a
//! cloned repository could add plugins, grants or allow rules. It takes
//! effect only after the user runs `corral trust`, which records the file's
//! SHA-256 (and a copy, to show what changed next time); a changed file is
//! untrusted again until reviewed.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where trust decisions live: `$XDG_DATA_HOME/corral/trust`.
pub fn store_dir() -> Option<PathBuf> {
    dirs::data_dir().map(|d| d.join("corral").join("trust"))
}

#[derive(Default, Serialize, Deserialize)]
struct Index {
    /// Canonical manifest path → SHA-256 of the trusted content.
    trusted: BTreeMap<String, String>,
}

/// The trust state of one project manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Trusted as it is.
    Trusted,
    /// Never trusted.
    New,
    /// Trusted once, changed since; the trusted text is given when kept.
    Changed {
        /// The text that was trusted.
        previous: Option<String>,
    },
}

/// Hex SHA-256 of a manifest's text.
pub fn hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn index_path(dir: &Path) -> PathBuf {
    dir.join("index.json")
}

fn read_index(dir: &Path) -> Index {
    std::fs::read(index_path(dir))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Whether `text`, read from `manifest`, is trusted.
pub fn status(dir: &Path, manifest: &Path, text: &str) -> Status {
    let key = manifest.display().to_string();
    match read_index(dir).trusted.get(&key) {
        Some(h) if *h == hash(text) => Status::Trusted,
        Some(h) => Status::Changed {
            previous: std::fs::read_to_string(dir.join(format!("{h}.toml"))).ok(),
        },
        None => Status::New,
    }
}

/// Records `text` of `manifest` as trusted.
pub fn trust(dir: &Path, manifest: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let h = hash(text);
    std::fs::write(dir.join(format!("{h}.toml")), text)?;
    let mut index = read_index(dir);
    index.trusted.insert(manifest.display().to_string(), h);
    let tmp = index_path(dir).with_extension("tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&index).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, index_path(dir))
}

/// A line diff of two manifests, for review (`-` removed, `+` added).
pub fn diff(old: &str, new: &str) -> String {
    let mut out = String::new();
    for change in similar::TextDiff::from_lines(old, new).iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Equal => ' ',
            similar::ChangeTag::Delete => '-',
            similar::ChangeTag::Insert => '+',
        };
        out.push(sign);
        out.push(' ');
        out.push_str(change.value().trim_end_matches('\n'));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_is_by_content() {
        let dir = tempfile::tempdir().unwrap();
        let m = Path::new("/p/corral.toml");
        assert_eq!(status(dir.path(), m, "a = 1\n"), Status::New);
        trust(dir.path(), m, "a = 1\n").unwrap();
        assert_eq!(status(dir.path(), m, "a = 1\n"), Status::Trusted);
        assert_eq!(
            status(dir.path(), m, "a = 2\n"),
            Status::Changed {
                previous: Some("a = 1\n".into())
            }
        );
        assert_eq!(
            diff("a = 1\nb = 2\n", "a = 1\nb = 3\nc = 4\n"),
            "  a = 1\n- b = 2\n+ b = 3\n+ c = 4\n"
        );
    }
}
