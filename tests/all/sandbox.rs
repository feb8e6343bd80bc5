//! The adversarial suite: each test has a malicious guest try to break one
//! sandbox promise, checks the attempt is contained with a clear error, and
//! checks the host still serves the next call.

use crate::*;
use corral_test_programs::{ADVERSARY, ECHO, HTTP_CLIENT, RAW_SOCKET};
use serde_json::json;
use std::io::{Read, Write};

const RW: &str = r#"grants.fs = [{ path = ".", access = "rw" }]"#;

async fn adversary(sb: &Sandbox, rest: &str) -> Plugins {
    sb.load(&plugin_toml("adversary", ADVERSARY, rest))
        .await
        .expect("load adversary")
}

/// The next call after an attack works: the same plugin reads a workspace file.
async fn assert_healthy(plugins: &Plugins) {
    let out = call(plugins, "read_path", json!({"path": "hello.txt"}))
        .await
        .expect("healthy call");
    assert_eq!(out.content, "hello from the workspace\n");
}

fn assert_no_secret(msg: &str) {
    assert!(!msg.contains(SECRET), "the secret leaked: {msg}");
}

#[tokio::test]
async fn read_etc_passwd_is_contained() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let msg = failed(call(&p, "read_path", json!({"path": "/etc/passwd"})).await);
    assert!(msg.contains("NotFound"), "{msg}");
    assert!(!msg.contains("root:"), "{msg}");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn dotdot_escape_is_contained() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    for path in [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "./../outside/secret.txt",
    ] {
        let msg = failed(call(&p, "read_path", json!({ "path": path })).await);
        assert_no_secret(&msg);
        assert!(
            msg.contains("PermissionDenied") || msg.contains("NotFound"),
            "{path}: {msg}"
        );
    }
    assert_healthy(&p).await;
}

#[tokio::test]
async fn absolute_path_is_contained() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let abs = sb.outside().join("secret.txt");
    let msg = failed(call(&p, "read_path", json!({"path": abs.to_string_lossy()})).await);
    assert_no_secret(&msg);
    // Even the workspace's own absolute path is not a way in.
    let abs_ws = sb.ws().join("hello.txt");
    failed(call(&p, "read_path", json!({"path": abs_ws.to_string_lossy()})).await);
    assert_healthy(&p).await;
}

#[tokio::test]
async fn symlinks_pointing_outside_are_contained() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("file-link"))
        .expect("symlink");
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("dir-link")).expect("symlink");
    std::os::unix::fs::symlink("../outside/secret.txt", sb.ws().join("rel-link")).expect("symlink");
    let p = adversary(&sb, RW).await;
    for path in [
        "file-link",
        "file-link/",
        "rel-link",
        "rel-link/",
        "dir-link/secret.txt",
        "dir-link/./secret.txt",
    ] {
        let msg = failed(call(&p, "read_path", json!({ "path": path })).await);
        assert_no_secret(&msg);
    }
    for path in ["dir-link", "dir-link/", "dir-link/."] {
        let r = call(&p, "list_dir", json!({ "path": path })).await;
        let msg = failed(r);
        assert!(!msg.contains("secret.txt"), "{path}: {msg}");
    }
    // Writing through a link does not reach outside either.
    failed(
        call(
            &p,
            "write_path",
            json!({"path": "dir-link/new.txt", "content": "x"}),
        )
        .await,
    );
    failed(
        call(
            &p,
            "write_path",
            json!({"path": "file-link", "content": "overwritten"}),
        )
        .await,
    );
    assert!(!sb.outside().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sb.outside().join("secret.txt")).expect("read"),
        SECRET
    );
    assert_healthy(&p).await;
}

#[tokio::test]
async fn write_into_read_only_grant_is_refused() {
    let sb = Sandbox::new();
    let p = adversary(&sb, r#"grants.fs = [{ path = ".", access = "ro" }]"#).await;
    let msg = failed(call(&p, "write_path", json!({"path": "new.txt", "content": "x"})).await);
    assert!(
        msg.contains("PermissionDenied") || msg.contains("ReadOnly"),
        "{msg}"
    );
    failed(
        call(
            &p,
            "write_path",
            json!({"path": "hello.txt", "content": "x"}),
        )
        .await,
    );
    assert!(!sb.ws().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("hello.txt")).expect("read"),
        "hello from the workspace\n"
    );
    assert_healthy(&p).await;
}

