//! Start-up that costs only what the command uses, through the real binary:
//! the built-in plugins come compiled by the build (a first command on an
//! empty compile cache compiles none of them, and neither does the MCP
//! server before it answers `initialize`), a plugin file is hashed when its
//! identity changed (and a swapped file is still refused), a declared but
//! unused plugin is not read by a call of another one, and compiling a
//! plugin on its first use says so on stderr. The binary's relocations are
//! packed for a cheaper start, and it stays position-independent.

use crate::support::output::{stderr, stdout};
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::{ECHO, TRUSTPIN};
use std::io::{BufRead as _, Write as _};
use std::path::Path;
use std::process::{Output, Stdio};

/// Names of the files (not directories) directly in `dir`; none when it
/// does not exist.
fn files_in(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.map(|e| e.expect("entry"))
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The built-ins `corral` loads with no manifest of the project's own.
fn builtin_count() -> usize {
    corral_manifest::DEFAULTS.matches("[plugins.").count()
}

#[test]
fn a_first_tools_list_on_an_empty_cache_compiles_no_builtin() {
    let (sb, cli) = workspace_and_cli();
    let cache = tempfile::tempdir().expect("cache home");
    let home = cache.path().to_str().expect("utf-8 path");
    let o = cli.run_env(
        &sb.ws(),
        &["-v", "tools", "list"],
        &[("XDG_CACHE_HOME", home)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stdout(&o), "read_file");
    let log = stderr(&o);
    assert!(!log.contains("compiled ("), "{log}");
    lacks(&log, "compiling");
    assert_eq!(
        log.matches("precompiled by the build").count(),
        builtin_count(),
        "{log}"
    );
    // Nothing was compiled into the compile cache either.
    let compiled: Vec<String> = files_in(&cache.path().join("corral/components"))
        .into_iter()
        .filter(|f| f.ends_with(".cwasm"))
        .collect();
    assert_eq!(compiled, Vec::<String>::new());
}

/// `corral mcp serve` in `ws` with the compile cache `cache` and `env`,
/// spoken to in raw JSON-RPC: `initialize`, `initialized`, `tools/list`.
/// Returns every message it wrote until the answer to a `ping` sent after
/// the `tools/list` answer, and its stderr.
fn mcp_first_contact(
    cli: &Cli,
    ws: &Path,
    cache: &Path,
    env: &[(&str, &str)],
) -> (Vec<serde_json::Value>, String) {
    let log = ws.join("../mcp-stderr.log");
    let mut cmd = cli.command(ws, &["mcp", "serve"]);
    cmd.env("XDG_CACHE_HOME", cache)
        .env("CORRAL_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log file"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start corral mcp serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut send = |line: &str| {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .expect("write to the server");
    };
    send(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"first-run","version":"0"}}}"#,
    );
    let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = || -> serde_json::Value {
        let line = lines.next().expect("the server answers").expect("line");
        serde_json::from_str(&line).expect("JSON-RPC on stdout")
    };
    // The answer to `initialize` comes first, whatever is still loading.
    let first = next();
    assert_eq!(first["id"], 1, "{first}");
    let mut seen = vec![first];
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    let mut until = |id: u64, seen: &mut Vec<serde_json::Value>| loop {
        let msg = next();
        let done = msg["id"] == id;
        seen.push(msg);
        if done {
            break;
        }
    };
    until(2, &mut seen);
    // A ping answered means that what was sent before it has gone out.
    send(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    until(3, &mut seen);
    drop(stdin);
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    (seen, std::fs::read_to_string(&log).expect("log"))
}

/// Fails the test unless the answer to `tools/list` (id 2) among
/// `answers` lists the tool `name`.
#[track_caller]
fn assert_listed(answers: &[serde_json::Value], name: &str) {
    let listed = answers
        .iter()
        .find(|m| m["id"] == 2)
        .expect("tools/list answer");
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == name)),
        "{listed}"
    );
}

#[test]
fn a_first_mcp_initialize_on_an_empty_cache_compiles_no_builtin() {
    let (sb, cli) = workspace_and_cli();
    let cache = tempfile::tempdir().expect("cache home");
    let (answers, log) = mcp_first_contact(&cli, &sb.ws(), cache.path(), &[]);
    assert_eq!(
        answers[0]["result"]["serverInfo"]["name"], "corral",
        "{answers:?}"
    );
    assert_listed(&answers, "grep");
    assert!(!log.contains("compiled ("), "{log}");
    has(&log, "precompiled by the build");
    let compiled: Vec<String> = files_in(&cache.path().join("corral/components"))
        .into_iter()
        .filter(|f| f.ends_with(".cwasm"))
        .collect();
    assert_eq!(compiled, Vec::<String>::new());
}

