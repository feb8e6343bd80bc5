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

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::AsyncReadExt;

mod tree;

pub use tree::{HostChild, adopt_orphans};

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

/// Whether the kernel confines programs here, probed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confinement {
    /// Landlock with this ABI version.
    Landlock(i32),
    /// No Landlock on this kernel.
    Unavailable,
}

/// Probes Landlock once and warns once when it is missing.
pub fn confinement() -> Confinement {
    static PROBE: OnceLock<Confinement> = OnceLock::new();
    *PROBE.get_or_init(|| {
        // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        // only returns the ABI version; it takes no pointers.
        let abi = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
        if abi >= 1 {
            Confinement::Landlock(abi as i32)
        } else {
            tracing::warn!(
                "this kernel has no Landlock: programs run by plugins cannot be confined to the workspace \
                 (set [sandbox] require_os_sandbox = false to run them anyway)"
            );
            Confinement::Unavailable
        }
    })
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

static RUNS: AtomicU64 = AtomicU64::new(0);

impl Exec {
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

/// Credentials in the user's home, by path relative to it. A program may
/// read the rest of the system (toolchains need it), not these.
const SECRETS_IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".pypirc",
];

/// What programs may not read: [`SECRETS_IN_HOME`] and corral's own data
/// (session logs, which hold whatever was said), those that exist, by
/// their canonical paths.
fn secret_paths() -> Vec<PathBuf> {
    // $HOME as set, and the home the system knows, if they differ.
    let mut homes: Vec<PathBuf> = std::env::var_os("HOME")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    homes.extend(dirs::home_dir());
    let mut paths: Vec<PathBuf> = homes
        .iter()
        .flat_map(|h| SECRETS_IN_HOME.iter().map(move |rel| h.join(rel)))
        .collect();
    // The same stores where the environment moves them.
    if let Some(cargo) = std::env::var_os("CARGO_HOME").map(PathBuf::from) {
        paths.extend([cargo.join("credentials"), cargo.join("credentials.toml")]);
    }
    if let Some(config) = dirs::config_dir() {
        paths.extend([config.join("gh"), config.join("gcloud")]);
    }
    for var in ["GNUPGHOME", "DOCKER_CONFIG", "AWS_SHARED_CREDENTIALS_FILE"] {
        paths.extend(std::env::var_os(var).map(PathBuf::from));
    }
    paths.extend(dirs::data_dir().map(|d| d.join("corral")));
    let mut out: Vec<PathBuf> = paths.iter().filter_map(|p| p.canonicalize().ok()).collect();
    out.sort();
    out.dedup();
    out
}

/// Paths whose subtrees together cover the whole file system except
/// `denied`: the entries of `/`, descending only into the directories on
/// the way to a denied path. Symlinks get no rule of their own; what they
/// point to is judged where it lies.
fn readable_except(denied: &[PathBuf]) -> Vec<PathBuf> {
    cover(Path::new("/"), denied)
}

/// [`readable_except`] below `root`.
fn cover(root: &Path, denied: &[PathBuf]) -> Vec<PathBuf> {
    fn visit(dir: &Path, denied: &[PathBuf], out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() || denied.contains(&path) {
                continue;
            }
            if kind.is_dir() && denied.iter().any(|d| d.starts_with(&path)) {
                visit(&path, denied, out);
            } else {
                out.push(path);
            }
        }
    }
    if !denied.iter().any(|d| d.starts_with(root)) {
        return vec![root.to_path_buf()];
    }
    let mut out = Vec::new();
    visit(root, denied, &mut out);
    out.sort();
    out
}