#[tokio::test]
async fn hard_link_and_rename_across_grants_are_refused() {
    let sb = Sandbox::new();
    sb.write("out/mine.txt", "rw data");
    sb.write("src/data.txt", "ro data");
    let err = sb
        .manifest(&plugin_toml(
            "adversary",
            ADVERSARY,
            r#"grants.fs = [{ path = "out", access = "rw" }, { path = ".", access = "ro" }]"#,
        ))
        .expect_err("overlapping grants refused");
    assert!(err.contains("overlaps"), "{err}");
    let p = adversary(
        &sb,
        r#"grants.fs = [{ path = "out", access = "rw" }, { path = "src", access = "ro" }]"#,
    )
    .await;
    // rw -> ro
    failed(
        call(
            &p,
            "hard_link",
            json!({"from": "out/mine.txt", "to": "src/linked.txt"}),
        )
        .await,
    );
    failed(
        call(
            &p,
            "rename",
            json!({"from": "out/mine.txt", "to": "src/moved.txt"}),
        )
        .await,
    );
    // ro -> rw: a writable alias of a read-only file must not appear either.
    failed(
        call(
            &p,
            "hard_link",
            json!({"from": "src/data.txt", "to": "out/alias.txt"}),
        )
        .await,
    );
    failed(
        call(
            &p,
            "rename",
            json!({"from": "src/data.txt", "to": "out/stolen.txt"}),
        )
        .await,
    );
    assert!(!sb.ws().join("src/linked.txt").exists());
    assert!(!sb.ws().join("src/moved.txt").exists());
    assert!(!sb.ws().join("out/alias.txt").exists());
    assert!(!sb.ws().join("out/stolen.txt").exists());
    assert!(sb.ws().join("out/mine.txt").exists());
    assert!(sb.ws().join("src/data.txt").exists());
    let out = call(&p, "read_path", json!({"path": "src/data.txt"}))
        .await
        .expect("next call works");
    assert_eq!(out.content, "ro data");
}

#[tokio::test]
async fn environment_is_empty_unless_granted() {
    let sb = Sandbox::new();
    // PATH and HOME are set in every test environment.
    let p = adversary(&sb, RW).await;
    let msg = failed(call(&p, "env_var", json!({"path": "PATH"})).await);
    assert!(msg.ends_with("visible: []"), "{msg}");
    let p = adversary(&sb, &format!("{RW}\ngrants.env = [\"HOME\"]")).await;
    let msg = failed(call(&p, "env_var", json!({"path": "PATH"})).await);
    assert!(msg.ends_with("visible: [HOME]"), "{msg}");
    let out = call(&p, "env_var", json!({"path": "HOME"}))
        .await
        .expect("granted variable");
    assert_eq!(
        out.content,
        format!("HOME={}", std::env::var("HOME").unwrap_or_default())
    );
    // No host arguments either.
    let out = call(&p, "args", json!({})).await.expect("args");
    assert_eq!(out.content, "");
}

/// Without `grants.net` a plugin that imports `wasi:http` loads, and every
/// request it makes is `HttpRequestDenied`, to any destination.
#[tokio::test]
async fn http_without_net_grant_loads_and_every_request_is_denied() {
    let (port, hits) = http_server();
    let sb = Sandbox::new();
    let p = sb
        .load(&plugin_toml("web", HTTP_CLIENT, ""))
        .await
        .expect("loads without grants.net");
    for url in [
        format!("http://127.0.0.1:{port}/"),
        "https://example.com/".to_owned(),
    ] {
        let msg = failed(call(&p, "http_get", json!({"url": url})).await);
        assert!(msg.contains("HttpRequestDenied"), "{url}: {msg}");
    }
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// Without `grants.net` a plugin that imports `wasi:sockets` loads, and its
/// connection is refused by the sandbox, not by a trap.
#[tokio::test]
async fn raw_socket_without_net_grant_loads_and_cannot_connect() {
    let (port, hits) = http_server();
    let sb = Sandbox::new();
    let p = sb
        .load(&plugin_toml("sock", RAW_SOCKET, ""))
        .await
        .expect("loads without grants.net");
    let msg = failed(
        call(
            &p,
            "tcp_connect",
            json!({"addr": format!("127.0.0.1:{port}")}),
        )
        .await,
    );
    assert!(msg.contains("PermissionDenied"), "{msg}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// A one-shot HTTP server on loopback that counts the requests it got.
fn http_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut s) = stream else { continue };
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            );
        }
    });
    (port, hits)
}