#[test]
fn mcp_serve_tells_the_client_when_it_compiles_a_plugin() {
    let p = Pinned::new(&[("echo", ECHO)]);
    let (seen, log) = mcp_first_contact(
        &p.cli,
        &p.sb.ws(),
        p.cache.path(),
        &[("CORRAL_PROGRESS_AFTER_MS", "0")],
    );
    assert_listed(&seen, "echo");
    let notes: Vec<String> = seen
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .filter_map(|m| m["params"]["data"].as_str().map(str::to_owned))
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("compiling plugin `echo` for its first use")),
        "{seen:?}\n{log}"
    );
    has(&log, "compiling plugin `echo`");
    assert_eq!(
        seen[0]["result"]["capabilities"]["logging"],
        serde_json::json!({}),
        "{seen:?}"
    );
}

/// A workspace whose manifest declares the test program `wasm` as plugin
/// `name` at `tools/<name>.wasm`, pinned by its SHA-256, with a compile
/// cache of its own.
struct Pinned {
    cli: Cli,
    sb: Sandbox,
    cache: tempfile::TempDir,
}

impl Pinned {
    fn new(plugins: &[(&str, &str)]) -> Self {
        let sb = Sandbox::new();
        let mut toml = String::new();
        for (name, wasm) in plugins {
            let to = sb.ws().join(format!("tools/{name}.wasm"));
            std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
            std::fs::copy(wasm, &to).expect("copy component");
            let sha = hex::encode(sha2::Sha256::digest(std::fs::read(&to).expect("read")));
            toml.push_str(&format!(
                "[plugins.{name}]\nsource = \"tools/{name}.wasm\"\nsha256 = \"{sha}\"\n\n"
            ));
        }
        sb.write("corral.toml", &toml);
        Self {
            cli: Cli::new(),
            sb,
            cache: tempfile::tempdir().expect("cache home"),
        }
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let home = self.cache.path().to_str().expect("utf-8 path");
        let mut all = vec![("XDG_CACHE_HOME", home)];
        all.extend_from_slice(env);
        self.cli.run_env(&self.sb.ws(), args, &all)
    }

    fn file(&self, name: &str) -> std::path::PathBuf {
        self.sb.ws().join(format!("tools/{name}.wasm"))
    }
}

use sha2::Digest as _;

#[test]
fn a_swapped_file_is_refused_even_with_its_size_and_mtime_kept() {
    let p = Pinned::new(&[("echo", ECHO)]);
    let call = ["-vv", "tool", "call", "echo", "--args", r#"{"text":"hi"}"#];
    let o = p.run(&call, &[]);
    assert_eq!(stdout(&o), "hi\n", "{}", stderr(&o));
    has(&stderr(&o), "read and hashed");
    // Unchanged, the file is not read again to be told apart.
    let o = p.run(&call, &[]);
    assert_eq!(stdout(&o), "hi\n", "{}", stderr(&o));
    let log = stderr(&o);
    has(&log, "from the verified-hash cache");
    lacks(&log, "read and hashed");

    // Other bytes in place: same inode, same size, the old modification
    // time put back. Only the change time tells.
    let file = p.file("echo");
    let before = std::fs::metadata(&file).expect("metadata");
    let mut bytes = std::fs::read(&file).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&file, &bytes).expect("rewrite");
    std::fs::File::options()
        .write(true)
        .open(&file)
        .expect("open")
        .set_modified(before.modified().expect("mtime"))
        .expect("set mtime");
    let after = std::fs::metadata(&file).expect("metadata");
    assert_eq!(after.len(), before.len());
    assert_eq!(after.modified().ok(), before.modified().ok());
    let o = p.run(&call, &[]);
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    has_all(&err, &["but the manifest pins", "the file changed"]);
}

#[test]
fn a_declared_but_unused_plugin_is_not_read_by_another_call() {
    let p = Pinned::new(&[("echo", ECHO), ("unused", TRUSTPIN)]);
    // The first command reads and hashes both to learn their tools.
    let o = p.run(&["-vv", "tools", "list"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let log = stderr(&o);
    assert_eq!(log.matches("read and hashed").count(), 2, "{log}");
    let o = p.run(
        &["-vv", "tool", "call", "echo", "--args", r#"{"text":"hi"}"#],
        &[],
    );
    assert_eq!(stdout(&o), "hi\n", "{}", stderr(&o));
    let log = stderr(&o);
    let unused = p.file("unused").display().to_string();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("plugin=unused"))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("from the verified-hash cache")),
        "{log}"
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("read and hashed") || l.contains("compile")),
        "{log}"
    );
    lacks(&log, format!("read and hashed {unused}"));
}

