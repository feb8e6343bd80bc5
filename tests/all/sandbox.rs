//! The adversarial suite: each test has a malicious guest try to break one
//! sandbox promise, checks the attempt is contained with a clear error, and
//! checks the host still serves the next call.

use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::{ADVERSARY, ECHO, HTTP_CLIENT, RAW_SOCKET};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::sync::atomic::Ordering::SeqCst;

const RW: &str = r#"grants.fs = [{ path = ".", access = "rw" }]"#;

/// A workspace holding `docs/guide.md`, and the adversary granted `docs`
/// read-only.
async fn docs_read_only() -> (Sandbox, Plugins) {
    let sb = Sandbox::new();
    sb.write("docs/guide.md", "the guide\n");
    let p = adversary(&sb, r#"grants.fs = [{ path = "docs", access = "ro" }]"#).await;
    (sb, p)
}

async fn adversary(sb: &Sandbox, rest: &str) -> Plugins {
    sb.load_plugin("adversary", ADVERSARY, rest)
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

/// The output of a call that must succeed.
async fn output(plugins: &Plugins, tool: &str, args: Value) -> String {
    call(plugins, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e:?}"))
        .content
}

fn assert_no_secret(msg: &str) {
    assert!(!msg.contains(SECRET), "the secret leaked: {msg}");
}

/// How an attack's call must end.
#[derive(Clone, Copy, Debug)]
enum Ends {
    /// The guest saw an error (`ToolError::Failed`).
    Failed,
    /// The sandbox stopped the call (`ToolError::Sandbox`).
    Stopped,
}

/// One attempt to break a sandbox promise: the grant the adversary gets, the
/// call it makes, how that call must end, and what must hold afterwards.
struct Attack {
    /// Named in every failure message.
    name: &'static str,
    /// The adversary's manifest lines (grants and limits).
    grant: String,
    /// Prepares the workspace before the plugin loads.
    setup: fn(&Sandbox),
    tool: &'static str,
    args: Box<dyn Fn(&Sandbox) -> Value>,
    ends: Ends,
    /// The message holds every one of these ...
    holds: &'static [&'static str],
    /// ... at least one of these, when there are any ...
    holds_one_of: &'static [&'static str],
    /// ... and none of these.
    lacks: &'static [&'static str],
    /// A call the same plugin must then answer, with that output if given.
    then: Option<(&'static str, Value, Option<String>)>,
    /// What must be true of the files afterwards (given the attack's name).
    after: fn(&Sandbox, &str),
    /// Whether the same plugin then reads `hello.txt` as before.
    healthy: bool,
}

fn attack(
    name: &'static str,
    grant: &str,
    tool: &'static str,
    args: impl Fn(&Sandbox) -> Value + 'static,
    ends: Ends,
) -> Attack {
    Attack {
        name,
        grant: grant.to_owned(),
        setup: |_| {},
        tool,
        args: Box::new(args),
        ends,
        holds: &[],
        holds_one_of: &[],
        lacks: &[],
        then: None,
        after: |_, _| {},
        healthy: true,
    }
}

impl Attack {
    fn holds(self, holds: &'static [&'static str]) -> Self {
        Self { holds, ..self }
    }
    fn holds_one_of(self, holds_one_of: &'static [&'static str]) -> Self {
        Self {
            holds_one_of,
            ..self
        }
    }
    fn lacks(self, lacks: &'static [&'static str]) -> Self {
        Self { lacks, ..self }
    }
    fn setup(self, setup: fn(&Sandbox)) -> Self {
        Self { setup, ..self }
    }
    fn after(self, after: fn(&Sandbox, &str)) -> Self {
        Self { after, ..self }
    }
    fn then(self, tool: &'static str, args: Value, output: Option<String>) -> Self {
        Self {
            then: Some((tool, args, output)),
            ..self
        }
    }
    fn unhealthy(self) -> Self {
        Self {
            healthy: false,
            ..self
        }
    }
}

/// Links from the workspace to the secret and to the directory holding it.
fn links_outside(sb: &Sandbox) {
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("file-link"))
        .expect("symlink");
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("dir-link")).expect("symlink");
    std::os::unix::fs::symlink("../outside/secret.txt", sb.ws().join("rel-link")).expect("symlink");
}

