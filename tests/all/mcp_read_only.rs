//! `corral mcp serve --mode read-only` runs only what reads, spoken to in
//! raw JSON-RPC over pipes: it lists only the tools that mode runs, the git
//! tools that read are among them and run, and reading with them leaves the
//! repository's index as it was.

use crate::support::served::Served;
use crate::*;
use serde_json::json;
use std::time::Duration;

fn git(ws: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(ws)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// Failed before the fix: read-only listed 16 tools and refused 12 of them
/// when called, the git tools it marked `readOnlyHint: true` among them;
/// and `git_diff`, run where it ran, rewrote `.git/index` (git refreshes
/// the index's stat information on a diff).
#[test]
fn read_only_lists_only_what_it_runs_and_git_reads_leave_the_index_alone() {
    let sb = Sandbox::new();
    let ws = sb.ws();
    git(&ws, &["init", "-q"]);
    git(&ws, &["add", "hello.txt"]);
    git(&ws, &["commit", "-qm", "first"]);
    // Same content, newer stat: what makes `git diff` refresh the index.
    std::thread::sleep(Duration::from_millis(1100));
    sb.write("hello.txt", "hello from the workspace\n");
    let index = ws.join(".git/index");
    let before = (
        std::fs::read(&index).unwrap(),
        std::fs::metadata(&index).unwrap().modified().unwrap(),
    );

    let cli = Cli::new();
    let mut served = Served::start(&cli, &sb, &["--mode", "read-only"]);
    let listed = served.request(1, "tools/list", json!({}));
    let tools = listed["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for read in ["read_file", "git_status", "git_diff", "git_log", "git_show"] {
        assert!(names.contains(&read), "{read} is not listed: {names:?}");
    }
    for refused in ["write_file", "apply_patch", "run_command", "git_commit"] {
        assert!(!names.contains(&refused), "{refused} is listed: {names:?}");
    }
    // Each listed tool runs: none is refused by the mode.
    let mut id = 10;
    for tool in tools {
        id += 1;
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        let name = tool["name"].as_str().unwrap();
        let result = served.request(id, "tools/call", json!({"name": name, "arguments": {}}));
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(!text.contains("read-only"), "{name} was refused: {text}");
    }

    let diff = served.request(
        2,
        "tools/call",
        json!({"name": "git_diff", "arguments": {}}),
    );
    assert_eq!(diff["isError"], false, "{diff}");
    let status = served.request(
        3,
        "tools/call",
        json!({"name": "git_status", "arguments": {}}),
    );
    assert_eq!(status["isError"], false, "{status}");
    let after = (
        std::fs::read(&index).unwrap(),
        std::fs::metadata(&index).unwrap().modified().unwrap(),
    );
    assert!(after.0 == before.0, "git_diff changed .git/index");
    assert_eq!(after.1, before.1, "git_diff touched .git/index");
}