#[test]
fn compiling_a_plugin_on_its_first_use_says_so_on_stderr() {
    let p = Pinned::new(&[("echo", ECHO)]);
    // Any compile counts as slow here, so the line shows whatever the
    // machine's speed; normally only one past 200 ms does.
    let slow = [("CORRAL_PROGRESS_AFTER_MS", "0")];
    let call = ["tool", "call", "echo", "--args", r#"{"text":"hi"}"#];
    let o = p.run(&call, &slow);
    assert_eq!(stdout(&o), "hi\n", "{}", stderr(&o));
    let err = stderr(&o);
    has_all(
        &err,
        &[
            "corral: compiling plugin `echo` for its first use",
            "corral: compiled plugin `echo` in ",
        ],
    );
    // From the compile cache: nothing to say.
    let o = p.run(&call, &slow);
    assert_eq!(stdout(&o), "hi\n", "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
}

/// The build's code of a built-in is copied into the compile cache once and
/// mapped from there, by the first process too (no copy of megabytes into
/// fresh memory per start); a damaged copy is not mapped, the command still
/// works, and the copy is written again.
#[test]
fn the_builds_code_is_mapped_from_its_checked_copy_in_the_cache() {
    let (sb, cli) = workspace_and_cli();
    let cache = tempfile::tempdir().expect("cache home");
    let home = cache.path().to_str().expect("utf-8 path");
    // Without the description cache every built-in is loaded.
    let env = [("XDG_CACHE_HOME", home), ("CORRAL_TOOL_CACHE", "off")];
    let run = || {
        let o = cli.run_env(&sb.ws(), &["-vv", "tools", "list"], &env);
        assert!(o.status.success(), "{}", stderr(&o));
        has(&stdout(&o), "read_file");
        (stdout(&o), stderr(&o))
    };
    const MAPPED: &str = "mapped from its copy in the compile cache";
    // The first run stores each copy, its sum taken from the embedded
    // bytes and recorded as checked for the file just written, and maps it.
    let (first, log) = run();
    assert_eq!(log.matches(MAPPED).count(), builtin_count(), "{log}");
    let built = cache.path().join("corral/components/built");
    let copies: Vec<String> = files_in(&built)
        .into_iter()
        .filter(|f| f.ends_with(".cwasm"))
        .collect();
    assert_eq!(copies.len(), builtin_count(), "{copies:?}");
    for copy in &copies {
        let sum = std::fs::read_to_string(built.join(copy).with_extension("sum")).expect("sum");
        let checked = sum.lines().nth(1).unwrap_or_default();
        assert!(checked.starts_with("verified "), "{sum}");
    }
    // Later runs map them by identity.
    for _ in 0..2 {
        let (out, log) = run();
        assert_eq!(out, first);
        assert_eq!(log.matches(MAPPED).count(), builtin_count(), "{log}");
        assert!(!log.contains("compiled ("), "{log}");
    }
    // A copy changed on disk (same size, so only its contents tell) is
    // refused, the embedded code used, and the copy stored again.
    let victim = built.join(&copies[0]);
    let mut bytes = std::fs::read(&victim).expect("copy");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&victim, &bytes).expect("damage");
    // It is stored again and the new copy mapped, in the same run.
    let (out, log) = run();
    assert_eq!(out, first);
    has(&log, "is damaged");
    assert_eq!(log.matches(MAPPED).count(), builtin_count(), "{log}");
    assert_ne!(std::fs::read(&victim).expect("copy"), bytes, "stored again");
    let (out, log) = run();
    assert_eq!(out, first);
    assert_eq!(log.matches(MAPPED).count(), builtin_count(), "{log}");
    lacks(&log, "is damaged");
}

/// Packing the binary's relocations (`host/build.rs`) must not cost its
/// address randomisation: the executable is still position-independent
/// (`ET_DYN`), whatever the toolchain did with the flag.
#[cfg(all(target_os = "linux", target_endian = "little"))]
#[test]
fn the_binary_stays_position_independent() {
    use std::io::Read as _;
    let mut header = [0u8; 18];
    std::fs::File::open(corral_binary())
        .and_then(|mut f| f.read_exact(&mut header))
        .expect("read the binary's ELF header");
    assert_eq!(&header[..4], b"\x7fELF", "not an ELF file");
    let e_type = u16::from_le_bytes([header[16], header[17]]);
    assert_eq!(
        e_type, 3,
        "e_type {e_type}: not a position-independent executable"
    );
}
