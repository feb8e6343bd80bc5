//! `corral plugin add | update | remove | verify | pack | publish`, driven
//! through the real binary: what a plugin requests is shown and only what
//! is approved is written, pinned by sha256; downloads must be pinned; a
//! registry round trip on loopback with a real OCI registry, where a wider
//! version does not get in without approval and a tampered blob is refused.

use crate::support::files::sha256_of;
use crate::support::output::printed as text;
use crate::support::registry::{Registry, publish, read_user_manifest, store_dir};
use crate::support::run::argv_with;
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::{ECHO, EXAMPLE, SNEAKY};
use serde_json::json;
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::process::Output;

fn word_count(cli: &Cli, sb: &Sandbox) -> Output {
    crate::support::run::tool_call(cli, sb, "word_count", json!({"path": "hello.txt"}))
}

/// Fails the test unless [`word_count`] counts the 4 words of `hello.txt`.
#[track_caller]
fn counts_four_words(cli: &Cli, sb: &Sandbox) {
    let o = word_count(cli, sb);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "4",
        "{}",
        text(&o)
    );
}

#[test]
fn add_shows_the_requests_and_writes_exactly_what_was_approved() {
    let (sb, cli) = workspace_and_cli();
    let t = added(&cli, &sb, EXAMPLE, "");
    // The review: tools with effects, the requests (from the SDK's
    // `requests!`), and what each import gets with those grants.
    has_all(
        &t,
        &[
            "word_count [read] Counts the words in a file.",
            "grant fs   . (read-only)",
            "Imports, with these grants:",
            "wasi:filesystem/preopens",
        ],
    );
    let manifest = read_user_manifest(&cli);
    let sha = sha256_of(EXAMPLE);
    assert!(
        manifest.contains(&format!("sha256 = \"{sha}\"")),
        "{manifest}"
    );
    has_all(&manifest, &["access = \"ro\"", "version = \"0.1.0\""]);
    assert!(store_dir(&cli).join(format!("{sha}.wasm")).is_file());
    // It works, with exactly that grant: it reads the workspace…
    let o = word_count(&cli, &sb);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "4");
    // …and `plugin list` shows where it came from and its version.
    let o = cli.run(&sb.ws(), &["plugin", "list"]);
    let t = text(&o);
    assert!(t.contains("example") && t.contains(&sha), "{t}");
    has(&t, "version  0.1.0");
    has(&t, format!("fetched  {EXAMPLE}"));
    // A second add under the same name is refused, nothing changes.
    let o = add(&cli, &sb, EXAMPLE, "");
    assert!(!o.status.success());
    has(&text(&o), "already declared");
    // Under another name its tool would clash with the installed one.
    let o = add(&cli, &sb, EXAMPLE, "--name example-two");
    assert!(!o.status.success());
    has_all(&text(&o), &["`word_count` (plugin `example`)", "--prefix"]);
    assert_eq!(read_user_manifest(&cli), manifest);
    // The way out: a prefix before its tool names.
    let t = added(&cli, &sb, EXAMPLE, "--name example-two --prefix two_");
    has(&t, "two_word_count [read]");
    assert!(read_user_manifest(&cli).contains("tool_prefix = \"two_\""));
    let o = cli.run(
        &sb.ws(),
        &argv_with("tool call two_word_count --args", r#"{"path":"hello.txt"}"#),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "4",
        "{}",
        text(&o)
    );
    assert!(word_count(&cli, &sb).status.success());
}

#[test]
fn add_without_approval_writes_nothing() {
    let (sb, cli) = workspace_and_cli();
    // stdin is not a terminal and there is no --yes.
    let o = cli.run(&sb.ws(), &["plugin", "add", EXAMPLE]);
    assert!(!o.status.success());
    let t = text(&o);
    has(&t, "not approved, nothing was changed");
    assert!(
        t.contains("grant fs   . (read-only)"),
        "the review is shown first: {t}"
    );
    assert!(!read_user_manifest(&cli).contains("[plugins"));
    assert!(!store_dir(&cli).exists() || std::fs::read_dir(store_dir(&cli)).unwrap().count() == 0);
}

