//! Nothing a program starts outlives its call, for every user: a program
//! that leaves its process group (`setsid`) is killed with the call when it
//! returns, times out or is interrupted, run as root or as an unprivileged
//! user, and a fork bomb is stopped as root without a cgroup. And the
//! defaults: `shell` (any program on PATH, confined) and `git` are there
//! without a manifest, asking in `ask` mode and denied in `read-only`.

use crate::support::mock::*;
use crate::support::model::calls_then;
use crate::support::output::report as text;
use crate::support::skip;
use crate::support::text::has;
use crate::*;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The escapee sleeps this long before writing its file.
const ESCAPEE_SLEEP_S: u64 = 2;

/// A command line whose program starts a process in its own session that
/// writes `file` in the workspace `ESCAPEE_SLEEP_S` seconds later, then
/// does `then`.
fn escaping(file: &str, then: &str) -> String {
    format!(
        "setsid sh -c 'sleep {ESCAPEE_SLEEP_S}; touch {file}' </dev/null >/dev/null 2>&1 & {then}"
    )
}

fn shell_manifest(exec_timeout_ms: u64, call_timeout_ms: u64) -> String {
    format!(
        "[plugins.shell]\nsource = \"builtin:shell\"\n\
         grants.exec = [{{ program = \"sh\", args = [\"**\"], timeout_ms = {exec_timeout_ms} }}]\n\
         limits = {{ timeout_ms = {call_timeout_ms} }}\n"
    )
}

/// Waits longer than the escapee sleeps, then says whether `file` appeared.
fn appears_later(file: &Path) -> bool {
    std::thread::sleep(Duration::from_secs(ESCAPEE_SLEEP_S) + Duration::from_millis(1500));
    file.exists()
}

/// `cmd` run where corral can create no cgroup, as for a user who is not
/// root: as root, in a mount namespace whose /sys/fs/cgroup is an empty
/// tmpfs (otherwise a `pids` cgroup would hold every process of the run and
/// the cleanup under test would not be the one that acts). The program
/// keeps its pid (`unshare` and `sh` exec), so signals reach corral.
fn without_cgroups(inner: Command) -> Command {
    // SAFETY: geteuid takes nothing.
    let root = unsafe { libc::geteuid() } == 0;
    let hidden = root
        && Command::new("unshare")
            .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
            .arg("mount -t tmpfs none /sys/fs/cgroup && test ! -e /sys/fs/cgroup/pids")
            .output()
            .is_ok_and(|o| o.status.success());
    if !hidden {
        if root {
            eprintln!("note: cannot hide the cgroup tree; corral may use a pids cgroup here");
        }
        return inner;
    }
    let mut unshare = Command::new("unshare");
    unshare
        .args(["--mount", "--propagation", "private", "--"])
        .args([
            "sh",
            "-c",
            "mount -t tmpfs none /sys/fs/cgroup && exec \"$@\"",
            "sh",
        ]);
    let mut cmd = crate::support::process::wrapping(unshare, &inner);
    cmd.stdin(Stdio::null());
    cmd
}

/// `args` for `tool call run_command` with `command`.
fn run_command(command: &str) -> Vec<String> {
    run_command_args(json!({ "command": command }))
}

/// `args` for `tool call run_command` with these arguments.
fn run_command_args(args: serde_json::Value) -> Vec<String> {
    let args = args.to_string();
    ["tool", "call", "run_command", "--args", &args]
        .map(str::to_owned)
        .to_vec()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_process_that_leaves_the_group_dies_when_the_call_returns() {
    let sb = Sandbox::with_manifest(&shell_manifest(60_000, 60_000));
    let cli = Cli::new();
    let o = without_cgroups(cli.command(
        &sb.ws(),
        &refs(&run_command(&escaping(
            "escaped",
            "sleep 0.5; echo started",
        ))),
    ))
    .output()
    .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("started"));
    assert!(
        !appears_later(&sb.ws().join("escaped")),
        "a process in its own session outlived the call and corral: {}",
        text(&o)
    );
}

#[test]
fn a_process_that_leaves_the_group_dies_when_the_call_times_out() {
    // The program's own timeout (grants.exec timeout_ms), then the plugin
    // call's (limits.timeout_ms), which cancels the call from outside.
    for (exec_ms, call_ms, expect) in [
        (1000, 60_000, "timed out"),
        (60_000, 1000, "timed out after 1000 ms"),
    ] {
        let sb = Sandbox::with_manifest(&shell_manifest(exec_ms, call_ms));
        let cli = Cli::new();
        let started = Instant::now();
        let o = without_cgroups(cli.command(
            &sb.ws(),
            &refs(&run_command(&escaping("escaped", "sleep 30"))),
        ))
        .output()
        .expect("run");
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "{exec_ms}/{call_ms}: the call was not stopped: {}",
            text(&o)
        );
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        has(&text(&o), expect);
        assert!(
            !appears_later(&sb.ws().join("escaped")),
            "{exec_ms}/{call_ms}: a process in its own session outlived the timed-out call: {}",
            text(&o)
        );
    }
}

