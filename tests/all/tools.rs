//! The first-party `fs` and `search` plugins, called through the sandbox.

use crate::support::text::has;
use crate::*;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

async fn builtins(sb: &Sandbox) -> Plugins {
    let m = sb.manifest_with_defaults("").expect("manifest");
    runtime().load(&m).await.expect("builtins load")
}

fn invalid(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::InvalidArguments(m)) => m,
        other => panic!("expected invalid arguments, got {other:?}"),
    }
}

/// The output of a call that must succeed.
async fn content(p: &Plugins, tool: &str, args: Value) -> String {
    let shown = args.to_string();
    call(p, tool, args)
        .await
        .unwrap_or_else(|e| panic!("{tool} {shown}: {e:?}"))
        .content
}

#[tokio::test]
async fn read_file_numbers_pages_and_caps() {
    let sb = Sandbox::new();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    sb.write("ten.txt", &text);
    let p = builtins(&sb).await;
    let out = call(&p, "read_file", json!({"path": "ten.txt"}))
        .await
        .expect("read");
    assert!(
        out.content.starts_with("     1\tline 1\n     2\tline 2\n"),
        "{}",
        out.content
    );
    assert_eq!(
        content(
            &p,
            "read_file",
            json!({"path": "ten.txt", "offset": 4, "limit": 2})
        )
        .await,
        "     4\tline 4\n     5\tline 5\n[showing lines 4-5 of 10; continue with offset 6]\n"
    );
    let out = call(&p, "read_file", json!({"path": "ten.txt", "offset": 40}))
        .await
        .expect("past end");
    has(&out.content, "past the end: the file has 10 lines");

    std::fs::write(sb.ws().join("blob.bin"), [0u8, 1, 2, 3, 0, 255]).expect("bin");
    let msg = failed(call(&p, "read_file", json!({"path": "blob.bin"})).await);
    has(&msg, "binary");

    sb.write("big.txt", &"0123456789abcdef\n".repeat(20_000));
    let out = call(&p, "read_file", json!({"path": "big.txt", "limit": 1}))
        .await
        .expect("big");
    assert!(
        out.content
            .contains("only the first 262144 bytes were read"),
        "{}",
        out.content
    );

    let msg = failed(call(&p, "read_file", json!({"path": "nope.txt"})).await);
    assert_eq!(msg, "`nope.txt` does not exist");
}

#[tokio::test]
async fn paths_must_stay_in_the_workspace() {
    let sb = Sandbox::new();
    let p = builtins(&sb).await;
    let msg = invalid(call(&p, "read_file", json!({"path": "/etc/passwd"})).await);
    has(&msg, "absolute path");
    let msg = invalid(call(&p, "read_file", json!({"path": "../outside/secret.txt"})).await);
    has(&msg, "leads out of the workspace");
    std::os::unix::fs::symlink(sb.outside().join("secret.txt"), sb.ws().join("link"))
        .expect("symlink");
    let msg = failed(call(&p, "read_file", json!({"path": "link"})).await);
    has(&msg, "outside what this plugin may access");
    assert!(!msg.contains(SECRET));
    let msg = invalid(
        call(
            &p,
            "write_file",
            json!({"path": "../evil.txt", "content": "x"}),
        )
        .await,
    );
    has(&msg, "leads out");
    assert!(!sb.root.path().join("evil.txt").exists());
}

