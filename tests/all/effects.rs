//! Declared effects are enforced, through the `corral` binary: a tool that
//! declares only `read` cannot run a program or send a request even when its
//! plugin is granted both, a preview gets no program, no network and no
//! writes, and a secret goes only to the scheme, host and port it is bound to.

use crate::support::cassette::{self, answer_turn, calls_turn};
use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::run::argv_with;
use crate::support::text::{has, has_all};
use crate::*;
use corral_test_programs::EFFECTS_GUEST;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request's headers, names lowercase.
type Headers = Vec<(String, String)>;

/// Every connection a loopback server accepted, and the headers of each
/// request it read.
#[derive(Clone, Default)]
struct Seen {
    connections: Arc<Mutex<usize>>,
    requests: Arc<Mutex<Vec<Headers>>>,
}

impl Seen {
    fn connections(&self) -> usize {
        *self.connections.lock().expect("lock")
    }

    fn requests(&self) -> Vec<Headers> {
        self.requests.lock().expect("lock").clone()
    }

    /// The value of `name` in each request, in order.
    fn header(&self, name: &str) -> Vec<Option<String>> {
        self.requests()
            .iter()
            .map(|h| h.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
            .collect()
    }
}

/// A plain HTTP/1.1 server on loopback that answers `200 ok` to anything and
/// records what reached it.
fn server() -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Seen::default();
    let out = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            *seen.connections.lock().expect("lock") += 1;
            let seen = seen.clone();
            std::thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let mut headers = Vec::new();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = h.trim_end().split_once(':') {
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                    }
                }
                seen.requests.lock().expect("lock").push(headers);
                let mut stream = stream;
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                );
            });
        }
    });
    (port, out)
}

/// The guest as plugin `sneaky`, granted `touch`, the workspace read-write
/// and `net` (it imports both `process` and `wasi:http`; with both grants its
/// calls are judged by the effects its tools declare, not denied for a
/// missing grant), plus `extra` lines.
fn sneaky(net: &[String], extra: &str) -> String {
    let net: Vec<String> = net.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "[plugins.sneaky]\nsource = {EFFECTS_GUEST:?}\n\
         grants.fs = [{{ path = \".\", access = \"rw\" }}]\n\
         grants.exec = [{{ program = \"touch\", args = [\"**\"] }}]\n\
         grants.net = [{}]\n{extra}\n",
        net.join(", ")
    )
}

/// `[plugins.replay]` playing `effects.cassette.json`.
const REPLAY: &str = "[plugins.replay]\nsource = \"builtin:replay\"\n\
     grants.fs = [{ path = \".\", access = \"ro\" }]\n\
     config = { cassette = \"effects.cassette.json\" }\n";

/// A server on loopback ([`server`]) and a project whose `sneaky` plugin
/// may reach it, played by [`REPLAY`].
fn replayed_project() -> (Sandbox, u16, Seen) {
    let (port, seen) = server();
    let sb = Sandbox::with_manifest(&format!(
        "{}\n{REPLAY}",
        sneaky(&[format!("http://127.0.0.1:{port}")], "")
    ));
    (sb, port, seen)
}

/// A cassette whose model makes `calls` in one turn, then answers.
fn cassette(sb: &Sandbox, calls: &[(&str, &str, Value)]) {
    cassette::write(
        sb,
        "effects.cassette.json",
        &[calls_turn(calls), answer_turn("Done.")],
    );
}

/// The events of a `--json` run, with the model's call ids.
fn run_events(o: &Output) -> Vec<Value> {
    with_model_ids(
        stdout(o)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect(),
    )
}

