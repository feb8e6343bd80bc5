//! The host's filesystem layer, driven through the `corral` binary: paths
//! into `.git` and to `corral.toml` are refused by what they resolve to,
//! whatever tool, plugin or argument names them; nothing that could block
//! (a FIFO, a device) is opened, by a plugin or by the host itself.

use crate::support::files::assert_absent;
use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::text::has;
use crate::*;
use corral_test_programs::FSGUARD;
use serde_json::json;
use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Longer than any of these commands takes; only there so that a hang
/// fails the test instead of the whole run.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs `cmd`, killing it if it is still running after [`HANG_GUARD`].
fn run_guarded(mut cmd: Command, what: &str) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn corral");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(out) => out.expect("corral output"),
        Err(_) => {
            // SAFETY: `kill` on the pid of our own child, still unreaped
            // since `wait_with_output` has not returned.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what}: corral still running after {HANG_GUARD:?}; it hung");
        }
    }
}

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

fn git(ws: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(ws)
        .output()
        .expect("git");
    assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A repository whose `.git` is also reachable as `meta`.
fn repo() -> Sandbox {
    let sb = Sandbox::new();
    git(&sb.ws(), &["init", "-q", "-b", "main"]);
    git(&sb.ws(), &["config", "user.email", "t@example.com"]);
    git(&sb.ws(), &["config", "user.name", "T"]);
    std::os::unix::fs::symlink(".git", sb.ws().join("meta")).expect("symlink");
    sb
}

/// Every file under `.git` with its content (symlinks by their target).
fn git_tree(sb: &Sandbox) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &std::path::Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read .git") {
            let entry = entry.expect("entry");
            let name = format!("{rel}/{}", entry.file_name().to_string_lossy());
            let ft = entry.file_type().expect("type");
            if ft.is_dir() {
                out.insert(name.clone(), Vec::new());
                walk(&entry.path(), &name, out);
            } else if ft.is_symlink() {
                let target = std::fs::read_link(entry.path()).expect("link");
                out.insert(name, target.as_os_str().as_encoded_bytes().to_vec());
            } else {
                out.insert(name, std::fs::read(entry.path()).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&sb.ws().join(".git"), ".git", &mut out);
    out
}

/// [`tool_call`], which must succeed.
fn call_ok(cli: &Cli, sb: &Sandbox, tool: &str, args: serde_json::Value) -> Output {
    let o = tool_call(cli, sb, tool, args);
    assert!(o.status.success(), "{}", stderr(&o));
    o
}

fn tool_call(cli: &Cli, sb: &Sandbox, tool: &str, args: serde_json::Value) -> Output {
    let args = args.to_string();
    run_guarded(
        cli.command(&sb.ws(), &["tool", "call", tool, "--args", &args]),
        tool,
    )
}

/// The call failed as a tool error whose message says why.
fn assert_refused(o: &Output, what: &str) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{what} was not refused:\nstdout: {}\nstderr: {err}",
        stdout(o)
    );
    // `tool call` takes the call pipeline: its protected-paths step (which
    // resolves symlinks too) refuses first, the sandbox's guard behind it.
    assert!(
        err.contains("a path the host protects")
            || err.contains("refused to")
            || err.contains("is protected: .git internals"),
        "{what}: the refusal does not say why: {err}"
    );
}