/// Starts corral on `command`, waits until the program has written
/// `started`, interrupts corral with SIGINT and returns what it printed.
fn interrupt_mid_call(mut cmd: Command, ws: &Path) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start corral");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ws.join("started").exists() {
        assert!(Instant::now() < deadline, "the program never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill takes plain integers.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let waited = Instant::now();
    let o = child.wait_with_output().expect("corral exits");
    assert!(
        waited.elapsed() < Duration::from_secs(20),
        "corral did not stop on SIGINT"
    );
    o
}

#[test]
fn a_process_that_leaves_the_group_dies_when_corral_is_interrupted() {
    let sb = Sandbox::with_manifest(&shell_manifest(60_000, 60_000));
    let cli = Cli::new();
    let args = run_command(&escaping("escaped", "touch started; sleep 30"));
    let o = interrupt_mid_call(
        without_cgroups(cli.command(&sb.ws(), &refs(&args))),
        &sb.ws(),
    );
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(
        !appears_later(&sb.ws().join("escaped")),
        "a process in its own session outlived the interrupted call: {}",
        text(&o)
    );
}

/// A directory tree for an unprivileged user: its home (config with the
/// manifest, cache, data) and its workspace.
struct Nobody {
    _root: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
}

const NOBODY: u32 = 65534;

impl Nobody {
    /// `None`, with the reason printed, when the tests cannot switch user.
    fn new(manifest: &str) -> Option<Self> {
        // SAFETY: geteuid takes nothing.
        if unsafe { libc::geteuid() } != 0 {
            skip::cannot_run_here(
                "not root, so already unprivileged (the other tests cover this user)",
            );
            return None;
        }
        if Command::new("setpriv").arg("--version").output().is_err() {
            skip::missing("setpriv is not installed", "apt-get install util-linux");
            return None;
        }
        let root = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let home = root.path().join("home");
        let ws = root.path().join("ws");
        let config = home.join("config/corral");
        std::fs::create_dir_all(&config).expect("config");
        std::fs::create_dir_all(&ws).expect("ws");
        std::fs::write(config.join("corral.toml"), manifest).expect("manifest");
        for dir in ["home", "home/config", "home/config/corral", "ws"] {
            let p = root.path().join(dir);
            std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).expect("chown");
        }
        std::os::unix::fs::chown(config.join("corral.toml"), Some(NOBODY), Some(NOBODY))
            .expect("chown");
        // The binary must be reachable by that user.
        let exe = Path::new(env!("CARGO_BIN_EXE_corral"));
        let reachable = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(exe)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !reachable {
            skip::cannot_run_here(format!(
                "user 65534 cannot run {} (a parent directory is closed to it)",
                exe.display()
            ));
            return None;
        }
        Some(Self {
            _root: root,
            home,
            ws,
        })
    }

    fn command(&self, args: &[String]) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_corral"))
            .args(args)
            .arg("--workspace")
            .arg(&self.ws)
            .current_dir(&self.ws)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_CACHE_HOME", self.home.join("cache"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env_remove("CORRAL_LOG")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .stdin(Stdio::null());
        cmd
    }
}

#[test]
fn an_unprivileged_user_gets_the_same_cleanup() {
    let Some(user) = Nobody::new(&shell_manifest(60_000, 60_000)) else {
        return;
    };
    // It really runs as that user, without a cgroup of its own.
    let o = user
        .command(&run_command("id -u; touch owned"))
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("65534"));
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(user.ws.join("owned"))
            .expect("owned")
            .uid(),
        NOBODY
    );
    // The call returns.
    let o = user
        .command(&run_command(&escaping(
            "escaped-return",
            "sleep 0.5; echo started",
        )))
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", text(&o));
    // The call times out.
    let o = user
        .command(&run_command_args(json!({
            "command": escaping("escaped-timeout", "sleep 30"),
            "timeout_ms": 1000,
        })))
        .output()
        .expect("run");
    has(&text(&o), "timed out");
    // corral is interrupted.
    let o = interrupt_mid_call(
        user.command(&run_command(&escaping(
            "escaped-interrupt",
            "touch started; sleep 30",
        ))),
        &user.ws,
    );
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    std::thread::sleep(Duration::from_secs(ESCAPEE_SLEEP_S) + Duration::from_millis(1500));
    for file in ["escaped-return", "escaped-timeout", "escaped-interrupt"] {
        assert!(
            !user.ws.join(file).exists(),
            "as user 65534, `{file}` was written by a process that outlived its call"
        );
    }
}

/// A `pids` cgroup around the whole test command, so that a process budget
/// that failed could not take the machine's process table with it. corral
/// cannot see it (its namespace hides the cgroup tree), so the budget that
/// stops the bomb is corral's own, which reports itself in the output.
struct SafetyNet(PathBuf);

