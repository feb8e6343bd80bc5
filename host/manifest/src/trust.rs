//! Project trust. A project's `corral.toml` comes with the code, so a
//! cloned repository could add plugins, grants or allow rules. It takes
//! effect only after the user runs `corral trust`, which records the file's
//! SHA-256 (and a copy, to show what changed next time); a changed file is
//! untrusted again until reviewed.
//!
//! Trust also covers the code: for every plugin of the project manifest
//! whose `.wasm` file has no `sha256` pin, `corral trust` records the
//! SHA-256 of the file it showed, and a load refuses that plugin once the
//! file differs, until `corral trust` approves the new one. The runtime
//! compares the hash of the very bytes it compiles ([`read_plugin_file`]
//! reads a file once), so a file swapped after the check never runs.
//!
//! The same holds for the code of the project's MCP servers: the program
//! and every file its arguments name, when they are beneath the workspace
//! (`python3 srv/server.py`, `./srv.py`), are hashed at trust
//! ([`server_code`]), and a server whose files differ is not started
//! ([`check_server_code`]) until `corral trust` approves them: a pull that
//! changes a trusted server's script is reviewed before it runs. Programs
//! outside the workspace (`python3`, `npx`) are the user's own install.
//!
//! And for the project's command hooks (`[hooks] … command = "…"`): every
//! file beneath the workspace that the command line names (a script such as
//! `"$CLAUDE_PROJECT_DIR"/.claude/hooks/check.sh` or `python3
//! hooks/lint.py`) is hashed at trust ([`hook_code`]), and a hook whose
//! files differ does not run ([`check_hook_code`]) until `corral trust`
//! approves them. Files those scripts read or source in turn are not
//! covered; they run inside the hook's confinement.

use crate::{
    CommandHook, HookBinding, HookTarget, Manifest, McpServerDecl, Origin, PluginDecl, Source,
};
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
    /// Canonical manifest path → what was trusted.
    trusted: BTreeMap<String, Record>,
}

/// One trust decision.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Record {
    /// The manifest and the plugin files it named.
    Full {
        /// SHA-256 of the trusted manifest text.
        manifest: String,
        /// Plugin name → its file as approved.
        #[serde(default)]
        plugins: BTreeMap<String, PluginFile>,
        /// MCP server name → the files of its code as approved.
        #[serde(default)]
        servers: BTreeMap<String, ServerCode>,
        /// Command hook ([`hook_key`]) → the files of its code as approved.
        #[serde(default)]
        hooks: BTreeMap<String, ServerCode>,
    },
    /// Written before plugin files were recorded: it approves no file, so a
    /// manifest that names unpinned files must be trusted again.
    ManifestOnly(String),
}

impl Record {
    fn manifest_hash(&self) -> &str {
        match self {
            Record::Full { manifest, .. } | Record::ManifestOnly(manifest) => manifest,
        }
    }
}

/// What trusting a project manifest approved of one plugin file it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginFile {
    /// The file, as the manifest's `source` resolved when it was trusted
    /// (shown in messages; the check is by content).
    pub path: String,
    /// Its SHA-256 when trusted; `None` when it could not be read then, which
    /// approves nothing.
    pub sha256: Option<String>,
}

/// What trusting a project manifest approved of one MCP server's code: each
/// file (as [`server_code`] names it) and its SHA-256, `None` when it could
/// not be read then, which approves nothing.
pub type ServerCode = BTreeMap<String, Option<String>>;

/// Largest plugin file corral reads (the biggest real components, built
/// from Python or JavaScript, are under 20 MiB).
pub const MAX_PLUGIN_FILE: u64 = 256 << 20;

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
    match read_index(dir).trusted.get(&key).map(Record::manifest_hash) {
        Some(h) if *h == hash(text) => Status::Trusted,
        Some(h) => Status::Changed {
            previous: std::fs::read_to_string(dir.join(format!("{h}.toml"))).ok(),
        },
        None => Status::New,
    }
}

