//! Streamable HTTP MCP servers (`[mcp.NAME] url = "…"`), through the real
//! binary: the reference server-everything (installed by `.ci/run`) listed
//! and called in a replayed session; a secret header that reaches the
//! server's origin and never the log (checked by a Python `mcp` SDK server
//! that records the headers it got); a redirect refused without its target
//! ever being reached; an oversized answer cut off; trust of a project's
//! `url`; `mcp add --url` and `mcp import` of URL entries.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::http::server;
use crate::support::imports::import_config;
use crate::support::output::{stderr, stdout, stdout_has};
use crate::support::run::argv_with;
use crate::support::text::{has, has_all};
use crate::support::{mcp_clients::sdk_python, servers::lifecycle_script};
use crate::*;
use serde_json::{Value, json};
use std::io::Write as _;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A server process started by the test, killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// Waits until something listens on `port` (at most 30 s).
fn listening(port: u16, child: &mut Child) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("the server exited before listening: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "nothing listens on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// server-everything in its streamable HTTP mode, or `None` (said why).
fn everything() -> Option<(u16, Child)> {
    let bin = crate::support::servers::installed("npm/node_modules/.bin/mcp-server-everything")?;
    let port = free_port();
    let mut child = Child(
        std::process::Command::new(&bin)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start server-everything"),
    );
    listening(port, &mut child);
    Some((port, child))
}

/// A workspace whose `[mcp.NAME]` is `server` (its TOML lines), with the
/// replay provider playing `turns`.
fn replayed(server: &str, turns: &[Value]) -> Sandbox {
    let sb = Sandbox::with_manifest(&format!(
        "{server}\n[plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"http.cassette.json\" }}\n\n\
             [policy]\nmode = \"full-auto\"\n"
    ));
    crate::support::cassette::write(&sb, "http.cassette.json", turns);
    sb
}

#[test]
fn the_reference_server_over_http_is_listed_and_called_in_a_session() {
    let Some((port, _server)) = everything() else {
        return;
    };
    let turns = [
        call_turn("c1", "every__echo", json!({ "message": "hi over http" })),
        answer_turn("Done."),
    ];
    let sb = replayed(
        &format!("[mcp.every]\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout_ms = 20000\n"),
        &turns,
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    stdout_has(&o, &["every__echo"]);
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "--json", "go"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let events = crate::support::events::events(&o);
    crate::support::events::untrusted_end(&events, "c1", "hi over http", "mcp:every");
    crate::support::log::assert_logged(&cli, &["every__echo", "hi over http"]);
}

#[test]
fn the_secret_header_reaches_the_servers_origin_and_never_the_log() {
    let Some(python) = sdk_python() else { return };
    let sb0 = Sandbox::new();
    let script = lifecycle_script(&sb0);
    let headers = sb0.outside().join("headers.jsonl");
    let port = free_port();
    let mut child = Child(
        std::process::Command::new(&python)
            .arg(&script)
            .args(["http", &port.to_string()])
            .arg(&headers)
            .current_dir(sb0.outside())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the Python server"),
    );
    listening(port, &mut child);
    let token = "tok-5ecret-7c1d";
    let turns = [
        call_turn("c1", "life__seen", json!({})),
        answer_turn("Done."),
    ];
    let sb = replayed(
        &format!(
            "[mcp.life]\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout_ms = 20000\n\
             grants.secrets = [{{ header = \"authorization\", value = \"Bearer ${{env:LIFE_TOKEN}}\" }}]\n"
        ),
        &turns,
    );
    let cli = Cli::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "replay", "--json", "go"],
        &[("LIFE_TOKEN", token)],
    );
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let events = crate::support::events::events(&o);
    let end = crate::support::events::find(&events, "tool_call_end", "c1");
    assert_eq!(end["outcome"]["content"], "recorded", "{end}");
    let seen = std::fs::read_to_string(&headers).expect("the server recorded headers");
    assert!(
        seen.contains(&format!("Bearer {token}")),
        "the header did not reach the server: {seen}"
    );
    let mut everything = format!("{}{}", stdout(&o), stderr(&o));
    for log in crate::support::log::session_logs(&cli) {
        everything.push_str(&std::fs::read_to_string(log).expect("log"));
    }
    assert!(
        !everything.contains(token),
        "the secret leaked: {everything}"
    );

    // Unset, the variable is a clear error and no request carries a header.
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(
        stderr(&o).contains("LIFE_TOKEN") && stderr(&o).contains("not set"),
        "{}",
        stderr(&o)
    );
}

/// A loopback HTTP server answering every request with `head` followed by
/// `body_len` bytes of `[`.
fn answering(head: String, body_len: usize) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    crate::support::http::serve(listener, move |_, s| {
        let _ = s.write_all(head.as_bytes());
        let chunk = vec![b'['; 64 << 10];
        let mut left = body_len;
        while left > 0 {
            let n = left.min(chunk.len());
            if s.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n;
        }
    });
    port
}

