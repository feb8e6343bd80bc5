//! [`Launch`]: the one way corral starts a native program, whether a plugin
//! asked for it (`grants.exec`, hooks' formatters) or corral needs it for
//! itself (git for the model's context, the UI's `/diff`, worktrees).
//!
//! Every launch gets the whole confinement: a scrubbed environment, a
//! process budget, Landlock, no capabilities, the seccomp filter, a
//! deadline, capped output and, whatever way the run ends, every process it
//! started killed. On top of that, the paths it is given as read-only (the
//! repository's `.git`, corral's manifest) are bind-mounted read-only in a
//! private mount namespace of the child before anything else is dropped, so
//! that a program allowed to write the workspace still cannot plant
//! `core.fsmonitor` in `.git/config` for the user's next `git status`. The
//! seccomp filter then refuses the system calls that could undo it
//! (`mount`, `umount2`, `unshare`, `setns`, ...), and no capability is left.
//! Any step that fails stops the program before it runs, with the step
//! named in the error.

use super::cgroup::{PidsCgroup, join_cgroup};
use super::confine::ChildConfinement;
use super::netns::{Handoff, PROXY_URL};
use super::privileges::nproc_limit;
use super::proxy::Proxy;
use super::step::Step;
use super::{ExecError, ExecOutput, MAX_PROCESSES, Network, tree};
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// One native program to start, and everything that confines it. Built with
/// [`Launch::new`] and the setters below, started with [`Launch::run`] (or
/// [`Launch::run_blocking`] from code that is not async).
#[derive(Debug, Clone)]
pub struct Launch {
    pub(super) program: PathBuf,
    /// The program as the caller named it, for messages.
    pub(super) shown: Option<String>,
    args: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    network: Network,
    timeout: Duration,
    output_cap: usize,
    stdin: Option<Vec<u8>>,
    /// What it may read, when narrower than everywhere (see `serve.rs`).
    pub(super) readable: Option<Vec<PathBuf>>,
}