#[tokio::test]
async fn http_to_unlisted_host_is_denied_and_granted_host_works() {
    let (allowed, allowed_hits) = http_server();
    let (other, other_hits) = http_server();
    let sb = Sandbox::new();
    let p = sb
        .load(&plugin_toml(
            "web",
            HTTP_CLIENT,
            &format!("grants.net = [\"http://127.0.0.1:{allowed}\"]"),
        ))
        .await
        .expect("web loads with a grant");
    let out = call(
        &p,
        "http_get",
        json!({"url": format!("http://127.0.0.1:{allowed}/")}),
    )
    .await
    .expect("allowed");
    assert_eq!(out.content, "200 hello");
    let msg = failed(
        call(
            &p,
            "http_get",
            json!({"url": format!("http://127.0.0.1:{other}/")}),
        )
        .await,
    );
    assert!(msg.contains("HttpRequestDenied"), "{msg}");
    let msg = failed(
        call(
            &p,
            "http_get",
            json!({"url": format!("http://localhost:{allowed}/")}),
        )
        .await,
    );
    assert!(msg.contains("HttpRequestDenied"), "{msg}");
    assert_eq!(
        other_hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the denied server was reached"
    );
    assert_eq!(allowed_hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn raw_socket_with_net_grant_is_still_denied() {
    let (port, hits) = http_server();
    let sb = Sandbox::new();
    let p = sb
        .load(&plugin_toml(
            "sock",
            RAW_SOCKET,
            &format!("grants.net = [\"http://127.0.0.1:{port}\"]"),
        ))
        .await
        .expect("loads with a grant");
    let msg = failed(
        call(
            &p,
            "tcp_connect",
            json!({"addr": format!("127.0.0.1:{port}")}),
        )
        .await,
    );
    assert!(msg.contains("connect"), "{msg}");
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn infinite_loop_times_out() {
    let sb = Sandbox::new();
    let p = adversary(&sb, &format!("{RW}\nlimits = {{ timeout_ms = 300 }}")).await;
    let msg = sandbox_err(call(&p, "spin", json!({})).await);
    assert!(msg.contains("timed out after 300 ms"), "{msg}");
    assert!(msg.contains("limits.timeout_ms"), "{msg}");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn allocating_2_gib_hits_the_memory_cap() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let msg = sandbox_err(call(&p, "alloc", json!({"n": 2048})).await);
    assert!(msg.contains("memory limit of 256 MiB"), "{msg}");
    // A modest allocation still works afterwards.
    let out = call(&p, "alloc", json!({"n": 16}))
        .await
        .expect("16 MiB is fine");
    assert_eq!(out.content, format!("allocated {} bytes", 16 << 20));
    assert_healthy(&p).await;
}

#[tokio::test]
async fn deep_recursion_overflows_cleanly() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let msg = sandbox_err(call(&p, "recurse", json!({"n": 100_000_000u64})).await);
    assert!(msg.contains("stack"), "{msg}");
    assert_eq!(
        call(&p, "recurse", json!({"n": 100}))
            .await
            .expect("shallow")
            .content,
        "100"
    );
    assert_healthy(&p).await;
}

#[tokio::test]
async fn returning_100_mib_hits_the_output_cap() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let msg = sandbox_err(call(&p, "big_output", json!({"n": 100})).await);
    assert!(msg.contains("exceeds the limit of 1024 KiB"), "{msg}");
    assert!(msg.contains("limits.output_kb"), "{msg}");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn panic_is_a_tool_error_with_its_message() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let msg = sandbox_err(call(&p, "panic", json!({})).await);
    assert!(msg.contains("crashed"), "{msg}");
    assert!(msg.contains("the adversary panicked on purpose"), "{msg}");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn stderr_flood_is_capped_not_fatal() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    let out = call(&p, "stderr_spam", json!({"n": 200_000}))
        .await
        .expect("spam is dropped, not fatal");
    assert_eq!(out.content, "done");
}

#[tokio::test]
async fn host_call_budget_ends_a_chatty_call() {
    let sb = Sandbox::new();
    let p = adversary(&sb, &format!("{RW}\nlimits = {{ host_calls = 1000 }}")).await;
    let msg = sandbox_err(call(&p, "stderr_spam", json!({"n": 100_000})).await);
    assert!(msg.contains("limits.host_calls"), "{msg}");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn read_only_tool_cannot_write_even_under_rw_grant() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    // Declares only `read`: its directories are mounted read-only for the call.
    let msg = failed(
        call(
            &p,
            "sneaky_write",
            json!({"path": "sneaky.txt", "content": "x"}),
        )
        .await,
    );
    assert!(
        msg.contains("PermissionDenied") || msg.contains("ReadOnly"),
        "{msg}"
    );
    assert!(!sb.ws().join("sneaky.txt").exists());
    // The same write from a tool that declares `write` goes through.
    call(
        &p,
        "write_path",
        json!({"path": "honest.txt", "content": "x"}),
    )
    .await
    .expect("declared write");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("honest.txt")).expect("written"),
        "x"
    );
}

