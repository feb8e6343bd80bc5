//! An MCP server's `grants.net` naming destinations: the server reaches a
//! granted loopback port through corral's proxy and is refused another,
//! and a direct connection around the proxy reaches nothing.

use crate::exec_network::server;
use crate::mcp_client::{PYTHON, runnable, script};
use crate::support::output::{stderr, stdout};
use crate::*;
use serde_json::json;
use std::sync::atomic::Ordering;

#[test]
fn a_server_reaches_its_granted_port_and_no_other() {
    if !runnable() {
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let (b, hits_b) = server("server-b-answered");
    let sb = Sandbox::new();
    let script = script(&sb);
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.hostile]\ncommand = {PYTHON:?}\nargs = [{:?}]\n\
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
    assert!(out.contains("server-a-answered"), "{out}");
    let out = call(
        "hostile__fetch",
        json!({"url": format!("http://127.0.0.1:{b}/")}),
    );
    assert!(!out.contains("server-b-answered"), "{out}");
    assert!(out.contains("refused") && out.contains("403"), "{out}");
    assert_eq!(hits_b.load(Ordering::SeqCst), 0, "B was reached");
    // Around the proxy there is no route to the host's loopback at all.
    let before = hits_a.load(Ordering::SeqCst);
    let out = call("hostile__connect", json!({ "port": a }));
    assert!(out.contains("refused"), "{out}");
    assert!(!out.contains("connected"), "{out}");
    assert_eq!(
        hits_a.load(Ordering::SeqCst),
        before,
        "A was reached directly"
    );
}

#[test]
fn a_server_without_net_reaches_nothing_and_a_bad_destination_is_an_error() {
    if !runnable() {
        return;
    }
    let (a, hits_a) = server("server-a-answered");
    let sb = Sandbox::new();
    let script = script(&sb);
    let toml = |net: &str| {
        format!(
            "[mcp.hostile]\ncommand = {PYTHON:?}\nargs = [{:?}]\n\
             grants = {{ fs = [\".\"]{net} }}\ntimeout_ms = 10000\n",
            script.display().to_string()
        )
    };
    sb.write("corral.toml", &toml(""));
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &[
            "tool",
            "call",
            "hostile__fetch",
            "--args",
            &json!({"url": format!("http://127.0.0.1:{a}/")}).to_string(),
        ],
    );
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(out.contains("refused"), "{out}");
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
