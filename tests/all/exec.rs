//! Programs run through the host for plugins granted `exec` (the `shell` and
//! `git` plugins): only granted programs and arguments, no shell unless
//! granted, a scrubbed environment, the whole process group killed at the
//! timeout, a process budget, and Landlock keeping writes in the workspace
//! and TCP closed.

use crate::support::mock::{MockServer, Reply, openai_sse};
use crate::support::output::{assert_exit, printed};
use crate::support::run::argv_with;
use crate::support::text::{has, has_all, lacks, lacks_all, tail};
use crate::*;
use serde_json::json;
use std::time::{Duration, Instant};

fn shell_toml(grants: &str, extra: &str) -> String {
    format!("[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{grants}]\n{extra}\n")
}

async fn shell(sb: &Sandbox, grants: &str) -> Plugins {
    sb.load(&shell_toml(grants, "")).await.expect("shell loads")
}

/// What `run_command` with `args` answered, and whether it is an error.
async fn run_command(p: &Plugins, args: serde_json::Value) -> (String, bool) {
    content(call(p, "run_command", args).await)
}

/// `sh -c` granted with `timeout_ms` of `ms`, running `command`: the
/// plugins, when the call started, and its (content, is_error).
async fn sh_timed(sb: &Sandbox, ms: u32, command: &str) -> (Plugins, Instant, (String, bool)) {
    let grant = format!(r#"{{ program = "sh", args = ["-c", "*"], timeout_ms = {ms} }}"#);
    let p = shell(sb, &grant).await;
    let started = Instant::now();
    let result = run_command(&p, json!({ "command": command })).await;
    (p, started, result)
}

/// The command lines of every process on the machine (`ps -eo args`).
fn processes() -> String {
    let ps = std::process::Command::new("ps")
        .args(["-eo", "args"])
        .output()
        .expect("ps");
    String::from_utf8_lossy(&ps.stdout).into_owned()
}

fn content(r: Result<ToolOutput, ToolError>) -> (String, bool) {
    match r {
        Ok(o) => (o.content, o.is_error),
        Err(e) => (e.to_string(), true),
    }
}

/// Without `grants.exec` the shell plugin loads, and `process.run` is a
/// stub that answers every run with `not-granted`, naming the entry and the
/// grant that would allow it.
#[tokio::test]
async fn shell_without_exec_grant_loads_and_runs_nothing() {
    let sb = Sandbox::new();
    let p = sb
        .load("[plugins.shell]\nsource = \"builtin:shell\"\n")
        .await
        .expect("loads without grants.exec");
    let (out, err) = run_command(&p, json!({"command": "touch made"})).await;
    assert!(err, "{out}");
    has(
        &out,
        "not granted: this plugin (`shell`) has no grants.exec entry in [plugins.shell] (corral.toml:2)",
    );
    has(&out, "add grants.exec = [");
    assert!(!sb.ws().join("made").exists(), "a program ran");
}

#[tokio::test]
async fn a_granted_program_runs_in_the_workspace() {
    let sb = Sandbox::new();
    let p = shell(&sb, r#"{ program = "ls", args = ["**"] }"#).await;
    let (out, err) = run_command(&p, json!({"command": "ls -1"})).await;
    assert!(!err, "{out}");
    assert!(out.starts_with("exit code 0\n"), "{out}");
    has(&out, "hello.txt");
    let (out, _) = run_command(&p, json!({"argv": ["ls", "-1", "nope"]})).await;
    assert!(
        out.contains("exit code 2") && out.contains("--- stderr ---"),
        "{out}"
    );
}

#[tokio::test]
async fn a_granted_cargo_test_runs() {
    let sb = Sandbox::new();
    sb.write(
        "Cargo.toml",
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    );
    sb.write(
        "src/lib.rs",
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    );
    let p = sb
        .load(&shell_toml(
            r#"{ program = "cargo", args = ["test", "**"], timeout_ms = 300000 }"#,
            "limits = { timeout_ms = 300000 }",
        ))
        .await
        .expect("load");
    let (out, err) = run_command(&p, json!({"command": "cargo test --offline"})).await;
    assert!(!err, "{out}");
    has(&out, "test adds ... ok");
    // Only `cargo test` is granted.
    let (out, err) = run_command(&p, json!({"command": "cargo build"})).await;
    assert!(err && out.contains("may not run `cargo build`"), "{out}");
}

#[tokio::test]
async fn programs_outside_the_grant_are_refused() {
    let sb = Sandbox::new();
    let p = shell(&sb, r#"{ program = "ls", args = ["**"] }"#).await;
    for cmd in ["curl http://127.0.0.1:9/", "rm -rf .", "/bin/ls -1"] {
        let (out, err) = run_command(&p, json!({ "command": cmd })).await;
        assert!(err, "{cmd}: {out}");
        assert!(out.contains("may not run"), "{cmd}: {out}");
    }
    // Shell syntax needs a shell, and sh is not granted.
    for cmd in [
        "ls | wc -l",
        "ls > out.txt",
        "ls && rm hello.txt",
        "ls $(id)",
    ] {
        let (out, err) = run_command(&p, json!({ "command": cmd })).await;
        assert!(err && out.contains("needs `sh`"), "{cmd}: {out}");
    }
    let (out, err) = run_command(&p, json!({"argv": ["sh", "-c", "echo pwned > pwned.txt"]})).await;
    assert!(err && out.contains("may not run `sh`"), "{out}");
    assert!(!sb.ws().join("pwned.txt").exists());
    assert!(!sb.ws().join("out.txt").exists());
}

#[tokio::test]
async fn find_exec_is_refused_by_the_argument_patterns() {
    let sb = Sandbox::new();
    let p = shell(&sb, r#"{ program = "find", args = [".", "-name", "*"] }"#).await;
    let (out, err) = run_command(&p, json!({"command": "find . -name hello.txt"})).await;
    assert!(!err && out.contains("./hello.txt"), "{out}");
    let (out, err) = run_command(
        &p,
        json!({"argv": ["find", ".", "-exec", "touch", "pwned", ";"]}),
    )
    .await;
    assert!(err && out.contains("may not run `find . -exec"), "{out}");
    assert!(!sb.ws().join("pwned").exists());
}

#[tokio::test]
async fn a_granted_program_cannot_write_outside_the_workspace() {
    let sb = Sandbox::new();
    let p = shell(
        &sb,
        r#"{ program = "touch", args = ["**"] }, { program = "find", args = ["**"] }"#,
    )
    .await;
    let outside = sb.outside().join("pwned.txt");
    let (out, err) = run_command(
        &p,
        json!({"argv": ["touch", outside.to_str().expect("utf-8")]}),
    )
    .await;
    assert!(err, "{out}");
    has(&out, "Permission denied");
    assert!(
        !outside.exists(),
        "Landlock let a write out of the workspace"
    );
    // Even through a program that runs others.
    let tmp_target = sb.outside().join("via-find");
    let (out, _) = run_command(&p, json!({"argv": ["find", "hello.txt", "-exec", "touch", tmp_target.to_str().expect("utf-8"), ";"]})).await;
    assert!(!tmp_target.exists(), "{out}");
    // Inside the workspace it works.
    let (out, err) = run_command(&p, json!({"argv": ["touch", "inside.txt"]})).await;
    assert!(!err, "{out}");
    assert!(sb.ws().join("inside.txt").exists());
}

#[tokio::test]
async fn tcp_is_closed_unless_granted() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    listener.set_nonblocking(true).expect("nonblocking");
    let sb = Sandbox::new();
    let script = format!(
        "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    );
    let p = shell(&sb, r#"{ program = "python3", args = ["-c", "*"] }"#).await;
    let (out, err) = run_command(&p, json!({"argv": ["python3", "-c", script]})).await;
    assert!(err, "{out}");
    assert!(
        out.contains("PermissionError") || out.contains("Permission denied"),
        "{out}"
    );
    assert!(listener.accept().is_err(), "the connection went through");
    let p = shell(
        &sb,
        r#"{ program = "python3", args = ["-c", "*"], network = true }"#,
    )
    .await;
    let (out, err) = run_command(&p, json!({"argv": ["python3", "-c", script]})).await;
    assert!(!err && out.contains("connected"), "{out}");
}

#[tokio::test]
async fn children_that_outlive_the_timeout_are_killed() {
    let sb = Sandbox::new();
    let (p, started, (out, err)) = sh_timed(&sb, 500, "sleep 1007 & sleep 1008; echo never").await;
    assert!(err && out.starts_with("timed out"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    let ps = processes();
    assert!(
        !ps.contains("sleep 1007") && !ps.contains("sleep 1008"),
        "survivors:\n{ps}"
    );
    // A background child of a program that exits is killed too.
    let (out, _) = run_command(&p, json!({"command": "sleep 1009 & echo started"})).await;
    has(&out, "started");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!processes().contains("sleep 1009"));
}

#[tokio::test]
async fn a_fork_bomb_hits_the_process_budget() {
    let sb = Sandbox::new();
    let (_, started, (out, err)) =
        sh_timed(&sb, 3000, "bomb_7f() { bomb_7f | bomb_7f; }; bomb_7f").await;
    assert!(err, "{out}");
    assert!(
        out.starts_with("timed out") || out.contains("fork") || out.contains("Resource"),
        "{out}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(500));
    let ps = processes();
    assert!(!ps.contains("bomb_7f"), "survivors:\n{ps}");
    // The host is fine and the next call works.
    let p2 = shell(&sb, r#"{ program = "ls", args = ["**"] }"#).await;
    let (out, err) = content(call(&p2, "run_command", json!({"command": "ls"})).await);
    assert!(!err && out.contains("hello.txt"), "{out}");
}

#[test]
fn the_environment_is_scrubbed() {
    let sb = Sandbox::with_manifest(&shell_toml(
        r#"{ program = "env", args = [] }"#,
        "grants.env = [\"VISIBLE_ONE\"]",
    ));
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &argv_with("tool call run_command --args", r#"{"command":"env"}"#),
        &[("SECRET_TOKEN", "s3cr3t-value"), ("VISIBLE_ONE", "shown")],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !out.contains("s3cr3t-value") && !out.contains("SECRET_TOKEN"),
        "{out}"
    );
    has_all(&out, &["VISIBLE_ONE=shown", "PATH=", "TMPDIR="]);
}

async fn git_repo(sb: &Sandbox) -> Plugins {
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(sb.ws())
            .output()
            .expect("git");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["config", "user.email", "t@example.com"]);
    git(&["config", "user.name", "T"]);
    sb.load("[plugins.git]\nsource = \"builtin:git\"\ngrants.exec = [{ program = \"git\", args = [\"**\"] }]\n")
        .await
        .expect("git loads")
}

#[tokio::test]
async fn git_tools_work_and_hooks_do_not_run() {
    let sb = Sandbox::new();
    let p = git_repo(&sb).await;
    let hook = sb.ws().join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\ntouch hook-ran\n").expect("hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (out, _) = content(call(&p, "git_status", json!({})).await);
    has(&out, "?? hello.txt");
    let (out, err) = content(call(&p, "git_add", json!({"paths": ["hello.txt"]})).await);
    assert!(!err, "{out}");
    let (out, err) = content(call(&p, "git_commit", json!({"message": "-first commit"})).await);
    assert!(!err, "{out}");
    assert!(!sb.ws().join("hook-ran").exists(), "a hook ran");
    let (out, _) = content(call(&p, "git_log", json!({})).await);
    has(&out, "-first commit");
}

#[tokio::test]
async fn git_argument_injection_is_refused() {
    let sb = Sandbox::new();
    let p = git_repo(&sb).await;
    let marker = sb.ws().join("injected");
    let cases = [
        (
            "git_diff",
            json!({"rev": format!("--upload-pack=touch {}", marker.display())}),
        ),
        ("git_log", json!({"rev": "-c"})),
        ("git_show", json!({"rev": "--exec=touch injected"})),
        (
            "git_branch",
            json!({"create": "--config=core.pager=touch injected"}),
        ),
        ("git_diff", json!({"paths": ["../outside"]})),
    ];
    for (tool, args) in cases {
        match call(&p, tool, args.clone()).await {
            Err(ToolError::InvalidArguments(m)) => assert!(!m.is_empty()),
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
    assert!(!marker.exists());
}

#[tokio::test]
async fn output_is_capped_with_a_notice() {
    // Each stream keeps a quarter of limits.output_kb, so the tool's answer still fits.
    let sb = Sandbox::new();
    let p = sb
        .load(&shell_toml(
            r#"{ program = "python3", args = ["-c", "*"] }"#,
            "limits = { output_kb = 64 }",
        ))
        .await
        .expect("load");
    let (out, err) = run_command(
        &p,
        json!({"argv": ["python3", "-c", "print('x' * 3_000_000)"]}),
    )
    .await;
    assert!(!err, "{}", &out[..200.min(out.len())]);
    assert!(
        out.contains("[output cut at 16384 bytes]"),
        "{}",
        tail(&out, 200)
    );
    assert!(out.len() < 20_000, "{}", out.len());
}

#[test]
fn a_granted_program_cannot_read_corrals_environment() {
    // A program granted to a plugin tries the side door: the environment
    // of its parent, corral, which holds the provider keys.
    let sb = Sandbox::with_manifest(
        "[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{ program = \"sh\", args = [\"**\"] }]\n",
    );
    let cli = Cli::new();
    let args = json!({"argv": ["sh", "-c", "cat /proc/$PPID/environ; echo; cat /proc/$PPID/cmdline; echo; tr '\\0' '\\n' < /proc/1/environ | head -3"]});
    let o = cli.run_env(
        &sb.ws(),
        &["tool", "call", "run_command", "--args", &args.to_string()],
        &[("CORRAL_TEST_PARENT_SECRET", "parent-secret-5e1f")],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    lacks(&out, "parent-secret-5e1f");
    lacks(&err, "parent-secret-5e1f");
    // The attempt really ran, and was refused by the kernel.
    assert!(out.contains("Permission denied"), "{out}\n{err}");
}

#[test]
fn a_granted_program_cannot_read_the_users_credentials() {
    let sb = Sandbox::with_manifest(
        "[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{ program = \"cat\", args = [\"**\"] }, { program = \"ls\", args = [\"**\"] }]\n",
    );
    let home = tempfile::tempdir().expect("home");
    let h = home.path();
    for (file, text) in [
        (".ssh/id_ed25519", "ssh-secret-91c2"),
        (".aws/credentials", "aws-secret-77d0"),
        (".cargo/credentials.toml", "cargo-secret-3b8e"),
        (".cargo/config.toml", "[build]\n"),
        (".profile", "export EDITOR=vi\n"),
    ] {
        std::fs::create_dir_all(h.join(file).parent().expect("parent")).expect("mkdir");
        std::fs::write(h.join(file), text).expect("write");
    }
    let cli = Cli::new();
    let home_env = h.display().to_string();
    let cat = |path: &str| {
        let args = json!({ "argv": ["cat", h.join(path).display().to_string()] });
        let o = cli.run_env(
            &sb.ws(),
            &["tool", "call", "run_command", "--args", &args.to_string()],
            &[("HOME", home_env.as_str())],
        );
        printed(&o)
    };
    for (path, secret) in [
        (".ssh/id_ed25519", "ssh-secret-91c2"),
        (".aws/credentials", "aws-secret-77d0"),
        (".cargo/credentials.toml", "cargo-secret-3b8e"),
    ] {
        let out = cat(path);
        assert!(!out.contains(secret), "{path}: {out}");
        assert!(out.contains("Permission denied"), "{path}: {out}");
    }
    // The rest of the home stays readable: toolchains need it.
    assert!(cat(".profile").contains("EDITOR=vi"));
    assert!(cat(".cargo/config.toml").contains("[build]"));
}

#[test]
fn the_git_status_in_the_context_runs_confined() {
    // A repository's configuration may name commands (fsmonitor, filters)
    // and a tool may have written it; a stand-in `git` first in PATH plays
    // such a command: it tries to read the provider key from its
    // environment, read a credential, and write into the workspace.
    let mock = MockServer::start(|_, _| Reply::Sse(openai_sse("Fine.", &[])));
    let sb = Sandbox::new();
    std::fs::create_dir(sb.ws().join(".git")).expect(".git");
    let bin = tempfile::tempdir().expect("bin");
    let home = tempfile::tempdir().expect("home");
    std::fs::create_dir(home.path().join(".ssh")).expect(".ssh");
    std::fs::write(home.path().join(".ssh/id_rsa"), "ssh-secret-0c4d").expect("key");
    let fake = bin.path().join("git");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho '## main-from-fake-git'\necho \"key=$TEST_OPENAI_KEY\"\ncat \"$HOME/.ssh/id_rsa\"\necho planted > \"$PWD/planted.txt\" && echo wrote-planted\nexit 0\n",
    )
    .expect("fake git");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    sb.write(
        "corral.toml",
        &format!(
            "[plugins.openai]\nsource = \"builtin:openai\"\ngrants.net = [\"http://127.0.0.1:{0}\"]\ngrants.secrets = [{{ origin = \"http://127.0.0.1:{0}\", header = \"authorization\", value = \"Bearer ${{env:TEST_OPENAI_KEY}}\" }}]\nconfig = {{ base_url = \"http://127.0.0.1:{0}/v1\", model = \"mock\" }}\n",
            mock.port
        ),
    );
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "hello"],
        &[
            ("TEST_OPENAI_KEY", "sk-context-secret-6a1b"),
            ("PATH", path.as_str()),
            ("HOME", &home.path().display().to_string()),
        ],
    );
    assert_exit(&o, 0);
    let reqs = mock.requests();
    let sent = reqs[0].body.to_string();
    // The stand-in ran (its output reached the context) ...
    has(&sent, "main-from-fake-git");
    // ... without the key, the credential, or a way to write.
    lacks_all(
        &sent,
        &["sk-context-secret-6a1b", "ssh-secret-0c4d", "wrote-planted"],
    );
    assert!(!sb.ws().join("planted.txt").exists());
}

#[tokio::test]
async fn a_granted_program_cannot_reach_unix_sockets_or_udp() {
    // A UNIX socket outside the sandbox (a session bus, a container
    // daemon) and a UDP port: with network = false neither is reachable;
    // Landlock alone stops only TCP.
    let sb = Sandbox::new();
    let dir = tempfile::tempdir().expect("dir");
    let sock = dir.path().join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind unix");
    listener.set_nonblocking(true).expect("nonblocking");
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind udp");
    udp.set_nonblocking(true).expect("nonblocking");
    let port = udp.local_addr().expect("addr").port();
    let p = shell(&sb, r#"{ program = "curl", args = ["**"] }"#).await;
    let (out, err) = run_command(&p, json!({"argv": ["curl", "-sS", "--max-time", "3", "--unix-socket", sock.display().to_string(), "http://localhost/"]})).await;
    assert!(err, "{out}");
    let (out2, err2) = run_command(
        &p,
        json!({"argv": ["curl", "-sS", "--max-time", "2", format!("tftp://127.0.0.1:{port}/x")]}),
    )
    .await;
    assert!(err2, "{out2}");
    // Neither side heard anything.
    assert!(listener.accept().is_err(), "unix socket reached: {out}");
    let mut buf = [0u8; 64];
    assert!(udp.recv_from(&mut buf).is_err(), "udp reached: {out2}");
    // The same curl may reach what it is granted: with network = true,
    // UDP leaves (TCP too), while UNIX sockets stay closed.
    let p = shell(
        &sb,
        r#"{ program = "curl", args = ["**"], network = true }"#,
    )
    .await;
    let _ = call(
        &p,
        "run_command",
        json!({"argv": ["curl", "-sS", "--max-time", "1", format!("tftp://127.0.0.1:{port}/x")]}),
    )
    .await;
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        udp.recv_from(&mut buf).is_ok(),
        "the granted network was not usable"
    );
    let _ = call(
        &p,
        "run_command",
        json!({"argv": ["curl", "-sS", "--max-time", "3", "--unix-socket", sock.display().to_string(), "http://localhost/"]}),
    )
    .await;
    assert!(
        listener.accept().is_err(),
        "unix socket reached with network = true"
    );
}

#[test]
fn credentials_stay_closed_when_the_workspace_is_the_home() {
    let sb = Sandbox::with_manifest(
        "[plugins.shell]\nsource = \"builtin:shell\"\ngrants.exec = [{ program = \"sh\", args = [\"**\"] }]\n",
    );
    sb.write(".ssh/id_ed25519", "ssh-secret-40aa");
    sb.write("src/lib.rs", "// code\n");
    let cli = Cli::new();
    let home = sb.ws().display().to_string();
    let args = json!({"argv": ["sh", "-c", "cat .ssh/id_ed25519; echo planted > .ssh/authorized_keys; echo fine > src/notes.txt && echo wrote-notes"]});
    let o = cli.run_env(
        &sb.ws(),
        &["tool", "call", "run_command", "--args", &args.to_string()],
        &[("HOME", home.as_str())],
    );
    let out = printed(&o);
    lacks(&out, "ssh-secret-40aa");
    assert!(!sb.ws().join(".ssh/authorized_keys").exists(), "{out}");
    // The rest of the workspace stays writable (Landlock cannot subtract,
    // so the rules cover the workspace's entries other than the secret;
    // only new files directly at its root are refused).
    has(&out, "wrote-notes");
}

#[tokio::test]
async fn a_granted_program_cannot_signal_corral() {
    // Landlock's signal scope needs ABI 6 (Linux 6.12).
    match corral_exec::confinement() {
        corral_exec::Confinement::Landlock(abi) if abi >= 6 => {}
        other => {
            crate::support::skip::cannot_run_here(format!(
                "this kernel's Landlock ({other:?}) has no signal scope"
            ));
            return;
        }
    }
    let sb = Sandbox::new();
    let p = shell(&sb, r#"{ program = "sh", args = ["**"] }"#).await;
    // `kill -0` only asks whether the signal could be sent.
    let (out, _) = run_command(&p, json!({"argv": ["sh", "-c", "kill -0 $PPID && echo reached-parent; kill -0 $$ && echo reached-self"]})).await;
    lacks(&out, "reached-parent");
    // Its own processes it may still signal.
    has(&out, "reached-self");
}
