//! Imports a plugin's grants do not cover are linked to stubs that deny every
//! call, so a plugin granted only files loads and works even though it
//! imports `process`, `wasi:sockets` and `wasi:http` (as Python and
//! JavaScript components always do); each ungranted call gets an error value
//! it can report, nothing reaches the network, and `plugins list` and
//! `plugins inspect` say which imports are live and which are denied.
//! Interfaces corral does not know are still refused at load, with the
//! likely cause.

use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::run::tool_call;
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::{ECHO, STUBS, STUBS_UNKNOWN};
use serde_json::{Value, json};
use std::net::TcpListener;

/// The stubs guest as plugin `stubs`, granted only the workspace, read-only.
/// Its `source` is on line 2 of the file.
fn fs_only() -> String {
    plugin_toml(
        "stubs",
        STUBS,
        "grants.fs = [{ path = \".\", access = \"ro\" }]",
    )
}

/// A project whose manifest declares only the stubs guest, granted files.
fn project() -> (Sandbox, Cli) {
    let sb = Sandbox::with_manifest(&fs_only());
    (sb, Cli::new())
}

/// A listener on loopback that accepts nothing by itself, so any connection
/// a plugin made stays queued where [`assert_untouched`] finds it.
fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    (listener, port)
}

/// Fails if a connection reached `listener`. A connect that completed is
/// queued by the kernel before the plugin's call returns, and the call is
/// over when this runs, so an empty queue means nothing connected.
fn assert_untouched(listener: &TcpListener, what: &str) {
    match listener.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        Ok((_, from)) => panic!("{what}: the listener got a connection from {from}"),
        Err(e) => panic!("{what}: accept failed: {e}"),
    }
}

#[test]
fn a_plugin_granted_only_files_loads_and_its_file_tool_works() {
    let (sb, cli) = project();
    let o = tool_call(&cli, &sb, "read_note", json!({"path": "hello.txt"}));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "hello from the workspace\n");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = stdout(&o);
    for tool in ["read_note", "run_program", "tcp_connect", "http_get"] {
        assert!(listed.contains(tool), "{tool} missing: {listed}");
    }
}

#[test]
fn process_run_without_grants_exec_is_the_not_granted_error() {
    let (sb, cli) = project();
    let o = tool_call(&cli, &sb, "run_program", json!({"program": "touch"}));
    assert_exit(&o, 1);
    let err = stderr(&o);
    // The guest got the process interface's own `not-granted` variant and
    // reported it; a trap would read "the plugin crashed".
    assert!(
        err.contains(
            "error: run_program: process.run returned NotGranted(\"not granted: this plugin \
             (`stubs`) has no grants.exec entry in [plugins.stubs]"
        ),
        "{err}"
    );
    has(&err, "corral.toml:2");
    has(
        &err,
        "add grants.exec = [{ program = \\\"NAME\\\", args = [\\\"**\\\"] }]",
    );
    has(&err, "to let it run programs");
    lacks(&err, "crashed");
}

#[test]
fn raw_tcp_without_grants_net_is_access_denied_and_reaches_nobody() {
    let (sb, cli) = project();
    let (listener, port) = listener();
    let o = tool_call(&cli, &sb, "tcp_connect", json!({"port": port}));
    assert_exit(&o, 1);
    let err = stderr(&o);
    has(
        &err,
        "tcp connect: Err(\"create-tcp-socket: access-denied\")",
    );
    // Name lookups are off, so no query leaves the machine either.
    has(
        &err,
        "name lookup: Err(\"resolve-addresses: permanent-resolver-failure\")",
    );
    lacks(&err, "crashed");
    assert_untouched(&listener, "tcp_connect");
}

#[test]
fn http_without_grants_net_is_denied_for_every_destination() {
    let (sb, cli) = project();
    let (listener, port) = listener();
    for url in [
        format!("http://127.0.0.1:{port}/"),
        format!("http://localhost:{port}/x"),
        "https://example.com/".to_owned(),
    ] {
        let o = tool_call(&cli, &sb, "http_get", json!({"url": url}));
        assert_eq!(o.status.code(), Some(1), "{url}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("error: http_get: wasi:http returned ErrorCode::HttpRequestDenied"),
            "{url}: {err}"
        );
        // corral's own log says why, and what would allow it.
        assert!(
            err.contains("plugin `stubs` has no grants.net entry in [plugins.stubs]"),
            "{url}: {err}"
        );
        assert!(err.contains("add grants.net = ["), "{url}: {err}");
    }
    assert_untouched(&listener, "http_get");
}

