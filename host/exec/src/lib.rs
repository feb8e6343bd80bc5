//! # corral-exec
//!
//! A bottom layer, beside the protocol: the one confined path for native programs
//! (exports [`Launch`], [`Exec`] grants, [`git`]) and bounded reads of
//! regular files ([`fsread`]).
//!
//! Running native programs. Every program corral starts, for plugins
//! granted `exec` ([`Exec`]) and for itself ([`git`]), goes through one
//! function, [`Launch::run`]. For plugins the program is resolved when
//! the manifest is loaded, every call's arguments are checked against the
//! grant's patterns (an argument filling a `*` may not start with `-`), and
//! the program runs without a shell, in the workspace,
//! with an allow-listed environment, a timeout, an output cap and, on Linux,
//! confinement. When the run ends, however it ends (exit, timeout, the
//! call's future dropped), every process it started is killed, those that
//! left its process group included (see [`tree`]). A grant of
//! [`ANY_PROGRAM`] lets a plugin run any program; the confinement is the same:
//!
//! - Landlock: the program may read everywhere except credentials in the
//!   user's home (`~/.ssh`, `~/.aws`, ...) and corral's session logs, and
//!   write only beneath the workspace and a private temp directory (and
//!   `/dev/null`); TCP connect and bind are denied unless the grant says
//!   `network = true`, and limited to corral's proxy when it names
//!   destinations (`network = ["https://crates.io:443"]`, see [`Network`]):
//!   then the program runs in a network namespace of its own whose only way
//!   out is that proxy ([`Proxy`]), which checks every connection.
//! - A process budget: a `pids` cgroup when the host may create one,
//!   `RLIMIT_NPROC` otherwise, and for root without a cgroup (whom
//!   `RLIMIT_NPROC` does not bind) a count of the run's processes, so a fork
//!   bomb hits a wall.
//! - A seccomp filter: no UNIX sockets (a session bus or a container daemon
//!   would run commands outside the sandbox), no IPv4/IPv6 sockets unless
//!   the grant says `network = true`, no `io_uring`.
//! - corral's own state ([`state`]) out of reach: the user's corral
//!   configuration, data and cache directories neither readable nor
//!   writable (left out of every Landlock rule), the project's
//!   `corral.toml` and `.corral/` read-only (below).
//! - The repository's `.git` and corral's `corral.toml` and `.corral/` read-only: bind
//!   mounts in a private mount namespace of the child (see `exec/launch.rs`),
//!   which the seccomp filter keeps it from undoing.
//! - No capabilities (a program run as root loses root's privileges), and
//!   corral itself non-dumpable, so that a program cannot read its parent's
//!   environment or memory, where the provider keys are.
//!
//! Every confinement step is checked: if one fails, the program does not
//! run. Where the kernel lacks Landlock, corral says so once and, unless
//! `[sandbox] require_os_sandbox = false`, refuses to run programs.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

pub mod fsread;

use std::path::{Path, PathBuf};
use std::time::Duration;

mod cgroup;
mod confine;
pub mod git;
mod landlock;
mod launch;
mod netns;
mod network;
mod privileges;
mod proxy;
mod seccomp;
mod serve;
pub mod state;
mod step;
mod tree;

pub use confine::{Confinement, confinement};
pub use launch::{Launch, protected_paths};
pub use netns::PROXY_PORT;
pub use network::{Destination, DestinationError, Network, Scheme};
pub use proxy::{HEAD_TIMEOUT, MAX_CONNECTIONS, MAX_HEAD, Proxy};
pub use serve::Served;
pub use tree::{HostChild, adopt_orphans};

use cgroup::PidsCgroup;

/// Default wall-clock limit of one program run.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Processes one run may have at once.
const MAX_PROCESSES: u64 = 256;
/// Environment variables passed through from corral's environment to every program.
const BASE_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "USER",
    "CARGO_HOME",
    "RUSTUP_HOME",
];

/// The credential stores programs may not read (`~/.ssh`, `~/.aws`, ...)
/// and corral's own data, those that exist, by canonical path. Content read
/// from them is sensitive to the exfiltration guard.
pub fn credential_stores() -> Vec<PathBuf> {
    landlock::secret_paths()
}

/// A program a plugin may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecGrant {
    /// The name as written (`cargo`).
    pub program: String,
    /// Where it was found when the manifest was loaded.
    pub path: PathBuf,
    /// Argument patterns: literal tokens, `*` (one argument not starting
    /// with `-`), `**` (the rest).
    pub args: Vec<String>,
    /// Wall-clock limit per run.
    pub timeout_ms: u64,
    /// The network the program gets: none, any, or only some destinations.
    pub network: Network,
}