#[test]
fn fs_tools_cannot_write_git_through_a_symlink() {
    let sb = repo();
    sb.write("notes.txt", "notes\n");
    let before = git_tree(&sb);
    let config = std::fs::read_to_string(sb.ws().join(".git/config")).expect("config");
    let cli = Cli::new();
    let fsmonitor = "[core]\n\tfsmonitor = \"touch pwned\"\n";
    let cases = [
        (
            "write_file",
            json!({"path": "meta/config", "content": fsmonitor}),
        ),
        (
            "write_file",
            json!({"path": "meta/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"}),
        ),
        (
            "write_file",
            json!({"path": "./meta/hooks/../config", "content": fsmonitor}),
        ),
        (
            "write_file",
            json!({"path": ".git/config", "content": fsmonitor}),
        ),
        (
            "edit_file",
            json!({"path": "meta/config", "old_string": "[core]", "new_string": fsmonitor}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: meta/config\n@@\n-[core]\n+[core]\n+\tfsmonitor = \"touch pwned\"\n*** End Patch\n"}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Add File: meta/hooks/post-checkout\n+#!/bin/sh\n+touch pwned\n*** End Patch\n"}),
        ),
        (
            "apply_patch",
            json!({"patch": "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: meta/hooks/pre-push\n@@\n-notes\n+#!/bin/sh\n*** End Patch\n"}),
        ),
        (
            "write_file",
            json!({"path": "corral.toml", "content": "[plugins.fs]\nsource = \"builtin:fs\"\n"}),
        ),
    ];
    for (tool, args) in cases {
        let o = tool_call(&cli, &sb, tool, args.clone());
        assert_refused(&o, &format!("{tool} {args}"));
    }
    assert_eq!(
        std::fs::read_to_string(sb.ws().join(".git/config")).expect("config"),
        config
    );
    pretty_assertions::assert_eq!(git_tree(&sb), before);
    assert!(!sb.ws().join("corral.toml").exists());
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "notes\n",
        "the refused move left its source alone"
    );
    // Ordinary writes still work, parents created, in a directory whose
    // name only starts like `.git`.
    call_ok(
        &cli,
        &sb,
        "write_file",
        json!({"path": ".github/workflows/ci.yml", "content": "on: push\n"}),
    );
    call_ok(
        &cli,
        &sb,
        "edit_file",
        json!({"path": "notes.txt", "old_string": "notes", "new_string": "more notes"}),
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "more notes\n"
    );
}

/// A call to the fsguard plugin's `scribble`, writing `text` at `target`.
fn scribble(target: &str, text: &str) -> (&'static str, serde_json::Value) {
    ("scribble", json!({"target": target, "text": text}))
}

/// A call to the fsguard plugin's `plant`: the file operation `op` on `a`.
fn plant(op: &str, a: &str) -> (&'static str, serde_json::Value) {
    ("plant", json!({"op": op, "a": a}))
}

/// A call to the fsguard plugin's `plant`: the file operation `op` from `a`
/// to `b`.
fn plant_to(op: &str, a: &str, b: &str) -> (&'static str, serde_json::Value) {
    ("plant", json!({"op": op, "a": a, "b": b}))
}

/// A call to the fsguard plugin's `dir_write`: `text` into `file` of `dir`.
fn dir_write(dir: &str, file: &str, text: &str) -> (&'static str, serde_json::Value) {
    ("dir_write", json!({"dir": dir, "file": file, "text": text}))
}

fn fsguard_toml(name: &str) -> String {
    plugin_toml(
        name,
        FSGUARD,
        "grants.fs = [{ path = \".\", access = \"rw\" }]",
    )
}