impl Launch {
    /// `program` (a path, or a name found in `PATH` when the run starts),
    /// run in `cwd` with an empty environment, no writable directory, no
    /// network, the default timeout and a 1 MiB output cap.
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            shown: None,
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            writable: Vec::new(),
            read_only: Vec::new(),
            network: Network::Off,
            timeout: Duration::from_millis(super::DEFAULT_TIMEOUT_MS),
            output_cap: 1 << 20,
            stdin: None,
            readable: None,
        }
    }

    /// The program's name in messages (otherwise its path).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.shown = Some(name.into());
        self
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets one environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Passes these variables through from corral's environment, those set.
    pub fn pass_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        for name in names {
            if let Some(value) = std::env::var_os(name.as_ref()) {
                self.env.push((name.as_ref().to_owned(), value));
            }
        }
        self
    }

    /// Lets the program write beneath `dir` (Landlock).
    pub fn writable(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable.push(dir.into());
        self
    }

    /// Makes `path` (a file or a directory, which must exist) read-only for
    /// the program, even beneath a writable directory.
    pub fn read_only(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only.push(path.into());
        self
    }

    /// Makes the protected paths of the repository at `root` read-only for
    /// the program (see [`protected_paths`]).
    pub fn protect(mut self, root: &Path) -> Self {
        self.read_only.extend(protected_paths(root, true));
        self
    }

    /// The program's network: `false` none, `true` any, or only some
    /// destinations through corral's proxy ([`Network::Only`]).
    pub fn network(mut self, network: impl Into<Network>) -> Self {
        self.network = network.into();
        self
    }

    /// Wall-clock limit of the run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Bytes kept of stdout and of stderr (each).
    pub fn output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }

    /// Bytes written to the program's standard input (otherwise `/dev/null`).
    pub fn stdin(mut self, bytes: Vec<u8>) -> Self {
        self.stdin = Some(bytes);
        self
    }

    /// [`Launch::run`] for code that is not async: runs on a thread of its
    /// own with a runtime of its own, so it may be called from anywhere.
    pub fn run_blocking(self) -> Result<ExecOutput, ExecError> {
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| {
                            ExecError::SpawnFailed(format!("cannot start a runtime: {e}"))
                        })?;
                    runtime.block_on(self.run())
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(ExecError::SpawnFailed(
                        "the thread running a program panicked".into(),
                    ))
                })
        })
    }

    /// Starts the program confined, waits for it (at most the timeout) and
    /// returns what it did. Dropping the future kills every process of the
    /// run.
    pub async fn run(self) -> Result<ExecOutput, ExecError> {
        let name = self
            .shown
            .clone()
            .unwrap_or_else(|| self.program.display().to_string());
        let mut cmd = self.command(&name)?;
        let Spawned {
            mut child,
            cgroup,
            watch_budget,
            proxy,
            registered,
        } = self.spawn_confined(&mut cmd, &name)?;
        let Some(pid) = child.id() else {
            return Err(ExecError::SpawnFailed(format!(
                "`{name}` exited before it could be followed"
            )));
        };
        // From here on, dropping this (a cancelled call) kills the whole run.
        let mut tree = tree::Tree::new(pid, cgroup);
        drop(registered);
        if let (Some(bytes), Some(mut pipe)) = (self.stdin, child.stdin.take()) {
            // A program that does not read its input must not block the run.
            tokio::spawn(async move {
                let _ = pipe.write_all(&bytes).await;
            });
        }
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
            s = tokio::time::timeout(self.timeout, child.wait()) => (s, false),
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
                return Err(ExecError::SpawnFailed(format!("waiting for `{name}`: {e}")));
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
        // The program is gone: so are its connections.
        drop(proxy);
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

    /// The command, before confinement: the program found, its arguments,
    /// working directory, environment and pipes.
    pub(super) fn command(&self, name: &str) -> Result<tokio::process::Command, ExecError> {
        let program = if self.program.components().count() > 1 {
            self.program.clone()
        } else {
            super::resolve(&self.program.to_string_lossy()).ok_or_else(|| {
                ExecError::SpawnFailed(format!(
                    "cannot start `{name}`: it is not installed (not found in PATH)"
                ))
            })?
        };
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(&self.args)
            .current_dir(&self.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if matches!(self.network, Network::Only(_)) {
            // The way out of the program's namespace, for every client
            // that reads these; one that does not reaches nothing.
            for (key, value) in PROXY_ENV {
                cmd.env(key, value);
            }
        }
        cmd.stdin(if self.stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
        Ok(cmd)
    }

    /// Spawns `cmd` confined: the process limit, the cgroup, the mounts and
    /// Landlock and seccomp applied in the child before exec; a step that
    /// fails fails the spawn. Also returns the run's cgroup, and whether
    /// corral must count the run's processes itself.
    pub(super) fn spawn_confined(
        &self,
        cmd: &mut tokio::process::Command,
        name: &str,
    ) -> Result<Spawned, ExecError> {
        let writable: Vec<&Path> = self.writable.iter().map(PathBuf::as_path).collect();
        let confine = ChildConfinement::prepare(&writable, &self.network, self.readable.as_deref())
            .map_err(|e| {
                ExecError::SpawnFailed(format!(
                    "cannot confine `{name}`: the Landlock ruleset cannot be prepared: {e}"
                ))
            })?;
        let only = match &self.network {
            Network::Only(d) => Some(d.clone()),
            _ => None,
        };
        let handoff = only.as_ref().map(|_| Handoff::new()).transpose()?;
        let handoff_fd = handoff.as_ref().map(Handoff::child_end);
        let mounts = Mounts::prepare(&self.read_only, &self.cwd, only.is_some())?;
        let report = Report::new()?;
        let report_fd = report.write_end();
        tree::Tree::prepare();
        let cgroup = PidsCgroup::create();
        let cgroup_tasks = cgroup.as_ref().map(|c| c.tasks.clone());
        // Root is exempt from RLIMIT_NPROC, so without a cgroup corral
        // counts the run's processes itself.
        // SAFETY: getuid takes nothing and cannot fail.
        let watch_budget = cgroup.is_none() && unsafe { libc::getuid() } == 0;
        let nproc = nproc_limit();
        // SAFETY: the closure runs in the forked child before exec. It only
        // makes system calls on data prepared in the parent (setrlimit, the
        // cgroup's task file, the mounts, then `ChildConfinement::apply`),
        // and fails the spawn when any of them fails, saying which.
        unsafe {
            cmd.pre_exec(move || {
                let fail = |step: Step| {
                    let err = std::io::Error::last_os_error();
                    Report::send(report_fd, step.code());
                    Err(err)
                };
                let limit = libc::rlimit {
                    rlim_cur: nproc,
                    rlim_max: nproc,
                };
                if libc::setrlimit(libc::RLIMIT_NPROC, &limit) != 0 {
                    return fail(Step::Rlimit);
                }
                if let Some(tasks) = &cgroup_tasks
                    && join_cgroup(tasks).is_err()
                {
                    return fail(Step::Cgroup);
                }
                if let Some(mounts) = &mounts
                    && let Err(step) = mounts.apply()
                {
                    return fail(step);
                }
                if let Some(fd) = handoff_fd
                    && let Err(step) = Handoff::send_listener(fd)
                {
                    return fail(step);
                }
                if let Err(step) = confine.apply() {
                    return fail(step);
                }
                Ok(())
            });
        }
        // Registered before any run may list its processes again: see
        // `tree::spawning`.
        let spawning = tree::spawning();
        let spawned = cmd.spawn();
        let registered = spawned
            .as_ref()
            .ok()
            .and_then(tokio::process::Child::id)
            .map(tree::HostChild::track);
        drop(spawning);
        let failed_step = report.received();
        let child = spawned.map_err(|e| {
            ExecError::SpawnFailed(match failed_step {
                Some(step) => format!(
                    "`{name}` did not run: {} ({e}); corral runs no program it cannot confine",
                    Step::describe(step, &self.read_only)
                ),
                None if e.kind() == std::io::ErrorKind::NotFound => {
                    format!("cannot start `{name}`: it is not installed (not found in PATH)")
                }
                None => format!("cannot start `{name}`: {e}"),
            })
        })?;
        // The child is stopped by `kill_on_drop` if its proxy cannot run.
        let proxy = match (handoff, only) {
            (Some(handoff), Some(grant)) => {
                let listener = handoff.receive()?;
                Some(Proxy::serve(listener, grant).map_err(|e| {
                    ExecError::SpawnFailed(format!(
                        "`{name}` did not run: its network proxy could not start ({e})"
                    ))
                })?)
            }
            _ => None,
        };
        Ok(Spawned {
            child,
            cgroup,
            watch_budget,
            proxy,
            registered,
        })
    }
}

/// The variables that point a program granted some destinations at
/// corral's proxy, in both spellings clients read; `NO_PROXY` empty, so
/// that nothing is meant to go around it.
const PROXY_ENV: [(&str, &str); 8] = [
    ("HTTP_PROXY", PROXY_URL),
    ("HTTPS_PROXY", PROXY_URL),
    ("ALL_PROXY", PROXY_URL),
    ("http_proxy", PROXY_URL),
    ("https_proxy", PROXY_URL),
    ("all_proxy", PROXY_URL),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
];

/// A confined child just started, and what lives as long as it.
pub(super) struct Spawned {
    pub(super) child: tokio::process::Child,
    /// Its pids cgroup, when corral could make one.
    pub(super) cgroup: Option<PidsCgroup>,
    /// Whether corral must count its processes itself.
    pub(super) watch_budget: bool,
    /// Its proxy, for a grant naming destinations; to be dropped with it.
    pub(super) proxy: Option<Proxy>,
    /// The child registered as corral's own from its fork on; to be kept
    /// until its [`tree::Tree`] registers it.
    pub(super) registered: Option<tree::HostChild>,
}

/// The paths of the repository at `root` that no program corral starts may
/// change, those that exist, by canonical path: `.git` (a directory, or a
/// worktree's `.git` file) unless `with_git` is false, and corral's
/// project files ([`crate::state::PROJECT_FILES`]: `corral.toml`,
/// `.corral/`). Configuration, hooks and attributes planted there would
/// run the next time the user or corral runs git; commands and settings
/// planted in corral's would steer corral.
pub fn protected_paths(root: &Path, with_git: bool) -> Vec<PathBuf> {
    let mut names: Vec<PathBuf> = crate::state::PROJECT_FILES
        .iter()
        .map(PathBuf::from)
        .collect();
    if with_git {
        names.push(PathBuf::from(".git"));
        names.extend(submodule_git_files(root));
    }
    let inside = root.canonicalize().ok();
    names
        .iter()
        .filter_map(|n| root.join(n).canonicalize().ok())
        .filter(|p| inside.as_ref().is_some_and(|r| p.starts_with(r)))
        .collect()
}

/// Submodules the repository lists in `.gitmodules`, at most this many.
const MAX_SUBMODULES: usize = 64;

/// The `.git` of each submodule `.gitmodules` lists (`path = vendor/lib`
/// gives `vendor/lib/.git`): a submodule's `.git` is a file naming its git
/// directory, and one rewritten to name a directory a program made would
/// hand that directory's configuration to the user's next `git status`,
/// which enters every submodule. `.gitmodules` is the repository's own
/// text, but it can only add paths to make read-only, never take one away.
fn submodule_git_files(root: &Path) -> Vec<PathBuf> {
    // Regular files only, without blocking: a FIFO named `.gitmodules`
    // must not hang every program run.
    let Ok(bytes) = crate::fsread::read_regular(&root.join(".gitmodules"), 64 * 1024) else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('=')?;
            (key.trim() == "path").then(|| value.trim().trim_matches('"').to_owned())
        })
        .filter(|path| !path.is_empty() && !Path::new(path).is_absolute())
        .take(MAX_SUBMODULES)
        .map(|path| Path::new(&path).join(".git"))
        .collect()
}

