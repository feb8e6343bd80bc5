//! `corral tool call` is a front-end like any other: a call typed on the
//! command line goes through the same steps as the model's, so what the
//! manifest forbids stays forbidden — a deny rule, a `before_tool` hook
//! that blocks, read-only mode — and the typed call's approval widens no
//! grant. Each through the binary, with a control call that the same
//! manifest lets through.

use crate::support::run::tool_call;
use crate::support::text::has;
use crate::*;
use serde_json::{Value, json};

fn write(path: &str) -> Value {
    json!({ "path": path, "content": "x\n" })
}

/// The JSON answer of `tool call --json`.
fn answer(cli: &Cli, sb: &Sandbox, tool: &str, args: Value) -> (Option<i32>, Value) {
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", tool, "--json", "--args", &args.to_string()],
    );
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), v)
}

#[test]
fn a_deny_rule_holds_for_a_typed_call() {
    let sb = Sandbox::with_manifest("[policy]\ndeny = [\"write_file(secret/**)\"]\n");
    std::fs::create_dir(sb.ws().join("secret")).expect("secret/");
    let cli = Cli::new();
    let (code, v) = answer(&cli, &sb, "write_file", write("secret/planted.txt"));
    assert_ne!(code, Some(0), "{v}");
    assert_eq!(v["error"]["kind"], "refused", "{v}");
    let message = v["error"]["message"].as_str().expect("message");
    has(message, "write_file(secret/**)");
    assert!(!sb.ws().join("secret/planted.txt").exists());
    // Spelled another way, the path is the same path.
    let (code, v) = answer(
        &cli,
        &sb,
        "write_file",
        write("./secret/../secret/again.txt"),
    );
    assert_ne!(code, Some(0), "{v}");
    assert!(!sb.ws().join("secret/again.txt").exists());
    // The control: a path no rule names is written.
    let o = tool_call(&cli, &sb, "write_file", write("fine.txt"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(sb.ws().join("fine.txt").exists());
}

#[test]
fn a_blocking_hook_holds_for_a_typed_call() {
    let sb = Sandbox::with_manifest(
        r#"
[plugins.no-pwn]
source = "builtin:hook-block"
config = { patterns = '["pwned.txt"]' }

[hooks]
before_tool = [{ plugin = "no-pwn", tools = ["write_file"] }]
"#,
    );
    let cli = Cli::new();
    let (code, v) = answer(&cli, &sb, "write_file", write("pwned.txt"));
    assert_ne!(code, Some(0), "{v}");
    assert!(!sb.ws().join("pwned.txt").exists(), "{v}");
    let o = tool_call(&cli, &sb, "write_file", write("fine.txt"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(sb.ws().join("fine.txt").exists());
}

#[test]
fn read_only_mode_holds_for_a_typed_call() {
    let sb = Sandbox::with_manifest("[policy]\nmode = \"read-only\"\n");
    sb.write("kept.txt", "kept\n");
    let cli = Cli::new();
    let (code, v) = answer(&cli, &sb, "write_file", write("kept.txt"));
    assert_ne!(code, Some(0), "{v}");
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("kept.txt")).expect("kept"),
        "kept\n"
    );
    // Reading is what read-only mode is for.
    let (code, v) = answer(&cli, &sb, "read_file", json!({ "path": "kept.txt" }));
    assert_eq!(code, Some(0), "{v}");
    assert!(
        v["ok"]["content"]
            .as_str()
            .is_some_and(|c| c.contains("kept")),
        "{v}"
    );
}
