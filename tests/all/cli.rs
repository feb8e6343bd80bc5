//! The `corral` binary, run as a user would, with its own config and cache
//! directories.

use crate::support::output::{stderr, stdout};
use crate::support::run::argv_with;
use crate::support::text::{has, has_all, lacks, lacks_all};
use crate::*;
use corral_test_programs::EXAMPLE;

/// `corral tool call TOOL --args ARGS` in a fresh workspace holding only
/// `file` (its path and text); fails the test unless it succeeds, and
/// returns what it printed.
fn call_over(file: (&str, &str), tool: &str, args: &str) -> String {
    let sb = Sandbox::new();
    sb.write(file.0, file.1);
    let o = Cli::new().run(&sb.ws(), &["tool", "call", tool, "--args", args]);
    assert!(o.status.success(), "{tool}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn read_file_prints_the_file() {
    let shown = call_over(
        ("README.md", "# Title\n\nBody text.\n"),
        "read_file",
        r#"{"path":"README.md"}"#,
    );
    assert_eq!(shown, "     1\t# Title\n     2\t\n     3\tBody text.\n");
}

#[test]
fn grep_lists_file_and_line() {
    let shown = call_over(
        ("src/main.rs", "// x\nfn main() {}\n"),
        "grep",
        r#"{"pattern":"fn main"}"#,
    );
    assert_eq!(shown, "src/main.rs:2:fn main() {}\n");
}

#[test]
fn tool_errors_exit_non_zero_with_message() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(
        &sb.ws(),
        &argv_with("tool call read_file --args", r#"{"path":"/etc/passwd"}"#),
    );
    assert_eq!(o.status.code(), Some(1));
    has(&stderr(&o), "absolute path");
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "read_file", "--args", "not json"],
    );
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), "--args must be a JSON object");
    let o = cli.run(&sb.ws(), &["tool", "call", "no_such_tool"]);
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), "available: apply_patch, edit_file, git_add,");
}

#[test]
fn json_output_of_a_call() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "list_files", "--args", "{}", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["ok"]["content"], "hello.txt");
    assert_eq!(v["ok"]["data"]["entries"][0], "hello.txt");
}