/// Everything approved with `text` of `manifest` (the plugin files by
/// plugin name, the MCP servers' code by server name, the command hooks'
/// code by [`hook_key`]), or `None` when that text is not trusted.
pub fn recorded(dir: &Path, manifest: &Path, text: &str) -> Option<Approved> {
    let key = manifest.display().to_string();
    let index = read_index(dir);
    let record = index.trusted.get(&key)?;
    if record.manifest_hash() != hash(text) {
        return None;
    }
    Some(match record {
        Record::Full {
            plugins,
            servers,
            hooks,
            ..
        } => Approved {
            plugins: plugins.clone(),
            servers: servers.clone(),
            hooks: hooks.clone(),
        },
        Record::ManifestOnly(_) => Approved::default(),
    })
}

/// What one trust decision approves besides the manifest's text: the
/// plugin files it names, the code of its MCP servers and of its command
/// hooks, as they were reviewed.
#[derive(Debug, Clone, Default)]
pub struct Approved {
    /// Plugin name → its file.
    pub plugins: BTreeMap<String, PluginFile>,
    /// MCP server name → its code ([`record_servers`]).
    pub servers: BTreeMap<String, ServerCode>,
    /// Command hook ([`hook_key`]) → its code ([`record_servers`]).
    pub hooks: BTreeMap<String, ServerCode>,
}

/// Records `text` of `manifest` as trusted, with the plugin files it names
/// and the code of its MCP servers as they were reviewed.
pub fn trust(
    dir: &Path,
    manifest: &Path,
    text: &str,
    plugins: &BTreeMap<String, PluginFile>,
    servers: &BTreeMap<String, ServerCode>,
) -> std::io::Result<()> {
    let approved = Approved {
        plugins: plugins.clone(),
        servers: servers.clone(),
        hooks: BTreeMap::new(),
    };
    trust_all(dir, manifest, text, &approved)
}

/// Records `text` of `manifest` as trusted with everything `approved`.
pub fn trust_all(
    dir: &Path,
    manifest: &Path,
    text: &str,
    approved: &Approved,
) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let h = hash(text);
    std::fs::write(dir.join(format!("{h}.toml")), text)?;
    let mut index = read_index(dir);
    index.trusted.insert(
        manifest.display().to_string(),
        Record::Full {
            manifest: h,
            plugins: approved.plugins.clone(),
            servers: approved.servers.clone(),
            hooks: approved.hooks.clone(),
        },
    );
    let tmp = index_path(dir).with_extension("tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(&index).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, index_path(dir))
}

/// Reads a plugin's component file whole, once: what is hashed is what is
/// compiled. Refuses anything but a regular file (a FIFO or a device would
/// block or never end) and files over [`MAX_PLUGIN_FILE`]. A symlink is
/// followed; its target's content is what gets checked.
pub fn read_plugin_file(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::fsread::read_regular(path, MAX_PLUGIN_FILE).map_err(|e| match e {
        crate::fsread::ReadError::Io(e) => e,
        other => std::io::Error::new(std::io::ErrorKind::InvalidInput, other.to_string()),
    })
}

/// Hex SHA-256 of a component's bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One plugin file of a project manifest, as `corral trust` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed {
    /// The plugin's name.
    pub plugin: String,
    /// The file its `source` names.
    pub path: PathBuf,
    /// Where the path leads when that differs from `path` (a symlink, `..`).
    pub resolved: Option<PathBuf>,
    /// The file is outside the workspace.
    pub outside_workspace: bool,
    /// Its content, as far as trust is concerned.
    pub state: FileState,
}

/// What trusting a manifest does about one plugin file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileState {
    /// The manifest pins it with `sha256 = "…"`; trusting the text covers it.
    Pinned(String),
    /// Its SHA-256 now, which trusting records.
    Hashed(String),
    /// It cannot be read now; trusting approves no content for it.
    Unreadable(String),
}

impl Reviewed {
    /// What trusting records for this file, `None` for a pinned one.
    pub fn record(&self) -> Option<PluginFile> {
        let sha256 = match &self.state {
            FileState::Pinned(_) => return None,
            FileState::Hashed(h) => Some(h.clone()),
            FileState::Unreadable(_) => None,
        };
        Some(PluginFile {
            path: self.path.display().to_string(),
            sha256,
        })
    }
}

