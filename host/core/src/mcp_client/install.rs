//! The packages of MCP server entries written as people copy them
//! (`npx -y PKG`, `uvx PKG`, `pipx run PKG`, `python -m PKG`, each with
//! the server's arguments): such an entry fetches its package from the
//! registry at every start, which a server confined without network cannot
//! do. corral installs the package once instead, through its one confined
//! path with the network only to the registry and writing only a staging
//! directory, into its package store; the entry then runs the installed
//! program, confined without network, and records the installed tree's
//! sha256, which [`check`] holds it to before each start.
//!
//! The store is beside corral's data directory, not in it: corral's own
//! state is kept out of every confined program's reach, and a server must
//! read its own package.

use crate::exec::{Destination, Launch, Network};
use crate::manifest::{McpPackage, McpServerDecl, PackageStore};
use crate::protocol::terminal::inert;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod pypi;
mod tree;

pub use tree::{TreeError, tree_hash};

/// npm's registry: the one destination an npm install may reach.
const NPM_REGISTRY: &str = "https://registry.npmjs.org:443";

/// How long one install may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The `PATH` an install runs with: the system's.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A package an entry fetches at each start, and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The registry it comes from.
    pub store: PackageStore,
    /// What fetches it: `npx`, `uvx`, `pipx run`, `python -m`.
    pub launcher: &'static str,
    /// The package as the entry names it: `@scope/name`, `name@1.2.3`,
    /// `name==1.2.3`.
    pub spec: String,
    /// The program of the package to run, when the entry names it apart
    /// from the package (`uvx --from PKG PROGRAM`, the module of
    /// `python -m`); else the package's own.
    pub program: Option<String>,
    /// The arguments given to the package's program.
    pub args: Vec<String>,
}

impl Fetched {
    /// The package's name, without a version.
    pub fn name(&self) -> &str {
        match self.store {
            PackageStore::Npm => {
                let (scoped, rest) = match self.spec.strip_prefix('@') {
                    Some(rest) => (true, rest),
                    None => (false, self.spec.as_str()),
                };
                let end = rest
                    .find('@')
                    .map_or(self.spec.len(), |i| i + usize::from(scoped));
                &self.spec[..end]
            }
            PackageStore::Pypi => {
                let end = self
                    .spec
                    .find(['[', '=', '<', '>', '!', '~', '@', ';', ' '])
                    .unwrap_or(self.spec.len());
                &self.spec[..end]
            }
        }
    }

    /// The origins an install reaches, as a grant writes them.
    pub fn registry(&self) -> &'static [&'static str] {
        match self.store {
            PackageStore::Npm => &[NPM_REGISTRY],
            PackageStore::Pypi => pypi::ORIGINS,
        }
    }

    /// What of the package's own code an install does not run, in words.
    pub fn unrun(&self) -> &'static str {
        match self.store {
            PackageStore::Npm => "install scripts not run",
            PackageStore::Pypi => "wheels only: no package is built, so none of its code runs",
        }
    }
}

/// The package an entry's command line fetches at each start, if it is one
/// corral understands: `npx [-y|--yes] PKG ARGS…`, `uvx [--from PKG]
/// PROGRAM ARGS…`, `pipx run [--spec PKG] PROGRAM ARGS…` or `python -m
/// MODULE ARGS…` (with any other option of those launchers, the entry is
/// left as it is).
pub fn fetched(command: &[String]) -> Option<Fetched> {
    let (program, rest) = command.split_first()?;
    let program = Path::new(program).file_name()?.to_str()?;
    match program {
        "npx" => npx(rest),
        "uvx" => pypi::named(rest, "uvx", "--from"),
        "pipx" if rest.first().is_some_and(|w| w == "run") => {
            pypi::named(&rest[1..], "pipx run", "--spec")
        }
        p if p == "python"
            || p.strip_prefix("python3")
                .is_some_and(|v| v.is_empty() || v.starts_with('.')) =>
        {
            pypi::module(rest)
        }
        _ => None,
    }
}