/// The same denials through the library, in one process: each is an error
/// the tool reports, and the plugin keeps serving calls afterwards.
#[tokio::test]
async fn denied_calls_leave_the_plugin_serving() {
    let sb = Sandbox::new();
    let (listener, port) = listener();
    let p = sb
        .load(&fs_only())
        .await
        .expect("loads with only grants.fs");
    let msg = failed(call(&p, "run_program", json!({"program": "ls"})).await);
    assert!(
        msg.contains("NotGranted(\"not granted: this plugin"),
        "{msg}"
    );
    let msg = failed(call(&p, "tcp_connect", json!({"port": port})).await);
    has(&msg, "access-denied");
    let url = format!("http://127.0.0.1:{port}/");
    let msg = failed(call(&p, "http_get", json!({"url": url})).await);
    has(&msg, "HttpRequestDenied");
    let out = call(&p, "read_note", json!({"path": "hello.txt"}))
        .await
        .expect("read_note");
    assert_eq!(out.content, "hello from the workspace\n");
    assert_untouched(&listener, "library calls");
}

/// `plugins list` with the built-in defaults, the stubs guest granted only
/// files, and an entry with a secret whose value must never be printed.
#[test]
fn plugins_list_shows_denied_imports_and_every_grant() {
    const VALUE: &str = "sk-literal-never-printed";
    let sb = Sandbox::with_manifest(&format!(
        "{}\n[plugins.keyed]\nsource = {ECHO:?}\n\
             grants.net = [\"https://api.example.com:443\"]\n\
             grants.secrets = [{{ origin = \"https://api.example.com:443\", header = \"x-api-key\", value = \"{VALUE}\" }}]\n",
        fs_only()
    ));
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["plugins", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    lacks(&text, VALUE);
    let block = |name: &str| -> String {
        let start = text
            .find(&format!("\n{name}\n  source"))
            .unwrap_or_else(|| panic!("{name} not listed: {text}"));
        let rest = &text[start + 1..];
        let end = rest.find("\n\n").unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    let live = |block: &str| -> String {
        block
            .lines()
            .find(|l| l.starts_with("  imports  live: "))
            .unwrap_or_else(|| panic!("no live imports: {block}"))
            .to_owned()
    };
    let stubs = block("stubs");
    has(&stubs, "grants   fs . (ro)");
    assert!(
        live(&stubs).contains(" wasi:filesystem/{preopens,types}@0.2"),
        "{stubs}"
    );
    assert!(!live(&stubs).contains("process"), "{stubs}");
    has(
        &stubs,
        "\n  denied   corral:plugin/process@0.1.0: process.run answers not-granted (no grants.exec)",
    );
    has_all(
        &stubs,
        &[
            "\n  denied   wasi:http/outgoing-handler@0.2",
            "every request is HttpRequestDenied (no grants.net)",
        ],
    );
    let sockets = stubs
        .lines()
        .find(|l| l.starts_with("  denied   wasi:sockets/{"))
        .unwrap_or_else(|| panic!("sockets not denied: {stubs}"));
    has(sockets, ",tcp}@0.2");
    has(sockets, "every socket is access-denied");
    let git = block("git");
    has(&git, "grants   exec git [**]");
    assert!(
        live(&git).contains("corral:plugin/{process,types}@0.1.0"),
        "{git}"
    );
    lacks(&git, "denied   corral:plugin/process");
    let shell = block("shell");
    has(&shell, "grants   exec * [**]");
    let keyed = block("keyed");
    has(&keyed, "secret x-api-key for https://api.example.com:443");

    let o = cli.run(&sb.ws(), &["plugins", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    lacks(&stdout(&o), VALUE);
    let list: Value = serde_json::from_str(&stdout(&o)).expect("json");
    let entry = |name: &str| -> Value {
        list.as_array()
            .expect("list")
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {list}"))
            .clone()
    };
    let stubs = entry("stubs");
    let status = |plugin: &Value, prefix: &str| -> String {
        plugin["imports"]
            .as_array()
            .expect("imports")
            .iter()
            .find(|i| i["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no import {prefix} in {plugin}"))["status"]
            .as_str()
            .expect("status")
            .to_owned()
    };
    assert_eq!(status(&stubs, "corral:plugin/process"), "denied");
    assert_eq!(status(&stubs, "wasi:sockets/tcp@"), "denied");
    assert_eq!(status(&stubs, "wasi:http/outgoing-handler"), "denied");
    assert_eq!(status(&stubs, "wasi:filesystem/preopens"), "live");
    assert_eq!(status(&stubs, "corral:plugin/types"), "live");
    let git = entry("git");
    assert_eq!(status(&git, "corral:plugin/process"), "live");
    assert_eq!(
        git["grants"]["exec"][0]["program"], "git",
        "{}",
        git["grants"]
    );
    assert_eq!(git["grants"]["exec"][0]["args"], json!(["**"]));
    assert_eq!(entry("shell")["grants"]["exec"][0]["program"], "*");
    assert_eq!(
        entry("keyed")["grants"]["secrets"],
        json!([{"origin": "https://api.example.com:443", "header": "x-api-key"}])
    );
}

#[test]
fn plugins_inspect_shows_which_imports_are_denied_without_grants() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["plugins", "inspect", STUBS]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let line = |prefix: &str| -> String {
        text.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .to_owned()
    };
    assert!(
        line("corral:plugin/process@0.1.0").contains("denied: process.run answers not-granted"),
        "{text}"
    );
    assert!(line("wasi:sockets/tcp@0.2").contains("denied"), "{text}");
    assert!(
        line("wasi:http/outgoing-handler@0.2").contains("denied"),
        "{text}"
    );
    assert!(line("corral:plugin/types@0.1.0").contains("live"), "{text}");
    has(&text, "run_program [execute]");

    let o = cli.run(&sb.ws(), &["plugins", "inspect", STUBS, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    let imports = v["imports"].as_array().expect("imports");
    let status = |prefix: &str| {
        imports
            .iter()
            .find(|i| i["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .unwrap_or_else(|| panic!("no {prefix} in {v}"))["status"]
            .clone()
    };
    assert_eq!(status("corral:plugin/process"), "denied");
    assert_eq!(status("wasi:sockets/tcp@"), "denied");
    assert_eq!(status("wasi:http/outgoing-handler"), "denied");
    assert_eq!(status("corral:plugin/types"), "live");
}

#[test]
fn an_unknown_interface_is_refused_at_load_naming_it_and_its_cause() {
    let sb = Sandbox::with_manifest(&plugin_toml(
        "odd",
        STUBS_UNKNOWN,
        "grants.fs = [{ path = \".\", access = \"ro\" }]",
    ));
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(!o.status.success(), "loaded: {}", stdout(&o));
    let err = stderr(&o);
    has_all(&err, &["plugin `odd`", "corral.toml:2"]);
    assert!(
        err.contains(
            "jco:node/fs (built with Node.js shims; rebuild without --bundle/node imports)"
        ),
        "{err}"
    );
    assert!(
        err.contains("acme:widgets/frob (corral does not provide it;"),
        "{err}"
    );

    // Inspecting it says the same, import by import.
    let o = cli.run(&sb.ws(), &["plugins", "inspect", STUBS_UNKNOWN]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    has(&text, "jco:node/fs  refused: built with Node.js shims");
    has(
        &text,
        "acme:widgets/frob  refused: corral does not provide it",
    );
    let o = cli.run(&sb.ws(), &["plugins", "inspect", STUBS_UNKNOWN, "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).expect("json");
    let refused: Vec<&str> = v["imports"]
        .as_array()
        .expect("imports")
        .iter()
        .filter(|i| i["status"] == "refused")
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert_eq!(refused, ["acme:widgets/frob", "jco:node/fs"]);
}
