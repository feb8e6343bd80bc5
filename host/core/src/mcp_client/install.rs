//! The packages of MCP server entries written as people copy them
//! (`npx -y PKG ARGS…`): such an entry fetches its package from the
//! registry at every start, which a server confined without network cannot
//! do. corral installs the package once instead, through its one confined
//! path with the network only to the registry and writing only a staging
//! directory, into its package store, and the entry runs the installed
//! program, confined without network.
//!
//! The store is beside corral's data directory, not in it: corral's own
//! state is kept out of every confined program's reach, and a server must
//! read its own package.

use crate::exec::{Destination, Launch, Network};
use crate::protocol::terminal::inert;
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// npm's registry: the one destination an install may reach.
const NPM_REGISTRY: &str = "https://registry.npmjs.org:443";

/// How long one install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// A package an entry fetches at each start, and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The package as the entry names it: `@scope/name`, `name@1.2.3`.
    pub spec: String,
    /// The arguments given to the package's program.
    pub args: Vec<String>,
}

impl Fetched {
    /// The package's name, without a version.
    pub fn name(&self) -> &str {
        let (scoped, rest) = match self.spec.strip_prefix('@') {
            Some(rest) => (true, rest),
            None => (false, self.spec.as_str()),
        };
        let end = rest
            .find('@')
            .map_or(self.spec.len(), |i| i + usize::from(scoped));
        &self.spec[..end]
    }
}

/// The package of an `npx [-y|--yes] PKG ARGS…` command line, if it is one
/// (other options of npx are not understood: such an entry is left as it
/// is).
pub fn npx(command: &[String]) -> Option<Fetched> {
    let (program, rest) = command.split_first()?;
    if Path::new(program).file_name()? != "npx" {
        return None;
    }
    let mut words = rest.iter();
    let spec = loop {
        let word = words.next()?;
        match word.as_str() {
            "-y" | "--yes" => {}
            w if w.starts_with('-') => return None,
            w => break w.to_owned(),
        }
    };
    Some(Fetched {
        spec,
        args: words.cloned().collect(),
    })
}

/// A package installed in the store.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The program to run: the package's own, in the store.
    pub command: PathBuf,
    /// The version the registry resolved.
    pub version: String,
    /// The sha256 of the installed tree (paths, contents, link targets).
    pub sha256: String,
}

/// Where installed packages are kept: `$XDG_DATA_HOME/corral-mcp-packages`.
pub fn store() -> Result<PathBuf, String> {
    dirs::data_dir()
        .map(|d| d.join("corral-mcp-packages"))
        .ok_or_else(|| {
            "cannot find the data directory for the MCP package store; set HOME or \
             XDG_DATA_HOME"
                .to_owned()
        })
}