/// `npx [-y|--yes] PKG ARGS…` without `npx`.
fn npx(rest: &[String]) -> Option<Fetched> {
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
        store: PackageStore::Npm,
        launcher: "npx",
        spec,
        program: None,
        args: words.cloned().collect(),
    })
}

/// Why a package could not be installed, found or checked; its text is the
/// message for the user.
#[derive(Debug, thiserror::Error)]
pub enum McpInstallError {
    /// No data directory to put the package store beside.
    #[error("cannot find the data directory for the MCP package store; set HOME or XDG_DATA_HOME")]
    NoStore,
    /// No data directory for corral's own state.
    #[error("cannot find corral's data directory; set HOME or XDG_DATA_HOME")]
    NoDataDir,
    /// An entry's package did not pass [`check`].
    #[error("[mcp.{name}] was not started: {why}")]
    NotStarted {
        /// The entry's name.
        name: String,
        /// Why.
        why: Box<CheckError>,
    },
    /// The program that installs is not on this machine.
    #[error(
        "cannot install `{}`: {program} is not installed (not found in PATH); {hint}",
        inert(spec)
    )]
    NoInstaller {
        /// The package, as the entry names it.
        spec: String,
        /// `npm`, `python3`.
        program: &'static str,
        /// What to install.
        hint: &'static str,
    },
    /// A directory or file of the install cannot be written.
    #[error("cannot {what} {}: {why}", path.display())]
    Io {
        /// `make`, `write in`, `replace`, `move the install into`.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system's reason, in words.
        why: String,
    },
    /// A registry's address does not parse.
    #[error(transparent)]
    Destination(#[from] crate::exec::DestinationError),
    /// The install's program could not be run.
    #[error("cannot install `{}`: {why}", inert(spec))]
    Launch {
        /// The package, as the entry names it.
        spec: String,
        /// Why, in words.
        why: String,
    },
    /// `python3` could not be run to ask which interpreter it is.
    #[error("cannot run {}: {why}", program.display())]
    Run {
        /// The program.
        program: PathBuf,
        /// Why, in words.
        why: String,
    },
    /// `python3` did not say which interpreter it is.
    #[error(
        "{} did not say which interpreter it is (exit {exit:?}): {}",
        program.display(),
        inert(stderr.trim())
    )]
    Interpreter {
        /// The program.
        program: PathBuf,
        /// Its exit code.
        exit: Option<i32>,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// The install's program failed.
    #[error(
        "{tool} could not install `{}` (exit {}{}): {}{}",
        inert(spec),
        exit.map_or("by a signal".to_owned(), |c| c.to_string()),
        if *timed_out { ", timed out" } else { "" },
        inert(stderr.trim()),
        if *source_only {
            " (corral installs wheels only, so that no package's code runs to build it: a \
             package published only as source cannot be installed this way)"
        } else {
            ""
        }
    )]
    Failed {
        /// `npm`, `pip`.
        tool: &'static str,
        /// The package, as the entry names it.
        spec: String,
        /// Its exit code (none: a signal).
        exit: Option<i32>,
        /// Whether it ran out of time.
        timed_out: bool,
        /// What it wrote to stderr.
        stderr: String,
        /// Whether pip found no wheel (the package is published only as
        /// source).
        source_only: bool,
    },
    /// npm left no readable `package.json` for the package.
    #[error(
        "npm installed `{}` but its package.json ({}) is missing or not JSON",
        inert(spec),
        path.display()
    )]
    NoPackageJson {
        /// The package, as the entry names it.
        spec: String,
        /// Where its `package.json` should be.
        path: PathBuf,
    },
    /// pip left no record of the distribution.
    #[error(
        "pip installed `{}` but left no record of it (no {wanted}-*.dist-info with its \
         METADATA in {})",
        inert(spec),
        dir.display()
    )]
    NoRecord {
        /// The package, as the entry names it.
        spec: String,
        /// The distribution's normalized name.
        wanted: String,
        /// Where pip installed.
        dir: PathBuf,
    },
    /// The npm package names no program.
    #[error("`{}` has no program to run (its package.json names no `bin`)", inert(.0))]
    NoBin(String),
    /// The Python package has no such console script.
    #[error(
        "`{}` has no program `{}` (its entry_points.txt names no such console_scripts)",
        inert(spec),
        inert(script)
    )]
    NoScript {
        /// The package, as the entry names it.
        spec: String,
        /// The program asked for.
        script: String,
    },
    /// The installed tree could not be hashed.
    #[error(transparent)]
    Tree(#[from] TreeError),
}

