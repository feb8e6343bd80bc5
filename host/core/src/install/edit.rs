//! Writing plugin entries into a manifest file, keeping everything else in
//! it (comments, order, other entries) as the user wrote it.

use super::requests::Requested;
use crate::manifest::Access;
use std::path::{Path, PathBuf};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value, value};

/// Why a manifest file could not be read, edited or written; its text
/// names the file and says why.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The file exists and cannot be read.
    #[error("cannot read {}: {why}", file.display())]
    Read {
        /// The manifest file.
        file: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// The file is not TOML.
    #[error("{} is not valid TOML: {why}", file.display())]
    NotToml {
        /// The manifest file.
        file: PathBuf,
        /// The parser's reason.
        why: String,
    },
    /// A key that must hold a table holds something else.
    #[error("{}: `{key}` is not a table", file.display())]
    NotATable {
        /// The manifest file.
        file: PathBuf,
        /// The key, dotted (`plugins`, `plugins.NAME`).
        key: String,
    },
    /// The path has no directory to write in.
    #[error("{}: no parent directory", .0.display())]
    NoParent(PathBuf),
    /// The file's directory cannot be made or written in.
    #[error("cannot {what} {}: {why}", dir.display())]
    Directory {
        /// `create` or `write in`.
        what: &'static str,
        /// The directory.
        dir: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// The file cannot be written.
    #[error("cannot write {}: {why}", file.display())]
    Write {
        /// The manifest file.
        file: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
}

impl From<EditError> for String {
    fn from(e: EditError) -> Self {
        e.to_string()
    }
}

/// What `corral plugin add`/`update` writes for one plugin.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The component's path.
    pub source: String,
    /// Its SHA-256 pin.
    pub sha256: String,
    /// Where it was fetched from.
    pub from: String,
    /// The version it declared.
    pub version: Option<String>,
    /// Put before its tool names; `None` keeps what the entry has.
    pub tool_prefix: Option<String>,
    /// Exactly what the user approved.
    pub grants: Requested,
    /// What the user refused (`--deny`, or not named by `--grant`), as
    /// `KIND:VALUE` specs: written as `denied = [...]` so that `plugin
    /// update` does not grant it again.
    pub denied: Vec<String>,
}

/// The manifest text at `file` ("" when it does not exist yet).
pub fn read(file: &Path) -> Result<String, EditError> {
    match crate::manifest::read_manifest(file) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(EditError::Read {
            file: file.to_path_buf(),
            why: crate::words::io(&e),
        }),
    }
}

fn parse(text: &str, file: &Path) -> Result<DocumentMut, EditError> {
    text.parse::<DocumentMut>().map_err(|e| EditError::NotToml {
        file: file.to_path_buf(),
        why: e.to_string(),
    })
}

/// A string from the entry `name` of `text`, e.g. its `from` or `version`.
pub fn entry_string(text: &str, name: &str, key: &str) -> Option<String> {
    let doc = text.parse::<DocumentMut>().ok()?;
    doc.get("plugins")?
        .get(name)?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

/// The strings of the array `key` of the entry `name` of `text`, e.g. its
/// `denied` list; empty when there is none.
pub fn entry_strings(text: &str, name: &str, key: &str) -> Vec<String> {
    let Ok(doc) = text.parse::<DocumentMut>() else {
        return Vec::new();
    };
    doc.get("plugins")
        .and_then(|p| p.get(name))
        .and_then(|e| e.get(key))
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `text` with `[plugins.NAME]` set to `entry`. An existing entry keeps its
/// `config`, `limits` and comments; its source, pin, origin, version and
/// grants are replaced.
pub fn set_entry(text: &str, file: &Path, name: &str, entry: &Entry) -> Result<String, EditError> {
    let mut doc = parse(text, file)?;
    let plugins = plugins_table(&mut doc, file)?;
    let table = plugins
        .entry(name)
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_mut()
        .ok_or_else(|| EditError::NotATable {
            file: file.to_path_buf(),
            key: format!("plugins.{name}"),
        })?;
    table.insert("source", value(entry.source.as_str()));
    table.insert("sha256", value(entry.sha256.as_str()));
    table.insert("from", value(entry.from.as_str()));
    match &entry.version {
        Some(v) => {
            table.insert("version", value(v.as_str()));
        }
        None => {
            table.remove("version");
        }
    }
    if let Some(p) = &entry.tool_prefix {
        table.insert("tool_prefix", value(p.as_str()));
    }
    table.remove("grants");
    table.remove("enabled");
    table.remove("denied");
    if !entry.denied.is_empty() {
        table.insert(
            "denied",
            value(entry.denied.iter().map(String::as_str).collect::<Array>()),
        );
    }
    let grants = grants_table(&entry.grants);
    if !grants.is_empty() {
        table.insert("grants", Item::Value(Value::InlineTable(grants)));
    }
    Ok(doc.to_string())
}

/// The document's `[plugins]` table, created (implicit) if missing.
fn plugins_table<'a>(doc: &'a mut DocumentMut, file: &Path) -> Result<&'a mut Table, EditError> {
    doc.entry("plugins")
        .or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or_else(|| EditError::NotATable {
            file: file.to_path_buf(),
            key: "plugins".into(),
        })
}