/// Installs `package` from npm's registry into the store (see the module
/// docs): the program to run, its version and the hash of what was
/// installed.
pub fn install_npm(package: &Fetched) -> Result<Installed, String> {
    let spec = &package.spec;
    let npm = crate::exec::resolve("npm").ok_or_else(|| {
        format!(
            "cannot install `{}`: npm is not installed (not found in PATH); install Node.js, \
             which brings npm",
            inert(spec)
        )
    })?;
    let store = store()?;
    // In the store's file system, so that the finished install is renamed
    // into place, never copied.
    let staging = store.join(format!(".staging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let home = staging.join(".home");
    std::fs::create_dir_all(&home)
        .map_err(|e| format!("cannot make {}: {e}", staging.display()))?;
    let cleanup = Cleanup(staging.clone());
    std::fs::write(staging.join("package.json"), "{\"private\":true}\n")
        .map_err(|e| format!("cannot write in {}: {e}", staging.display()))?;
    let registry = Destination::parse(NPM_REGISTRY)?;
    let out = Launch::new(&npm, &staging)
        .named("npm install")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--loglevel=error",
            spec.as_str(),
        ])
        .env("HOME", &home)
        .env("npm_config_cache", home.join("cache"))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .network(Network::Only(vec![registry]))
        .writable(&staging)
        .timeout(INSTALL_TIMEOUT)
        .run_blocking()
        .map_err(|e| format!("cannot install `{}`: {e}", inert(spec)))?;
    if out.exit_code != Some(0) {
        return Err(format!(
            "npm could not install `{}` (exit {}{}): {}",
            inert(spec),
            out.exit_code
                .map_or("by a signal".to_owned(), |c| c.to_string()),
            if out.timed_out { ", timed out" } else { "" },
            inert(out.stderr.trim())
        ));
    }
    let _ = std::fs::remove_dir_all(&home);
    let name = package.name();
    let manifest_path = staging.join("node_modules").join(name).join("package.json");
    let manifest: serde_json::Value = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| {
            format!(
                "npm installed `{}` but its package.json ({}) is missing or not JSON",
                inert(spec),
                manifest_path.display()
            )
        })?;
    let version = manifest["version"].as_str().unwrap_or("unknown").to_owned();
    let bin = program_of(name, &manifest).ok_or_else(|| {
        format!(
            "`{}` has no program to run (its package.json names no `bin`)",
            inert(spec)
        )
    })?;
    let sha256 = tree_hash(&staging)?;
    let dir = store
        .join("npm")
        .join(format!("{}@{version}", name.replace('/', "+")));
    if dir.exists() {
        // What is there was installed before: the new install replaces it
        // whole, never merged with it.
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot replace {}: {e}", dir.display()))?;
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
    }
    std::fs::rename(&staging, &dir)
        .map_err(|e| format!("cannot move the install into {}: {e}", dir.display()))?;
    std::mem::forget(cleanup);
    Ok(Installed {
        command: dir.join("node_modules").join(".bin").join(bin),
        version,
        sha256,
    })
}

/// The program of a package: its only `bin`, or the one named as the
/// package (without its scope).
fn program_of(name: &str, manifest: &serde_json::Value) -> Option<String> {
    let short = name.rsplit('/').next().unwrap_or(name);
    match &manifest["bin"] {
        serde_json::Value::String(_) => Some(short.to_owned()),
        serde_json::Value::Object(bins) if bins.len() == 1 => bins.keys().next().cloned(),
        serde_json::Value::Object(bins) => bins.contains_key(short).then(|| short.to_owned()),
        _ => None,
    }
}

/// The sha256 of the tree at `root`: each entry's path relative to it, in
/// order, with its content or link target.
pub fn tree_hash(root: &Path) -> Result<String, String> {
    let mut hasher = Sha256::new();
    let mut stack = vec![root.to_path_buf()];
    let mut files = Vec::new();
    while let Some(dir) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(_) => files.push(path),
                Err(_) => {}
            }
        }
    }
    files.sort();
    for path in files {
        let rel = path.strip_prefix(root).unwrap_or(&path);
        hasher.update(rel.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            hasher.update(b"link:");
            hasher.update(target.as_os_str().as_encoded_bytes());
        } else {
            let bytes =
                std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            hasher.update(bytes.len().to_le_bytes());
            hasher.update(&bytes);
        }
        hasher.update([0]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

/// Removes a staging directory left by an install that failed.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn npx_entries_name_their_package_and_its_arguments() {
        let f = npx(&words(
            "npx -y @modelcontextprotocol/server-filesystem@2026.8.31 .",
        ))
        .unwrap();
        assert_eq!(f.spec, "@modelcontextprotocol/server-filesystem@2026.8.31");
        assert_eq!(f.name(), "@modelcontextprotocol/server-filesystem");
        assert_eq!(f.args, vec![".".to_owned()]);
        let f = npx(&words("/usr/bin/npx some-server@1 --flag")).unwrap();
        assert_eq!(f.name(), "some-server");
        assert_eq!(f.args, vec!["--flag".to_owned()]);
        assert_eq!(npx(&words("npx --package x y")), None);
        assert_eq!(npx(&words("node x.js")), None);
    }
}