/// Why an entry's installed package may not start (see [`check`]).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Its directory is not in the store.
    #[error(
        "its package {} is not in corral's package store (no {}); {again}",
        inert(package),
        dir.display()
    )]
    Missing {
        /// The package, as shown (`store:name@version`).
        package: String,
        /// Its directory.
        dir: PathBuf,
        /// How to install it again.
        again: String,
    },
    /// Its files could not be read.
    #[error("cannot check its package: {0}")]
    Unreadable(TreeError),
    /// Its files are not those installed.
    #[error(
        "its package {} changed since it was installed: the files in {} have the sha256 {now}, \
         the install recorded {recorded}. Something other than corral wrote there; {again}",
        inert(package),
        dir.display()
    )]
    Changed {
        /// The package, as shown (`store:name@version`).
        package: String,
        /// Its directory.
        dir: PathBuf,
        /// The sha256 of its files now.
        now: String,
        /// The sha256 its install recorded.
        recorded: String,
        /// How to install it again.
        again: String,
    },
}

impl From<McpInstallError> for String {
    fn from(e: McpInstallError) -> Self {
        e.to_string()
    }
}

impl McpInstallError {
    fn io(what: &'static str, path: &Path, e: &std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.to_path_buf(),
            why: e.to_string(),
        }
    }
}

/// A package installed in the store.
#[derive(Debug, Clone)]
pub struct Installed {
    /// The command line that runs it, before the entry's own arguments:
    /// the package's program in the store, or the interpreter and what it
    /// runs.
    pub command: Vec<String>,
    /// Variables the program needs to find its package.
    pub env: Vec<(String, String)>,
    /// What the entry records of it: the registry, its name, the version
    /// the registry resolved and the sha256 of the installed tree (paths,
    /// contents, link targets), checked before each start.
    pub package: McpPackage,
}

/// Where installed packages are kept: `$XDG_DATA_HOME/corral-mcp-packages`.
pub fn store() -> Result<PathBuf, McpInstallError> {
    dirs::data_dir()
        .map(|d| d.join("corral-mcp-packages"))
        .ok_or(McpInstallError::NoStore)
}

/// Where the hashes of installed trees are kept with their identity
/// (module `tree`): in corral's data directory, out of every confined
/// program's reach.
fn kept_hashes() -> Result<PathBuf, McpInstallError> {
    dirs::data_dir()
        .map(|d| d.join("corral").join("mcp-package-hashes"))
        .ok_or(McpInstallError::NoDataDir)
}

/// Checks, before `decl` starts, that the files of the package it runs are
/// those its install recorded (their sha256); the package's directory,
/// which the server reads as its install.
pub fn check(decl: &McpServerDecl, package: &McpPackage) -> Result<PathBuf, McpInstallError> {
    let dir = package.path_in(&store()?);
    let again = format!(
        "install it again: `corral mcp import FILE --yes` with the file it came from, or \
         `corral mcp add {} -- {}` (either replaces the directory whole); or remove the \
         `package` line of [mcp.{}] in {} to run what is there unchecked",
        decl.name,
        reinstall_command(package),
        decl.name,
        decl.file
    );
    let not_started = |why: CheckError| McpInstallError::NotStarted {
        name: decl.name.clone(),
        why: Box::new(why),
    };
    if !dir.is_dir() {
        return Err(not_started(CheckError::Missing {
            package: package.shown(),
            dir,
            again,
        }));
    }
    let started = std::time::Instant::now();
    let now = tree::current_hash(&dir, &kept_hashes()?)
        .map_err(|e| not_started(CheckError::Unreadable(e)))?;
    tracing::debug!(
        "[mcp.{}]: package {} checked in {:?}",
        decl.name,
        package.shown(),
        started.elapsed()
    );
    if now != package.sha256 {
        return Err(not_started(CheckError::Changed {
            package: package.shown(),
            dir,
            now,
            recorded: package.sha256.clone(),
            again,
        }));
    }
    Ok(dir)
}