#[test]
fn a_plugin_with_a_rw_grant_cannot_reach_git_under_any_argument_name() {
    let sb = repo();
    sb.write("notes.txt", "notes\n");
    sb.write("corral.toml", &fsguard_toml("scribbler"));
    // A dangling link whose target is a hook that does not exist yet.
    std::os::unix::fs::symlink(".git/hooks/pre-commit", sb.ws().join("innocent.sh"))
        .expect("symlink");
    // A link into .git by way of another directory.
    std::fs::create_dir(sb.ws().join("docs")).expect("docs");
    std::os::unix::fs::symlink("../meta/hooks", sb.ws().join("docs/hooks")).expect("symlink");
    let before = git_tree(&sb);
    let manifest = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml");
    let cli = Cli::new();
    let cases = [
        scribble("meta/config", "x"),
        scribble("innocent.sh", "#!/bin/sh\n"),
        scribble("docs/hooks/pre-commit", "x"),
        scribble("docs/hooks/../config", "x"),
        scribble("corral.toml", "x"),
        plant_to("append", "meta/config", "x"),
        plant("mkdir", "meta/hooks/x"),
        plant("rmdir", "meta/hooks"),
        plant("remove", "meta/HEAD"),
        plant_to("rename", "notes.txt", "meta/hooks/pre-commit"),
        plant_to("rename", "meta/config", "stolen"),
        plant_to("rename", ".git", "old-git"),
        plant_to("link", "meta/config", "config-link"),
        plant_to("link", "notes.txt", "meta/hooks/pre-commit"),
        plant_to("symlink", "../../notes.txt", "meta/hooks/pre-commit"),
        plant("mkdir", "sub/.git"),
        plant("mkdir", ".Git"),
        dir_write("meta", "config", "x"),
        dir_write("meta/hooks", "pre-commit", "x"),
        dir_write(".", "corral.toml", "x"),
    ];
    // The fixture's subdirectory for the last `mkdir`.
    std::fs::create_dir(sb.ws().join("sub")).expect("sub");
    for (tool, args) in cases {
        let o = tool_call(&cli, &sb, tool, args.clone());
        assert_refused(&o, &format!("{tool} {args}"));
    }
    pretty_assertions::assert_eq!(git_tree(&sb), before);
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml"),
        manifest
    );
    for left_alone in ["stolen", "config-link", "old-git", "sub/.git"] {
        assert!(!sb.ws().join(left_alone).exists(), "{left_alone} exists");
    }
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("notes.txt")).expect("notes"),
        "notes\n"
    );
    // The same plugin still writes where it may, through a symlink too.
    std::os::unix::fs::symlink("docs", sb.ws().join("d")).expect("symlink");
    call_ok(
        &cli,
        &sb,
        "scribble",
        json!({"target": "d/ok.txt", "text": "fine"}),
    );
    call_ok(
        &cli,
        &sb,
        "dir_write",
        json!({"dir": "d", "file": "ok2.txt", "text": "fine"}),
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("docs/ok2.txt")).expect("ok2"),
        "fine"
    );
}

#[test]
fn a_file_plugin_named_git_is_not_exempt() {
    let sb = repo();
    sb.write("corral.toml", &fsguard_toml("git"));
    let before = git_tree(&sb);
    let cli = Cli::new();
    for target in [".git/config", "meta/hooks/pre-commit"] {
        let o = tool_call(
            &cli,
            &sb,
            "scribble",
            json!({"target": target, "text": "x"}),
        );
        assert_refused(&o, target);
    }
    pretty_assertions::assert_eq!(git_tree(&sb), before);
}

fn git_toml() -> &'static str {
    "[plugins.git]\nsource = \"builtin:git\"\ngrants.exec = [{ program = \"git\", args = [\"**\"] }]\n"
}

