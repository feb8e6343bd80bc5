//! MCP server entries as people copy them, through the binary: a Claude
//! Code `.mcp.json` whose server is `npx -y PKG` is imported by installing
//! the package once from npm's real registry (into the test's own data
//! directory: every run installs it afresh) and the server then runs from
//! corral's package store without network; `node FILE` runs the script it
//! names.

use crate::support::output::{stderr, stdout};
use crate::*;
use serde_json::json;
use std::path::PathBuf;

/// Whether npm is here to install with; under CORRAL_CI it must be.
fn npm() -> bool {
    if std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("npm").exists()))
    {
        return true;
    }
    assert!(
        std::env::var_os("CORRAL_CI").is_none(),
        "npm must be installed under CORRAL_CI"
    );
    eprintln!("skipped: npm is not installed");
    false
}

#[test]
fn an_npx_entry_of_a_claude_mcp_json_is_installed_once_and_runs_without_network() {
    if !npm() {
        return;
    }
    let sb = Sandbox::new();
    let claude = sb.outside().join("claude-mcp.json");
    std::fs::write(
        &claude,
        json!({"mcpServers": {"everything": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-everything@2026.8.31"]
        }}})
        .to_string(),
    )
    .expect("claude-mcp.json");
    let claude = claude.display().to_string();
    let cli = Cli::new();
    let shown = cli.run(&sb.ws(), &["mcp", "import", &claude]);
    assert!(
        stdout(&shown).contains("corral installs it once from https://registry.npmjs.org"),
        "{}{}",
        stdout(&shown),
        stderr(&shown)
    );
    assert!(
        stdout(&shown).contains("Nothing was written"),
        "{}",
        stdout(&shown)
    );
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
        &[
            "tool",
            "call",
            "everything__echo",
            "--args",
            r#"{"message":"hi from the store"}"#,
        ],
    );
    assert!(
        stdout(&echoed).contains("hi from the store"),
        "{}{}",
        stdout(&echoed),
        stderr(&echoed)
    );
}

#[test]
fn a_node_file_entry_runs_the_script_it_names() {
    let Some(root) = std::env::var_os("CORRAL_TEST_MCP_SERVERS") else {
        assert!(
            std::env::var_os("CORRAL_CI").is_none(),
            "CORRAL_TEST_MCP_SERVERS must be set under CORRAL_CI (.ci/run installs the servers)"
        );
        eprintln!("skipped: CORRAL_TEST_MCP_SERVERS is unset (.ci/run installs the servers)");
        return;
    };
    let script = PathBuf::from(root)
        .join("npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
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
    let read = cli.run(
        &sb.ws(),
        &[
            "tool",
            "call",
            "files__read_text_file",
            "--args",
            &json!({"path": ws.join("hello.txt")}).to_string(),
        ],
    );
    assert!(
        stdout(&read).contains("hello from the workspace"),
        "{}{}",
        stdout(&read),
        stderr(&read)
    );
}
