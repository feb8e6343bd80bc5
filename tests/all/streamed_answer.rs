//! A provider plugin may leave its answer's text to the host
//! (`corral:plugin/answer`): the host puts it together from the text deltas
//! it streamed. Through `corral run`, with a test provider that does so
//! honestly, returns text of its own as well, asks too late, or streams
//! past its memory limit.

use crate::support::events::events;
use crate::support::text::{has, lacks};
use crate::*;
use corral_test_programs::ENV_PROVIDER;

/// `corral run --json` with the test provider playing `mode`.
fn run(mode: &str, extra: &str) -> (std::process::Output, Cli) {
    let sb = Sandbox::with_manifest(&format!(
        "[plugins.kept]\nsource = {ENV_PROVIDER:?}\n{extra}\
             config = {{ answer = \"{mode}\", flood_mib = \"64\" }}\n"
    ));
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["run", "--provider", "kept", "--json", "go"]);
    (o, cli)
}

/// Standard output and error as text.
fn text(o: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `message.text` of every `request_end` event.
fn answers(o: &std::process::Output) -> Vec<String> {
    events(o)
        .iter()
        .filter(|e| e["type"] == "request_end")
        .map(|e| e["message"]["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn a_provider_may_leave_its_answer_to_the_host() {
    let (o, cli) = run("kept", "");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert_eq!(answers(&o), ["Kept by the host."], "{out}");
    // The log holds the answer whole, as a resumed session needs it.
    let logs = crate::support::log::session_logs(&cli);
    let log = std::fs::read_to_string(&logs[0]).expect("the session log");
    let end = log
        .lines()
        .find(|l| l.contains("\"request_end\""))
        .expect("a request_end record");
    has(end, "\"text\":\"Kept by the host.\"");
}

#[test]
fn a_provider_that_keeps_its_text_and_returns_more_is_refused() {
    let (o, _cli) = run("lies", "");
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    // With `--json`, the failure is an event on standard output.
    assert!(
        out.contains("returned text of its own") && out.contains("plugin `kept`"),
        "{out}\n{err}"
    );
    // Neither the streamed text nor the forged ending becomes an answer.
    assert!(answers(&o).is_empty(), "{out}");
    assert!(
        !out.contains("FORGED") && !err.contains("FORGED"),
        "{out}\n{err}"
    );
}

#[test]
fn asking_after_the_first_delta_ends_the_call() {
    let (o, _cli) = run("late", "");
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("after it had streamed text"), "{out}\n{err}");
    assert!(answers(&o).is_empty(), "{out}");
}

#[test]
fn a_kept_answer_is_bounded_by_the_plugin_memory_limit() {
    // 64 one-MiB deltas against a 16 MiB limit: the host stops keeping
    // before the text and the plugin's own memory pass the limit, instead
    // of holding all of it for the plugin.
    let (o, _cli) = run(
        "flood",
        "limits = { memory_mb = 16, output_kb = 2048, timeout_ms = 120000 }\n",
    );
    let (out, err) = text(&o);
    assert_ne!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("passed the memory limit of 16 MiB") && out.contains("limits.memory_mb"),
        "{out}\n{err}"
    );
    assert!(answers(&o).is_empty());
    let streamed: usize = events(&o)
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().map_or(0, str::len))
        .sum();
    assert!(
        streamed < 16 << 20,
        "{streamed} bytes streamed past the limit"
    );
    assert!(out.len() < 24 << 20, "{} bytes of output", out.len());
}

#[test]
fn a_tool_plugin_cannot_have_the_host_keep_text() {
    // A tool (the budgets guest) that imports the provider's interface: the
    // host would hold text for a call that never reads it.
    let sb = Sandbox::with_manifest(&plugin_toml(
        "budgets",
        corral_test_programs::BUDGETS,
        "config = { mode = \"keeps_answer\" }\n",
    ));
    let cli = Cli::new();
    let o = cli.run(&sb.ws(), &["tool", "call", "keep_answer", "--args", "{}"]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("outside a provider's `complete`") && err.contains("plugin `budgets`"),
        "{err}"
    );
    lacks(&out, "the host kept");
}