/// The `.wasm` file of `decl` and its `sha256` pin, when `decl` was declared
/// in the project manifest named `project` and loads one.
fn from_project<'a>(decl: &'a PluginDecl, project: &str) -> Option<(&'a Path, Option<&'a str>)> {
    match &decl.source {
        Source::File { path, sha256 } if decl.origin.file == project => {
            Some((path.as_path(), sha256.as_deref()))
        }
        _ => None,
    }
}

/// The plugin files that the project manifest named `project` brings into
/// `manifest`, each read and hashed now, for review.
pub fn review_files(manifest: &Manifest, project: &str) -> Vec<Reviewed> {
    let mut out = Vec::new();
    for decl in &manifest.plugins {
        let Some((path, pin)) = from_project(decl, project) else {
            continue;
        };
        let canonical = path.canonicalize().ok();
        let state = match pin {
            Some(pin) => FileState::Pinned(pin.to_owned()),
            None => match read_plugin_file(path) {
                Ok(bytes) => FileState::Hashed(sha256_hex(&bytes)),
                Err(e) => FileState::Unreadable(e.to_string()),
            },
        };
        let absolute = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(path)
        };
        out.push(Reviewed {
            plugin: decl.name.clone(),
            path: path.to_path_buf(),
            outside_workspace: canonical
                .as_deref()
                .is_some_and(|c| !c.starts_with(&manifest.workspace)),
            resolved: canonical.filter(|c| *c != absolute),
            state,
        });
    }
    out
}

/// Binds every unpinned plugin file of the trusted project manifest
/// `project` (its path and its text) to what trusting it approved, so the
/// runtime refuses a file that changed since. A file the record does not
/// cover is bound to no content, which the runtime refuses too.
pub fn bind(manifest: &mut Manifest, project: &Path, text: &str) {
    let name = project.display().to_string();
    let canonical = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    let recorded = store_dir()
        .and_then(|dir| recorded(&dir, &canonical, text))
        .unwrap_or_default();
    let mut bound = BTreeMap::new();
    for decl in &manifest.plugins {
        let Some((path, None)) = from_project(decl, &name) else {
            continue;
        };
        let file = recorded
            .plugins
            .get(&decl.name)
            .cloned()
            .unwrap_or(PluginFile {
                path: path.display().to_string(),
                sha256: None,
            });
        bound.insert(decl.name.clone(), file);
    }
    manifest.trusted_files = bound;
    for decl in manifest.mcp.iter_mut().filter(|d| d.file == name) {
        decl.trusted_code = Some(
            recorded
                .servers
                .get(&decl.name)
                .cloned()
                .unwrap_or_default(),
        );
    }
    for binding in manifest.hooks.iter_mut().filter(|b| b.origin.file == name) {
        let key = hook_key(binding);
        if let HookTarget::Command(c) = &mut binding.target {
            c.trusted_code = Some(recorded.hooks.get(&key).cloned().unwrap_or_default());
        }
    }
}

/// The key of a command hook in a trust record: its event and command line.
pub fn hook_key(binding: &HookBinding) -> String {
    match &binding.target {
        HookTarget::Command(c) => format!("{} {}", binding.event.as_str(), c.command),
        HookTarget::Plugin(p) => format!("{} plugin {p}", binding.event.as_str()),
    }
}

/// Most files beside a hook's script that trust covers with it.
const HOOK_SIBLINGS: usize = 64;

/// The code of a command hook that trust covers: each file beneath its
/// workspace that a word of its command line names (after the project
/// directory variables are replaced by the workspace; a link is followed)
/// and the regular files beside it in its directory (what a script sources
/// or imports usually sits there; not for a file at the workspace's root),
/// each read and hashed now.
pub fn hook_code(hook: &CommandHook) -> Vec<CodeFile> {
    let workspace = hook
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| hook.workspace.clone());
    let line = hook.expanded(&hook.workspace);
    let mut out: Vec<CodeFile> = Vec::new();
    for segment in corral_syntax::shell::segments(&line) {
        let Ok(words) = corral_syntax::shell::words(segment) else {
            continue;
        };
        for word in words
            .iter()
            .filter(|w| !w.is_empty() && !w.starts_with('-'))
        {
            let path = hook.workspace.join(word);
            let beneath = path
                .canonicalize()
                .is_ok_and(|c| c.starts_with(&workspace) && c.is_file());
            if beneath {
                add_siblings(&mut out, &path, &workspace);
                add_code_file(&mut out, path);
            }
        }
    }
    out
}