#[test]
fn the_builtin_git_plugin_still_adds_and_commits() {
    let sb = repo();
    sb.write(".gitignore", "corral.toml\nmeta\n");
    sb.write("corral.toml", git_toml());
    let cli = Cli::new();
    call_ok(
        &cli,
        &sb,
        "git_add",
        json!({"paths": ["hello.txt", ".gitignore"]}),
    );
    let o = call_ok(&cli, &sb, "git_commit", json!({"message": "first"}));
    assert_eq!(git(&sb.ws(), &["log", "--format=%s"]), "first\n");
    assert_eq!(
        git(&sb.ws(), &["ls-files"]),
        ".gitignore\nhello.txt\n",
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_git_tools_do_not_run_a_planted_fsmonitor() {
    let sb = repo();
    sb.write("corral.toml", git_toml());
    // Planted before corral ran (by hand, or by an older corral): git
    // status would run it as the filesystem monitor hook.
    sb.write("monitor.sh", "#!/bin/sh\ntouch fsmonitor-ran\n");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        sb.ws().join("monitor.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    let monitor = sb.ws().join("monitor.sh");
    git(
        &sb.ws(),
        &["config", "core.fsmonitor", monitor.to_str().expect("utf-8")],
    );
    let cli = Cli::new();
    let o = call_ok(&cli, &sb, "git_status", json!({}));
    has(&stdout(&o), "?? hello.txt");
    assert_absent(&sb, "fsmonitor-ran", "git_status ran the fsmonitor hook");
}

#[test]
fn reading_a_fifo_fails_at_once_for_every_plugin() {
    let sb = Sandbox::new();
    mkfifo(&sb.ws().join("pipe"));
    std::os::unix::fs::symlink("pipe", sb.ws().join("to-pipe")).expect("symlink");
    sb.write("corral.toml", &fsguard_toml("reader"));
    let cli = Cli::new();
    let started = Instant::now();
    for (tool, args) in [
        ("read_file", json!({"path": "pipe"})),
        ("read_file", json!({"path": "to-pipe"})),
        ("slurp", json!({"target": "pipe"})),
        ("slurp", json!({"target": "to-pipe"})),
    ] {
        let o = tool_call(&cli, &sb, tool, args.clone());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{tool} {args}: {err}");
        assert!(
            err.contains("FIFO"),
            "{tool} {args}: the error does not say why: {err}"
        );
    }
    // Not a timing assertion: four calls that each waited for a deadline
    // (30 s by default) would take minutes.
    assert!(started.elapsed() < HANG_GUARD, "{:?}", started.elapsed());
    call_ok(&cli, &sb, "read_file", json!({"path": "hello.txt"}));
}

#[test]
fn a_fifo_named_agents_md_does_not_hang_a_run() {
    let sb = Sandbox::new();
    sb.write("README.md", "# A project\n\nIt does things.\n");
    mkfifo(&sb.ws().join("AGENTS.md"));
    let cli = Cli::new();
    let o = run_guarded(
        cli.command(
            &sb.ws(),
            &["run", "--provider", "replay", "What is this project?"],
        ),
        "run with a FIFO AGENTS.md",
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    has(&stdout(&o), "● read_file(limit=30, path=README.md)");
    has(&err, "AGENTS.md skipped: it is a FIFO");
}

#[test]
fn a_source_that_is_not_a_regular_file_fails_fast() {
    let sb = Sandbox::new();
    mkfifo(&sb.ws().join("pipe.wasm"));
    let cli = Cli::new();
    sb.write("corral.toml", "[plugins.piped]\nsource = \"pipe.wasm\"\n");
    let o = run_guarded(cli.command(&sb.ws(), &["tools", "list"]), "FIFO source");
    assert_exit(&o, 2);
    has(&stderr(&o), "it is a FIFO (named pipe), not a regular file");
    // Through the user's own configuration, which needs no trust.
    std::fs::remove_file(sb.ws().join("corral.toml")).expect("rm");
    cli.write_user_manifest("[plugins.zero]\nsource = \"/dev/zero\"\n");
    let o = run_guarded(
        cli.command(&sb.ws(), &["tools", "list"]),
        "/dev/zero source",
    );
    assert_exit(&o, 2);
    has(
        &stderr(&o),
        "/dev/zero: it is a character device, not a regular file",
    );
    std::fs::remove_file(cli.home.path().join("config/corral/corral.toml")).expect("rm");
    let o = run_guarded(
        cli.command(&sb.ws(), &["plugins", "inspect", "/dev/zero"]),
        "inspect /dev/zero",
    );
    assert_exit(&o, 2);
    has(&stderr(&o), "it is a character device, not a regular file");
    let pipe = sb.ws().join("pipe.wasm");
    let o = run_guarded(
        cli.command(
            &sb.ws(),
            &["plugins", "inspect", pipe.to_str().expect("utf-8")],
        ),
        "inspect a FIFO",
    );
    assert_exit(&o, 2);
    has(&stderr(&o), "FIFO");
}

#[test]
fn a_fifo_named_corral_toml_does_not_hang_a_command() {
    let sb = Sandbox::new();
    mkfifo(&sb.ws().join("corral.toml"));
    let cli = Cli::untrusting();
    let o = run_guarded(
        cli.command(&sb.ws(), &["tools", "list"]),
        "FIFO corral.toml",
    );
    assert_exit(&o, 2);
    has(&stderr(&o), "it is a FIFO (named pipe), not a regular file");
}