/// The `tool_call_end` outcome of each call of a `--json` run, by call id.
fn outcomes(o: &Output) -> Vec<(String, String, bool)> {
    run_events(o)
        .into_iter()
        .filter(|e| e["type"] == "tool_call_end")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap_or("").to_owned(),
                e["outcome"]["content"].as_str().unwrap_or("").to_owned(),
                e["outcome"]["is_error"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// The permission decision of each call of a `--json` run.
fn decisions(o: &Output) -> Vec<(String, String)> {
    crate::support::events::decisions(&run_events(o))
}

#[test]
fn a_read_tool_cannot_run_a_program_through_tool_call() {
    let sb = Sandbox::with_manifest(&sneaky(&["http://127.0.0.1:9".to_owned()], ""));
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &argv_with(
            "tool call touch_reader --args",
            r#"{"path":"made-by-reader"}"#,
        ),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    has(&err, "process.run refused: NotGranted");
    has(
        &err,
        "tool `touch_reader` (plugin `sneaky`) may not run programs",
    );
    has_all(&err, &["it declares only read", "declare `execute`"]);
    assert!(!sb.ws().join("made-by-reader").exists());

    // The same code in a tool that declares `execute` runs, under the same grant.
    let o = cli.run(
        &sb.ws(),
        &argv_with(
            "tool call touch_runner --args",
            r#"{"path":"made-by-runner"}"#,
        ),
    );
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "touch ran: exit Some(0)\n");
    assert!(sb.ws().join("made-by-runner").exists());
}

#[test]
fn a_read_tool_cannot_reach_the_network_through_tool_call() {
    let (port, seen) = server();
    let sb = Sandbox::new();
    let url = format!("http://127.0.0.1:{port}/leak?data=workspace");
    sb.write(
        "corral.toml",
        &sneaky(&[format!("http://127.0.0.1:{port}")], ""),
    );
    let cli = Cli::new();
    let args = json!({ "url": url }).to_string();
    let o = cli.run(&sb.ws(), &["tool", "call", "fetch_reader", "--args", &args]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    has(&err, "request failed: Denied");
    // The host says why, on its log (stderr by default).
    has(
        &err,
        "tool `fetch_reader` (plugin `sneaky`) may not reach the network",
    );
    has(&err, "declare `network`");
    assert_eq!(seen.connections(), 0, "the server was reached");

    // The grant itself allows it: a tool that declares `network` gets through.
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "fetch_networker", "--args", &args],
    );
    assert_exit(&o, 0);
    assert_eq!(stdout(&o), "200 ok\n");
    assert_eq!(seen.requests().len(), 1);
}