impl ExecGrant {
    /// Whether `args` fit this grant's patterns.
    pub fn allows(&self, args: &[String]) -> bool {
        matches(&self.args, args)
    }
}

pub use corral_protocol::ANY_PROGRAM;

/// Where `program` is, for a grant of [`ANY_PROGRAM`]: found in `PATH` like
/// a shell would, or a path, relative ones from the working directory `dir`.
fn any_program(program: &str, dir: &Path) -> Result<PathBuf, ExecError> {
    let found = if program.contains('/') {
        resolve(&dir.join(program).to_string_lossy())
    } else {
        resolve(program)
    };
    found.ok_or_else(|| {
        ExecError::Invalid(format!(
            "`{program}` is not an executable program{}",
            if program.contains('/') {
                " at that path"
            } else {
                " in PATH; check its name, or that it is installed"
            }
        ))
    })
}

/// Whether `args` fit `pattern` (`*` one argument that is not an option,
/// `**` the rest). An argument filling a `*` is text the model or a hook
/// chose, a file name say, so one starting with `-` does not fit: the
/// program would read it as an option (`--plugin=./evil.mjs`).
pub fn matches(pattern: &[String], args: &[String]) -> bool {
    match (pattern.first().map(String::as_str), args.first()) {
        (Some("**"), _) => true,
        (Some("*"), Some(a)) => !a.starts_with('-') && matches(&pattern[1..], &args[1..]),
        (Some(p), Some(a)) => p == a && matches(&pattern[1..], &args[1..]),
        (None, None) => true,
        _ => false,
    }
}

/// The argument starting with `-` that keeps `args` from fitting
/// `pattern` only because it fills a `*`, if that is why.
fn option_in_slot<'a>(pattern: &[String], args: &'a [String]) -> Option<&'a str> {
    let mut slot = None;
    let loosened: Vec<String> = pattern
        .iter()
        .zip(args)
        .map(|(p, a)| {
            if p == "*" && a.starts_with('-') && slot.is_none() {
                slot = Some(a.as_str());
                a.clone()
            } else {
                p.clone()
            }
        })
        .chain(pattern.iter().skip(args.len()).cloned())
        .collect();
    slot.filter(|_| matches(&loosened, args))
}

/// Finds `program` the way a shell would (`PATH`), or checks the path given.
pub fn resolve(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    // Not canonicalized: rustup's proxies (cargo, rustc) are symlinks that
    // pick the tool by the name they are started as.
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| executable(p))
}

/// Why a program did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecError {
    /// Not granted.
    #[error("{0}")]
    NotGranted(String),
    /// A bad request.
    #[error("{0}")]
    Invalid(String),
    /// Could not start.
    #[error("{0}")]
    SpawnFailed(String),
}

/// What a program did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutput {
    /// Exit code, if it exited normally.
    pub exit_code: Option<i32>,
    /// Standard output, cut at the cap.
    pub stdout: String,
    /// Standard error, cut at the cap.
    pub stderr: String,
    /// Whether output was cut.
    pub truncated: bool,
    /// Whether the timeout killed it.
    pub timed_out: bool,
}

/// The programs one plugin may run, and how.
#[derive(Debug, Clone)]
pub struct Exec {
    /// The plugin's name, for messages.
    pub plugin: String,
    /// Its grants.
    pub grants: Vec<ExecGrant>,
    /// The canonical workspace root.
    pub workspace: PathBuf,
    /// Extra variables the plugin's `grants.env` passes through.
    pub env: Vec<String>,
    /// Bytes kept of stdout and of stderr (each).
    pub output_cap: usize,
    /// Refuse to run programs when the kernel cannot confine them.
    pub require_os_sandbox: bool,
    /// Make the workspace's `.git` read-only for the programs (corral's
    /// manifest is read-only for them always); false only for the built-in
    /// git plugin, whose tools change the repository by design.
    pub protect_git: bool,
    /// Give the programs no writable workspace: the tool that runs them
    /// declares reading and not writing, so what it runs may read the
    /// workspace and change nothing in it (`git diff` cannot refresh the
    /// index).
    pub read_only: bool,
}

impl Exec {
    /// The grant a run of `program` with `args` goes by, as [`Exec::run`]
    /// picks it.
    pub fn grant_for(&self, program: &str, args: &[String]) -> Option<&ExecGrant> {
        self.grants
            .iter()
            .filter(|g| g.program == program || g.program == ANY_PROGRAM)
            .find(|g| g.allows(args))
    }

