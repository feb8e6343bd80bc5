//! Errors a user can act on, each through the binary: what happened, why,
//! and the fix, never a Rust `Debug` dump.

use crate::support::manifest::openai_plugin;
use crate::support::output::{stderr, stdout};
use crate::support::text::{has, has_all, lacks};
use crate::*;
use corral_test_programs::ECHO;

/// What a user reads of a run: stdout and stderr together.
fn both(o: &std::process::Output) -> String {
    format!("{}\n{}", stdout(o), stderr(o))
}

/// No Rust `Debug` text of an error reaches the user.
fn assert_no_debug(text: &str) {
    for leak in [
        "Os {",
        "code: 111",
        "ConnectionRefused",
        "expected=[",
        "ErrorCode::",
    ] {
        assert!(!text.contains(leak), "`{leak}` leaked:\n{text}");
    }
}

#[test]
fn tools_list_keeps_the_description_past_e_g() {
    let sb = Sandbox::new();
    let o = Cli::new().run(&sb.ws(), &["tools", "list"]);
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("run_command "))
        .unwrap_or_else(|| panic!("no run_command line:\n{out}"));
    has(line, "e.g. `cargo test`");
}

/// Loads the plugin `name` from `name.wasm` holding `bytes`; fails the test
/// unless `tools list` fails saying each of `says`, in words (no debug
/// print). Returns what it said.
fn plugin_refused(name: &str, bytes: &[u8], says: &[&str]) -> String {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join(format!("{name}.wasm")), bytes).expect("plugin");
    sb.write(
        "corral.toml",
        &format!("[plugins.{name}]\nsource = \"{name}.wasm\"\n"),
    );
    let o = Cli::new().run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{name}: {err}");
    has_all(&err, says);
    assert_no_debug(&err);
    err
}

#[test]
fn a_text_file_as_a_plugin_says_it_is_not_webassembly() {
    plugin_refused(
        "tool",
        b"#!/bin/sh\necho not wasm\n",
        &[
            "plugin `tool`",
            "the file is text, not WebAssembly",
            "wasm32-wasip2",
        ],
    );
}

#[test]
fn a_core_module_says_it_must_be_a_component_and_how() {
    // The smallest core module: magic, version 1, no sections.
    let err = plugin_refused(
        "core",
        b"\0asm\x01\0\0\0",
        &[
            "is a core WebAssembly module",
            "only components",
            "wasm-tools component new",
        ],
    );
    lacks(&err, "component parser");
}

#[test]
fn a_refused_connection_says_so_in_words() {
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sb = Sandbox::with_manifest(&format!(
        "[agent]\nprovider = \"openai\"\n\n{}",
        openai_plugin(
            port,
            "model = \"gpt-4.1\"",
            "limits = { timeout_ms = 30000 }"
        )
    ));
    let o = Cli::new().run_env(&sb.ws(), &["run", "hi"], &[("TEST_OPENAI_KEY", "k")]);
    let text = both(&o);
    assert!(!o.status.success(), "{text}");
    has_all(&text, &["connection was refused", "base_url"]);
    assert_no_debug(&text);
}

#[test]
fn an_openai_entry_without_a_model_is_a_configuration_error() {
    let sb = Sandbox::with_manifest(&format!(
        "[agent]\nprovider = \"openai\"\n\n{}",
        openai_plugin(1, "", "")
    ));
    let o = Cli::new().run_env(&sb.ws(), &["run", "hi"], &[("TEST_OPENAI_KEY", "k")]);
    let text = both(&o);
    assert!(!o.status.success(), "{text}");
    has(&text, "configuration error");
    assert!(
        text.contains("model = \\\"gpt-4.1\\\"") || text.contains("model = \"gpt-4.1\""),
        "{text}"
    );
    lacks(&text, "protocol");
}

#[test]
fn a_tool_name_clash_names_tool_prefix() {
    let sb = Sandbox::new();
    // Different settings, so both are described and both export `echo`.
    sb.write(
        "corral.toml",
        &plugins_toml(&[
            ("one", ECHO, "config = { n = \"1\" }"),
            ("two", ECHO, "config = { n = \"2\" }"),
        ]),
    );
    let o = Cli::new().run(&sb.ws(), &["tools", "list"]);
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    has_all(&err, &["exported by two plugins", "tool_prefix = \"two_\""]);

    // The same component with the same settings: the other message.
    sb.write(
        "corral.toml",
        &plugins_toml(&[("one", ECHO, ""), ("two", ECHO, "")]),
    );
    let err = stderr(&Cli::new().run(&sb.ws(), &["tools", "list"]));
    has(&err, "tool_prefix = \"two_\"");
}

#[test]
fn bare_resume_mentions_last() {
    let sb = Sandbox::new();
    let o = Cli::new().run(&sb.ws(), &["resume"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    has_all(&err, &["corral resume --last", "corral sessions"]);
    lacks(&err, "<ID>");
}

/// The README's quick start, then `resume --last -p` and `compact` on the
/// session it left: both work on the demo cassette.
#[test]
fn the_quick_start_session_resumes_and_compacts() {
    let sb = Sandbox::new();
    sb.write("README.md", "# A project\n\nIt does things.\n");
    let cli = Cli::new();
    let ws = sb.ws();
    let o = cli.run(
        &ws,
        &["run", "--provider", "replay", "What is this project?"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", both(&o));
    let o = cli.run(&ws, &["resume", "--last", "-p", "And the tests?"]);
    let text = both(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    has(&text, "last one the demo cassette recorded");
    lacks(&text, "[agent.models.\"\"]");
    let o = cli.run(&ws, &["sessions", "--json"]);
    let sessions: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    let o = cli.run(&ws, &["compact", &id]);
    let text = both(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    has(&text, format!("compacted {id}"));
    // Past the recorded turns, the cassette says what to do.
    let o = cli.run(&ws, &["resume", "--last", "-p", "one more"]);
    let o = if o.status.success() {
        cli.run(&ws, &["resume", "--last", "-p", "and another"])
    } else {
        o
    };
    let text = both(&o);
    if !o.status.success() {
        has_all(
            &text,
            &["plays back only what it recorded", "--provider openai"],
        );
    }
}

#[test]
fn verbose_tools_list_logs_where_the_tools_came_from_on_a_warm_run() {
    let (sb, cli) = workspace_and_cli();
    // The first run fills the caches; the second is the warm one.
    let _ = cli.run(&sb.ws(), &["tools", "list"]);
    let o = cli.run(&sb.ws(), &["-v", "tools", "list"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("tools from the description cache") || err.contains("compile cache hit"),
        "{err}"
    );
    has(&err, "plugin=fs");
}
