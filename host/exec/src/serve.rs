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

    /// The program's exit status, once it has exited (without waiting for
    /// it).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
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
    /// Lets the program read only beneath `dirs`, the system's own
    /// directories ([`SYSTEM_READS`]) and its install, instead of
    /// everywhere; credentials stay out even there.
    ///
    /// The install is the package of `program`, of the interpreter its
    /// `#!` line names, and of `script` (the file its arguments name, which
    /// an interpreter runs): see [`install_root`]. None of them is ever `/`,
    /// a top-level directory, the home directory or one above it, or a
    /// directory above `workspace`: a server started as `./srv.py` at the
    /// workspace's root reads the workspace, not the projects beside it.
    pub fn strict(
        mut self,
        dirs: &[PathBuf],
        program: Option<&Path>,
        script: Option<&Path>,
        workspace: &Path,
    ) -> Self {
        let mut readable: Vec<PathBuf> = SYSTEM_READS.iter().map(PathBuf::from).collect();
        readable.extend(dirs.iter().cloned());
        let bounds = Bounds::new(workspace);
        let mut installed: Vec<PathBuf> = program
            .into_iter()
            .chain(script)
            .map(Path::to_path_buf)
            .collect();
        // A script's interpreter (a venv's python, `env node`) is part of
        // what it needs to run.
        installed.extend(program.and_then(shebang));
        for file in &installed {
            readable.extend(install_roots(file, &bounds));
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
            registered,
        } = self.spawn_confined(&mut cmd, &name)?;
        let Some(pid) = child.id() else {
            return Err(ExecError::SpawnFailed(format!(
                "`{name}` exited before it could be followed"
            )));
        };
        let tree = tree::Tree::new(pid, cgroup);
        drop(registered);
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

/// The directories holding the install of `file`, as named and as
/// resolved (a link in `node_modules/.bin` or `~/.local/bin` leads into the
/// package), each within `bounds`.
fn install_roots(file: &Path, bounds: &Bounds) -> Vec<PathBuf> {
    [Some(lexical(file)), file.canonicalize().ok()]
        .into_iter()
        .flatten()
        .filter_map(|p| install_root(&p, bounds))
        .collect()
}

/// The package directory of `file`: the outermost `node_modules` above it
/// (a package imports its siblings); for a program in a `bin` directory
/// (`venv/bin/python`, `~/.pyenv/versions/3.12/bin/python3`) the prefix
/// above it, which holds its libraries; otherwise, or when that prefix is
/// out of `bounds`, the file's own directory (a script beside its modules).
fn install_root(file: &Path, bounds: &Bounds) -> Option<PathBuf> {
    let own = file.parent()?;
    let package = file
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .or_else(|| {
            let bin = own.file_name()?;
            (bin == "bin" || bin == "sbin" || bin == "shims")
                .then(|| own.parent())
                .flatten()
        });
    package
        .filter(|p| bounds.allow(p))
        .or_else(|| Some(own).filter(|p| bounds.allow(p)))
        .map(Path::to_path_buf)
}

/// What an install directory may never be: the root, a top-level
/// directory (all of `/usr`, `/home`, `/tmp`), a home directory or one
/// above it, a directory above the workspace. What of those a program
/// needs, [`SYSTEM_READS`] gives.
struct Bounds {
    workspace: Vec<PathBuf>,
    homes: Vec<PathBuf>,
}

impl Bounds {
    fn new(workspace: &Path) -> Self {
        let both = |p: &Path| -> Vec<PathBuf> {
            let mut v = vec![lexical(p)];
            v.extend(p.canonicalize().ok());
            v
        };
        let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
            .map(PathBuf::from)
            .into_iter()
            .chain(dirs::home_dir())
            .flat_map(|h| both(&h))
            .collect();
        homes.dedup();
        Self {
            workspace: both(workspace),
            homes,
        }
    }

    fn allow(&self, dir: &Path) -> bool {
        let canonical = dir.canonicalize().ok();
        [Some(lexical(dir)), canonical]
            .into_iter()
            .flatten()
            .all(|d| {
                d.parent().is_some_and(|p| p.parent().is_some())
                    && !self.homes.iter().any(|h| h.starts_with(&d))
                    && !self.workspace.iter().any(|w| w.starts_with(&d) && *w != d)
            })
    }
}

/// `path` made absolute and without `.` or `..`, as written (links not
/// followed): `WORKSPACE/./srv.py` is `WORKSPACE/srv.py`.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
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