/// Writing through a link does not reach outside.
fn outside_untouched(sb: &Sandbox, name: &str) {
    assert!(!sb.outside().join("new.txt").exists(), "{name}");
    assert_eq!(
        std::fs::read_to_string(sb.outside().join("secret.txt")).expect("read"),
        SECRET,
        "{name}"
    );
}

/// A file in a read-only grant stays as it was and none is added.
fn workspace_untouched(sb: &Sandbox, name: &str) {
    assert!(!sb.ws().join("new.txt").exists(), "{name}");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("hello.txt")).expect("read"),
        "hello from the workspace\n",
        "{name}"
    );
}

/// One writable and one read-only grant, a file in each.
fn two_grants(sb: &Sandbox) {
    sb.write("out/mine.txt", "rw data");
    sb.write("src/data.txt", "ro data");
}

/// No alias or moved copy appeared across the grants; the sources stayed.
fn nothing_crossed(sb: &Sandbox, name: &str) {
    for gone in [
        "src/linked.txt",
        "src/moved.txt",
        "out/alias.txt",
        "out/stolen.txt",
    ] {
        assert!(!sb.ws().join(gone).exists(), "{name}: {gone}");
    }
    assert!(sb.ws().join("out/mine.txt").exists(), "{name}");
    assert!(sb.ws().join("src/data.txt").exists(), "{name}");
}

const TWO_GRANTS: &str =
    r#"grants.fs = [{ path = "out", access = "rw" }, { path = "src", access = "ro" }]"#;
const RO: &str = r#"grants.fs = [{ path = ".", access = "ro" }]"#;
const DENIED: &[&str] = &["PermissionDenied", "NotFound"];
const READ_ONLY: &[&str] = &["PermissionDenied", "ReadOnly"];

/// Arguments naming `path`, the same whatever the workspace.
fn at(path: &'static str) -> impl Fn(&Sandbox) -> Value {
    move |_| json!({ "path": path })
}

