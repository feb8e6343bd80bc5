//! Long-lived confined programs (an MCP server): [`Launch::serve`] starts
//! the program through the same confinement as [`Launch::run`] (process
//! budget, mounts, Landlock, no capabilities, seccomp, every process killed
//! when the handle drops) but leaves it running with its standard input
//! and output piped to corral and its standard error in a file.
//!
//! [`Launch::strict`] narrows what the program may read: only beneath the
//! directories it is given (its grants, which it may also write) and the
//! system directories a program needs to run, never the rest of the
//! user's home.

use super::launch::Launch;
use super::{ExecError, tree};
use std::path::{Path, PathBuf};

/// System directories any program needs to read to run: loaders,
/// libraries, interpreters, certificates, locale and time zone data.
const SYSTEM_READS: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev",
];

/// A program left running by [`Launch::serve`]. Dropping it kills every
/// process the program started.
pub struct Served {
    pipes: Option<(tokio::process::ChildStdout, tokio::process::ChildStdin)>,
    child: tokio::process::Child,
    tree: tree::Tree,
    /// The proxy of a grant naming destinations: it lives as long as the
    /// program does.
    _proxy: Option<super::Proxy>,
    /// For root without a pids cgroup: the count of the program's
    /// processes, which kills them all past the budget, as for a run.
    _watchdog: Option<tree::Watchdog>,
}

impl std::fmt::Debug for Served {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Served")
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl Served {
    /// The program's standard output and input, once.
    pub fn take_pipes(
        &mut self,
    ) -> Option<(tokio::process::ChildStdout, tokio::process::ChildStdin)> {
        self.pipes.take()
    }

    /// The program's process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Whether the program has exited (without waiting for it).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        // SIGKILL to the whole tree: a server that ignores SIGTERM dies too.
        self.tree.kill_all();
        let _ = self.child.start_kill();
    }
}

impl Launch {
    /// Lets the program read only beneath `dirs` and the system's own
    /// directories ([`SYSTEM_READS`]) and the directory holding `program`'s
    /// install (its resolved path's grandparent: a venv, `node_modules`),
    /// instead of everywhere; credentials stay out even there.
    pub fn strict(mut self, dirs: &[PathBuf], install: Option<&Path>) -> Self {
        let mut readable: Vec<PathBuf> = SYSTEM_READS.iter().map(PathBuf::from).collect();
        readable.extend(dirs.iter().cloned());
        if let Some(program) = install {
            readable.extend(install_roots(program));
            // A script's interpreter (a venv's python, `env node`) is part
            // of what it needs to run.
            if let Some(interpreter) = shebang(program) {
                readable.extend(install_roots(&interpreter));
            }
        }
        readable.retain(|p| p.exists());
        readable.sort();
        readable.dedup();
        self.readable = Some(readable);
        self
    }

    /// Starts the program confined and leaves it running, its standard
    /// error appended to `stderr`.
    pub fn serve(self, stderr: std::fs::File) -> Result<Served, ExecError> {
        let name = self
            .shown
            .clone()
            .unwrap_or_else(|| self.program.display().to_string());
        let mut cmd = self.command(&name)?;
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::from(stderr));
        let super::launch::Spawned {
            mut child,
            cgroup,
            proxy,
            watch_budget,
        } = self.spawn_confined(&mut cmd, &name)?;
        let Some(pid) = child.id() else {
            return Err(ExecError::SpawnFailed(format!(
                "`{name}` exited before it could be followed"
            )));
        };
        let tree = tree::Tree::new(pid, cgroup);
        let watchdog = watch_budget.then(|| tree.watch(super::MAX_PROCESSES as usize).0);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ExecError::SpawnFailed(format!(
                "`{name}` started without its pipes"
            )));
        };
        Ok(Served {
            pipes: Some((stdout, stdin)),
            child,
            tree,
            _proxy: proxy,
            _watchdog: watchdog,
        })
    }
}

/// The directories holding `program`'s install, as named and as resolved:
/// the grandparent of its path (`venv/bin/x` → `venv`, `node_modules/.bin/x`
/// → `node_modules`).
fn install_roots(program: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in [Some(program.to_path_buf()), program.canonicalize().ok()]
        .into_iter()
        .flatten()
    {
        out.extend(p.parent().and_then(Path::parent).map(Path::to_path_buf));
        // A package inside `node_modules` imports its siblings.
        out.extend(
            p.ancestors()
                .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
                .last()
                .map(Path::to_path_buf),
        );
    }
    out
}

/// The interpreter a script's `#!` line names (through `env`, looked up
/// in `PATH`).
fn shebang(program: &Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = words.next()?;
    if first.ends_with("/env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        super::resolve(name)
    } else {
        Some(PathBuf::from(first))
    }
}