/// A seccomp filter for programs: `socket()` for UNIX sockets is refused
/// (a session bus, an ssh or gpg agent, a container daemon could each run
/// commands outside the sandbox for it), and without `network` so is
/// `socket()` for IPv4 and IPv6 (Landlock stops TCP, not UDP); `io_uring`,
/// which could open sockets past the filter, is refused too. Anything for
/// another architecture (32-bit or x32 system calls) is refused.
fn socket_filter(network: bool) -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JGE: u16 = 0x35;
    const RET: u16 = 0x06;
    const ALLOW: u32 = 0x7fff_0000;
    const DENY: u32 = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
    #[cfg(target_arch = "x86_64")]
    const ARCH: u32 = 0xc000_003e;
    #[cfg(target_arch = "aarch64")]
    const ARCH: u32 = 0xc000_00b7;
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut prog = vec![
        // arch must be this one
        op(LD_W_ABS, 0, 0, 4),
        op(JEQ, 1, 0, ARCH),
        op(RET, 0, 0, DENY),
        op(LD_W_ABS, 0, 0, 0),
        // x32 system calls carry bit 30
        op(JGE, 0, 1, 0x4000_0000),
        op(RET, 0, 0, DENY),
        op(JEQ, 0, 1, libc::SYS_io_uring_setup as u32),
        op(RET, 0, 0, DENY),
        op(JEQ, 1, 0, libc::SYS_socket as u32),
        op(RET, 0, 0, ALLOW),
        // socket(domain, ...): the low word of the first argument
        op(LD_W_ABS, 0, 0, 16),
    ];
    let mut denied = vec![libc::AF_UNIX as u32];
    if !network {
        denied.extend([libc::AF_INET as u32, libc::AF_INET6 as u32]);
    }
    for domain in denied {
        prog.push(op(JEQ, 0, 1, domain));
        prog.push(op(RET, 0, 0, DENY));
    }
    prog.push(op(RET, 0, 0, ALLOW));
    prog
}

/// In the child, before exec: installs `filter` (after no-new-privs, which
/// it needs). Only syscalls.
fn install_filter(filter: &[libc::sock_filter]) -> std::io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl reads `prog`, which points at `filter`; both outlive the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &prog as *const libc::sock_fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes corral non-dumpable, so that its `/proc/PID/environ` and `mem`
/// (provider keys among them) open only with `CAP_SYS_PTRACE`, which the
/// programs it runs do not have (see [`drop_capabilities`]). Landlock alone
/// does not stop a program from reading its parent's environment.
fn hide_from_children() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl(PR_SET_DUMPABLE, 0) takes plain integers.
        let rc = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        if rc != 0 {
            tracing::warn!(
                "cannot make corral non-dumpable: programs it runs may read its environment: {}",
                std::io::Error::last_os_error()
            );
        }
    });
}