impl SafetyNet {
    fn new() -> Option<Self> {
        let dir = PathBuf::from(format!(
            "/sys/fs/cgroup/pids/corral-test-net-{}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).ok()?;
        if std::fs::write(dir.join("pids.max"), "2048").is_err() {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Self(dir))
    }
}

impl Drop for SafetyNet {
    fn drop(&mut self) {
        for _ in 0..500 {
            if let Ok(tasks) = std::fs::read_to_string(self.0.join("tasks")) {
                for pid in tasks.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // SAFETY: kill takes plain integers.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_fork_bomb_as_root_without_a_cgroup_is_stopped() {
    // SAFETY: geteuid takes nothing.
    if unsafe { libc::geteuid() } != 0 {
        skip::cannot_run_here("needs root (RLIMIT_NPROC binds every other user)");
        return;
    }
    // A mount namespace where /sys/fs/cgroup is an empty tmpfs: corral can
    // create no cgroup there, as in a container whose cgroup tree is read-only.
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg("mount -t tmpfs none /sys/fs/cgroup && test ! -e /sys/fs/cgroup/pids")
        .output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        skip::cannot_run_here(format!(
            "cannot hide the cgroup tree in a mount namespace (unshare/mount): {probe:?}"
        ));
        return;
    }
    let Some(net) = SafetyNet::new() else {
        skip::cannot_run_here(
            "no pids cgroup v1 to hold the bomb if the budget failed; \
             a fork bomb without one could exhaust this machine's process table",
        );
        return;
    };
    let sb = Sandbox::with_manifest(&shell_manifest(20_000, 60_000));
    let cli = Cli::new();
    // Trust the manifest first, outside the namespace.
    let _ = cli.run(&sb.ws(), &["tools", "list"]);
    let inner = cli.command(
        &sb.ws(),
        &refs(&run_command("bomb_c9() { bomb_c9 | bomb_c9; }; bomb_c9")),
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("echo $$ > \"$1/tasks\" && shift && exec \"$@\"")
        .arg("sh")
        .arg(&net.0)
        .args(["unshare", "--mount", "--propagation", "private", "--"])
        .args([
            "sh",
            "-c",
            "mount -t tmpfs none /sys/fs/cgroup && exec \"$@\"",
            "sh",
        ])
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(sb.ws())
        .stdin(Stdio::null());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let started = Instant::now();
    let o = cmd.output().expect("run");
    // What is left now was left by corral (the net's drop kills it later).
    let ps = Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .expect("ps");
    let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
    drop(net);
    assert!(
        started.elapsed() < Duration::from_secs(18),
        "the bomb ran into the timeout instead of the process budget: {}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    has(&text(&o), "more than 256 processes at once");
    assert!(!ps.contains("bomb_c9"), "survivors:\n{ps}");
}

#[test]
fn shell_and_git_are_there_without_a_manifest() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(o.status.success(), "{}", text(&o));
    let list = String::from_utf8_lossy(&o.stdout);
    for tool in [
        "run_command",
        "git_status",
        "git_diff",
        "git_log",
        "git_show",
        "git_add",
        "git_commit",
        "git_branch",
    ] {
        assert!(list.contains(tool), "{tool} missing:\n{list}");
    }
    // Any program on PATH runs, confined: in the workspace, not outside it.
    let o = cli.run(&sb.ws(), &refs(&run_command("touch made-here")));
    assert!(o.status.success(), "{}", text(&o));
    assert!(sb.ws().join("made-here").exists());
    let outside = sb.outside().join("made-there");
    let o = cli.run(
        &sb.ws(),
        &refs(&run_command(&format!("touch {}", outside.display()))),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        !outside.exists(),
        "a default command wrote outside the workspace"
    );
    // A program that does not exist is a clear error.
    let o = cli.run(&sb.ws(), &refs(&run_command("no-such-program-q7 --x")));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    has(
        &text(&o),
        "`no-such-program-q7` is not an executable program in PATH",
    );
}

/// The model runs `touch by-model`, then answers.
fn commander() -> MockServer {
    calls_then(
        "Running. ",
        vec![("c1", "run_command", json!({"command": "touch by-model"}))],
        "Done.",
    )
}

/// Only the provider is configured; `shell` comes from the defaults.
fn provider_only(port: u16) -> String {
    format!(
        r#"
[plugins.openai]
source = "builtin:openai"
grants.net = ["http://127.0.0.1:{port}"]
config = {{ base_url = "http://127.0.0.1:{port}/v1", model = "mock" }}
"#
    )
}

#[test]
fn default_commands_ask_and_are_denied_in_read_only() {
    for (flags, expect, runs) in [
        (
            &["--mode", "read-only", "--yes"][..],
            "denied by the permission policy",
            false,
        ),
        (
            &[][..],
            "needs the user's approval and the run is not interactive",
            false,
        ),
        (&["--yes"][..], "exit code 0", true),
    ] {
        let mock = commander();
        let sb = Sandbox::with_manifest(&provider_only(mock.port));
        let cli = Cli::new();
        let mut args = vec!["run", "--provider", "openai"];
        args.extend_from_slice(flags);
        args.push("make a file");
        let o = cli.run(&sb.ws(), &args);
        assert_eq!(o.status.code(), Some(0), "{flags:?}: {}", text(&o));
        let result = openai_tool_result(&mock.requests()[1], "c1");
        assert!(result.contains(expect), "{flags:?}: {result}");
        assert_eq!(sb.ws().join("by-model").exists(), runs, "{flags:?}");
    }
}
