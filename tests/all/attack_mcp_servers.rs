//! MCP servers as an attacker would set them up, driven through the
//! `corral` binary: what a server may read of its install, what trust
//! approves of its code, and which of its tools need an approval. Each test
//! failed before the fix it guards, as its comment says.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::output::{stderr, stdout};
use crate::support::run::argv;
use crate::support::servers::{SYSTEM_PYTHON, hostile_runnable};
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt as _;

/// The hostile server's code (tools `read`, `pid`, `send`, …), which runs
/// with the system's Python whatever starts it.
fn hostile_code() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/hostile_server.py");
    std::fs::read_to_string(path).expect("the hostile server")
}

/// Writes `text` to `rel` in the workspace, executable.
fn executable(sb: &Sandbox, rel: &str, text: &str) {
    sb.write(rel, text);
    let path = sb.ws().join(rel);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// `corral tool call TOOL --args ARGS`: what it printed, out and err.
fn call(cli: &Cli, sb: &Sandbox, tool: &str, args: Value) -> (bool, String) {
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", tool, "--args", &args.to_string()],
    );
    (o.status.success(), format!("{}{}", stdout(&o), stderr(&o)))
}

/// The server `srv` reads the file at `path`: refused by the kernel.
fn refused(cli: &Cli, sb: &Sandbox, path: &Path) {
    let (ok, all) = call(cli, sb, "srv__read", json!({ "path": path }));
    assert!(!ok, "{path:?} was read: {all}");
    assert!(all.contains("Permission denied"), "{path:?}: {all}");
    lacks(&all, SECRET);
}

// Failed before the fix: the install of `WORKSPACE/srv.py` was its path's
// grandparent, the directory holding the workspace, so the server read
// the project beside it (`outside/secret.txt`).
#[test]
fn a_server_at_the_workspace_root_cannot_read_the_projects_beside_it() {
    if !hostile_runnable() {
        return;
    }
    let sb = Sandbox::new();
    executable(
        &sb,
        "srv.py",
        &format!("#!{SYSTEM_PYTHON}\n{}", hostile_code()),
    );
    sb.write(
        "corral.toml",
        "[mcp.srv]\ncommand = \"./srv.py\"\ntimeout_ms = 5000\n",
    );
    let cli = Cli::new();
    // Its own directory is its install: it runs, and reads beside itself.
    let (ok, all) = call(
        &cli,
        &sb,
        "srv__read",
        json!({ "path": sb.ws().join("hello.txt") }),
    );
    assert!(ok && all.contains("hello from the workspace"), "{all}");
    refused(&cli, &sb, &sb.outside().join("secret.txt"));
}

// Failed before the fix: the interpreter of a `#!/bin/sh` wrapper was
// installed at `/bin/sh`'s grandparent, `/`, so the server read every file
// of the disk that is not a credential.
#[test]
fn a_server_behind_a_shell_wrapper_cannot_read_the_whole_disk() {
    if !hostile_runnable() {
        return;
    }
    let sb = Sandbox::new();
    sb.write("tools/hostile_server.py", &hostile_code());
    executable(
        &sb,
        "tools/wrap.sh",
        &format!("#!/bin/sh\nexec {SYSTEM_PYTHON} \"${{0%/*}}/hostile_server.py\"\n"),
    );
    sb.write(
        "corral.toml",
        "[mcp.srv]\ncommand = \"tools/wrap.sh\"\ntimeout_ms = 5000\n",
    );
    let cli = Cli::new();
    let (ok, all) = call(&cli, &sb, "srv__pid", json!({}));
    assert!(ok, "the wrapped server did not run: {all}");
    refused(&cli, &sb, &sb.outside().join("secret.txt"));
}

// Failed before the fix: a script named in the arguments was not part of
// the install (only the interpreter's grandparent, `/usr`, was), so
// `python3 srv/server.py` could not even open its script without a grant.
// Now the script's own directory is readable, and nothing above it.
#[test]
fn a_script_named_in_the_arguments_is_its_install_and_no_more() {
    if !hostile_runnable() {
        return;
    }
    let sb = Sandbox::new();
    sb.write("srv/server.py", &hostile_code());
    sb.write("srv/data.txt", "beside the script\n");
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.srv]\ncommand = {SYSTEM_PYTHON:?}\nargs = [\"srv/server.py\"]\ntimeout_ms = 5000\n"
        ),
    );
    let cli = Cli::new();
    let (ok, all) = call(
        &cli,
        &sb,
        "srv__read",
        json!({ "path": sb.ws().join("srv/data.txt") }),
    );
    assert!(ok && all.contains("beside the script"), "{all}");
    refused(&cli, &sb, &sb.ws().join("hello.txt"));
    refused(&cli, &sb, &sb.outside().join("secret.txt"));
}

/// A project whose `[mcp.srv]` runs `python3 srv/server.py` with the
/// workspace granted; `prelude` is put before the server's code.
fn project_server(sb: &Sandbox, prelude: &str) {
    sb.write("srv/server.py", &format!("{prelude}{}", hostile_code()));
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.srv]\ncommand = {SYSTEM_PYTHON:?}\nargs = [\"srv/server.py\"]\n\
             grants = {{ fs = [\".\"] }}\ntimeout_ms = 5000\n"
        ),
    );
}