    /// Runs `program` with `args` after checking the grant and the working directory.
    pub async fn run(
        &self,
        program: &str,
        args: &[String],
        cwd: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> Result<ExecOutput, ExecError> {
        let plugin = &self.plugin;
        let candidates: Vec<&ExecGrant> = self
            .grants
            .iter()
            .filter(|g| g.program == program || g.program == ANY_PROGRAM)
            .collect();
        if candidates.is_empty() {
            let granted: Vec<&str> = self.grants.iter().map(|g| g.program.as_str()).collect();
            return Err(ExecError::NotGranted(format!(
                "plugin `{plugin}` may not run `{program}`; granted programs: {}. Add {{ program = \"{program}\", args = [\"**\"] }} to its grants.exec to allow it",
                if granted.is_empty() {
                    "none".to_owned()
                } else {
                    granted.join(", ")
                }
            )));
        }
        let Some(grant) = candidates.iter().find(|g| g.allows(args)) else {
            let patterns: Vec<String> = candidates
                .iter()
                .map(|g| format!("{program} {}", g.args.join(" ")))
                .collect();
            let option = candidates
                .iter()
                .find_map(|g| option_in_slot(&g.args, args));
            return Err(ExecError::NotGranted(match option {
                Some(arg) => format!(
                    "plugin `{plugin}` may not run `{program} {}`: `{}` fills a `*` of the grant but starts with `-`, so `{program}` would read it as an option. A file named like that can be passed as `./{}`; a grant that means to allow options says `**`. Granted: {}",
                    args.join(" "),
                    arg.escape_debug(),
                    arg.escape_debug(),
                    patterns.join("; ")
                ),
                None => format!(
                    "plugin `{plugin}` may not run `{program} {}`; granted: {}",
                    args.join(" "),
                    patterns.join("; ")
                ),
            }));
        };
        let confined = confinement();
        if confined == Confinement::Unavailable && self.require_os_sandbox {
            return Err(ExecError::SpawnFailed(
                "this kernel cannot confine programs (no Landlock) and [sandbox] require_os_sandbox is true".into(),
            ));
        }
        let dir = self.working_dir(cwd)?;
        let path = if grant.program == ANY_PROGRAM {
            any_program(program, &dir)?
        } else {
            grant.path.clone()
        };
        let tmp = tempfile::Builder::new()
            .prefix("corral-exec-")
            .tempdir()
            .map_err(|e| ExecError::SpawnFailed(format!("cannot create a temp directory: {e}")))?;
        let timeout =
            Duration::from_millis(timeout_ms.unwrap_or(grant.timeout_ms).min(grant.timeout_ms));
        let mut launch = Launch::new(path, &dir)
            .named(program)
            .args(args)
            .pass_env(BASE_ENV)
            .pass_env(&self.env)
            .env("TMPDIR", tmp.path())
            .writable(tmp.path())
            .network(grant.network.clone())
            .timeout(timeout)
            .output_cap(self.output_cap);
        if !self.read_only {
            launch = launch.writable(&self.workspace);
        }
        for p in protected_paths(&self.workspace, self.protect_git) {
            launch = launch.read_only(p);
        }
        let out = launch.run().await;
        // The program is gone: its temp directory may go too.
        drop(tmp);
        out
    }

    /// The working directory: inside the workspace, symlinks resolved.
    fn working_dir(&self, cwd: Option<&str>) -> Result<PathBuf, ExecError> {
        let Some(rel) = cwd.filter(|c| !c.is_empty() && *c != ".") else {
            return Ok(self.workspace.clone());
        };
        if Path::new(rel).is_absolute() {
            return Err(ExecError::Invalid(format!(
                "cwd `{rel}` must be relative to the workspace root"
            )));
        }
        let dir = self
            .workspace
            .join(rel)
            .canonicalize()
            .map_err(|e| ExecError::Invalid(format!("cwd `{rel}`: {e}")))?;
        if !dir.starts_with(&self.workspace) || !dir.is_dir() {
            return Err(ExecError::Invalid(format!(
                "cwd `{rel}` is not a directory inside the workspace"
            )));
        }
        Ok(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn argument_patterns() {
        assert!(matches(&v("test **"), &v("test")));
        assert!(matches(&v("test **"), &v("test --release -p x")));
        assert!(!matches(&v("test **"), &v("build")));
        assert!(!matches(&v("status *"), &v("status -s")));
        assert!(matches(&v("status *"), &v("status s")));
        assert!(matches(&v("status **"), &v("status -s")));
        assert!(!matches(&v("--write *"), &v("--write --plugin=./evil.mjs")));
        assert!(matches(
            &v("--write *"),
            &v("--write ./--plugin=./evil.mjs")
        ));
        assert!(!matches(&v("status *"), &v("status")));
        assert!(!matches(&v("status *"), &v("status s -b")));
        assert!(matches(&v("--version"), &v("--version")));
        assert!(!matches(&v(""), &v("x")));
        assert!(matches(&v(""), &v("")));
    }
}
