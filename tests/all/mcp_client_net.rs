//! An MCP server's `grants.net` naming destinations: the server reaches a
//! granted loopback port through corral's proxy and is refused another,
//! and a direct connection around the proxy reaches nothing.

use crate::support::http::server;
use crate::support::output::{stderr, stdout};
use crate::support::servers::installed;
use crate::support::servers::{SYSTEM_PYTHON, hostile_runnable, hostile_script};
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::json;
use std::sync::atomic::Ordering;

#[test]
fn a_server_reaches_its_granted_port_and_no_other() {
    if !hostile_runnable() {
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let (b, hits_b) = server("server-b-answered");
    let sb = Sandbox::new();
    let script = hostile_script(&sb);
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.hostile]\ncommand = {SYSTEM_PYTHON:?}\nargs = [{:?}]\n\
             grants = {{ fs = [\".\"], net = [\"http://127.0.0.1:{a}\"] }}\ntimeout_ms = 10000\n",
            script.display().to_string()
        ),
    );
    let cli = Cli::new();
    let call = |tool: &str, args: serde_json::Value| {
        let o = cli.run(
            &sb.ws(),
            &["tool", "call", tool, "--args", &args.to_string()],
        );
        format!("{}{}", stdout(&o), stderr(&o))
    };
    let out = call(
        "hostile__fetch",
        json!({"url": format!("http://127.0.0.1:{a}/")}),
    );
    has(&out, "server-a-answered");
    let out = call(
        "hostile__fetch",
        json!({"url": format!("http://127.0.0.1:{b}/")}),
    );
    lacks(&out, "server-b-answered");
    assert!(out.contains("refused") && out.contains("403"), "{out}");
    assert_eq!(hits_b.load(Ordering::SeqCst), 0, "B was reached");
    // Around the proxy there is no route to the host's loopback at all.
    let before = hits_a.load(Ordering::SeqCst);
    let out = call("hostile__connect", json!({ "port": a }));
    has(&out, "refused");
    lacks(&out, "connected");
    assert_eq!(
        hits_a.load(Ordering::SeqCst),
        before,
        "A was reached directly"
    );
}

#[test]
fn a_server_without_net_reaches_nothing_and_a_bad_destination_is_an_error() {
    if !hostile_runnable() {
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let sb = Sandbox::new();
    let script = hostile_script(&sb);
    let toml = |net: &str| {
        format!(
            "[mcp.hostile]\ncommand = {SYSTEM_PYTHON:?}\nargs = [{:?}]\n\
             grants = {{ fs = [\".\"]{net} }}\ntimeout_ms = 10000\n",
            script.display().to_string()
        )
    };
    sb.write("corral.toml", &toml(""));
    let cli = Cli::new();
    let o = crate::support::run::tool_call(
        &cli,
        &sb,
        "hostile__fetch",
        json!({"url": format!("http://127.0.0.1:{a}/")}),
    );
    let out = format!("{}{}", stdout(&o), stderr(&o));
    has(&out, "refused");
    assert_eq!(hits_a.load(Ordering::SeqCst), 0, "{out}");
    sb.write("corral.toml", &toml(", net = [\"ftp://127.0.0.1:21\"]"));
    // The manifest is checked when it is trusted: the entry is refused there.
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("[mcp.hostile] grants.net") && out.contains("ftp://127.0.0.1:21"),
        "{out}"
    );
}

/// A loopback HTTP server answering every path with an HTML article
/// headed `marker` but `/robots.txt`, which is 404; the targets it was
/// asked for.
fn plain_site(marker: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::Write as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: std::sync::Arc<std::sync::Mutex<Vec<String>>> = Default::default();
    let log = seen.clone();
    crate::support::http::serve(listener, move |head, s| {
        let text = String::from_utf8_lossy(head).into_owned();
        let target = text.split_whitespace().nth(1).unwrap_or("").to_owned();
        log.lock().expect("lock").push(target.clone());
        let (status, body) = if target == "/robots.txt" {
            ("404 Not Found", "no robots here".to_owned())
        } else {
            (
                "200 OK",
                format!(
                    "<html><head><title>t</title><script>var x = 'SCRIPT-TEXT';</script></head>\
                     <body><main><h1>{marker}</h1><p>The article text of this page, long \
                     enough to be kept by the extractor as its content.</p></main></body></html>"
                ),
            )
        };
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    (port, seen)
}

/// PyPI's `mcp-server-fetch`, granted one loopback origin, run by
/// `corral run` from a cassette: it fetches that origin through corral's
/// proxy (its robots.txt check included), the result is logged and
/// labelled untrusted, and another loopback port is refused by the proxy
/// without being reached. `--allow-private-ips` turns off the server's own
/// refusal of loopback addresses: here the grant is what limits it. Its
/// `PATH` is its venv's `bin`: with `node` in `PATH`, readabilipy (which
/// turns the page into Markdown) runs `npm install` into its own install
/// at first use, which a confined server may not write, and fails.
#[test]
fn the_pypi_fetch_server_fetches_its_granted_loopback_origin_and_no_other() {
    let Some(fetch) = installed("py/bin/mcp-server-fetch") else {
        return;
    };
    let (a, seen_a) = plain_site("fetched-from-site-a");
    let (b, seen_b) = plain_site("fetched-from-site-b");
    let sb = Sandbox::new();
    sb.write(".gitignore", "*.cassette.json\n");
    sb.write(
        "corral.toml",
        &format!(
            "[policy]\nmode = \"full-auto\"\n\n\
             [mcp.fetch]\ncommand = {:?}\nargs = [\"--allow-private-ips\"]\n\
             env = {{ PATH = {:?} }}\n\
             grants = {{ net = [\"http://127.0.0.1:{a}\"] }}\ntimeout_ms = 30000\n\n\
             [plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"guard.cassette.json\" }}\n",
            fetch.display().to_string(),
            fetch
                .parent()
                .expect("the venv's bin")
                .display()
                .to_string(),
        ),
    );
    crate::support::guard::cassette(
        &sb,
        &[
            crate::support::cassette::call_turn(
                "f1",
                "fetch__fetch",
                json!({"url": format!("http://127.0.0.1:{a}/page")}),
            ),
            crate::support::cassette::call_turn(
                "f2",
                "fetch__fetch",
                json!({"url": format!("http://127.0.0.1:{b}/page")}),
            ),
            crate::support::cassette::answer_turn("Fetched."),
        ],
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "--json", "go"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let events = crate::support::events::events(&o);
    let end = crate::support::events::find(&events, "tool_call_end", "f1");
    let text = end["outcome"]["content"].as_str().unwrap_or_default();
    assert!(text.contains("# fetched-from-site-a"), "{end}");
    assert!(!text.contains("SCRIPT-TEXT"), "{end}");
    assert_eq!(end["outcome"]["is_error"], false, "{end}");
    assert_eq!(
        crate::support::events::labels(end),
        vec![crate::support::events::label("untrusted", "mcp:fetch")]
    );
    assert_eq!(
        *seen_a.lock().expect("lock"),
        ["/robots.txt", "/page"],
        "{end}"
    );
    let end = crate::support::events::find(&events, "tool_call_end", "f2");
    let text = end["outcome"]["content"].as_str().unwrap_or_default();
    assert_eq!(end["outcome"]["is_error"], true, "{end}");
    assert!(!text.contains("fetched-from-site-b"), "{end}");
    assert!(seen_b.lock().expect("lock").is_empty(), "{end}");
    let log = std::fs::read_to_string(crate::support::log::session_log(&cli)).expect("log");
    assert!(
        log.contains("fetch__fetch") && log.contains("fetched-from-site-a"),
        "the session log lacks the call"
    );
}
