//! What a plugin makes the host hold is budgeted per call, and what a plugin
//! or a model writes reaches the terminal inert. Each test drives the
//! `corral` binary against the malicious `budgets` guest (no grants) or a
//! replayed model.

use crate::support::output::assert_exit;
use crate::support::output::{stderr, stdout};
use crate::support::run::argv_with;
use crate::support::run::tool_call;
use crate::support::text::{has, lacks, tail};
use crate::*;
use corral_test_programs::BUDGETS;
use std::process::Output;

const ESC: u8 = 0x1b;

/// Fails if a raw escape byte (or a C1 CSI) reached stdout or stderr.
fn assert_inert(o: &Output, what: &str) {
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        assert!(
            !bytes.contains(&ESC),
            "{what}: raw ESC on {stream}: {}",
            String::from_utf8_lossy(bytes)
        );
        let text = String::from_utf8_lossy(bytes);
        assert!(
            !text.contains('\u{9b}'),
            "{what}: raw C1 CSI on {stream}: {text}"
        );
    }
}

/// A workspace whose manifest adds the budgets guest in `mode`, with `rest`
/// (limits, say) in its entry.
fn workspace(mode: &str, rest: &str) -> Sandbox {
    Sandbox::with_manifest(&plugin_toml(
        "budgets",
        BUDGETS,
        &format!("config = {{ mode = {mode:?} }}\n{rest}"),
    ))
}

#[test]
fn header_maps_without_any_grant_are_stopped_by_the_call_budget() {
    let sb = workspace("", "");
    let cli = Cli::new();
    let o = tool_call(&cli, &sb, "fields_flood", "{}");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}{}", stdout(&o));
    lacks(&stdout(&o), "holding");
    assert!(
        err.contains("more than 1024 host objects") && err.contains("HTTP header maps"),
        "{err}"
    );
    // The host is unharmed: the next call in the same configuration runs.
    let o = tool_call(&cli, &sb, "escapes", "{}");
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Fails the test, showing the last `shown` bytes of `text`, unless it
/// contains every one of `needles`.
#[track_caller]
fn has_near_end(text: &str, needles: &[&str], shown: usize) {
    for needle in needles {
        assert!(text.contains(needle), "{}", tail(text, shown));
    }
}

/// Fails the test unless the command printed less than `limit` bytes to
/// stderr, saying how many bytes of `what`.
fn assert_stderr_under(o: &std::process::Output, limit: usize, what: &str) {
    assert!(o.stderr.len() < limit, "{} bytes of {what}", o.stderr.len());
}