/// The command line that installs `package` again through `corral mcp add`.
fn reinstall_command(package: &McpPackage) -> String {
    match package.store {
        PackageStore::Npm => format!("npx -y {}", package.shown()),
        PackageStore::Pypi => format!("uvx {}", package.shown()),
    }
}

/// Installs `package` from its registry into the store (see the module
/// docs): what runs it, and what the entry records of it.
pub fn install(package: &Fetched) -> Result<Installed, McpInstallError> {
    match package.store {
        PackageStore::Npm => install_npm(package),
        PackageStore::Pypi => pypi::install(package),
    }
}

/// A directory an install writes, in the store's file system (so that the
/// finished install is renamed into place, never copied), with a home of
/// its own inside; removed unless [`Staging::into_store`] moved it.
struct Staging {
    dir: PathBuf,
    home: PathBuf,
    store: PathBuf,
}

impl Staging {
    fn new() -> Result<Self, McpInstallError> {
        let store = store()?;
        let dir = store.join(format!(".staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join(".home");
        std::fs::create_dir_all(&home).map_err(|e| McpInstallError::io("make", &dir, &e))?;
        Ok(Self { dir, home, store })
    }

    /// Moves what was installed into the store as `package` (its home
    /// left out), hashing it first; its directory there.
    fn into_store(
        self,
        store: PackageStore,
        name: &str,
        version: String,
    ) -> Result<(PathBuf, McpPackage), McpInstallError> {
        let _ = std::fs::remove_dir_all(&self.home);
        let package = McpPackage {
            store,
            name: name.to_owned(),
            version,
            sha256: tree_hash(&self.dir)?,
        };
        let dir = package.path_in(&self.store);
        if dir.exists() {
            // What is there was installed before: the new install replaces
            // it whole, never merged with it.
            std::fs::remove_dir_all(&dir).map_err(|e| McpInstallError::io("replace", &dir, &e))?;
        }
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| McpInstallError::io("make", parent, &e))?;
        }
        std::fs::rename(&self.dir, &dir)
            .map_err(|e| McpInstallError::io("move the install into", &dir, &e))?;
        Ok((dir, package))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The installer `program`, found where the system keeps programs, or why
/// installing `spec` cannot start, with `hint` to get it.
fn installer(
    spec: &str,
    program: &'static str,
    hint: &'static str,
) -> Result<PathBuf, McpInstallError> {
    crate::exec::resolve(program).ok_or_else(|| McpInstallError::NoInstaller {
        spec: spec.to_owned(),
        program,
        hint,
    })
}

/// Runs the installer `launch` for `spec`, within [`INSTALL_TIMEOUT`].
fn run_installer(launch: Launch, spec: &str) -> Result<crate::exec::ExecOutput, McpInstallError> {
    launch
        .timeout(INSTALL_TIMEOUT)
        .run_blocking()
        .map_err(|e| McpInstallError::Launch {
            spec: spec.to_owned(),
            why: e.to_string(),
        })
}

/// Why an install's program failed.
fn failed(tool: &'static str, spec: &str, out: &crate::exec::ExecOutput) -> McpInstallError {
    McpInstallError::Failed {
        tool,
        spec: spec.to_owned(),
        exit: out.exit_code,
        timed_out: out.timed_out,
        stderr: out.stderr.clone(),
        source_only: false,
    }
}

/// Installs `package` from npm's registry, install scripts not run.
fn install_npm(package: &Fetched) -> Result<Installed, McpInstallError> {
    let spec = &package.spec;
    let npm = installer(spec, "npm", "install Node.js, which brings npm")?;
    let stage = Staging::new()?;
    let (staging, home) = (stage.dir.clone(), stage.home.clone());
    std::fs::write(staging.join("package.json"), "{\"private\":true}\n")
        .map_err(|e| McpInstallError::io("write in", &staging, &e))?;
    let registry = Destination::parse(NPM_REGISTRY)?;
    let launch = Launch::new(&npm, &staging)
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
        .env("PATH", SYSTEM_PATH)
        .network(Network::Only(vec![registry]))
        .writable(&staging);
    let out = run_installer(launch, spec)?;
    if out.exit_code != Some(0) {
        return Err(failed("npm", spec, &out));
    }
    let name = package.name();
    let manifest_path = staging.join("node_modules").join(name).join("package.json");
    let manifest: serde_json::Value = std::fs::read_to_string(&manifest_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| McpInstallError::NoPackageJson {
            spec: spec.clone(),
            path: manifest_path.clone(),
        })?;
    let version = manifest["version"].as_str().unwrap_or("unknown").to_owned();
    let bin = program_of(name, &manifest).ok_or_else(|| McpInstallError::NoBin(spec.clone()))?;
    let (dir, package) = stage.into_store(PackageStore::Npm, name, version)?;
    Ok(Installed {
        command: vec![
            dir.join("node_modules")
                .join(".bin")
                .join(bin)
                .display()
                .to_string(),
        ],
        env: Vec::new(),
        package,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn npx_entries_name_their_package_and_its_arguments() {
        let f = fetched(&words(
            "npx -y @modelcontextprotocol/server-filesystem@2026.8.31 .",
        ))
        .unwrap();
        assert_eq!(f.spec, "@modelcontextprotocol/server-filesystem@2026.8.31");
        assert_eq!(f.name(), "@modelcontextprotocol/server-filesystem");
        assert_eq!(f.args, vec![".".to_owned()]);
        let f = fetched(&words("/usr/bin/npx some-server@1 --flag")).unwrap();
        assert_eq!(f.name(), "some-server");
        assert_eq!(f.args, vec!["--flag".to_owned()]);
        assert_eq!(fetched(&words("npx --package x y")), None);
        assert_eq!(fetched(&words("node x.js")), None);
    }

    #[test]
    fn python_entries_name_their_package_program_and_arguments() {
        let f = fetched(&words(
            "uvx mcp-server-fetch@2026.10.24 --ignore-robots-txt",
        ))
        .unwrap();
        assert_eq!(
            (f.store, f.launcher, f.name(), f.program.as_deref()),
            (PackageStore::Pypi, "uvx", "mcp-server-fetch", None)
        );
        assert_eq!(pypi::pip_spec(&f.spec), "mcp-server-fetch==2026.10.24");
        assert_eq!(f.args, vec!["--ignore-robots-txt".to_owned()]);
        let f = fetched(&words("uvx --from mcp-server-git==1.0 mcp-server-git -r .")).unwrap();
        assert_eq!(
            (f.name(), f.program.as_deref()),
            ("mcp-server-git", Some("mcp-server-git"))
        );
        let f = fetched(&words("pipx run --spec x-tools x-server")).unwrap();
        assert_eq!(
            (f.launcher, f.name(), f.program.as_deref()),
            ("pipx run", "x-tools", Some("x-server"))
        );
        let f = fetched(&words("python3 -m mcp_server_time --local-timezone UTC")).unwrap();
        assert_eq!(
            (f.launcher, f.name(), f.program.as_deref()),
            ("python -m", "mcp_server_time", Some("mcp_server_time"))
        );
        assert_eq!(f.args.len(), 2);
        assert_eq!(fetched(&words("uvx --python 3.12 x")), None);
        assert_eq!(fetched(&words("python3 server.py")), None);
        assert_eq!(fetched(&words("python -m http.server")), None);
        assert_eq!(fetched(&words("pipx install x")), None);
        assert_eq!(fetched(&words("uvx git+https://example.com/x")), None);
    }
}
