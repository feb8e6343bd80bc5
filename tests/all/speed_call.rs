//! The call path at its floor, and what it must still do: the granted
//! directories are opened only when a call looks at its files (and still
//! refused when one moved), a read's provenance path is taken from the open
//! itself when no symlink was on the way (and from the kernel when one was),
//! and `list_files` lists a directory in one host call with the same
//! entries and rules as before.

use crate::support::cassette::{answer_turn, call_turn};
use crate::support::events::{events, find, label, labels};
use crate::support::guard::cassette;
use crate::support::output::printed;
use crate::support::run::argv_with;
use crate::support::text::lacks;
use crate::*;
use corral_test_programs::{ADVERSARY, ECHO};
use serde_json::json;

/// Host calls of the last sandboxed call, from the runtime's debug log.
fn host_calls(stderr: &str) -> u64 {
    stderr
        .lines()
        .rfind(|l| l.contains("call finished"))
        .and_then(|l| l.split("host_calls=").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no host_calls in the log:\n{stderr}"))
}

#[test]
fn list_files_lists_a_directory_in_one_host_call_with_the_same_rules() {
    let sb = Sandbox::new();
    let mut want = Vec::new();
    for i in 0..300 {
        sb.write(&format!("big/f{i:03}.txt"), "x\n");
        want.push(format!("big/f{i:03}.txt"));
    }
    sb.write("big/sub/deep/a.txt", "x\n");
    want.insert(0, "big/sub/".to_owned());
    want.sort_by(|a, b| a.trim_end_matches('/').cmp(b.trim_end_matches('/')));
    // Ignored by the root's rules, hidden, and a symlink (listed, not followed).
    sb.write(".gitignore", "*.log\n");
    sb.write("big/trace.log", "x\n");
    sb.write("big/.hidden", "x\n");
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("big/zlink")).expect("symlink");
    want.push("big/zlink".to_owned());

    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &argv_with(
            "tool call list_files -vv --args",
            r#"{"path":"big","depth":1,"limit":1000}"#,
        ),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let got: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(got, want);
    // Through `std::fs` each entry cost at least two host calls.
    let calls = host_calls(&stderr);
    assert!(calls < 50, "{calls} host calls for 302 entries");

    // Depth 2 descends one level more; `all` shows what the rules hid.
    let o = cli.run(
        &sb.ws(),
        &argv_with(
            "tool call list_files --args",
            r#"{"path":"big","depth":2,"all":true,"limit":1000}"#,
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let got: Vec<&str> = out.lines().collect();
    for entry in ["big/.hidden", "big/trace.log", "big/sub/deep/", "big/zlink"] {
        assert!(got.contains(&entry), "{entry} missing from {got:?}");
    }
    assert!(!got.contains(&"big/sub/deep/a.txt"), "{got:?}");
}

#[test]
fn list_files_still_refuses_what_it_refused() {
    let (sb, cli) = workspace_and_cli();
    for (args, why) in [
        (r#"{"path":"../outside"}"#, "leads out of the workspace"),
        (r#"{"path":"/etc"}"#, "absolute path"),
        (r#"{"path":"hello.txt"}"#, "is not a directory"),
        (r#"{"path":"missing"}"#, "does not exist"),
    ] {
        let o = cli.run(&sb.ws(), &["tool", "call", "list_files", "--args", args]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args}");
        assert!(stderr.contains(why), "{args}: {stderr}");
        lacks(&stderr, SECRET);
    }
    // A symlink leading out is listed as a name, never entered.
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("out")).expect("symlink");
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "list_files", "--args", r#"{"path":"out"}"#],
    );
    assert_ne!(o.status.code(), Some(0));
    let all = printed(&o);
    lacks(&all, "secret.txt");
}

#[test]
fn reads_are_labelled_by_the_file_opened_with_or_without_a_symlink() {
    let sb = Sandbox::new();
    sb.write(".env", "API_KEY=sk-test\n");
    sb.write("notes.txt", "nothing secret here\n");
    sb.write("sub/keep.txt", "x\n");
    sb.write("vendor/lib/README.md", "# lib\n");
    std::os::unix::fs::symlink(".env", sb.ws().join("alias.txt")).expect("symlink");
    sb.write(
        "corral.toml",
        "[policy]\nmode = \"auto-edit\"\n\n\
         [plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\
         config = { cassette = \"guard.cassette.json\" }\n",
    );
    cassette(
        &sb,
        &[
            call_turn("c1", "read_file", json!({"path": "notes.txt"})),
            call_turn("c2", "read_file", json!({"path": "alias.txt"})),
            call_turn("c3", "read_file", json!({"path": "sub/../.env"})),
            call_turn("c4", "read_file", json!({"path": "vendor/lib/README.md"})),
            call_turn(
                "c5",
                "grep",
                json!({"pattern": "API_KEY", "all": true, "path": "."}),
            ),
            answer_turn("Done."),
        ],
    );
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &["run", "--provider", "replay", "--json", "Read them"],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let events = events(&o);
    let held = |id: &str| -> Vec<(String, String)> {
        labels(find(&events, "tool_call_end", id))
            .into_iter()
            .filter(|(kind, _)| kind != "workspace")
            .collect()
    };
    assert_eq!(held("c1"), vec![]);
    // The symlink counts as what it points to.
    assert_eq!(held("c2"), vec![label("sensitive", ".env")]);
    assert_eq!(held("c3"), vec![label("sensitive", ".env")]);
    assert_eq!(held("c4"), vec![label("untrusted", "vendor/lib/README.md")]);
    let grep = held("c5");
    assert!(grep.contains(&label("sensitive", ".env")), "{grep:?}");
}

#[tokio::test]
async fn a_call_that_never_looks_at_its_files_does_not_open_them() {
    let sb = Sandbox::new();
    sb.write("docs/guide.md", "the guide\n");
    let grant = r#"grants.fs = [{ path = "docs", access = "ro" }]"#;
    let toml = plugins_toml(&[("echo", ECHO, grant), ("adversary", ADVERSARY, grant)]);
    let p = sb.load(&toml).await.expect("load");
    // A grant swapped for a symlink after loading (a program a plugin runs
    // could do it).
    std::fs::remove_dir_all(sb.ws().join("docs")).expect("rm");
    std::os::unix::fs::symlink(sb.outside(), sb.ws().join("docs")).expect("symlink");
    // A call that never asks for its directories runs.
    let out = call(&p, "echo", json!({"text": "hi"})).await.expect("echo");
    assert_eq!(out.content, "hi");
    // One that does is refused, whichever interface it reaches them by.
    for (tool, args) in [
        ("read_path", json!({"path": "docs/secret.txt"})),
        ("files_list", json!({"path": "docs"})),
    ] {
        let msg = sandbox_err(call(&p, tool, args).await);
        assert!(
            msg.contains("is no longer what the manifest granted"),
            "{tool}: {msg}"
        );
        lacks(&msg, SECRET);
    }
}
