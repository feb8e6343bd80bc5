//! MCP server entries as people copy them, through the binary: a Claude
//! Code `.mcp.json` whose server is `npx -y PKG` or `uvx PKG` is imported
//! by installing the package once from the real registry (npm's, PyPI)
//! into the test's own data directory (every run installs it afresh), and
//! the server then runs from corral's package store without network, its
//! installed files checked before each start: one changed file and the
//! server is refused; `node FILE` runs the script it names.

use crate::support::output::{stderr, stdout, stdout_has};
use crate::support::run::argv_with;
use crate::support::skip;
use crate::support::text::{has, lacks};
use crate::*;
use serde_json::{Value, json};

/// `corral ARGS` in `workspace` as [`Cli::run`] runs it, but without the
/// `--workspace` it puts last, which would end up among the arguments of
/// `mcp add`'s command (the workspace is the current directory).
fn run_last(cli: &Cli, workspace: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut cmd = std::process::Command::new(corral_binary());
    cmd.args(args).current_dir(workspace);
    cli.homes(&mut cmd)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run corral")
}

/// Whether npm is here to install with; under CORRAL_CI it must be.
fn npm() -> bool {
    if std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("npm").exists()))
    {
        return true;
    }
    skip::missing("npm is not installed", "apt-get install npm");
    false
}

/// A sandbox with Claude Code's `.mcp.json` of `servers` (its
/// `mcpServers`) outside the workspace; the file's path.
fn claude_config(servers: Value) -> (Sandbox, String) {
    let sb = Sandbox::new();
    let claude = sb.outside().join("claude-mcp.json");
    std::fs::write(&claude, json!({ "mcpServers": servers }).to_string()).expect("claude-mcp.json");
    let claude = claude.display().to_string();
    (sb, claude)
}

#[test]
fn an_npx_entry_of_a_claude_mcp_json_is_installed_once_and_runs_without_network() {
    if !npm() {
        return;
    }
    let (sb, claude) = claude_config(json!({"everything": {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]
    }}));
    let cli = Cli::new();
    let shown = cli.run(&sb.ws(), &["mcp", "import", &claude]);
    stdout_has(
        &shown,
        &["corral installs it once from https://registry.npmjs.org"],
    );
    has(&stdout(&shown), "Nothing was written");
    let o = cli.run(&sb.ws(), &["mcp", "import", &claude, "--yes"]);
    let said = stdout(&o);
    assert!(
        said.contains("installed @modelcontextprotocol/server-everything@2026.8.31 (sha256 "),
        "{said}{}",
        stderr(&o)
    );
    let store = cli.home.path().join("data/corral-mcp-packages/npm");
    assert!(
        said.contains(&store.display().to_string()),
        "not run from the store: {said}"
    );
    let echoed = cli.run(
        &sb.ws(),
        &argv_with(
            "tool call everything__echo --args",
            r#"{"message":"hi from the store"}"#,
        ),
    );
    stdout_has(&echoed, &["hi from the store"]);

    // One file of the install changed, its size kept: refused, and said.
    let dir = store.join("@modelcontextprotocol+server-everything@2026.8.31");
    let manifest = dir.join("node_modules/@modelcontextprotocol/server-everything/package.json");
    let text = std::fs::read_to_string(&manifest).expect("package.json");
    std::fs::write(&manifest, text.replacen('{', "[", 1)).expect("write package.json");
    let listed = cli.run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&listed);
    lacks(&stdout(&listed), "everything__echo");
    for said in [
        "[mcp.everything] was not started: its package \
         @modelcontextprotocol/server-everything@2026.8.31 changed since it was installed",
        &dir.display().to_string(),
        "install it again: `corral mcp import FILE --yes`",
        "corral mcp add everything -- npx -y @modelcontextprotocol/server-everything@2026.8.31",
        "remove the `package` line of [mcp.everything]",
    ] {
        assert!(err.contains(said), "no {said:?} in: {err}");
    }

    // The fix it offers: `mcp add` installs afresh, once asked (-y here,
    // with no terminal to answer on; without it, the entry is written as
    // given), replacing the changed directory.
    let spec = "@modelcontextprotocol/server-everything@2026.8.31";
    let unasked = run_last(
        &cli,
        &sb.ws(),
        &["mcp", "add", "everything", "--", "npx", "-y", spec],
    );
    stdout_has(
        &unasked,
        &[
            "note: added as written, not installed",
            "run this again with -y",
        ],
    );
    let added = run_last(
        &cli,
        &sb.ws(),
        &["mcp", "add", "everything", "-y", "--", "npx", "-y", spec],
    );
    stdout_has(
        &added,
        &["installed @modelcontextprotocol/server-everything@2026.8.31"],
    );
    let listed = cli.run(&sb.ws(), &["tools", "list"]);
    stdout_has(&listed, &["everything__echo"]);
}