#[test]
fn a_redirect_is_refused_and_its_target_never_reached() {
    let (target, hits) = server("redirected-here");
    let port = answering(
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{target}/mcp\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        0,
    );
    let sb = Sandbox::with_manifest(&format!(
        "[mcp.moved]\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout_ms = 5000\n\
             grants.secrets = [{{ header = \"x-key\", value = \"k\" }}]\n"
    ));
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&o);
    assert!(
        err.contains("[mcp.moved]") && err.contains("redirect"),
        "{err}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the redirect was followed");
}

#[test]
fn an_oversized_answer_is_cut_off() {
    let size = 64 << 20;
    let port = answering(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\
             Connection: close\r\n\r\n"
        ),
        size,
    );
    let sb = Sandbox::with_manifest(&format!(
        "[mcp.big]\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout_ms = 10000\noutput_kb = 64\n"
    ));
    let cli = Cli::new();
    let start = Instant::now();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&o);
    assert!(
        err.contains("[mcp.big]") && err.contains("larger than"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(30), "it read on");
}

#[test]
fn a_projects_url_server_is_reached_only_once_trusted_and_again_after_a_change() {
    let (a, hits_a) = server("a");
    let (b, hits_b) = server("b");
    let sb = Sandbox::new();
    let manifest = |port: u16| {
        format!("[mcp.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\ntimeout_ms = 3000\n")
    };
    sb.write("corral.toml", &manifest(a));
    let cli = Cli::untrusting();
    cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(hits_a.load(Ordering::SeqCst), 0, "reached before trust");
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!(
            "[mcp.remote] connects to http://127.0.0.1:{a}/mcp"
        )),
        "{}",
        stdout(&o)
    );
    cli.run(&sb.ws(), &["tools", "list"]);
    assert!(
        hits_a.load(Ordering::SeqCst) > 0,
        "not reached once trusted"
    );
    sb.write("corral.toml", &manifest(b));
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(!o.status.success() || !stdout(&o).contains("remote__"));
    assert_eq!(
        hits_b.load(Ordering::SeqCst),
        0,
        "a changed url ran untrusted"
    );
}

#[test]
fn bad_url_entries_are_clear_errors() {
    let sb = Sandbox::new();
    let cli = Cli::untrusting();
    for (entry, says) in [
        (
            "url = \"http://127.0.0.1:1/mcp\"\ncommand = \"x\"",
            "both `url` and a program",
        ),
        (
            "url = \"http://user:pw@127.0.0.1:1/mcp\"",
            "a user or password in the url",
        ),
        ("url = \"ftp://127.0.0.1/mcp\"", "http or https"),
        (
            "url = \"http://127.0.0.1:1/mcp\"\ngrants = { net = true }",
            "a `url` server runs none",
        ),
        (
            "url = \"http://127.0.0.1:1/mcp\"\ngrants.secrets = [{ origin = \"https://elsewhere.example:443\", header = \"x\", value = \"v\" }]",
            "but this server's requests go only to http://127.0.0.1:1",
        ),
    ] {
        sb.write("corral.toml", &format!("[mcp.x]\n{entry}\n"));
        let o = cli.run(&sb.ws(), &["trust", "--yes"]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{entry}: accepted");
        assert!(err.contains(says), "{entry}: {err}");
        assert!(!err.contains("Spanned") && !err.contains("{ "), "{err}");
    }
}

#[test]
fn mcp_add_url_and_import_of_url_entries() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(
        &sb.ws(),
        &argv_with(
            "mcp add web --url https://mcp.example.com/mcp --secret",
            "Authorization=Bearer ${env:WEB_TOKEN}",
        ),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    has(
        &stdout(&o),
        "[mcp.web] connects to https://mcp.example.com/mcp",
    );
    let listed = cli.run(&sb.ws(), &["mcp", "list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&listed)).expect("JSON");
    assert_eq!(list[0]["url"], "https://mcp.example.com/mcp", "{list:?}");
    assert_eq!(list[0]["secret_headers"], json!(["authorization"]));
    let bad = cli.run(&sb.ws(), &["mcp", "add", "w", "--url", "mcp.example.com"]);
    assert!(!bad.status.success());
    has(&stderr(&bad), "no scheme");

    let o = import_config(
        &cli,
        &sb,
        ".mcp.json",
        r#"{"mcpServers": {"gh": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}, "old": {"type": "sse", "url": "https://x.example/sse"}}}"#,
    );
    has(&stdout(&o), "SSE server");
    import_config(
        &cli,
        &sb,
        "config.toml",
        "[mcp_servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"DOCS_TOKEN\"\n",
    );
    let user = std::fs::read_to_string(cli.home.path().join("config/corral/corral.toml"))
        .expect("user manifest");
    has_all(
        &user,
        &["Bearer ${env:GH_TOKEN}", "Bearer ${env:DOCS_TOKEN}"],
    );
    let listed = cli.run(&sb.ws(), &["mcp", "list", "--json"]);
    let list: Vec<Value> = serde_json::from_str(&stdout(&listed)).expect("JSON");
    let names: Vec<&str> = list.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, vec!["docs", "gh", "web"]);
}
