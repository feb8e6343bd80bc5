//! Running programs for plugins granted `exec`: the program is resolved when
//! the manifest is loaded, every call's arguments are checked against the
//! grant's patterns, and the program runs without a shell, in the workspace,
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
//!   `network = true`.
//! - A process budget: a `pids` cgroup when the host may create one,
//!   `RLIMIT_NPROC` otherwise, and for root without a cgroup (whom
//!   `RLIMIT_NPROC` does not bind) a count of the run's processes, so a fork
//!   bomb hits a wall.
//! - A seccomp filter: no UNIX sockets (a session bus or a container daemon
//!   would run commands outside the sandbox), no IPv4/IPv6 sockets unless
//!   the grant says `network = true`, no `io_uring`.
//! - No capabilities (a program run as root loses root's privileges), and
//!   corral itself non-dumpable, so that a program cannot read its parent's
//!   environment or memory, where the provider keys are.
//!
//! Every confinement step is checked: if one fails, the program does not
//! run. Where the kernel lacks Landlock, corral says so once and, unless
//! `[sandbox] require_os_sandbox = false`, refuses to run programs.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::AsyncReadExt;

mod cgroup;
mod confine;
mod landlock;
mod privileges;
mod seccomp;
mod tree;

pub use confine::{Confinement, confine_helper, confine_helper_writing, confinement};
pub use tree::{HostChild, adopt_orphans};

use cgroup::{PidsCgroup, join_cgroup};
use confine::ChildConfinement;
use privileges::nproc_limit;

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
    /// Argument patterns: literal tokens, `*` (one argument), `**` (the rest).
    pub args: Vec<String>,
    /// Wall-clock limit per run.
    pub timeout_ms: u64,
    /// Whether the program may open TCP connections.
    pub network: bool,
}

impl ExecGrant {
    /// Whether `args` fit this grant's patterns.
    pub fn allows(&self, args: &[String]) -> bool {
        matches(&self.args, args)
    }
}

/// The `program` of a grant that lets a plugin run any program: a name
/// looked up in `PATH` when the command runs, or a path.
pub const ANY_PROGRAM: &str = "*";

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

/// Whether `args` fit `pattern` (`*` one argument, `**` the rest).
pub fn matches(pattern: &[String], args: &[String]) -> bool {
    match (pattern.first().map(String::as_str), args.first()) {
        (Some("**"), _) => true,
        (Some("*"), Some(_)) => matches(&pattern[1..], &args[1..]),
        (Some(p), Some(a)) => p == a && matches(&pattern[1..], &args[1..]),
        (None, None) => true,
        _ => false,
    }
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
            return Err(ExecError::NotGranted(format!(
                "plugin `{plugin}` may not run `{program} {}`; granted: {}",
                args.join(" "),
                patterns.join("; ")
            )));
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

        let mut cmd = tokio::process::Command::new(&path);
        cmd.args(args)
            .current_dir(&dir)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for var in BASE_ENV
            .iter()
            .map(|v| v.to_string())
            .chain(self.env.iter().cloned())
        {
            if let Some(value) = std::env::var_os(&var) {
                cmd.env(&var, value);
            }
        }
        cmd.env("TMPDIR", tmp.path());

        let confine = ChildConfinement::prepare(&[&self.workspace, tmp.path()], grant.network)
            .map_err(|e| {
                ExecError::SpawnFailed(format!("cannot prepare the Landlock ruleset: {e}"))
            })?;
        tree::Tree::prepare();
        let cgroup = PidsCgroup::create();
        let cgroup_tasks = cgroup.as_ref().map(|c| c.tasks.clone());
        // Root is exempt from RLIMIT_NPROC, so without a cgroup corral
        // counts the run's processes itself.
        // SAFETY: getuid takes nothing and cannot fail.
        let watch_budget = cgroup.is_none() && unsafe { libc::getuid() } == 0;
        let nproc = nproc_limit();
        // SAFETY: the closure runs in the forked child before exec. It only
        // makes syscalls (setrlimit, open/write of a path prepared in the
        // parent, then `ChildConfinement::apply`'s), and fails the spawn
        // when any of them fails.
        unsafe {
            cmd.pre_exec(move || {
                let limit = libc::rlimit {
                    rlim_cur: nproc,
                    rlim_max: nproc,
                };
                if libc::setrlimit(libc::RLIMIT_NPROC, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(tasks) = &cgroup_tasks {
                    join_cgroup(tasks)?;
                }
                confine.apply()
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            ExecError::SpawnFailed(if e.kind() == std::io::ErrorKind::NotFound {
                format!("cannot start `{program}`: it is not installed (not found in PATH)")
            } else {
                format!("cannot start `{program}`: {e}")
            })
        })?;
        let Some(pid) = child.id() else {
            return Err(ExecError::SpawnFailed(format!(
                "`{program}` exited before it could be followed"
            )));
        };
        // From here on, dropping this (a cancelled call) kills the whole run.
        let mut tree = tree::Tree::new(pid, cgroup);
        let cap = self.output_cap;
        let out = tokio::spawn(read_capped(child.stdout.take(), cap));
        let err = tokio::spawn(read_capped(child.stderr.take(), cap));
        let (watchdog, budget) = if watch_budget {
            let (guard, fired) = tree.watch(MAX_PROCESSES as usize);
            (Some(guard), Some(fired))
        } else {
            (None, None)
        };
        let budget = async {
            if let Some(fired) = budget
                && fired.await.is_ok()
            {
                return;
            }
            std::future::pending().await
        };
        let (status, over_budget) = tokio::select! {
            s = tokio::time::timeout(timeout, child.wait()) => (s, false),
            () = budget => (Ok(Err(std::io::Error::other("process budget"))), true),
        };
        // The program may have died of the budget's kill before the budget's
        // message arrived.
        let over_budget = over_budget || watchdog.as_ref().is_some_and(|w| w.fired());
        // Whatever happened, nothing the program started may outlive the run.
        tree.kill_all();
        let (exit_code, timed_out) = match status {
            Ok(Ok(s)) => (s.code(), false),
            Ok(Err(_)) if over_budget => {
                let _ = child.wait().await;
                (None, false)
            }
            Ok(Err(e)) => {
                return Err(ExecError::SpawnFailed(format!(
                    "waiting for `{program}`: {e}"
                )));
            }
            Err(_) => {
                let _ = child.kill().await;
                (None, true)
            }
        };
        let grace = Duration::from_secs(2);
        let (stdout, t1) = tokio::time::timeout(grace, out)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let (mut stderr, t2) = tokio::time::timeout(grace, err)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        drop(tree);
        if over_budget {
            stderr.push_str(&format!(
                "\n[corral: the program had more than {MAX_PROCESSES} processes at once; all of them were killed]"
            ));
        }
        Ok(ExecOutput {
            exit_code,
            stdout,
            stderr,
            truncated: t1 || t2,
            timed_out,
        })
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

/// Reads a pipe to the end, keeping at most `cap` bytes.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    cap: usize,
) -> (String, bool) {
    let Some(mut pipe) = pipe else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut cut = false;
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if cut {
        text.push_str(&format!("\n[output cut at {cap} bytes]"));
    }
    (text, cut)
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
        assert!(matches(&v("status *"), &v("status -s")));
        assert!(!matches(&v("status *"), &v("status")));
        assert!(!matches(&v("status *"), &v("status -s -b")));
        assert!(matches(&v("--version"), &v("--version")));
        assert!(!matches(&v(""), &v("x")));
        assert!(matches(&v(""), &v("")));
    }
}