#[test]
fn a_read_only_run_lets_a_read_tool_run_but_not_run_programs_or_reach_out() {
    let (sb, port, seen) = replayed_project();
    cassette(
        &sb,
        &[
            ("t1", "touch_reader", json!({"path": "made-by-reader"})),
            ("t2", "touch_runner", json!({"path": "made-by-runner"})),
            (
                "t3",
                "fetch_reader",
                json!({"url": format!("http://127.0.0.1:{port}/leak")}),
            ),
        ],
    );
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &argv_with(
            "run --provider replay --mode read-only --json",
            "look around",
        ),
    );
    assert_exit(&o, 0);
    // The policy judged each call by its declared effects: the two that
    // declare only `read` run, the one that declares `execute` does not...
    assert_eq!(
        decisions(&o),
        [("t1", "allow"), ("t2", "deny"), ("t3", "allow")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // ...and the sandbox held the two that ran to those same effects.
    let out = outcomes(&o);
    assert_eq!(out.len(), 3, "{out:?}");
    let (id, content, is_error) = &out[0];
    assert_eq!(id, "t1");
    assert!(*is_error);
    has(content, "process.run refused");
    has(content, "may not run programs");
    let (id, content, _) = &out[1];
    assert_eq!(id, "t2");
    has(content, "read-only");
    let (id, content, is_error) = &out[2];
    assert_eq!(id, "t3");
    assert!(*is_error);
    has(content, "request failed: Denied");
    assert!(!sb.ws().join("made-by-reader").exists());
    assert!(!sb.ws().join("made-by-runner").exists());
    assert_eq!(seen.connections(), 0, "the server was reached");
}

/// Runs corral on a pseudo-terminal and answers its first approval prompt
/// with `answer`; returns the exit code and everything it wrote.
fn run_on_pty(cli: &Cli, ws: &Path, args: &[&str], answer: &str) -> (Option<i32>, String) {
    let mut pty = crate::support::approvals::Pty::open();
    let mut cmd = cli.command(ws, args);
    pty.attach(&mut cmd);
    let mut child = cmd.spawn().expect("spawn");
    drop(cmd);
    // A hang guard only: the prompt normally comes within a few seconds.
    pty.wait_for("[y] yes, once", Duration::from_secs(60));
    pty.type_text(answer);
    let status = child.wait().expect("wait");
    (status.code(), pty.close())
}

#[test]
fn a_preview_gets_no_program_no_network_and_no_writes() {
    let (sb, port, seen) = replayed_project();
    cassette(
        &sb,
        &[(
            "w1",
            "sneaky_writer",
            json!({
                "path": "target.txt",
                "touch": "touched-by-preview",
                "url": format!("http://127.0.0.1:{port}/from-preview"),
            }),
        )],
    );
    let cli = Cli::new();
    let (code, screen) = run_on_pty(
        &cli,
        &sb.ws(),
        &["run", "--provider", "replay", "--mode", "ask", "write it"],
        "n\n",
    );
    assert_eq!(code, Some(0), "{screen}");
    // The preview ran (its diff is on the screen) and was refused all three.
    has_all(
        &screen,
        &["+preview says:", "process.run refused: NotGranted"],
    );
    has(
        &screen,
        "the preview of `sneaky_writer` (plugin `sneaky`) may not run programs",
    );
    has_all(&screen, &["request failed: Denied", "write refused"]);
    assert!(!sb.ws().join("touched-by-preview").exists());
    assert!(!sb.ws().join("target.txt").exists());
    assert_eq!(seen.connections(), 0, "the server was reached");
}

/// GETs each of `urls` through `fetch_networker`, with `EFFECTS_TEST_KEY`
/// set in corral's environment.
fn fetch_all(cli: &Cli, sb: &Sandbox, urls: &[String]) {
    for url in urls {
        let args = json!({ "url": url }).to_string();
        let o = cli.run_env(
            &sb.ws(),
            &["tool", "call", "fetch_networker", "--args", &args],
            &[("EFFECTS_TEST_KEY", "sk-effects-secret")],
        );
        assert_eq!(o.status.code(), Some(0), "{url}: {}", stderr(&o));
    }
}

const KEY_SECRET: &str = "header = \"x-test-key\", value = \"${env:EFFECTS_TEST_KEY}\"";

#[test]
fn a_secret_for_https_is_not_sent_over_http_or_to_another_port() {
    let (a, seen_a) = server();
    let (b, seen_b) = server();
    let sb = Sandbox::new();
    let net = [
        format!("https://127.0.0.1:{a}"),
        format!("http://127.0.0.1:{a}"),
        format!("http://127.0.0.1:{b}"),
    ];
    sb.write(
        "corral.toml",
        &sneaky(
            &net,
            &format!("grants.secrets = [{{ origin = \"https://127.0.0.1:{a}\", {KEY_SECRET} }}]"),
        ),
    );
    let cli = Cli::new();
    fetch_all(
        &cli,
        &sb,
        &[
            format!("http://127.0.0.1:{a}/same-port-cleartext"),
            format!("http://127.0.0.1:{b}/other-port"),
        ],
    );
    assert_eq!(seen_a.header("x-test-key"), [None]);
    assert_eq!(seen_b.header("x-test-key"), [None]);

    // The header does reach the destination the secret is bound to.
    sb.write(
        "corral.toml",
        &sneaky(
            &net,
            &format!("grants.secrets = [{{ origin = \"http://127.0.0.1:{a}\", {KEY_SECRET} }}]"),
        ),
    );
    fetch_all(
        &cli,
        &sb,
        &[
            format!("http://127.0.0.1:{a}/bound"),
            format!("http://127.0.0.1:{b}/other-port"),
        ],
    );
    assert_eq!(
        seen_a.header("x-test-key"),
        [None, Some("sk-effects-secret".to_owned())]
    );
    assert_eq!(seen_b.header("x-test-key"), [None, None]);
}

#[test]
fn a_host_only_secret_goes_to_https_on_443_and_nowhere_else() {
    let (a, seen_a) = server();
    let (b, seen_b) = server();
    let sb = Sandbox::with_manifest(&sneaky(
        &[
            "https://127.0.0.1:443".to_owned(),
            format!("http://127.0.0.1:{a}"),
            format!("http://127.0.0.1:{b}"),
        ],
        &format!("grants.secrets = [{{ host = \"127.0.0.1\", {KEY_SECRET} }}]"),
    ));
    let cli = Cli::new();
    fetch_all(
        &cli,
        &sb,
        &[
            format!("http://127.0.0.1:{a}/"),
            format!("http://127.0.0.1:{b}/"),
        ],
    );
    assert_eq!(seen_a.header("x-test-key"), [None]);
    assert_eq!(seen_b.header("x-test-key"), [None]);
}

#[test]
fn a_host_only_secret_without_an_https_grant_is_refused_with_the_fix() {
    let (sb, cli) = workspace_and_cli();
    // The user's own manifest, which needs no trust step before it counts.
    let user = cli.home.path().join("config/corral/corral.toml");
    std::fs::create_dir_all(user.parent().expect("dir")).expect("mkdir");
    std::fs::write(
        &user,
        sneaky(
            &["http://127.0.0.1:11434".to_owned()],
            &format!("grants.secrets = [{{ host = \"127.0.0.1\", {KEY_SECRET} }}]"),
        ),
    )
    .expect("write");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    has(&err, "config/corral/corral.toml:6:");
    assert!(
        err.contains(
            "plugin `sneaky`: secret for https://127.0.0.1:443, which grants.net does not allow"
        ),
        "{err}"
    );
    has(
        &err,
        "write `origin = \"http://127.0.0.1:11434\"` instead of `host`",
    );
}

#[test]
fn secret_destinations_are_checked_when_the_manifest_loads() {
    let sb = Sandbox::new();
    let cases = [
        (
            "{ origin = \"https://*.example.com\", header = \"a\", value = \"v\" }",
            "names every subdomain",
        ),
        (
            "{ host = \"example.com\", origin = \"https://example.com\", header = \"a\", value = \"v\" }",
            "both `origin` and `host`",
        ),
        (
            "{ header = \"a\", value = \"v\" }",
            "a secret names no destination",
        ),
        (
            "{ host = \"example.com:8443\", header = \"a\", value = \"v\" }",
            "is not a bare host name",
        ),
        (
            "{ origin = \"ftp://example.com\", header = \"a\", value = \"v\" }",
            "the scheme must be http or https",
        ),
        (
            "{ origin = \"https://example.org\", header = \"a\", value = \"v\" }",
            "secret for https://example.org:443, which grants.net does not allow",
        ),
    ];
    for (secret, want) in cases {
        let toml = format!(
            "[plugins.p]\nsource = \"builtin:fs\"\ngrants.net = [\"https://*.example.com\", \"https://example.com\"]\ngrants.secrets = [{secret}]\n"
        );
        let err = sb.manifest(&toml).expect_err(secret);
        assert!(err.contains(want), "{secret}: {err}");
    }
    // Both spellings of the same destination, and a wildcard grant covering it.
    for secret in [
        "{ host = \"API.example.com\", header = \"a\", value = \"v\" }",
        "{ origin = \"https://api.example.com:443\", header = \"a\", value = \"v\" }",
    ] {
        let toml = format!(
            "[plugins.p]\nsource = \"builtin:fs\"\ngrants.net = [\"https://*.example.com\"]\ngrants.secrets = [{secret}]\n"
        );
        let m = sb.manifest(&toml).expect(secret);
        let s = &m.plugins[0].secrets[0];
        assert_eq!(s.origin(), "https://api.example.com:443");
        assert!(s.applies_to("https", "api.example.com", 443));
        assert!(!s.applies_to("http", "api.example.com", 443));
        assert!(!s.applies_to("https", "api.example.com", 8443));
        assert!(!s.applies_to("https", "www.example.com", 443));
    }
}
