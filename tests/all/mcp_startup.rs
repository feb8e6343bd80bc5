//! MCP servers at start, through the binary: they start all at once (one
//! that never answers costs `tools list` one wait, not the sum of all, and
//! never more than the listing's 5 s whatever its `timeout_ms`; a call of
//! a plugin's tool starts no server at all), one
//! that fails says why in its warning (the end of its standard error and the
//! likely cause), and the reference filesystem server starts every time,
//! beside servers that die while it starts.

use crate::support::files::assert_absent;
use crate::support::output::{stderr, stdout};
use crate::support::servers::installed;
use crate::support::text::{has, has_all, lacks};
use crate::*;
use std::time::{Duration, Instant};

/// A `[mcp.NAME]` entry running `script` with the system's shell.
fn shell_server(name: &str, script: &str, timeout_ms: u64) -> String {
    format!(
        "[mcp.{name}]\ncommand = \"/bin/sh\"\nargs = [\"-c\", {script:?}]\ntimeout_ms = {timeout_ms}\n\n"
    )
}

#[test]
fn servers_that_never_answer_cost_tools_list_one_wait_not_the_sum() {
    let sb = Sandbox::new();
    let mut manifest = String::new();
    for name in ["silent1", "silent2", "silent3", "silent4"] {
        manifest.push_str(&shell_server(name, "exec sleep 60", 3000));
    }
    sb.write("corral.toml", &manifest);
    let cli = Cli::new();
    let started = Instant::now();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let took = started.elapsed();
    let err = stderr(&o);
    // One after another this took 12 s; at once, one wait of 3 s.
    assert!(
        took < Duration::from_secs(8),
        "tools list took {took:?}: {err}"
    );
    for name in ["silent1", "silent2", "silent3", "silent4"] {
        assert!(
            err.contains(&format!(
                "the MCP server `{name}` did not answer `initialize` within 3000 ms"
            )),
            "{err}"
        );
    }
    has_all(
        &err,
        &[
            "it wrote nothing to its standard error",
            "raise `timeout_ms` of [mcp.silent1]",
        ],
    );
}

#[test]
fn a_server_that_fails_says_why_in_its_warning() {
    let sb = Sandbox::new();
    // What npm says when it cannot reach its registry, then its exit.
    let offline = "echo 'npm error code ENOTFOUND' >&2; \
                   echo 'npm error network request to https://registry.npmjs.org/x failed, reason: getaddrinfo ENOTFOUND registry.npmjs.org' >&2; \
                   exit 1";
    let refused =
        "echo \"Error: EACCES: permission denied, open '/home/u/.config/x.json'\" >&2; exit 2";
    sb.write(
        "npx",
        "#!/bin/sh\n# stands for npx waiting on a registry it cannot reach\nexec sleep 60\n",
    );
    let mut perms = std::fs::metadata(sb.ws().join("npx"))
        .expect("npx")
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(sb.ws().join("npx"), perms).expect("chmod");
    sb.write(
        "corral.toml",
        &format!(
            "{}{}[mcp.fetcher]\ncommand = \"./npx\"\nargs = [\"-y\", \"some-server\"]\ntimeout_ms = 2000\n",
            shell_server("offline", offline, 5000),
            shell_server("refused", refused, 5000),
        ),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&o);
    assert!(
        err.contains(
            "the MCP server `offline` exited (exit status: 1) before it answered `initialize`"
        ),
        "{err}"
    );
    has(&err, "getaddrinfo ENOTFOUND registry.npmjs.org");
    assert!(
        err.contains(
            "likely cause: it has no network where it needed one: [mcp.offline] grants none"
        ),
        "{err}"
    );
    has_all(
        &err,
        &[
            "EACCES: permission denied",
            "likely cause: it was refused a path",
        ],
    );
    has(
        &err,
        "likely cause: `npx` fetches the package from its registry at start",
    );
    lacks(&err, "AsyncRwTransport");
}

#[test]
fn the_reference_filesystem_server_starts_fifty_times_beside_servers_that_die() {
    let Some(fs) = installed("npm/node_modules/.bin/mcp-server-filesystem") else {
        return;
    };
    let sb = Sandbox::new();
    sb.write("hello.txt", "hello\n");
    let mut manifest = format!(
        "[mcp.files]\ncommand = {:?}\nargs = [\".\"]\ngrants = {{ fs = [\".\"] }}\ntimeout_ms = 20000\n\n",
        fs.display().to_string()
    );
    // Servers that die while it starts: each one's end is a run ending,
    // which must not take the starting server for one of its own.
    for k in 0..6 {
        manifest.push_str(&shell_server(&format!("dies{k}"), "exit 3", 5000));
    }
    sb.write("corral.toml", &manifest);
    let cli = Cli::new();
    let mut failures = Vec::new();
    for run in 0..50 {
        // `--wait`: as a session waits, up to the server's `timeout_ms`.
        let o = cli.run(&sb.ws(), &["tools", "list", "--wait"]);
        if !stdout(&o).contains("files__read_text_file") {
            failures.push(format!("run {run}: {}", stderr(&o)));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 50 starts failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_server_that_never_answers_does_not_hold_up_the_listing_or_a_plugin_call() {
    let sb = Sandbox::new();
    sb.write("hello.txt", "hello\n");
    let ws = sb.ws().display().to_string();
    // The user's servers (a project's would first be trusted, and trusting
    // waits for every server's list): one that never answers, and would be
    // waited for a minute, says it started.
    let mut manifest = format!(
        "[mcp.silent]\ncommand = \"/bin/sh\"\n\
         args = [\"-c\", \"echo started > {ws}/started.txt; exec sleep 120\"]\n\
         grants = {{ fs = [{ws:?}] }}\ntimeout_ms = 60000\n\n"
    );
    let fs = installed("npm/node_modules/.bin/mcp-server-filesystem");
    if let Some(fs) = &fs {
        manifest.push_str(&format!(
            "[mcp.files]\ncommand = {:?}\nargs = [{ws:?}]\ngrants = {{ fs = [{ws:?}] }}\n\n",
            fs.display().to_string()
        ));
    }
    let cli = Cli::new();
    let user = cli.home.path().join("config/corral/corral.toml");
    let mut text = std::fs::read_to_string(&user).expect("the user's manifest");
    text.push_str(&manifest);
    std::fs::write(&user, text).expect("the user's servers");

    let started = Instant::now();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let took = started.elapsed();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    // A minute of `timeout_ms` is not waited: the listing's 5 s are.
    assert!(
        took < Duration::from_secs(30),
        "tools list took {took:?}: {err}"
    );
    has(
        &err,
        "the tools of [mcp.silent] are not listed: the MCP server `silent` had not answered within 5000 ms",
    );
    has(&err, "`corral tools list --wait`");
    // Plugins' and answering servers' tools are listed all the same.
    let out = stdout(&o);
    has(&out, "read_file");
    if fs.is_some() {
        assert!(out.contains("files__read_text_file"), "{out}\n{err}");
    }
    assert!(
        sb.ws().join("started.txt").exists(),
        "the server never started: {err}"
    );

    // A plugin's tool needs no server: none is started.
    std::fs::remove_file(sb.ws().join("started.txt")).expect("remove the marker");
    let started = Instant::now();
    let o = crate::support::run::tool_call(&cli, &sb, "read_file", r#"{"path":"hello.txt"}"#);
    let took = started.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stdout(&o), "hello");
    assert!(took < Duration::from_secs(30), "tool call took {took:?}");
    assert_absent(&sb, "started.txt", "a plugin's call started an MCP server");
}