/// `text` without `[plugins.NAME]`; `None` when it has no such entry.
pub fn remove_entry(text: &str, file: &Path, name: &str) -> Result<Option<String>, EditError> {
    let mut doc = parse(text, file)?;
    let removed = doc
        .get_mut("plugins")
        .and_then(Item::as_table_like_mut)
        .and_then(|t| t.remove(name));
    Ok(removed.map(|_| doc.to_string()))
}

/// `text` with `[plugins.NAME] enabled = false`, which removes a plugin an
/// earlier layer (the built-in defaults) declares.
pub fn disable_entry(text: &str, file: &Path, name: &str) -> Result<String, EditError> {
    let mut doc = parse(text, file)?;
    let plugins = plugins_table(&mut doc, file)?;
    let mut t = Table::new();
    t.insert("enabled", value(false));
    plugins.insert(name, Item::Table(t));
    Ok(doc.to_string())
}

/// A TOML array of `list`.
fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(String::as_str).collect())
}

fn grants_table(g: &Requested) -> InlineTable {
    let mut t = InlineTable::new();
    if !g.fs.is_empty() {
        let mut a = Array::new();
        for f in &g.fs {
            let mut e = InlineTable::new();
            e.insert("path", f.path.as_str().into());
            e.insert(
                "access",
                match f.access {
                    Access::Ro => "ro",
                    Access::Rw => "rw",
                }
                .into(),
            );
            a.push(e);
        }
        t.insert("fs", Value::Array(a));
    }
    if !g.net.is_empty() {
        t.insert("net", strings(&g.net));
    }
    if !g.env.is_empty() {
        t.insert("env", strings(&g.env));
    }
    if !g.exec.is_empty() {
        let mut a = Array::new();
        for x in &g.exec {
            let mut e = InlineTable::new();
            e.insert("program", x.program.as_str().into());
            e.insert("args", strings(&x.args));
            if x.network {
                e.insert("network", true.into());
            }
            a.push(e);
        }
        t.insert("exec", Value::Array(a));
    }
    if !g.secrets.is_empty() {
        let mut a = Array::new();
        for s in &g.secrets {
            let mut e = InlineTable::new();
            e.insert("origin", s.origin.as_str().into());
            e.insert("header", s.header.as_str().into());
            e.insert("value", s.value.as_str().into());
            a.push(e);
        }
        t.insert("secrets", Value::Array(a));
    }
    t
}

/// Writes `bytes` to `file` atomically, creating its directory.
pub fn write(file: &Path, bytes: &[u8]) -> Result<(), EditError> {
    use std::io::Write as _;
    let dir = file
        .parent()
        .ok_or_else(|| EditError::NoParent(file.to_path_buf()))?;
    let in_dir = |what, e: std::io::Error| EditError::Directory {
        what,
        dir: dir.to_path_buf(),
        why: crate::words::io(&e),
    };
    std::fs::create_dir_all(dir).map_err(|e| in_dir("create", e))?;
    let mut tmp = super::store::temp_in(dir).map_err(|e| in_dir("write in", e))?;
    let unwritten = |e: &std::io::Error| EditError::Write {
        file: file.to_path_buf(),
        why: crate::words::io(e),
    };
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| unwritten(&e))?;
    tmp.persist(file).map_err(|e| unwritten(&e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::requests::FsRequest;

    #[test]
    fn an_update_keeps_config_limits_and_comments() {
        let text = "# mine\n[plugins.wc]\nsource = \"old.wasm\"\nconfig = { a = \"1\" }\ngrants.net = [\"https://x:443\"]\n\n[plugins.other]\nsource = \"builtin:fs\"\n";
        let entry = Entry {
            source: "/d/abc.wasm".into(),
            sha256: "ab".repeat(32),
            from: "oci://127.0.0.1:5000/wc:2".into(),
            version: Some("2.0.0".into()),
            tool_prefix: None,
            denied: vec!["net:https://y:443".into()],
            grants: Requested {
                fs: vec![FsRequest {
                    path: ".".into(),
                    access: Access::Ro,
                }],
                ..Default::default()
            },
        };
        let out = set_entry(text, Path::new("c.toml"), "wc", &entry).unwrap();
        assert!(out.starts_with("# mine\n"), "{out}");
        assert!(out.contains("config = { a = \"1\" }"), "{out}");
        assert!(!out.contains("https://x:443"), "{out}");
        assert!(out.contains("[plugins.other]"), "{out}");
        assert_eq!(
            entry_string(&out, "wc", "version").as_deref(),
            Some("2.0.0")
        );
        assert_eq!(entry_strings(&out, "wc", "denied"), ["net:https://y:443"]);
        let removed = remove_entry(&out, Path::new("c.toml"), "wc")
            .unwrap()
            .unwrap();
        assert!(!removed.contains("plugins.wc"), "{removed}");
        assert!(removed.contains("[plugins.other]"), "{removed}");
    }
}