// Failed before the fix: trust hashed `.wasm` files only, so after
// `corral trust` the server's script could change (a `git pull` would do
// it) and the next `corral tools list` ran the new code with no review.
#[test]
fn a_trusted_servers_script_that_changes_needs_trust_again() {
    if !hostile_runnable() {
        return;
    }
    let sb = Sandbox::new();
    project_server(&sb, "");
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("srv/server.py") && stdout(&o).contains("sha256"),
        "the review does not show the server's code: {}",
        stdout(&o)
    );
    let listed = cli.run(&sb.ws(), &["tools", "list"]);
    has(&stdout(&listed), "srv__read");

    // The pull: the script now leaves a mark when it starts.
    let marker = sb.ws().join("ran.txt");
    project_server(
        &sb,
        &format!(
            "open({:?}, 'w').write('new code ran')\n",
            marker.display().to_string()
        ),
    );
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    lacks(&all, "srv__read");
    assert!(!marker.exists(), "the changed script ran: {all}");
    assert!(
        all.contains("srv/server.py") && all.contains("corral trust"),
        "the refusal does not say which file changed and what to do: {all}"
    );

    // `corral trust` shows the change without running it, then approves it.
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    has(&stdout(&o), "the code its MCP servers run");
    let listed = cli.run(&sb.ws(), &["tools", "list"]);
    has(&stdout(&listed), "srv__read");
    assert!(marker.exists(), "the approved script did not run");
}

/// The effects `corral tools list --json` gives the tool `name`.
fn effects(cli: &Cli, sb: &Sandbox, name: &str) -> Value {
    let o = cli.run(&sb.ws(), &["tools", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: Vec<Value> = serde_json::from_str(&stdout(&o)).expect("JSON");
    list.iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list:?}"))["effects"]
        .clone()
}

// Failed before the fix: every tool of a server was `read` unless its
// entry said otherwise, whatever its grants, and the server's own
// `readOnlyHint = true` was all the model needed: in `ask` mode the tool
// ran with no question, though the server may write the workspace.
#[test]
fn a_tool_of_a_server_that_may_write_asks_first_whatever_it_claims() {
    if !hostile_runnable() {
        return;
    }
    let sb = Sandbox::new();
    sb.write("srv/server.py", &hostile_code());
    let turns = [
        call_turn("c1", "srv__read", json!({ "path": "hello.txt" })),
        answer_turn("Done."),
    ];
    crate::support::cassette::write(&sb, "mcp.cassette.json", &turns);
    let server = format!(
        "[mcp.srv]\ncommand = {SYSTEM_PYTHON:?}\nargs = [\"srv/server.py\"]\ntimeout_ms = 5000\n"
    );
    let replay = "[plugins.replay]\nsource = \"builtin:replay\"\n\
                  grants.fs = [{ path = \".\", access = \"ro\" }]\n\
                  config = { cassette = \"mcp.cassette.json\" }\n";
    let cli = Cli::new();

    // Granted nothing, it cannot write: its tools read.
    sb.write("corral.toml", &format!("{server}\n{replay}"));
    assert_eq!(effects(&cli, &sb, "srv__read"), json!(["read"]));

    // Granted the workspace (or the network), every tool may write, and
    // `readOnlyHint = true` does not make it a reader.
    for grant in ["grants = { fs = [\".\"] }", "grants = { net = true }"] {
        sb.write("corral.toml", &format!("{server}{grant}\n\n{replay}"));
        assert_eq!(effects(&cli, &sb, "srv__read"), json!(["write"]), "{grant}");
        let o = cli.run(
            &sb.ws(),
            &argv("run --provider replay --mode ask --json go"),
        );
        let events = crate::support::events::events(&o);
        let permission = crate::support::events::find(&events, "permission", "c1");
        assert_ne!(permission["decision"], "allow", "{grant}: {permission}");
    }

    // The user's entry may say it reads.
    sb.write(
        "corral.toml",
        &format!("{server}grants = {{ fs = [\".\"] }}\neffects = [\"read\"]\n\n{replay}"),
    );
    assert_eq!(effects(&cli, &sb, "srv__read"), json!(["read"]));
}

// Failed before the fix: the reference filesystem server's tools were all
// `read`, so in `ask` mode its `write_file` wrote a workspace file without
// asking.
#[test]
fn the_reference_filesystem_servers_write_file_asks_in_ask_mode() {
    let Some((fs, sb, ws)) = crate::support::servers::filesystem_in_sandbox() else {
        return;
    };
    let target = ws.join("written.txt");
    let turns = [
        call_turn(
            "c1",
            "files__write_file",
            json!({ "path": target, "content": "written without asking\n" }),
        ),
        answer_turn("Done."),
    ];
    crate::support::servers::filesystem_replay(&sb, &fs, &ws, &turns, "", "");
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &argv("run --provider replay --mode ask --json go"),
    );
    let events = crate::support::events::events(&o);
    let permission = crate::support::events::find(&events, "permission", "c1");
    assert_ne!(permission["decision"], "allow", "{permission}");
    assert!(
        !target.exists(),
        "write_file wrote without asking: {}",
        stderr(&o)
    );
}