#[test]
fn a_denied_request_is_not_granted_and_the_plugin_gets_a_clean_error() {
    let (sb, cli) = workspace_and_cli();
    let t = added(&cli, &sb, EXAMPLE, "--deny fs");
    has(&t, "DENY  fs   . (read-only)");
    lacks(&read_user_manifest(&cli), "grants");
    let o = word_count(&cli, &sb);
    assert!(!o.status.success());
    assert!(!text(&o).contains("hello from the workspace"));
    // A filter that names nothing requested is a typo, not a silent no-op.
    let o = add(&cli, &sb, EXAMPLE, "--name x --deny net:https://a:443");
    assert!(!o.status.success());
    has(&text(&o), "names nothing the plugin requests");
}

#[test]
fn hidden_characters_in_descriptions_are_flagged_and_a_bait_and_switch_is_refused() {
    let (sb, cli) = workspace_and_cli();
    // Granted the workspace, its second tool describes itself differently
    // than it did for the review: refused, nothing written.
    let o = add(&cli, &sb, SNEAKY, "");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    has(&t, "describes different tools once granted");
    assert!(!read_user_manifest(&cli).contains("[plugins"));
    // Without the grant it describes the same tools; the hidden characters
    // are flagged and shown escaped, never raw.
    let t = added(&cli, &sb, SNEAKY, "--deny fs");
    has(&t, "invisible Unicode");
    assert!(t.contains("U+202E") || t.contains("202e"), "{t}");
    assert!(!t.contains('\u{202e}') && !t.contains('\u{200b}'), "{t}");
}

#[test]
fn pack_embeds_requests_that_add_then_reads() {
    let (sb, cli) = workspace_and_cli();
    sb.write(
        "corral-plugin.toml",
        "[plugin]\nname = \"echoer\"\nversion = \"2.1.0\"\n[requests]\nenv = [\"LANG\"]\n",
    );
    let packed = sb.root.path().join("echo-packed.wasm");
    let o = pack_echo(&cli, &sb, "corral-plugin.toml", &packed);
    assert!(o.status.success(), "{}", text(&o));
    let t = added(&cli, &sb, packed.to_str().unwrap(), "");
    has_all(&t, &["Plugin `echoer` 2.1.0", "grant env  LANG"]);
    assert!(read_user_manifest(&cli).contains("[plugins.echoer]"));
    // Malformed requests are refused by `pack`, with the reason.
    sb.write(
        "bad.toml",
        "[requests]\nfs = [{ path = \"/etc\", access = \"rw\" }]\n",
    );
    let o = pack_echo(&cli, &sb, "bad.toml", &packed);
    assert!(!o.status.success());
    has(&text(&o), "inside the workspace");
}