#[tokio::test]
async fn no_grant_means_no_files() {
    let sb = Sandbox::new();
    let p = adversary(&sb, "").await;
    let msg = failed(call(&p, "read_path", json!({"path": "hello.txt"})).await);
    assert!(msg.contains("NotFound"), "{msg}");
    failed(call(&p, "list_dir", json!({"path": "."})).await);
    failed(call(&p, "list_dir", json!({"path": "/"})).await);
}

#[tokio::test]
async fn sha256_pin_is_enforced() {
    let sb = Sandbox::new();
    let wrong = "0".repeat(64);
    let err = sb
        .load(&plugin_toml("echo", ECHO, &format!("sha256 = \"{wrong}\"")))
        .await
        .expect_err("mismatch refused");
    assert!(err.contains("the manifest pins"), "{err}");
    let bytes = std::fs::read(ECHO).expect("echo.wasm");
    use sha2::Digest;
    let right = hex::encode(sha2::Sha256::digest(&bytes));
    let p = sb
        .load(&plugin_toml("echo", ECHO, &format!("sha256 = \"{right}\"")))
        .await
        .expect("matching pin loads");
    assert_eq!(
        call(&p, "echo", json!({"text": "pinned"}))
            .await
            .expect("call")
            .content,
        "pinned"
    );
}

#[tokio::test]
async fn plugin_config_is_readable_and_private() {
    let sb = Sandbox::new();
    let p = sb
        .load(&plugin_toml(
            "echo",
            ECHO,
            "config = { model = \"m1\", depth = 3 }",
        ))
        .await
        .expect("load");
    assert_eq!(
        call(&p, "config_get", json!({"key": "model"}))
            .await
            .expect("c")
            .content,
        "m1"
    );
    assert_eq!(
        call(&p, "config_get", json!({"key": "depth"}))
            .await
            .expect("c")
            .content,
        "3"
    );
    assert_eq!(
        call(&p, "config_get", json!({"key": "other"}))
            .await
            .expect("c")
            .content,
        "<unset>"
    );
}

#[tokio::test]
async fn bad_arguments_are_a_clear_tool_error() {
    let sb = Sandbox::new();
    let p = sb.load(&plugin_toml("echo", ECHO, "")).await.expect("load");
    match call(&p, "echo", json!({"txt": 1})).await {
        Err(ToolError::InvalidArguments(m)) => assert!(m.contains("missing field `text`"), "{m}"),
        other => panic!("{other:?}"),
    }
    match call(&p, "nope", json!({})).await {
        Err(ToolError::UnknownTool(m)) => assert_eq!(m, "nope"),
        other => panic!("{other:?}"),
    }
}