/// The private mount namespace of a run, prepared in the parent.
#[derive(Debug)]
struct Mounts {
    /// Paths bind-mounted read-only onto themselves.
    paths: Vec<CString>,
    /// The working directory, entered again once the mounts are made (the
    /// one entered before them still sees the writable mounts).
    cwd: CString,
    /// `uid_map` and `gid_map` lines for a user namespace, when corral is
    /// not root (or root may not make a mount namespace by itself).
    uid_map: CString,
    gid_map: CString,
    root: bool,
    /// A network namespace of its own too ([`Network::Only`]).
    net: bool,
}

/// `/proc/self/…` paths written in the child.
const SETGROUPS: &std::ffi::CStr = c"/proc/self/setgroups";
const UID_MAP: &std::ffi::CStr = c"/proc/self/uid_map";
const GID_MAP: &std::ffi::CStr = c"/proc/self/gid_map";

impl Mounts {
    /// Nothing when there is nothing to protect and no network namespace to make.
    fn prepare(paths: &[PathBuf], cwd: &Path, net: bool) -> Result<Option<Self>, ExecError> {
        if paths.is_empty() && !net {
            return Ok(None);
        }
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| ExecError::SpawnFailed(format!("{} holds a NUL byte", p.display())))
        };
        // SAFETY: getuid, getgid and geteuid take nothing and cannot fail.
        let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
        let to_c = |s: String| CString::new(s).unwrap_or_default();
        Ok(Some(Self {
            paths: paths.iter().map(|p| c(p)).collect::<Result<_, _>>()?,
            cwd: c(cwd)?,
            uid_map: to_c(format!("{uid} {uid} 1\n")),
            gid_map: to_c(format!("{gid} {gid} 1\n")),
            root: euid == 0,
            net,
        }))
    }

    /// In the child, before exec: a mount namespace of its own in which
    /// each path is a read-only bind mount of itself. Only system calls.
    fn apply(&self) -> Result<(), Step> {
        // SAFETY: system calls on NUL-terminated strings prepared in the
        // parent, which outlive them; the forked child is single-threaded,
        // as unshare(CLONE_NEWUSER) requires.
        unsafe {
            let spaces = libc::CLONE_NEWNS | if self.net { libc::CLONE_NEWNET } else { 0 };
            let own_ns = self.root && libc::unshare(spaces) == 0;
            if !own_ns {
                if libc::unshare(libc::CLONE_NEWUSER | spaces) != 0 {
                    return Err(Step::Namespace);
                }
                // A non-dumpable process's `/proc/self` files belong to
                // root, so a user other than root could not write its maps:
                // dumpable for these three writes only, so that nothing
                // outside gets to attach while the child still holds a copy
                // of corral's memory (provider keys among it).
                let dumpable = libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) == 0;
                let mapped = dumpable
                    && write_file(SETGROUPS, b"deny")
                    && write_file(UID_MAP, self.uid_map.as_bytes())
                    && write_file(GID_MAP, self.gid_map.as_bytes());
                if libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || !mapped {
                    return Err(Step::UserMap);
                }
            }
            // Nothing done here may reach the mounts of the host.
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(Step::Private);
            }
            for (i, path) in self.paths.iter().enumerate() {
                let step = Step::Mount(u8::try_from(i).unwrap_or(u8::MAX));
                if libc::mount(
                    path.as_ptr(),
                    path.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(step);
                }
                let mut st: libc::statvfs = std::mem::zeroed();
                if libc::statvfs(path.as_ptr(), &mut st) != 0 {
                    return Err(step);
                }
                // A remount must keep the flags the mount had (a user
                // namespace may not clear them).
                let mut flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
                for (st_flag, ms_flag) in [
                    (libc::ST_NOSUID, libc::MS_NOSUID),
                    (libc::ST_NODEV, libc::MS_NODEV),
                    (libc::ST_NOEXEC, libc::MS_NOEXEC),
                    (libc::ST_NOATIME, libc::MS_NOATIME),
                    (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
                    (libc::ST_RELATIME, libc::MS_RELATIME),
                ] {
                    if st.f_flag & st_flag != 0 {
                        flags |= ms_flag;
                    }
                }
                if libc::mount(
                    std::ptr::null(),
                    path.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(step);
                }
            }
            if libc::chdir(self.cwd.as_ptr()) != 0 {
                return Err(Step::Cwd);
            }
        }
        Ok(())
    }
}