/// Whether pip and PyPI are here to install with; the test is counted as
/// skipped when not (under CORRAL_CI both must be).
fn pip_and_pypi() -> bool {
    let pip = std::process::Command::new("python3")
        .args(["-m", "pip", "--version"])
        .output();
    if !pip.is_ok_and(|o| o.status.success()) {
        skip::missing(
            "python3 with pip is not installed",
            "apt-get install python3-pip",
        );
        return false;
    }
    use std::net::ToSocketAddrs as _;
    let reached = ("pypi.org", 443)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(5)).is_ok()
        });
    if !reached {
        skip::offline("pypi.org:443 cannot be reached from here");
        return false;
    }
    true
}

#[test]
fn a_uvx_entry_of_a_claude_mcp_json_is_installed_from_pypi_and_lists_its_tool() {
    if !pip_and_pypi() {
        return;
    }
    let (sb, claude) = claude_config(
        json!({"fetch": {"command": "uvx", "args": ["mcp-server-fetch@2026.10.24"]}}),
    );
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["mcp", "import", &claude, "--yes"]);
    let said = stdout(&o);
    for part in [
        "`uvx` fetches `mcp-server-fetch@2026.10.24` from the registry at each start",
        "https://pypi.org:443 and https://files.pythonhosted.org:443",
        "installed mcp-server-fetch@2026.10.24 (sha256 ",
        "-m mcp_server_fetch`",
    ] {
        assert!(said.contains(part), "no {part:?} in: {said}{}", stderr(&o));
    }
    let dir = cli
        .home
        .path()
        .join("data/corral-mcp-packages/pypi/mcp-server-fetch@2026.10.24");
    assert!(
        said.contains(&format!("PYTHONPATH={}", dir.display())),
        "not run from the store: {said}"
    );
    let listed = cli.run(&sb.ws(), &["tools", "list"]);
    stdout_has(&listed, &["fetch__fetch"]);
}

#[test]
fn a_node_file_entry_runs_the_script_it_names() {
    let Some(script) = crate::support::servers::installed(
        "npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    ) else {
        return;
    };
    let sb = Sandbox::new();
    let ws = sb.ws().canonicalize().expect("ws");
    sb.write("hello.txt", "hello from the workspace\n");
    sb.write(
        "corral.toml",
        &format!(
            "[mcp.files]\ncommand = \"node\"\nargs = [{:?}, \".\"]\ngrants = {{ fs = [\".\"] }}\ntimeout_ms = 20000\n",
            script.display().to_string()
        ),
    );
    let cli = Cli::new();
    let read = crate::support::run::tool_call(
        &cli,
        &sb,
        "files__read_text_file",
        json!({"path": ws.join("hello.txt")}),
    );
    stdout_has(&read, &["hello from the workspace"]);
}

#[test]
fn a_package_line_is_checked_like_the_rest_of_the_manifest() {
    let (sb, cli) = workspace_and_cli();
    let entry =
        |package: &str| format!("[mcp.srv]\ncommand = \"/bin/true\"\npackage = {{ {package} }}\n");
    let sha = "0".repeat(64);
    for (package, said) in [
        (
            format!("store = \"cargo\", name = \"x\", version = \"1\", sha256 = \"{sha}\""),
            "[mcp.srv]: package store `cargo` is not one corral installs from",
        ),
        (
            format!("store = \"npm\", name = \"../x\", version = \"1\", sha256 = \"{sha}\""),
            "[mcp.srv]: package `../x@1` is not a package name and version",
        ),
        (
            "store = \"npm\", name = \"x\", version = \"1\", sha256 = \"abc\"".to_owned(),
            "[mcp.srv]: package sha256 `abc` is not a sha256",
        ),
        (
            format!(
                "store = \"npm\", name = \"x\", version = \"1\", sha256 = \"{sha}\", path = \"/\""
            ),
            "unknown field `path`",
        ),
    ] {
        cli.write_user_manifest(&entry(&package));
        let o = cli.run(&sb.ws(), &["mcp", "list"]);
        assert!(stderr(&o).contains(said), "no {said:?} in: {}", stderr(&o));
    }
    // Well formed, but nothing of it in the store: not started, and why.
    std::fs::write(
        cli.home.path().join("config/corral/corral.toml"),
        entry(&format!(
            "store = \"npm\", name = \"x\", version = \"1\", sha256 = \"{sha}\""
        )),
    )
    .expect("corral.toml");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(
        stderr(&o).contains(
            "[mcp.srv] was not started: its package x@1 is not in corral's package store"
        ),
        "{}",
        stderr(&o)
    );
}