/// The result line of `files_read` for `path`.
fn line_for<'a>(out: &'a str, path: &str) -> &'a str {
    let prefix = format!("{path}: ");
    out.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for {path} in {out}"))
}

#[tokio::test]
async fn files_interface_is_confined_like_wasi() {
    let sb = Sandbox::new();
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("file-link"))
        .expect("symlink");
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("dir-link")).expect("symlink");
    std::os::unix::fs::symlink("../outside/secret.txt", sb.ws().join("rel-link")).expect("symlink");
    // A link that stays inside the grant is followed.
    std::os::unix::fs::symlink("hello.txt", sb.ws().join("inner-link")).expect("symlink");
    sb.write("sub/inside.txt", "inside\n");
    let p = adversary(&sb, RW).await;
    let outside_abs = sb.outside().join("secret.txt").display().to_string();
    let escapes = [
        "/etc/passwd",
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "./../outside/secret.txt",
        outside_abs.as_str(),
        "file-link",
        "file-link/",
        "rel-link",
        "dir-link/secret.txt",
        "dir-link/./secret.txt",
    ];
    let mut paths: Vec<&str> = escapes.to_vec();
    paths.extend([
        "hello.txt",
        "inner-link",
        "sub/../hello.txt",
        "sub",
        "missing.txt",
    ]);
    let out = call(
        &p,
        "files_read",
        json!({"paths": paths, "max_bytes": 1 << 20}),
    )
    .await
    .expect("files_read")
    .content;
    assert_no_secret(&out);
    assert!(!out.contains("root:"), "{out}");
    for path in escapes {
        let line = line_for(&out, path);
        assert!(
            line.ends_with("error Denied") || line.ends_with("error NotFound"),
            "{line}"
        );
    }
    assert_eq!(
        line_for(&out, "hello.txt"),
        "hello.txt: hello from the workspace"
    );
    assert_eq!(
        line_for(&out, "inner-link"),
        "inner-link: hello from the workspace"
    );
    assert_eq!(
        line_for(&out, "sub/../hello.txt"),
        "sub/../hello.txt: hello from the workspace"
    );
    assert_eq!(line_for(&out, "sub"), "sub: error WrongKind");
    assert_eq!(line_for(&out, "missing.txt"), "missing.txt: error NotFound");

    // Listing: the workspace yes, a symlinked directory outside no.
    let listed = call(&p, "files_list", json!({"path": "."}))
        .await
        .expect("list")
        .content;
    assert!(listed.contains("hello.txt:File"), "{listed}");
    assert!(listed.contains("sub:Directory"), "{listed}");
    assert!(listed.contains("dir-link:Symlink"), "{listed}");
    let outside_dir = sb.outside().display().to_string();
    for path in ["dir-link", "dir-link/", "..", "/etc", outside_dir.as_str()] {
        let msg = failed(call(&p, "files_list", json!({ "path": path })).await);
        assert!(msg.ends_with("Denied"), "{path}: {msg}");
        assert!(!msg.contains("secret.txt"), "{path}: {msg}");
    }
    assert_healthy(&p).await;
}