#[test]
fn inspect_lists_imports_and_tools_of_an_sdk_plugin() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["plugins", "inspect", EXAMPLE]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    has_all(
        &text,
        &[
            "corral:plugin/types@0.1.0",
            "wasi:filesystem/preopens@0.2",
            "files (only directories in grants.fs)",
            "corral:plugin/tool@0.1.0",
            "word_count [read]",
        ],
    );
    let o = cli.run(&sb.ws(), &["plugins", "inspect", EXAMPLE, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert!(
        v["imports"]
            .as_array()
            .expect("imports")
            .iter()
            .any(|i| i["capability"] == "files")
    );
}

#[test]
fn example_plugin_runs_from_a_project_manifest() {
    let (sb, cli) = workspace_and_cli();
    sb.write("corral.toml", &format!(
        "[plugins.example]\nsource = {EXAMPLE:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n"
    ));
    let o = cli.run(
        &sb.ws(),
        &argv_with("tool call word_count --args", r#"{"path":"hello.txt"}"#),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "4\n");
    let o = cli.run(&sb.ws(), &["plugins", "list"]);
    let text = stdout(&o);
    has_all(
        &text,
        &[
            "example\n  source",
            "grants   fs . (ro)",
            "tools    word_count",
        ],
    );
}

#[test]
fn a_bad_project_manifest_is_reported_with_its_line() {
    let cli = Cli::untrusting();
    let sb = Sandbox::with_manifest("[plugins.fs]\nsource = \"builtin:fs\"\nbogus = 1\n");
    // Reviewing it for trust reports the mistake; it cannot be trusted as it is.
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    has(&err, "corral.toml:3:1: unknown field `bogus`");
    // A user manifest with the same mistake stops every command.
    cli.write_user_manifest("[plugins.fs]\nsource = \"builtin:fs\"\nbogus = 1\n");
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2));
    has(&stderr(&o), "corral/corral.toml:3:1: unknown field `bogus`");
}

#[test]
fn warm_tools_list_compiles_nothing() {
    let (sb, cli) = workspace_and_cli();
    let own_cache = cli.home.path().join("cache");
    let own = own_cache.to_str().expect("utf-8 path");
    let run = |args: &[&str]| cli.run_env(&sb.ws(), args, &[("XDG_CACHE_HOME", own)]);
    // Cold, the built-ins come compiled by the build: nothing is compiled.
    let cold = run(&["-v", "tools", "list"]);
    assert!(cold.status.success(), "{}", stderr(&cold));
    let cold_log = stderr(&cold);
    let n = corral_manifest::DEFAULTS.matches("[plugins.").count();
    assert_eq!(
        cold_log.matches("precompiled by the build").count(),
        n,
        "{cold_log}"
    );
    assert!(!cold_log.contains("compiled ("), "{cold_log}");
    // Warm, the tools come from the description cache: no component is
    // compiled or even loaded.
    let warm = run(&["-v", "tools", "list"]);
    let warm_log = stderr(&warm);
    lacks_all(
        &warm_log,
        &["compile cache hit", "precompiled by the build"],
    );
    assert!(!warm_log.contains("compiled ("), "{warm_log}");
    assert_eq!(stdout(&cold), stdout(&warm));
    has(&stdout(&warm), "read_file");
    // Without that cache every component is loaded, compiled by the build.
    let off = [("XDG_CACHE_HOME", own), ("CORRAL_TOOL_CACHE", "off")];
    let loaded = cli.run_env(&sb.ws(), &["-v", "tools", "list"], &off);
    let loaded_log = stderr(&loaded);
    assert_eq!(
        loaded_log.matches("precompiled by the build").count(),
        n,
        "{loaded_log}"
    );
    assert!(!loaded_log.contains("compiled ("), "{loaded_log}");
    assert_eq!(stdout(&loaded), stdout(&warm));
    // Without the build's code, every built-in is compiled once, then
    // loaded from the compile cache.
    let own_code = [
        ("XDG_CACHE_HOME", own),
        ("CORRAL_TOOL_CACHE", "off"),
        ("CORRAL_PRECOMPILED", "off"),
    ];
    let compiled = cli.run_env(&sb.ws(), &["-v", "tools", "list"], &own_code);
    let log = stderr(&compiled);
    has(&log, "CORRAL_PRECOMPILED=off");
    assert_eq!(log.matches("compiled (").count(), n, "{log}");
    assert_eq!(stdout(&compiled), stdout(&warm));
    let hit = cli.run_env(&sb.ws(), &["-v", "tools", "list"], &own_code);
    let log = stderr(&hit);
    assert_eq!(log.matches("compile cache hit").count(), n, "{log}");
    assert!(!log.contains("compiled ("), "{log}");
    // A damaged cache entry is recompiled, not trusted.
    let dir = cli.home.path().join("cache/corral/components");
    for entry in std::fs::read_dir(&dir).expect("cache dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            let mut data = std::fs::read(&path).expect("read");
            let mid = data.len() / 2;
            data[mid] ^= 0xff;
            std::fs::write(&path, data).expect("write");
        }
    }
    let again = cli.run_env(&sb.ws(), &["-v", "tools", "list"], &own_code);
    assert!(again.status.success());
    let log = stderr(&again);
    assert!(log.contains("damaged; recompiling"), "{log}");
    assert_eq!(log.matches("compiled (").count(), n, "{log}");
}

#[test]
fn tools_list_json_has_schemas() {
    let (sb, cli) = workspace_and_cli();
    let o = cli.run(&sb.ws(), &["tools", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let grep = v
        .as_array()
        .expect("list")
        .iter()
        .find(|t| t["name"] == "grep")
        .expect("grep");
    assert_eq!(grep["plugin"], "search");
    assert_eq!(grep["effects"], serde_json::json!(["read"]));
    assert_eq!(
        grep["input_schema"]["required"],
        serde_json::json!(["pattern"])
    );
}

#[test]
fn an_untrusted_project_manifest_adds_nothing() {
    let sb = Sandbox::new();
    let toml = format!(
        "[plugins.example]\nsource = {EXAMPLE:?}\ngrants.fs = [{{ path = \".\", access = \"ro\" }}]\n"
    );
    sb.write("corral.toml", &toml);
    let cli = Cli::untrusting();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    lacks(&stdout(&o), "word_count");
    has(&stderr(&o), "is not trusted yet and was ignored");
    // Without a terminal, trust needs --yes.
    let o = cli.run(&sb.ws(), &["trust"]);
    assert_eq!(o.status.code(), Some(2));
    has(&stdout(&o), "is not trusted yet");
    let o = cli.run(&sb.ws(), &["trust", "--yes"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    has(&stdout(&o), "word_count");
    // A changed file is untrusted again, and trust shows what changed.
    sb.write(
        "corral.toml",
        &toml.replace("access = \"ro\"", "access = \"rw\""),
    );
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    lacks(&stdout(&o), "word_count");
    let o = cli.run(&sb.ws(), &["trust"]);
    let review = stdout(&o);
    has_all(
        &review,
        &[
            "changed since you trusted it",
            "- grants.fs = [{ path = \".\", access = \"ro\" }]",
            "+ grants.fs = [{ path = \".\", access = \"rw\" }]",
        ],
    );
}