/// The regular files beside `script` (not its own), when its directory is
/// beneath `workspace` and not the workspace itself.
fn add_siblings(out: &mut Vec<CodeFile>, script: &Path, workspace: &Path) {
    let Ok(own) = script.canonicalize() else {
        return;
    };
    let Some(dir) = own.parent().map(Path::to_path_buf) else {
        return;
    };
    if dir == workspace || !dir.starts_with(workspace) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| *p != own)
        .collect();
    files.sort();
    for file in files.into_iter().take(HOOK_SIBLINGS) {
        add_code_file(out, file);
    }
}

/// The code of each command hook the project manifest named `project`
/// brings into `manifest`, by [`hook_key`], each file read and hashed now,
/// for review.
pub fn review_hooks(manifest: &Manifest, project: &str) -> Vec<(String, Vec<CodeFile>)> {
    manifest
        .hooks
        .iter()
        .filter(|b| b.origin.file == project)
        .filter_map(|b| match &b.target {
            HookTarget::Command(c) => Some((hook_key(b), hook_code(c))),
            HookTarget::Plugin(_) => None,
        })
        .collect()
}

/// Checks the code of a project's command hook against what trusting its
/// manifest approved, just before it runs; the error names each changed
/// file and the fix. A hook of the user's own file is not checked.
pub fn check_hook_code(hook: &CommandHook) -> Result<(), TrustError> {
    unchanged(hook.trusted_code.as_ref(), || hook_code(hook)).map_err(|changes| {
        TrustError::HookCodeChanged {
            hook: crate::hook::command_name(&hook.command),
            changes,
        }
    })
}

/// `Err` with the changes ([`code_changes`]) when the code `now` reads
/// differs from what was `approved`; a hook or server whose file was not
/// trusted, with nothing approved, is not checked.
fn unchanged(
    approved: Option<&ServerCode>,
    now: impl FnOnce() -> Vec<CodeFile>,
) -> Result<(), Vec<String>> {
    let Some(approved) = approved else {
        return Ok(());
    };
    let changes = code_changes(&now(), approved);
    if changes.is_empty() {
        return Ok(());
    }
    Err(changes)
}

/// One file of an MCP server's code, as `corral trust` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeFile {
    /// The file, as the entry names it (beneath the workspace).
    pub path: PathBuf,
    /// Its SHA-256 now, or why it cannot be read.
    pub state: FileState,
}

impl CodeFile {
    /// The key of this file in a [`ServerCode`] record.
    pub fn key(&self) -> String {
        self.path.display().to_string()
    }

    /// Its SHA-256, `None` when it cannot be read.
    pub fn sha256(&self) -> Option<String> {
        match &self.state {
            FileState::Hashed(h) | FileState::Pinned(h) => Some(h.clone()),
            FileState::Unreadable(_) => None,
        }
    }
}

/// The code of the server `decl` that trust covers: its program when
/// written as a path, and each file its arguments name, those beneath its
/// workspace (a link is followed: its target's content is what is hashed),
/// each read and hashed now.
pub fn server_code(decl: &McpServerDecl) -> Vec<CodeFile> {
    if decl.url.is_some() {
        return Vec::new();
    }
    let workspace = decl
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| decl.workspace.clone());
    let program = decl
        .command
        .contains('/')
        .then(|| decl.cwd.join(&decl.command));
    let mut out: Vec<CodeFile> = Vec::new();
    for path in program.into_iter().chain(decl.named_files()) {
        let beneath = path.canonicalize().is_ok_and(|c| c.starts_with(&workspace));
        if beneath {
            add_code_file(&mut out, path);
        }
    }
    out
}