/// The attacks of one call each, every one with a fresh workspace and plugin.
fn attacks() -> Vec<Attack> {
    use Ends::{Failed, Stopped};
    let rw_with = |limits: &str| format!("{RW}\nlimits = {{ {limits} }}");
    let mut all = vec![
        attack(
            "read /etc/passwd",
            RW,
            "read_path",
            at("/etc/passwd"),
            Failed,
        )
        .holds(&["NotFound"])
        .lacks(&["root:"]),
    ];
    for (name, path) in [
        ("dotdot escape", "../outside/secret.txt"),
        (
            "dotdot escape from a subdirectory",
            "sub/../../outside/secret.txt",
        ),
        ("dotdot escape after ./", "./../outside/secret.txt"),
    ] {
        all.push(
            attack(name, RW, "read_path", at(path), Failed)
                .lacks(&[SECRET])
                .holds_one_of(DENIED),
        );
    }
    all.push(
        attack(
            "absolute path outside",
            RW,
            "read_path",
            |sb| json!({"path": sb.outside().join("secret.txt").to_string_lossy()}),
            Failed,
        )
        .lacks(&[SECRET]),
    );
    // Even the workspace's own absolute path is not a way in.
    all.push(attack(
        "absolute path of the workspace",
        RW,
        "read_path",
        |sb| json!({"path": sb.ws().join("hello.txt").to_string_lossy()}),
        Failed,
    ));
    for (name, path) in [
        ("read a file link", "file-link"),
        ("read a file link/", "file-link/"),
        ("read a relative link", "rel-link"),
        ("read a relative link/", "rel-link/"),
        ("read through a directory link", "dir-link/secret.txt"),
        ("read through a directory link/.", "dir-link/./secret.txt"),
    ] {
        all.push(
            attack(name, RW, "read_path", at(path), Failed)
                .setup(links_outside)
                .lacks(&[SECRET]),
        );
    }
    for (name, path) in [
        ("list a directory link", "dir-link"),
        ("list a directory link/", "dir-link/"),
        ("list a directory link/.", "dir-link/."),
    ] {
        all.push(
            attack(name, RW, "list_dir", at(path), Failed)
                .setup(links_outside)
                .lacks(&["secret.txt"]),
        );
    }
    for (name, args) in [
        (
            "write through a directory link",
            (|_| json!({"path": "dir-link/new.txt", "content": "x"})) as fn(&Sandbox) -> Value,
        ),
        (
            "write through a file link",
            |_| json!({"path": "file-link", "content": "overwritten"}),
        ),
    ] {
        all.push(
            attack(name, RW, "write_path", args, Failed)
                .setup(links_outside)
                .after(outside_untouched),
        );
    }
    all.extend([
        attack(
            "write a new file in a read-only grant",
            RO,
            "write_path",
            |_| json!({"path": "new.txt", "content": "x"}),
            Failed,
        )
        .holds_one_of(READ_ONLY)
        .after(workspace_untouched),
        attack(
            "overwrite a file in a read-only grant",
            RO,
            "write_path",
            |_| json!({"path": "hello.txt", "content": "x"}),
            Failed,
        )
        .after(workspace_untouched),
        attack(
            "an infinite loop",
            &rw_with("timeout_ms = 300"),
            "spin",
            |_| json!({}),
            Stopped,
        )
        .holds(&["timed out after 300 ms", "limits.timeout_ms"]),
        attack(
            "allocating 2 GiB",
            RW,
            "alloc",
            |_| json!({"n": 2048}),
            Stopped,
        )
        .holds(&["memory limit of 256 MiB"])
        // A modest allocation still works afterwards.
        .then(
            "alloc",
            json!({"n": 16}),
            Some(format!("allocated {} bytes", 16 << 20)),
        ),
        attack(
            "deep recursion",
            RW,
            "recurse",
            |_| json!({"n": 100_000_000u64}),
            Stopped,
        )
        .holds(&["stack"])
        .then("recurse", json!({"n": 100}), Some("100".into())),
        attack(
            "returning 100 MiB",
            RW,
            "big_output",
            |_| json!({"n": 100}),
            Stopped,
        )
        .holds(&["exceeds the limit of 1024 KiB", "limits.output_kb"]),
        attack("a panic", RW, "panic", |_| json!({}), Stopped)
            .holds(&["crashed", "the adversary panicked on purpose"]),
        attack(
            "a chatty call",
            &rw_with("host_calls = 1000"),
            "stderr_spam",
            |_| json!({"n": 100_000}),
            Stopped,
        )
        .holds(&["limits.host_calls"]),
        // Declares only `read`: its directories are mounted read-only for the
        // call; the same write from a tool that declares `write` goes through.
        attack(
            "a read-only tool writing under an rw grant",
            RW,
            "sneaky_write",
            |_| json!({"path": "sneaky.txt", "content": "x"}),
            Failed,
        )
        .holds_one_of(READ_ONLY)
        .then(
            "write_path",
            json!({"path": "honest.txt", "content": "x"}),
            None,
        )
        .after(|sb, name| {
            assert!(!sb.ws().join("sneaky.txt").exists(), "{name}");
            assert_eq!(
                std::fs::read_to_string(sb.ws().join("honest.txt")).expect("written"),
                "x",
                "{name}"
            );
        }),
        attack("no grant: read", "", "read_path", at("hello.txt"), Failed)
            .holds(&["NotFound"])
            .unhealthy(),
        attack("no grant: list .", "", "list_dir", at("."), Failed).unhealthy(),
        attack("no grant: list /", "", "list_dir", at("/"), Failed).unhealthy(),
    ]);
    for (name, tool, args) in [
        // rw -> ro
        (
            "hard link from rw into ro",
            "hard_link",
            (|_| json!({"from": "out/mine.txt", "to": "src/linked.txt"})) as fn(&Sandbox) -> Value,
        ),
        (
            "rename from rw into ro",
            "rename",
            |_| json!({"from": "out/mine.txt", "to": "src/moved.txt"}),
        ),
        // ro -> rw: a writable alias of a read-only file must not appear either.
        (
            "hard link from ro into rw",
            "hard_link",
            |_| json!({"from": "src/data.txt", "to": "out/alias.txt"}),
        ),
        (
            "rename from ro into rw",
            "rename",
            |_| json!({"from": "src/data.txt", "to": "out/stolen.txt"}),
        ),
    ] {
        all.push(
            attack(name, TWO_GRANTS, tool, args, Failed)
                .setup(two_grants)
                .after(nothing_crossed)
                .then(
                    "read_path",
                    json!({"path": "src/data.txt"}),
                    Some("ro data".into()),
                )
                .unhealthy(),
        );
    }
    all
}