/// Writes `bytes` to the file at `path` in one `write`. Only system calls.
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> bool {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        n == bytes.len() as isize
    }
}

/// A pipe on which the child says which confinement step failed, so that
/// the error names it (exec closes it when every step succeeded).
struct Report {
    read: OwnedFd,
    write: OwnedFd,
}

impl Report {
    fn new() -> Result<Self, ExecError> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(ExecError::SpawnFailed(format!(
                "cannot make a pipe: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: both descriptors were just made and are owned by nothing else.
        Ok(unsafe {
            Self {
                read: OwnedFd::from_raw_fd(fds[0]),
                write: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    fn write_end(&self) -> i32 {
        self.write.as_raw_fd()
    }

    /// In the child: one byte naming the step.
    fn send(fd: i32, step: u8) {
        // SAFETY: write of one byte from the stack to a descriptor the
        // child inherited.
        unsafe {
            libc::write(fd, (&step as *const u8).cast(), 1);
        }
    }

    /// In the parent, once the spawn returned: the step that failed, if any.
    fn received(self) -> Option<u8> {
        let mut byte = 0u8;
        // SAFETY: read of one byte into the stack from a descriptor we own.
        let n = unsafe { libc::read(self.read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) };
        (n == 1).then_some(byte)
    }
}

/// Reads a pipe to the end, keeping at most `cap` bytes.
pub(super) async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
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