/// Reads and hashes the code file `path` into `out`, unless it is there.
fn add_code_file(out: &mut Vec<CodeFile>, path: PathBuf) {
    if out.iter().any(|f| f.path == path) {
        return;
    }
    let state = match read_plugin_file(&path) {
        Ok(bytes) => FileState::Hashed(sha256_hex(&bytes)),
        Err(e) => FileState::Unreadable(e.to_string()),
    };
    out.push(CodeFile { path, state });
}

/// The code of each MCP server the project manifest named `project` brings
/// into `manifest`, by server name, each file read and hashed now, for
/// review.
pub fn review_servers(manifest: &Manifest, project: &str) -> Vec<(String, Vec<CodeFile>)> {
    manifest
        .mcp
        .iter()
        .filter(|d| d.file == project)
        .map(|d| (d.name.clone(), server_code(d)))
        .collect()
}

/// What trusting records of the reviewed code of servers.
pub fn record_servers(reviewed: &[(String, Vec<CodeFile>)]) -> BTreeMap<String, ServerCode> {
    reviewed
        .iter()
        .map(|(name, files)| {
            let code = files.iter().map(|f| (f.key(), f.sha256())).collect();
            (name.clone(), code)
        })
        .collect()
}

/// Each file of `now` whose content is not what `approved` holds, in
/// words: the file, and the hashes before and now.
pub fn code_changes(now: &[CodeFile], approved: &ServerCode) -> Vec<String> {
    let mut out = Vec::new();
    for f in now {
        let was = approved.get(&f.key()).cloned().flatten();
        let is = f.sha256();
        if was.is_some() && was == is {
            continue;
        }
        let was = was.map_or_else(|| "(none approved)".to_owned(), |h| format!("sha256 {h}"));
        let is = match &f.state {
            FileState::Unreadable(e) => format!("unreadable ({e})"),
            _ => is.map_or_else(String::new, |h| format!("sha256 {h}")),
        };
        out.push(format!("{}: was {was}, now {is}", f.path.display()));
    }
    out
}

/// Why code a trusted manifest names may not run: it is not what trusting
/// the manifest approved. Each message names the entry, what changed and
/// the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// Files of a project server's code changed since trust.
    #[error(
        "[mcp.{server}] was not started: its code changed since you trusted {file} ({}). Check the \
         change (a pull or a checkout brings new code), then run `corral trust` to review and \
         approve it",
        .changes.join("; ")
    )]
    ServerCodeChanged {
        /// The `[mcp.NAME]` entry.
        server: String,
        /// The manifest that declared it.
        file: String,
        /// Each changed file, as [`code_changes`] says it.
        changes: Vec<String>,
    },
    /// Files a project's command hook runs changed since trust.
    #[error(
        "the command hook `{hook}` did not run: the files it runs changed since you trusted the \
         project's corral.toml ({}). Check the change (a pull or a checkout brings new code), \
         then run `corral trust` to review and approve it",
        .changes.join("; ")
    )]
    HookCodeChanged {
        /// The hook, as [`crate::command_name`] names it.
        hook: String,
        /// Each changed file, as [`code_changes`] says it.
        changes: Vec<String>,
    },
    /// A plugin's file has another SHA-256 than the one approved.
    #[error(
        "plugin `{}` ({}): {} changed since you trusted {}: its sha256 was {approved} and is now \
         {}. Check where the new file came from, then run `corral trust` to review and approve \
         it (or pin it with `sha256`)",
        .found.plugin, .found.origin, .found.file, .found.origin.file, .found.sha256
    )]
    FileChanged {
        /// The file as it is now.
        found: Box<UnapprovedFile>,
        /// The SHA-256 trusting approved.
        approved: String,
    },
    /// A plugin's file was not approved when the manifest was trusted.
    #[error(
        "plugin `{}` ({}): {} (sha256 {}) was not approved when you trusted {} (it could not be \
         read then, or was trusted by an older corral); run `corral trust` to review and approve \
         it",
        .0.plugin, .0.origin, .0.file, .0.sha256, .0.origin.file
    )]
    FileNotApproved(Box<UnapprovedFile>),
}