#[test]
fn verify_finds_a_changed_file_and_remove_cleans_up() {
    let (sb, cli) = workspace_and_cli();
    assert!(add(&cli, &sb, EXAMPLE, "").status.success());
    let o = cli.run(&sb.ws(), &["plugin", "verify"]);
    assert!(o.status.success(), "{}", text(&o));
    has(&text(&o), "ok");
    // Someone changes the installed file.
    let stored = store_dir(&cli).join(format!("{}.wasm", sha256_of(EXAMPLE)));
    let mut bytes = std::fs::read(&stored).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&stored, &bytes).unwrap();
    let o = cli.run(&sb.ws(), &["plugin", "verify"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    has(&text(&o), "changed");
    // The runtime refuses it too.
    let o = word_count(&cli, &sb);
    assert!(!o.status.success());
    has(&text(&o), "the file changed");
    // Removing it takes the entry and the stored file.
    let o = cli.run(&sb.ws(), &["plugin", "remove", "example"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!read_user_manifest(&cli).contains("plugins.example"));
    assert!(!stored.exists());
    // A built-in plugin is disabled instead.
    let o = cli.run(&sb.ws(), &["plugin", "remove", "shell"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(read_user_manifest(&cli).contains("enabled = false"));
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    lacks(&text(&o), "run_command");
}

/// Serves `body` over HTTP on loopback for as many requests as come.
fn serve(body: Vec<u8>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    port
}

#[test]
fn a_download_must_be_pinned_and_match_its_pin() {
    let (sb, cli) = workspace_and_cli();
    let port = serve(std::fs::read(EXAMPLE).unwrap());
    let url = format!("http://127.0.0.1:{port}/example.wasm");
    let o = add(&cli, &sb, &url, "");
    assert!(!o.status.success());
    has(&text(&o), "pass --sha256");
    let wrong = "0".repeat(64);
    let o = cli.run(
        &sb.ws(),
        &["plugin", "add", &url, "--yes", "--sha256", &wrong],
    );
    assert!(!o.status.success());
    has(&text(&o), "not the");
    assert!(!read_user_manifest(&cli).contains("[plugins"));
    let o = cli.run(
        &sb.ws(),
        &[
            "plugin",
            "add",
            &url,
            "--yes",
            "--sha256",
            &sha256_of(EXAMPLE),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(read_user_manifest(&cli).contains(&format!("from = \"{url}\"")));
    // Plain http to anything but loopback is refused before connecting.
    let o = add(&cli, &sb, "http://example.com/x.wasm", "");
    assert!(!o.status.success());
    has(&text(&o), "only used for loopback");
}

#[test]
fn an_oci_round_trip_reviews_updates_and_refuses_tampering() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let (sb, cli) = workspace_and_cli();
    // v1 asks to read the workspace.
    sb.write(
        "v1.toml",
        "[plugin]\nname = \"counter\"\nversion = \"1.0.0\"\n[requests]\nfs = [{ path = \".\", access = \"ro\" }]\n",
    );
    let stable = registry.reference("tools/counter:stable");
    publish(&cli, &sb, EXAMPLE, &stable, "v1.toml");
    let t = added(&cli, &sb, &stable, "");
    has_all(&t, &["Plugin `counter` 1.0.0", "digest sha256:"]);
    counts_four_words(&cli, &sb);
    let v1_manifest = read_user_manifest(&cli);
    assert!(
        v1_manifest.contains(&format!("from = \"{stable}\"")),
        "{v1_manifest}"
    );

    // Nothing new: up to date.
    let o = cli.run(&sb.ws(), &["plugin", "update", "counter"]);
    assert!(o.status.success(), "{}", text(&o));
    has(&text(&o), "up to date");

    // v2, pushed to the same tag, also wants to write and to reach a host.
    sb.write(
        "v2.toml",
        "[plugin]\nname = \"counter\"\nversion = \"2.0.0\"\n[requests]\nfs = [{ path = \".\", access = \"rw\" }]\nnet = [\"https://api.example.com:443\"]\n",
    );
    publish(&cli, &sb, EXAMPLE, &stable, "v2.toml");
    // Without approval the update shows the diff and changes nothing.
    let o = cli.run(&sb.ws(), &["plugin", "update", "counter"]);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    has_all(
        &t,
        &[
            "1.0.0 -> 2.0.0",
            "+ NEW  fs   . (read-write)",
            "+ NEW  net  https://api.example.com:443",
            "not approved, nothing was changed",
        ],
    );
    assert_eq!(read_user_manifest(&cli), v1_manifest);
    // Approved but narrowed: the network request is left out.
    let o = cli.run(
        &sb.ws(),
        &["plugin", "update", "counter", "--yes", "--deny", "net"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let m = read_user_manifest(&cli);
    assert!(
        m.contains("access = \"rw\"")
            && m.contains("denied = [\"net:https://api.example.com:443\"]")
            && !m.contains("net = [\"https://api.example.com"),
        "{m}"
    );
    has(&m, "version = \"2.0.0\"");
    counts_four_words(&cli, &sb);

    // A registry that serves altered bytes is refused by digest.
    sb.write("v3.toml", "[plugin]\nname = \"other\"\n[requests]\n");
    let other = registry.reference("tools/other:1");
    let o = cli.run(
        &sb.ws(),
        &["plugin", "publish", ECHO, &other, "--requests", "v3.toml"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let mut tampered = 0;
    for blob in registry.blobs() {
        let mut bytes = std::fs::read(&blob).unwrap();
        // Only the component layers (wasm binaries), not configs or manifests.
        if bytes.starts_with(b"\0asm") {
            let at = bytes.len() / 2;
            bytes[at] ^= 0xff;
            std::fs::write(&blob, &bytes).unwrap();
            tampered += 1;
        }
    }
    assert!(tampered >= 2, "found {tampered} component blobs");
    let o = add(&cli, &sb, &other, "");
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.to_lowercase().contains("digest"), "{t}");
    assert!(!read_user_manifest(&cli).contains("plugins.other"));
}

/// Runs `corral ARGS` in a tmux pane (a real terminal), answers its
/// question with `answer`, and returns the pane's text once it exits.
fn on_a_terminal(cli: &Cli, sb: &Sandbox, args: &[&str], answer: &str) -> Option<String> {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        crate::support::skip::missing("tmux is not installed", "apt-get install tmux");
        return None;
    }
    // A server per call: a second `new-session` on the socket of a server
    // that `kill-server` is still shutting down fails with "server exited
    // unexpectedly".
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let session = format!("corral-install-{}-{call}", std::process::id());
    let socket = sb.root.path().join(format!("tmux-{call}.sock"));
    let home = cli.home.path();
    let mut command = format!(
        "env XDG_CONFIG_HOME={} XDG_DATA_HOME={} XDG_CACHE_HOME={} {}",
        home.join("config").display(),
        home.join("data").display(),
        cache_home().display(),
        env!("CARGO_BIN_EXE_corral")
    );
    for a in args {
        command.push_str(&format!(" '{a}'"));
    }
    command.push_str(&format!(
        " --workspace {}; echo EXIT=$?; sleep 60",
        sb.ws().display()
    ));
    let tmux = |extra: &[&str]| {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(extra)
            .output()
            .expect("tmux")
    };
    let o = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "200",
        "-y",
        "50",
        &command,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let screen = || {
        String::from_utf8_lossy(
            &tmux(&["capture-pane", "-p", "-J", "-S", "-200", "-t", &session]).stdout,
        )
        .into_owned()
    };
    let wait_for = |what: &str| {
        for _ in 0..600 {
            let s = screen();
            if s.contains(what) {
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("`{what}` never appeared:\n{}", screen());
    };
    wait_for("[y/N]");
    tmux(&["send-keys", "-t", &session, answer, "Enter"]);
    let s = wait_for("EXIT=");
    tmux(&["kill-server"]);
    Some(s)
}

#[test]
fn add_asks_on_a_terminal_and_only_yes_approves() {
    let (sb, cli) = workspace_and_cli();
    let Some(screen) = on_a_terminal(&cli, &sb, &["plugin", "add", EXAMPLE], "n") else {
        return;
    };
    has_all(&screen, &["grant fs   . (read-only)", "EXIT=2"]);
    assert!(!read_user_manifest(&cli).contains("[plugins"));
    let screen = on_a_terminal(&cli, &sb, &["plugin", "add", EXAMPLE], "y").unwrap();
    has(&screen, "EXIT=0");
    assert!(read_user_manifest(&cli).contains("[plugins.example]"));
}

/// `corral plugin add SOURCE --yes`, then the words of `more`.
fn add(cli: &Cli, sb: &Sandbox, source: &str, more: &str) -> Output {
    let mut args = vec!["plugin", "add", source, "--yes"];
    args.extend(more.split_whitespace());
    cli.run(&sb.ws(), &args)
}

/// [`add`], which must succeed; all it printed.
#[track_caller]
fn added(cli: &Cli, sb: &Sandbox, source: &str, more: &str) -> String {
    let o = add(cli, sb, source, more);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    t
}

/// `corral plugin pack ECHO --requests REQUESTS -o PACKED`.
fn pack_echo(cli: &Cli, sb: &Sandbox, requests: &str, packed: &Path) -> Output {
    let packed = packed.to_str().expect("utf-8 path");
    cli.run(
        &sb.ws(),
        &["plugin", "pack", ECHO, "--requests", requests, "-o", packed],
    )
}