/// In the child, before exec: drops every capability (effective, permitted,
/// inheritable, ambient and the bounding set), so that a program run as
/// root cannot use root's privileges either, e.g. `CAP_SYS_PTRACE` to read
/// corral's memory. Only syscalls, as a `pre_exec` closure requires; any
/// failure fails the spawn.
fn drop_capabilities() -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    /// `_LINUX_CAPABILITY_VERSION_3`.
    const VERSION_3: u32 = 0x2008_0522;
    let last_error = std::io::Error::last_os_error;
    // SAFETY: prctl, capset and capget take plain integers and pointers to
    // the structs above, which live for the duration of the calls.
    unsafe {
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(last_error());
        }
        // Dropping from the bounding set needs CAP_SETPCAP, which a user
        // who is not root lacks; it matters only when a uid is 0, whose
        // exec would otherwise regain the set.
        let root = libc::getuid() == 0 || libc::geteuid() == 0;
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                let err = last_error();
                match err.raw_os_error() {
                    // Past the last capability this kernel knows.
                    Some(libc::EINVAL) => break,
                    Some(libc::EPERM) if !root => break,
                    _ => return Err(err),
                }
            }
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(last_error());
        }
        // Read back: what counts is what the kernel holds.
        if libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) != 0 {
            return Err(last_error());
        }
        if data
            .iter()
            .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
        {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

/// What confines a child, prepared in the parent and applied in the child
/// between fork and exec, where only system calls may be made.
struct ChildConfinement {
    /// Taken by the child; the mutex cannot be held by any other thread there.
    ruleset: Mutex<Option<landlock::RulesetCreated>>,
    /// Whether a ruleset was prepared, so that its absence is a failure.
    landlock: bool,
    filter: Vec<libc::sock_filter>,
}

impl ChildConfinement {
    /// Landlock rules where the kernel has Landlock (reads as in
    /// [`landlock_ruleset`], writes beneath `writable`, TCP with `network`)
    /// and the socket filter; makes corral non-dumpable first.
    fn prepare(writable: &[&Path], network: bool) -> Result<Self, landlock::RulesetError> {
        hide_from_children();
        let ruleset = match confinement() {
            Confinement::Landlock(_) => Some(landlock_ruleset(writable, network)?),
            Confinement::Unavailable => None,
        };
        Ok(Self {
            landlock: ruleset.is_some(),
            ruleset: Mutex::new(ruleset),
            filter: socket_filter(network),
        })
    }

    /// In the child: Landlock, then no capabilities, then the filter.
    fn apply(&self) -> std::io::Result<()> {
        let denied = || std::io::Error::from_raw_os_error(libc::EPERM);
        let rules = self.ruleset.lock().map_err(|_| denied())?.take();
        if let Some(rules) = rules {
            let status = rules.restrict_self().map_err(|_| denied())?;
            // Prepared because the kernel has Landlock: not enforcing it is a failure.
            if status.ruleset == landlock::RulesetStatus::NotEnforced {
                return Err(denied());
            }
        } else if self.landlock {
            // Taken already: this confinement was applied to another child.
            return Err(denied());
        }
        drop_capabilities()?;
        install_filter(&self.filter)
    }
}

/// Confines a helper program corral runs for itself (`git status` for the
/// model's context): an environment of only `PATH`, `HOME`, `LANG` and
/// `LC_ALL`, no capabilities, the socket filter, and where the kernel has
/// Landlock, reads as for granted programs, writes nowhere (but
/// `/dev/null`) and no TCP. A repository's configuration is the
/// workspace's to set, and a tool may have written it: whatever command it
/// names runs confined. Fails, so that the caller runs nothing, when the
/// confinement cannot be prepared.
pub fn confine_helper(cmd: &mut std::process::Command) -> Result<(), String> {
    use std::os::unix::process::CommandExt as _;
    cmd.env_clear();
    for var in ["PATH", "HOME", "LANG", "LC_ALL"] {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    let confine = ChildConfinement::prepare(&[], false).map_err(|e| e.to_string())?;
    // SAFETY: `apply` only makes system calls.
    unsafe {
        cmd.pre_exec(move || confine.apply());
    }
    Ok(())
}

/// Reads everywhere but [`secret_paths`], everything beneath `writable`,
/// `/dev/null`, and TCP only with `network`.
fn landlock_ruleset(
    writable: &[&Path],
    network: bool,
) -> Result<landlock::RulesetCreated, landlock::RulesetError> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
        path_beneath_rules,
    };
    // Best effort: what this kernel's Landlock lacks is left out. On 6.12
    // and later the program cannot signal processes outside its sandbox
    // (corral among them) nor reach abstract UNIX sockets; on 7.1 and later
    // it cannot connect to named UNIX sockets outside the workspace and its
    // temp directory (before that the seccomp filter refuses UNIX sockets).
    let abi = ABI::V10;
    let secrets = secret_paths();
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?;
    if !network {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    ruleset
        .create()?
        .add_rules(path_beneath_rules(
            readable_except(&secrets),
            AccessFs::from_read(abi),
        ))?
        // A secret beneath a writable directory (a workspace that is the
        // home directory, say) stays out: the rule covers the rest of it.
        .add_rules(path_beneath_rules(
            writable.iter().flat_map(|w| cover(w, &secrets)),
            AccessFs::from_all(abi),
        ))?
        .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_file(abi)))
}

/// A `pids` cgroup (v1 or v2) for one run, when the host may create one.
struct PidsCgroup {
    dir: PathBuf,
    tasks: Arc<CString>,
}