/// A plugin's file about to be compiled, as a [`TrustError`] names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnapprovedFile {
    /// The plugin.
    pub plugin: String,
    /// Where its entry is.
    pub origin: Origin,
    /// Its source, as the manifest names it.
    pub file: String,
    /// The SHA-256 of its bytes.
    pub sha256: String,
}

/// For callers whose errors are still text.
impl From<TrustError> for String {
    fn from(e: TrustError) -> Self {
        e.to_string()
    }
}

/// Checks the code of the project's server `decl` against what trusting its
/// manifest approved, just before it starts; the error names each changed
/// file and the fix. A server of the user's own file is not checked.
pub fn check_server_code(decl: &McpServerDecl) -> Result<(), TrustError> {
    unchanged(decl.trusted_code.as_ref(), || server_code(decl)).map_err(|changes| {
        TrustError::ServerCodeChanged {
            server: decl.name.clone(),
            file: decl.file.clone(),
            changes,
        }
    })
}

/// Checks the SHA-256 of the bytes about to be compiled for `decl` against
/// what trusting its manifest approved; the error names the plugin, both
/// hashes and the fix.
pub fn check_file(decl: &PluginDecl, manifest: &Manifest, sha256: &str) -> Result<(), TrustError> {
    let Some(approved) = manifest.trusted_files.get(&decl.name) else {
        return Ok(());
    };
    if approved.sha256.as_deref() == Some(sha256) {
        return Ok(());
    }
    let found = Box::new(UnapprovedFile {
        plugin: decl.name.clone(),
        origin: decl.origin.clone(),
        file: decl.source.to_string(),
        sha256: sha256.to_owned(),
    });
    Err(match &approved.sha256 {
        Some(h) => TrustError::FileChanged {
            found,
            approved: h.clone(),
        },
        None => TrustError::FileNotApproved(found),
    })
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
        trust(dir.path(), m, "a = 1\n", &BTreeMap::new(), &BTreeMap::new()).unwrap();
        assert_eq!(status(dir.path(), m, "a = 1\n"), Status::Trusted);
        assert_eq!(
            status(dir.path(), m, "a = 2\n"),
            Status::Changed {
                previous: Some("a = 1\n".into())
            }
        );
        assert_eq!(
            recorded(dir.path(), m, "a = 1\n").map(|r| r.plugins),
            Some(BTreeMap::new())
        );
        assert!(recorded(dir.path(), m, "a = 2\n").is_none());
        assert_eq!(
            diff("a = 1\nb = 2\n", "a = 1\nb = 3\nc = 4\n"),
            "  a = 1\n- b = 2\n+ b = 3\n+ c = 4\n"
        );
    }

    #[test]
    fn plugin_files_are_recorded_with_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let m = Path::new("/p/corral.toml");
        let files = BTreeMap::from([(
            "wc".to_owned(),
            PluginFile {
                path: "/p/wc.wasm".into(),
                sha256: Some("ab".repeat(32)),
            },
        )]);
        trust(dir.path(), m, "x = 1\n", &files, &BTreeMap::new()).unwrap();
        assert_eq!(
            recorded(dir.path(), m, "x = 1\n").map(|r| r.plugins),
            Some(files)
        );
        // An index written before plugin files were recorded still reads.
        std::fs::write(
            dir.path().join("index.json"),
            format!(
                r#"{{"trusted":{{"/p/corral.toml":"{}"}}}}"#,
                hash("x = 1\n")
            ),
        )
        .unwrap();
        assert_eq!(status(dir.path(), m, "x = 1\n"), Status::Trusted);
        assert_eq!(
            recorded(dir.path(), m, "x = 1\n").map(|r| r.plugins),
            Some(BTreeMap::new())
        );
    }

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_plugin_file(dir.path()).unwrap_err();
        assert_eq!(err.to_string(), "it is a directory, not a regular file");
        let file = dir.path().join("x.wasm");
        std::fs::write(&file, b"\0asm").unwrap();
        assert_eq!(read_plugin_file(&file).unwrap(), b"\0asm");
    }
}