#[tokio::test]
async fn attacks_are_contained_and_the_host_serves_the_next_call() {
    for a in attacks() {
        let name = a.name;
        let sb = Sandbox::new();
        (a.setup)(&sb);
        let p = adversary(&sb, &a.grant).await;
        let msg = match (a.ends, call(&p, a.tool, (a.args)(&sb)).await) {
            (Ends::Failed, Err(ToolError::Failed(m)))
            | (Ends::Stopped, Err(ToolError::Sandbox(m))) => m,
            (ends, other) => panic!("{name}: expected {ends:?}, got {other:?}"),
        };
        for h in a.holds {
            assert!(msg.contains(h), "{name}: no {h:?} in {msg}");
        }
        assert!(
            a.holds_one_of.is_empty() || a.holds_one_of.iter().any(|h| msg.contains(h)),
            "{name}: none of {:?} in {msg}",
            a.holds_one_of
        );
        for l in a.lacks {
            assert!(!msg.contains(l), "{name}: {l:?} leaked: {msg}");
        }
        if let Some((tool, args, want)) = a.then {
            let out = call(&p, tool, args)
                .await
                .unwrap_or_else(|e| panic!("{name}: the next call, {tool}: {e:?}"));
            if let Some(want) = want {
                assert_eq!(out.content, want, "{name}: the next call, {tool}");
            }
        }
        (a.after)(&sb, name);
        if a.healthy {
            let out = call(&p, "read_path", json!({"path": "hello.txt"}))
                .await
                .unwrap_or_else(|e| panic!("{name}: the healthy call: {e:?}"));
            assert_eq!(out.content, "hello from the workspace\n", "{name}");
        }
    }
}

#[tokio::test]
async fn overlapping_grants_are_refused() {
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
    has(&err, "overlaps");
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
    let p = net_plugin(&sb, "web", HTTP_CLIENT, None).await;
    for url in [
        format!("http://127.0.0.1:{port}/"),
        "https://example.com/".to_owned(),
    ] {
        let msg = failed(call(&p, "http_get", json!({"url": url})).await);
        assert!(msg.contains("HttpRequestDenied"), "{url}: {msg}");
    }
    assert_eq!(hits.load(SeqCst), 0);
}

/// Without `grants.net` a plugin that imports `wasi:sockets` loads, and its
/// connection is refused by the sandbox, not by a trap.
#[tokio::test]
async fn raw_socket_without_net_grant_loads_and_cannot_connect() {
    let (port, hits) = http_server();
    let sb = Sandbox::new();
    let p = net_plugin(&sb, "sock", RAW_SOCKET, None).await;
    has(&tcp_connect(&p, port).await, "PermissionDenied");
    assert_eq!(hits.load(SeqCst), 0);
}

/// The plugin `name` from `wasm`, loaded with `grants.net` for loopback's
/// `granted` port, or with no `grants.net` at all.
async fn net_plugin(sb: &Sandbox, name: &str, wasm: &str, granted: Option<u16>) -> Plugins {
    let rest = granted
        .map(|port| format!("grants.net = [\"http://127.0.0.1:{port}\"]"))
        .unwrap_or_default();
    sb.load_plugin(name, wasm, &rest)
        .await
        .unwrap_or_else(|e| panic!("{name} loads with grants.net {granted:?}: {e}"))
}

/// The failure of the raw-socket plugin's connection to loopback's `port`.
async fn tcp_connect(p: &Plugins, port: u16) -> String {
    let addr = format!("127.0.0.1:{port}");
    failed(call(p, "tcp_connect", json!({ "addr": addr })).await)
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
            counter.fetch_add(1, SeqCst);
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
    let p = net_plugin(&sb, "web", HTTP_CLIENT, Some(allowed)).await;
    let get = |url: String| call(&p, "http_get", json!({ "url": url }));
    let out = get(format!("http://127.0.0.1:{allowed}/"))
        .await
        .expect("allowed");
    assert_eq!(out.content, "200 hello");
    for url in [
        format!("http://127.0.0.1:{other}/"),
        format!("http://localhost:{allowed}/"),
    ] {
        has(&failed(get(url).await), "HttpRequestDenied");
    }
    assert_eq!(other_hits.load(SeqCst), 0, "the denied server was reached");
    assert_eq!(allowed_hits.load(SeqCst), 1);
}