#[tokio::test]
async fn write_and_edit() {
    let sb = Sandbox::new();
    let p = builtins(&sb).await;
    assert_eq!(
        content(
            &p,
            "write_file",
            json!({"path": "src/new.rs", "content": "fn a() {}\nfn a() {}\n"})
        )
        .await,
        "created `src/new.rs` (20 bytes, 2 lines)"
    );
    // An edit of `src/new.rs` that replaces `old` by `new`.
    let edit = |old: &str, new: &str| {
        call(
            &p,
            "edit_file",
            json!({"path": "src/new.rs", "old_string": old, "new_string": new}),
        )
    };
    let msg = failed(edit("fn a()", "fn b()").await);
    assert!(
        msg.contains("occurs 2 times") && msg.contains("at lines 1, 2"),
        "{msg}"
    );
    let msg = failed(edit("fn z()", "fn b()").await);
    has(&msg, "was not found");
    let out = edit("fn a() {}\nfn a", "fn a() {}\nfn b")
        .await
        .expect("unique edit");
    assert_eq!(out.content, "replaced 1 occurrence in `src/new.rs`");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("src/new.rs")).expect("r"),
        "fn a() {}\nfn b() {}\n"
    );
    assert_eq!(content(&p, "edit_file", json!({"path": "src/new.rs", "old_string": "{}", "new_string": "{ }", "replace_all": true})).await, "replaced 2 occurrences in `src/new.rs`");
    let msg = invalid(edit("x", "x").await);
    has(&msg, "nothing would change");
    match call(&p, "write_file", json!({"path": "x.txt"})).await {
        Err(ToolError::InvalidArguments(m)) => {
            assert!(m.contains("missing field `content`"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn list_files_respects_gitignore_depth_and_limit() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "target/\n*.log\n");
    sb.write("src/main.rs", "fn main() {}\n");
    sb.write("src/deep/a/b.rs", "\n");
    sb.write("target/junk.o", "\n");
    sb.write("debug.log", "\n");
    let p = builtins(&sb).await;
    let out = call(&p, "list_files", json!({})).await.expect("list");
    assert_eq!(
        out.content,
        "hello.txt\nsrc/\nsrc/deep/\nsrc/deep/a/\nsrc/main.rs"
    );
    let out = call(&p, "list_files", json!({"depth": 4}))
        .await
        .expect("deeper");
    has(&out.content, "src/deep/a/b.rs");
    assert_eq!(
        content(&p, "list_files", json!({"depth": 1})).await,
        "hello.txt\nsrc/"
    );
    let out = call(&p, "list_files", json!({"limit": 2}))
        .await
        .expect("limit");
    assert!(
        out.content
            .starts_with("hello.txt\nsrc/\n[listing stopped at 2 entries"),
        "{}",
        out.content
    );
    let out = call(&p, "list_files", json!({"all": true, "depth": 1}))
        .await
        .expect("all");
    assert!(
        out.content.contains("target/") && out.content.contains("debug.log"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn grep_finds_with_context_and_globs() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "ignored/\n");
    sb.write(
        "src/main.rs",
        "use std::io;\n\nfn main() {\n    println!(\"hi\");\n}\n",
    );
    sb.write("src/lib.rs", "pub fn main_helper() {}\n");
    sb.write("docs/notes.md", "fn main is documented here\n");
    sb.write("ignored/copy.rs", "fn main() {}\n");
    let p = builtins(&sb).await;
    assert_eq!(
        content(&p, "grep", json!({"pattern": "fn main"})).await,
        "docs/notes.md:1:fn main is documented here\nsrc/lib.rs:1:pub fn main_helper() {}\nsrc/main.rs:3:fn main() {\n"
    );
    assert_eq!(
        content(
            &p,
            "grep",
            json!({"pattern": "fn main\\(", "include": ["*.rs"], "context": 1})
        )
        .await,
        "src/main.rs-2-\nsrc/main.rs:3:fn main() {\nsrc/main.rs-4-    println!(\"hi\");\n"
    );
    assert_eq!(content(&p, "grep", json!({"pattern": "FN MAIN", "ignore_case": true, "exclude": ["docs/**"], "files_only": true})).await, "src/lib.rs\nsrc/main.rs\n");
    let out = call(&p, "grep", json!({"pattern": "fn", "max_results": 1}))
        .await
        .expect("cap");
    has(&out.content, "[stopped after 1 results");
    assert_eq!(
        content(&p, "grep", json!({"pattern": "nothing-matches-this"})).await,
        "no matches for `nothing-matches-this` under `.`\n"
    );
    let msg = invalid(call(&p, "grep", json!({"pattern": "fn ("})).await);
    has(&msg, "not a valid regex");
}

#[tokio::test]
async fn grep_below_the_root_keeps_the_root_ignore_rules() {
    let sb = Sandbox::new();
    sb.write(
        ".gitignore",
        "*.gen.rs
",
    );
    sb.write(
        "src/.gitignore",
        "!keep.gen.rs
",
    );
    sb.write("src/deep/a.rs", "needle\n");
    sb.write("src/deep/b.gen.rs", "needle\n");
    sb.write("src/deep/keep.gen.rs", "needle\n");
    sb.write("src/deep/.hidden.rs", "needle\n");
    let p = builtins(&sb).await;
    // Searching `src/deep`, the rules of `.` and `src` above it still apply.
    assert_eq!(
        content(
            &p,
            "grep",
            json!({"pattern": "needle", "path": "src/deep", "files_only": true})
        )
        .await,
        "src/deep/a.rs\nsrc/deep/keep.gen.rs\n"
    );
    assert_eq!(
        content(&p, "glob", json!({"pattern": "*.rs", "path": "src/deep"})).await,
        "src/deep/a.rs\nsrc/deep/keep.gen.rs"
    );
    // `all` turns the rules and hidden-file skipping off.
    assert_eq!(
        content(
            &p,
            "grep",
            json!({"pattern": "needle", "path": "src", "files_only": true, "all": true})
        )
        .await,
        "src/deep/.hidden.rs\nsrc/deep/a.rs\nsrc/deep/b.gen.rs\nsrc/deep/keep.gen.rs\n"
    );
}

#[tokio::test]
async fn glob_matches_paths() {
    let sb = Sandbox::new();
    sb.write("src/a.rs", "");
    sb.write("src/sub/b.rs", "");
    sb.write("Cargo.toml", "");
    let p = builtins(&sb).await;
    assert_eq!(
        content(&p, "glob", json!({"pattern": "**/*.rs"})).await,
        "src/a.rs\nsrc/sub/b.rs"
    );
    assert_eq!(
        content(&p, "glob", json!({"pattern": "*.rs", "path": "src"})).await,
        "src/a.rs"
    );
    assert_eq!(
        content(&p, "glob", json!({"pattern": "*.toml"})).await,
        "Cargo.toml"
    );
}

#[tokio::test]
async fn search_plugin_cannot_write() {
    // `search` is granted `.` read-only by the defaults; its tools only read.
    let sb = Sandbox::new();
    let p = builtins(&sb).await;
    let search = p.plugin_for("grep").expect("grep");
    assert!(search.tools().iter().all(|t| t.is_read_only()));
    let fs = p.plugin_for("write_file").expect("write_file");
    assert!(
        !fs.tools()
            .iter()
            .find(|t| t.name == "write_file")
            .expect("spec")
            .is_read_only()
    );
}

#[tokio::test]
async fn tool_schemas_are_json_schema_objects() {
    let sb = Sandbox::new();
    let p = builtins(&sb).await;
    for (_, spec) in p.tools() {
        assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
        // `git_status` takes no arguments and has no `properties`.
        let props = &spec.input_schema["properties"];
        assert!(props.is_object() || props.is_null(), "{}", spec.name);
        assert!(!spec.description.is_empty());
    }
    let names: Vec<&str> = p.tools().iter().map(|(_, t)| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "apply_patch",
            "edit_file",
            "git_add",
            "git_branch",
            "git_commit",
            "git_diff",
            "git_log",
            "git_show",
            "git_status",
            "glob",
            "grep",
            "list_files",
            "read_file",
            "run_command",
            "web_fetch",
            "write_file"
        ]
    );
}