#[tokio::test]
async fn files_interface_serves_only_the_granted_directory() {
    let sb = Sandbox::new();
    sb.write("docs/guide.md", "the guide\n");
    let p = adversary(&sb, r#"grants.fs = [{ path = "docs", access = "ro" }]"#).await;
    let out = call(
        &p,
        "files_read",
        json!({"paths": ["docs/guide.md", "hello.txt", "docs/../hello.txt", "docs2/x"], "max_bytes": 1 << 20}),
    )
    .await
    .expect("files_read")
    .content;
    assert_eq!(line_for(&out, "docs/guide.md"), "docs/guide.md: the guide");
    assert_eq!(line_for(&out, "hello.txt"), "hello.txt: error Denied");
    assert_eq!(
        line_for(&out, "docs/../hello.txt"),
        "docs/../hello.txt: error Denied"
    );
    assert_eq!(line_for(&out, "docs2/x"), "docs2/x: error Denied");
    failed(call(&p, "files_list", json!({"path": "."})).await);

    // No grant at all: nothing is served.
    let none = adversary(&sb, "").await;
    let out = call(
        &none,
        "files_read",
        json!({"paths": ["hello.txt"], "max_bytes": 100}),
    )
    .await
    .expect("files_read")
    .content;
    assert_eq!(out, "hello.txt: error Denied");
}

#[tokio::test]
async fn files_interface_does_not_hang_on_a_fifo() {
    let sb = Sandbox::new();
    let fifo = sb.ws().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let p = adversary(&sb, RW).await;
    // Opening a FIFO for reading would block until a writer came; the host
    // opens non-blocking and reads only regular files.
    let out = call(
        &p,
        "files_read",
        json!({"paths": ["pipe"], "max_bytes": 100}),
    )
    .await
    .expect("files_read")
    .content;
    assert_eq!(out, "pipe: error WrongKind");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn files_interface_keeps_to_its_budgets() {
    let sb = Sandbox::new();
    let p = adversary(&sb, &format!("{RW}\nlimits = {{ host_calls = 1000 }}")).await;
    // Bytes: "hello from the workspace\n" is 25 bytes; 40 allow one copy.
    let out = call(
        &p,
        "files_read",
        json!({"paths": ["hello.txt", "hello.txt"], "max_bytes": 40}),
    )
    .await
    .expect("files_read")
    .content;
    assert_eq!(
        out,
        "hello.txt: hello from the workspace\nhello.txt: error OverBudget"
    );
    // Host calls: every path of a batch counts.
    let many: Vec<&str> = vec!["hello.txt"; 5000];
    let msg = sandbox_err(
        call(
            &p,
            "files_read",
            json!({"paths": many, "max_bytes": 1 << 20}),
        )
        .await,
    );
    assert!(msg.contains("limits.host_calls"), "{msg}");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn memory_is_wiped_between_calls() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    // The scan works: a marker planted in the same call is found.
    let control = call(
        &p,
        "scan_memory",
        json!({"key": 7, "mib": 1, "plant": true}),
    )
    .await
    .expect("control scan")
    .content;
    assert!(control.starts_with("found 1 in"), "{control}");
    for _ in 0..3 {
        // One call fills 8 MiB with the marker; the next, in a fresh
        // instance that may reuse the same memory slot, grows its memory
        // past that and finds nothing.
        let wrote = call(
            &p,
            "mark_memory",
            json!({"key": 7, "mib": 8, "plant": false}),
        )
        .await
        .expect("mark")
        .content;
        assert!(wrote.starts_with("wrote"), "{wrote}");
        let scan = call(
            &p,
            "scan_memory",
            json!({"key": 7, "mib": 16, "plant": false}),
        )
        .await
        .expect("scan")
        .content;
        assert!(scan.starts_with("found 0 in"), "{scan}");
        // It looked at least where the marks were.
        let scanned: usize = scan
            .split_whitespace()
            .nth(3)
            .and_then(|n| n.parse().ok())
            .expect("size");
        assert!(scanned >= 16 << 20, "{scan}");
    }
    assert_healthy(&p).await;
}

#[tokio::test]
async fn a_granted_directory_swapped_for_a_symlink_is_refused() {
    let sb = Sandbox::new();
    sb.write("docs/guide.md", "the guide\n");
    let p = adversary(&sb, r#"grants.fs = [{ path = "docs", access = "ro" }]"#).await;
    let out = call(&p, "read_path", json!({"path": "docs/guide.md"}))
        .await
        .expect("read");
    assert_eq!(out.content, "the guide\n");
    // Something with write access to the workspace (a program a plugin
    // runs, say) puts a symlink to another directory where the grant was.
    std::fs::remove_dir_all(sb.ws().join("docs")).expect("rm");
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("docs")).expect("symlink");
    for (tool, args) in [
        ("read_path", json!({"path": "docs/secret.txt"})),
        (
            "files_read",
            json!({"paths": ["docs/secret.txt"], "max_bytes": 100}),
        ),
        ("files_list", json!({"path": "docs"})),
    ] {
        let msg = sandbox_err(call(&p, tool, args).await);
        assert!(
            msg.contains("is no longer what the manifest granted"),
            "{tool}: {msg}"
        );
        assert_no_secret(&msg);
    }
}