#[tokio::test]
async fn raw_socket_with_net_grant_is_still_denied() {
    let (port, hits) = http_server();
    let sb = Sandbox::new();
    let p = net_plugin(&sb, "sock", RAW_SOCKET, Some(port)).await;
    has(&tcp_connect(&p, port).await, "connect");
    assert_eq!(hits.load(SeqCst), 0);
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
async fn sha256_pin_is_enforced() {
    let sb = Sandbox::new();
    let wrong = "0".repeat(64);
    let err = sb
        .load_plugin("echo", ECHO, &format!("sha256 = \"{wrong}\""))
        .await
        .expect_err("mismatch refused");
    has(&err, "the manifest pins");
    let bytes = std::fs::read(ECHO).expect("echo.wasm");
    use sha2::Digest;
    let right = hex::encode(sha2::Sha256::digest(&bytes));
    let p = sb
        .load_plugin("echo", ECHO, &format!("sha256 = \"{right}\""))
        .await
        .expect("matching pin loads");
    assert_eq!(
        output(&p, "echo", json!({"text": "pinned"})).await,
        "pinned"
    );
}

#[tokio::test]
async fn plugin_config_is_readable_and_private() {
    let sb = Sandbox::new();
    let p = sb
        .load_plugin("echo", ECHO, "config = { model = \"m1\", depth = 3 }")
        .await
        .expect("load");
    for (key, value) in [("model", "m1"), ("depth", "3"), ("other", "<unset>")] {
        let got = output(&p, "config_get", json!({ "key": key })).await;
        assert_eq!(got, value, "{key}");
    }
}

#[tokio::test]
async fn bad_arguments_are_a_clear_tool_error() {
    let sb = Sandbox::new();
    let p = sb.load_plugin("echo", ECHO, "").await.expect("load");
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
    let out = output(
        &p,
        "files_read",
        json!({"paths": paths, "max_bytes": 1 << 20}),
    )
    .await;
    assert_no_secret(&out);
    lacks(&out, "root:");
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
    let listed = output(&p, "files_list", json!({"path": "."})).await;
    has_all(
        &listed,
        &["hello.txt:File", "sub:Directory", "dir-link:Symlink"],
    );
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
    let (sb, p) = docs_read_only().await;
    let out = output(&p, "files_read", json!({"paths": ["docs/guide.md", "hello.txt", "docs/../hello.txt", "docs2/x"], "max_bytes": 1 << 20})).await;
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
    let out = output(
        &none,
        "files_read",
        json!({"paths": ["hello.txt"], "max_bytes": 100}),
    )
    .await;
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
    let out = output(
        &p,
        "files_read",
        json!({"paths": ["pipe"], "max_bytes": 100}),
    )
    .await;
    assert_eq!(out, "pipe: error WrongKind");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn files_interface_keeps_to_its_budgets() {
    let sb = Sandbox::new();
    let p = adversary(&sb, &format!("{RW}\nlimits = {{ host_calls = 1000 }}")).await;
    // Bytes: "hello from the workspace\n" is 25 bytes; 40 allow one copy.
    let out = output(
        &p,
        "files_read",
        json!({"paths": ["hello.txt", "hello.txt"], "max_bytes": 40}),
    )
    .await;
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
    has(&msg, "limits.host_calls");
    assert_healthy(&p).await;
}

#[tokio::test]
async fn memory_is_wiped_between_calls() {
    let sb = Sandbox::new();
    let p = adversary(&sb, RW).await;
    // The scan works: a marker planted in the same call is found.
    let control = output(
        &p,
        "scan_memory",
        json!({"key": 7, "mib": 1, "plant": true}),
    )
    .await;
    assert!(control.starts_with("found 1 in"), "{control}");
    for _ in 0..3 {
        // One call fills 8 MiB with the marker; the next, in a fresh
        // instance that may reuse the same memory slot, grows its memory
        // past that and finds nothing.
        let wrote = output(
            &p,
            "mark_memory",
            json!({"key": 7, "mib": 8, "plant": false}),
        )
        .await;
        assert!(wrote.starts_with("wrote"), "{wrote}");
        let scan = output(
            &p,
            "scan_memory",
            json!({"key": 7, "mib": 16, "plant": false}),
        )
        .await;
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
    let (sb, p) = docs_read_only().await;
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