#[test]
fn log_lines_are_capped_per_call_not_only_per_line() {
    let sb = workspace("", "");
    let cli = Cli::new();
    // 20 000 lines of 1000 bytes, each well under the per-line cap.
    let o = cli.run(
        &sb.ws(),
        &argv_with("-v tool call log_flood --args", r#"{"n":20000}"#),
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{}", tail(&err, 2000));
    assert_stderr_under(&o, 1 << 20, "log reached stderr");
    has_near_end(&err, &["dropped", "256 KiB per call"], 2000);
}

#[test]
fn huge_error_text_is_cut_to_the_output_limit() {
    let sb = workspace("", "limits = { output_kb = 64 }");
    let cli = Cli::new();
    let o = tool_call(&cli, &sb, "big_error", r#"{"n":8}"#);
    assert_eq!(o.status.code(), Some(1));
    assert_stderr_under(&o, 80 * 1024, "error text printed");
    let err = stderr(&o);
    has_near_end(
        &err,
        &["error text cut at 65536 of 8388608 bytes (limits.output_kb)"],
        300,
    );
}

#[test]
fn a_huge_describe_is_refused_at_load() {
    let sb = workspace("huge_describe", "");
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o).len());
    assert!(o.stdout.len() < 4096, "{} bytes printed", o.stdout.len());
    let err = stderr(&o);
    assert!(
        err.contains("plugin `budgets`")
            && err.contains("`describe` returned")
            && err.contains("limits.output_kb"),
        "{err}"
    );
}

#[test]
fn tool_names_with_spaces_or_escapes_are_refused_at_load() {
    let cli = Cli::new();
    for (mode, shown) in [
        ("name_with_space", "\"bad name\""),
        ("name_with_escape", "\"red\\u{1b}[31mtool\""),
    ] {
        let sb = workspace(mode, "");
        let o = cli.run(&sb.ws(), &["tools", "list"]);
        assert_eq!(o.status.code(), Some(2), "{mode}: {}", stdout(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("tool name {shown} is not allowed"))
                && err.contains("letters, digits, `_` or `-`"),
            "{mode}: {err}"
        );
        assert_inert(&o, mode);
    }
}

#[test]
fn tool_output_and_errors_are_printed_inert() {
    let sb = workspace("", "");
    let cli = Cli::new();
    let o = tool_call(&cli, &sb, "escapes", "{}");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_inert(&o, "tool call escapes");
    let out = stdout(&o);
    assert!(
        out.contains("clip\\x1b]52;c;cm0gLXJmIH4=\\x07")
            && out.contains("link\\x1b]8;;https://evil.example\\x1b\\here")
            && out.contains("red\\x1b[31mRED")
            && out.contains("c1\\u{9b}2J")
            && out.contains("\nsecond line"),
        "{out}"
    );

    let o = tool_call(&cli, &sb, "escapes_error", "{}");
    assert_eq!(o.status.code(), Some(1));
    assert_inert(&o, "tool call escapes_error");
    has(&stderr(&o), "failed: clip\\x1b]52;c;");

    // JSON keeps the exact text, escaped the JSON way.
    let o = cli.run(
        &sb.ws(),
        &["tool", "call", "escapes", "--args", "{}", "--json"],
    );
    assert_inert(&o, "tool call --json");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let content = v["ok"]["content"].as_str().expect("content");
    assert!(
        content.contains("\x1b]52;c;") && content.contains('\u{9b}'),
        "{content:?}"
    );
}

#[test]
fn suspicious_descriptions_are_flagged_escaped_and_capped() {
    let sb = workspace("loud", "");
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tools", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_inert(&o, "tools list");
    let out = stdout(&o);
    assert!(out.contains("clip\\x1b]52;c;"), "{out}");
    for (tool, flag) in [
        ("loud", "control characters"),
        ("long_desc", "bytes long; the model sees its first 4096"),
        (
            "hidden_desc",
            "invisible Unicode characters (U+200B, U+E0049",
        ),
    ] {
        let at = out.find(&format!("\n{tool} ")).map_or_else(
            || out.starts_with(&format!("{tool} ")).then_some(0),
            |i| Some(i + 1),
        );
        let at = at.unwrap_or_else(|| panic!("{tool} not listed: {out}"));
        let block: String = out[at..].lines().take(3).collect::<Vec<_>>().join("\n");
        assert!(block.contains(flag), "{tool}: {block}");
    }

    let o = cli.run(&sb.ws(), &["plugins", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_inert(&o, "plugins list");
    let out = stdout(&o);
    has(
        &out,
        "warning  `hidden_desc`: description holds 7 invisible Unicode characters",
    );
    has(&out, "warning  `long_desc`: description is");

    // What the model would read is escaped and capped.
    let o = cli.run(&sb.ws(), &["tools", "list", "--json"]);
    assert_inert(&o, "tools list --json");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    let list = v.as_array().expect("list");
    let find = |name: &str| {
        list.iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let long = find("long_desc")["description"].as_str().expect("desc");
    assert!(long.len() <= 4096 + 8, "{}", long.len());
    let hidden = find("hidden_desc")["description"].as_str().expect("desc");
    assert!(
        hidden.starts_with("Lists files.\\u{200b}\\u{e0049}") && !hidden.contains('\u{e0049}'),
        "{hidden:?}"
    );
    assert_eq!(
        find("hidden_desc")["warnings"].as_array().map(Vec::len),
        Some(1)
    );
}

/// A cassette whose model writes escape sequences, calls a tool that fails
/// with them and calls a tool whose name holds one.
fn escaping_cassette() -> String {
    let esc = "clip\x1b]52;c;cm0gLXJmIH4=\x07 red\x1b[31mRED";
    let turns = serde_json::json!({
        "version": 1,
        "turns": [
            {
                "events": [{ "type": "text_delta", "text": format!("thinking {esc}") }],
                "response": {
                    "message": {
                        "text": format!("thinking {esc}"),
                        "tool_calls": [
                            { "id": "c1", "name": "escapes_error", "arguments": "{}" },
                            { "id": "c2", "name": "ghost\x1b]8;;https://evil\x1b\\", "arguments": "{\"x\":\"\\u001b[2J\"}" }
                        ]
                    },
                    "finish_reason": "tool_calls",
                    "usage": null
                }
            },
            {
                "events": [],
                "response": {
                    "message": { "text": format!("done {esc}"), "tool_calls": [] },
                    "finish_reason": "stop",
                    "usage": null
                }
            }
        ]
    });
    serde_json::to_string(&turns).expect("cassette")
}

#[test]
fn run_and_show_print_model_and_tool_text_inert() {
    let sb = workspace("", "");
    let toml = std::fs::read_to_string(sb.ws().join("corral.toml")).expect("toml");
    sb.write(
        "corral.toml",
        &format!(
            "{toml}\n[plugins.replay]\nsource = \"builtin:replay\"\n\
             grants.fs = [{{ path = \".\", access = \"ro\" }}]\n\
             config = {{ cassette = \"esc.cassette.json\" }}\n"
        ),
    );
    sb.write("esc.cassette.json", &escaping_cassette());
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "--yes", "go"]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert_inert(&o, "run");
    let out = stdout(&o);
    has(
        &out,
        "thinking clip\\x1b]52;c;cm0gLXJmIH4=\\x07 red\\x1b[31mRED",
    );
    assert!(
        out.contains("● ghost\\x1b]8;;https://evil\\x1b\\("),
        "{out}"
    );
    assert!(out.contains("error: failed: clip\\x1b]52;c;"), "{out}");

    let o = cli.run(&sb.ws(), &["sessions", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("sessions");
    let id = v[0]["id"].as_str().expect("id").to_owned();
    let o = cli.run(&sb.ws(), &["show", &id]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_inert(&o, "show");
    let out = stdout(&o);
    assert!(
        out.contains("done clip\\x1b]52;c;") && out.contains("● ghost\\x1b]8;;"),
        "{out}"
    );
    let o = cli.run(&sb.ws(), &["show", &id, "--json"]);
    assert_inert(&o, "show --json");
}

#[test]
fn a_stream_event_over_the_output_limit_ends_the_provider_call() {
    let sb = Sandbox::with_manifest(
        "[plugins.replay]\nsource = \"builtin:replay\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\
         config = { cassette = \"big.cassette.json\" }\n\
         limits = { output_kb = 64 }\n",
    );
    let big = "x".repeat(200 * 1024);
    let cassette = serde_json::json!({
        "version": 1,
        "turns": [{
            "events": [{ "type": "text_delta", "text": big }],
            "response": {
                "message": { "text": "short", "tool_calls": [] },
                "finish_reason": "stop",
                "usage": null
            }
        }]
    });
    sb.write("big.cassette.json", &cassette.to_string());
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--provider", "replay", "go"]);
    assert_exit(&o, 3);
    assert!(
        o.stdout.len() < 64 * 1024,
        "{} bytes printed",
        o.stdout.len()
    );
    let err = stderr(&o);
    has(
        &err,
        "stream event of 204800 bytes, over the limit of 64 KiB",
    );
}

#[test]
fn a_pattern_too_large_for_memory_is_an_answer_not_a_crash() {
    let sb = Sandbox::new();
    // With less memory than ripgrep's own size limits assume, compiling the
    // pattern used to end in an out-of-memory trap.
    sb.write(
        "corral.toml",
        "[plugins.search]\nsource = \"builtin:search\"\n\
         grants.fs = [{ path = \".\", access = \"ro\" }]\n\
         limits = { memory_mb = 64 }\n",
    );
    sb.write("many.txt", &"a".repeat(5000));
    let cli = Cli::new();
    let o = cli.run(
        &sb.ws(),
        &argv_with("tool call grep --args", r#"{"pattern":"a{1000}{1000}"}"#),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    has(&err, "pattern too large");
    assert!(
        !err.contains("RUST_BACKTRACE") && !err.contains("crashed"),
        "{err}"
    );
}

#[test]
fn a_crash_shows_the_panic_but_not_the_backtrace_hint() {
    let sb = workspace("", "");
    let cli = Cli::new();
    let o = tool_call(&cli, &sb, "crash", "{}");
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    has(&err, "the budgets guest crashed on purpose");
    lacks(&err, "RUST_BACKTRACE");
}

/// A preview is only shown on a terminal; this checks the runtime's answer.
#[tokio::test]
async fn a_huge_preview_is_refused() {
    let sb = Sandbox::new();
    let plugins = sb
        .load_plugin("budgets", BUDGETS, "limits = { output_kb = 64 }")
        .await
        .expect("load");
    let plugin = plugins.plugin_for("big_preview").expect("plugin");
    let err = plugin
        .preview("big_preview", r#"{"n":1}"#, "p")
        .await
        .expect_err("refused");
    let text = err.to_string();
    has(
        &text,
        "the preview of `big_preview` (3145728 bytes) exceeds the limit of 64 KiB",
    );
}