impl PidsCgroup {
    fn create() -> Option<Self> {
        let n = RUNS.fetch_add(1, Ordering::Relaxed);
        let name = format!("corral-{}-{n}", std::process::id());
        for (root, tasks) in [
            ("/sys/fs/cgroup/pids", "tasks"),
            ("/sys/fs/cgroup", "cgroup.procs"),
        ] {
            let base = Path::new(root);
            if !base.join("pids.max").exists() && root == "/sys/fs/cgroup" {
                continue;
            }
            let dir = base.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            if std::fs::write(dir.join("pids.max"), MAX_PROCESSES.to_string()).is_err() {
                let _ = std::fs::remove_dir(&dir);
                continue;
            }
            let tasks = CString::new(dir.join(tasks).into_os_string().into_encoded_bytes()).ok()?;
            return Some(Self {
                dir,
                tasks: Arc::new(tasks),
            });
        }
        None
    }

    /// Kills every process still in the group.
    fn kill_all(&self) {
        for file in ["cgroup.procs", "tasks"] {
            if let Ok(text) = std::fs::read_to_string(self.dir.join(file)) {
                for pid in text.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // SAFETY: kill takes plain integers.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // The directory can be removed once its processes are gone.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            self.kill_all();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Moves the calling process into the cgroup whose task file is `tasks`.
/// Runs between fork and exec: no allocation.
fn join_cgroup(tasks: &CString) -> std::io::Result<()> {
    let mut buf = [0u8; 16];
    // SAFETY: getpid takes nothing.
    let mut pid = unsafe { libc::getpid() } as u32;
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    // SAFETY: open/write/close with a valid NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(tasks.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, buf[i..].as_ptr().cast(), buf.len() - i);
        let failed = written != (buf.len() - i) as isize;
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if failed {
            return Err(err);
        }
    }
    Ok(())
}

/// `RLIMIT_NPROC` for a run: [`MAX_PROCESSES`] more than the user runs
/// already, since the kernel counts every process and thread of the real
/// user (a desktop session has hundreds), within the current hard limit.
fn nproc_limit() -> libc::rlim_t {
    // SAFETY: getuid takes nothing; getrlimit writes into a valid struct.
    let (uid, hard) = unsafe {
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let hard = if libc::getrlimit(libc::RLIMIT_NPROC, &mut current) == 0 {
            current.rlim_max
        } else {
            libc::RLIM_INFINITY
        };
        (libc::getuid(), hard)
    };
    let uid = uid.to_string();
    let threads: u64 = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
                .filter_map(|status| {
                    let mut real_uid = None;
                    let mut threads = None;
                    for line in status.lines() {
                        if let Some(v) = line.strip_prefix("Uid:") {
                            real_uid = v.split_whitespace().next().map(str::to_owned);
                        } else if let Some(v) = line.strip_prefix("Threads:") {
                            threads = v.trim().parse::<u64>().ok();
                        }
                    }
                    (real_uid.as_deref() == Some(uid.as_str())).then_some(threads?)
                })
                .sum()
        })
        .unwrap_or(0);
    (threads + MAX_PROCESSES).min(hard)
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_readable_cover_leaves_out_only_the_secrets() {
        use super::cover;
        let root = tempfile::tempdir().expect("tempdir");
        let r = root.path();
        for dir in ["etc", "home/.ssh", "home/.cargo/registry", "home/src"] {
            std::fs::create_dir_all(r.join(dir)).expect("mkdir");
        }
        for file in [
            "home/.profile",
            "home/.cargo/credentials.toml",
            "home/.ssh/id_rsa",
        ] {
            std::fs::write(r.join(file), "x").expect("write");
        }
        std::os::unix::fs::symlink(r.join("home/.ssh"), r.join("home/keys")).expect("symlink");
        let denied = [r.join("home/.ssh"), r.join("home/.cargo/credentials.toml")];
        let got: Vec<String> = cover(r, &denied)
            .iter()
            .map(|p| p.strip_prefix(r).expect("under root").display().to_string())
            .collect();
        // Everything but the two secrets and the symlink to one of them;
        // the directories on the way are covered by their other entries.
        assert_eq!(
            got,
            ["etc", "home/.cargo/registry", "home/.profile", "home/src"]
        );
        // Nothing denied below a root: the root itself.
        assert_eq!(cover(&r.join("etc"), &denied), [r.join("etc")]);
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
