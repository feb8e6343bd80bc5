//! `corral run --json` for scripts and CI, through the real binary against
//! the mock model on loopback: the final `result` event (usage summed as the
//! mock reported it, cost from a configured price or null), `run -` reading
//! the prompt from stdin, `--profile` and `-c` overrides (the request the
//! mock receives shows what they chose), the SDKs' base-URL variables, and
//! `--approvals stdin` answers that come early or just before stdin closes.
//! Every event these tests read goes through the events schema
//! (`support::schema`).

use crate::support::manifest::{anthropic_plugin, openai_plugin};
use crate::support::mock::write_call;
use crate::support::mock::{MockServer, Reply, anthropic_sse};
use crate::support::model::{calls_then_done, writer};
use crate::support::output::{assert_exit, json_events, stderr};
use crate::support::process::{HANG, events, wait_bounded, wait_for};
use crate::support::run::{answering, openai_workspace};
use crate::support::run::{argv, argv_with};
use crate::support::text::{has, has_all, lacks, lacks_all};
use crate::*;
use serde_json::{Value, json};
use std::io::Write as _;
use std::process::Stdio;

const KEY: (&str, &str) = ("TEST_OPENAI_KEY", "sk-json-test");

/// `[agent.models."mock"] price`: $2 in, $8 out per million tokens.
const PRICED: &str =
    "\n[agent.models.\"mock\"]\nprice = { input_per_mtok = 2.0, output_per_mtok = 8.0 }\n";

fn run_json(cli: &Cli, sb: &Sandbox, extra: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let mut args = vec![
        "run",
        "--provider",
        "openai",
        "--json",
        "--mode",
        "auto-edit",
    ];
    args.extend_from_slice(extra);
    args.push("Write it");
    let mut env = env.to_vec();
    env.push(KEY);
    let o = cli.run_env(&sb.ws(), &args, &env);
    assert_exit(&o, 0);
    json_events(&o)
}

fn result(events: &[Value]) -> &Value {
    let last = events.last().expect("events");
    assert_eq!(
        last["type"], "result",
        "the last event is the result: {events:#?}"
    );
    last
}

/// The `model` of each chat request the mock received.
fn models(server: &MockServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .map(|r| r.body["model"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Fails the test unless `server` got a request for `path`: the request
/// went to `variable`.
#[track_caller]
fn assert_reached(server: &MockServer, path: &str, variable: &str) {
    assert!(
        server.requests().iter().any(|r| r.path == path),
        "the request did not go to {variable}"
    );
}
#[test]
fn the_result_event_sums_the_usage_and_prices_it() {
    let server = writer();
    let sb = openai_workspace(server.port, PRICED);
    let cli = Cli::new();
    let ev = run_json(&cli, &sb, &[], &[]);
    let r = result(&ev);
    let started = ev
        .iter()
        .find(|e| e["type"] == "session_started")
        .expect("started");
    assert_eq!(r["session_id"], started["session_id"]);
    assert_eq!(r["stop_reason"], "final_answer");
    assert_eq!(r["answer"], "Done.");
    // What the mock reported, request by request, summed.
    let reported: Vec<&Value> = ev
        .iter()
        .filter(|e| e["type"] == "request_end")
        .map(|e| &e["usage"])
        .collect();
    assert_eq!(reported.len(), 2);
    let sum = |k: &str| reported.iter().map(|u| u[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(
        r["usage"]["input_tokens"].as_u64(),
        Some(sum("input_tokens"))
    );
    assert_eq!(
        r["usage"]["output_tokens"].as_u64(),
        Some(sum("output_tokens"))
    );
    assert_eq!(r["usage"]["input_tokens"], 200);
    assert_eq!(r["usage"]["output_tokens"], 40);
    let cost = r["cost_usd"].as_f64().expect("a cost");
    assert!(
        (cost - (200.0 * 2.0 + 40.0 * 8.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    assert_eq!(r["turns"], 1);
    assert_eq!(r["requests"], 2);
    assert_eq!(r["tool_calls"], 1);
    assert!(r["duration_ms"].as_u64().is_some());
}

#[test]
fn without_a_price_the_cost_is_null() {
    let server = writer();
    let sb = openai_workspace(server.port, "");
    let cli = Cli::new();
    let ev = run_json(&cli, &sb, &[], &[]);
    let r = result(&ev);
    assert!(r["cost_usd"].is_null(), "{r}");
    assert_eq!(r["usage"]["input_tokens"], 200);
}

#[test]
fn run_dash_reads_the_prompt_from_stdin() {
    let server = writer();
    let sb = openai_workspace(server.port, "");
    let cli = Cli::new();
    let mut child = cli
        .command(
            &sb.ws(),
            &argv("run --provider openai --json --mode auto-edit -"),
        )
        .env(KEY.0, KEY.1)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"What does the piped prompt say?\n")
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_exit(&o, 0);
    let first = &server.requests()[0];
    let said = first.body["messages"].to_string();
    has(&said, "What does the piped prompt say?");
    let user = json_events(&o)
        .into_iter()
        .find(|e| e["type"] == "user_message")
        .expect("user_message");
    assert_ne!(user["text"], "-");

    // Nothing on stdin is a clear error, not an empty prompt.
    let o = cli.run_env(&sb.ws(), &["run", "--provider", "openai", "-"], &[KEY]);
    assert_exit(&o, 2);
    has(&stderr(&o), "read no prompt from stdin");
}

#[test]
fn a_profile_and_c_overrides_choose_the_model_and_the_base_url() {
    let server = writer();
    let sb = openai_workspace(server.port, "");
    let cli = Cli::new();
    let user = cli.home.path().join("config/corral/corral.toml");
    let mut text = std::fs::read_to_string(&user).expect("user config");
    text.push_str("\n[profiles.cheap]\nmodel = \"from-profile\"\nmode = \"auto-edit\"\n");
    std::fs::write(&user, text).expect("write");

    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--provider", "openai", "--json"];
        args.extend_from_slice(extra);
        args.push("Write it");
        let o = cli.run_env(&sb.ws(), &args, &[KEY]);
        assert_exit(&o, 0);
        json_events(&o)
    };
    let ev = run(&["--profile", "cheap"]);
    assert_eq!(models(&server), ["from-profile", "from-profile"]);
    // The profile's mode let the write run without asking.
    assert!(
        ev.iter()
            .any(|e| e["type"] == "permission" && e["decision"] == "allow")
    );
    assert!(sb.ws().join("new.txt").exists());

    // -c comes after the profile, and wins.
    run(&["--profile", "cheap", "-c", "model=from-c"]);
    let later = models(&server)[2..].to_vec();
    assert!(
        !later.is_empty() && later.iter().all(|m| m == "from-c"),
        "{later:?}"
    );
    let before = models(&server).len();

    // A base URL and the grant it needs, both typed on the command line.
    let other = writer();
    let grants = format!(
        "plugins.openai.grants.net=[\"http://127.0.0.1:{}\", \"http://127.0.0.1:{}\"]",
        server.port, other.port
    );
    let base = format!(
        "providers.openai.base_url=http://127.0.0.1:{}/v1",
        other.port
    );
    run(&["-c", &grants, "-c", &base, "-c", "model=elsewhere"]);
    assert_eq!(models(&other), ["elsewhere", "elsewhere"]);
    assert_eq!(
        models(&server).len(),
        before,
        "the first server got nothing more"
    );

    // A bad key or value is an error naming it, with the way to write one.
    for (bad, says) in [
        ("agent.bogus=1", "unknown field `bogus`"),
        ("max_iterations=lots", "invalid type"),
        ("model", "has no `=`"),
    ] {
        let o = cli.run_env(
            &sb.ws(),
            &["run", "--provider", "openai", "-c", bad, "Write it"],
            &[KEY],
        );
        assert_exit(&o, 2);
        let err = stderr(&o);
        assert!(err.contains(bad) && err.contains(says), "{bad}: {err}");
        has(&err, "a key is a manifest path");
        assert!(!err.contains("Error {"), "no Debug output: {err}");
    }
    let o = cli.run_env(
        &sb.ws(),
        &argv_with("run --provider openai --profile nope", "Write it"),
        &[KEY],
    );
    assert_exit(&o, 2);
    has_all(&stderr(&o), &["no [profiles.nope]", "cheap"]);
}

/// A project whose `name` provider is granted the mock but sets no base URL.
fn without_base_url(sb: &Sandbox, table: String) {
    let table: String = table
        .lines()
        .map(|l| match l.starts_with("config = ") {
            true => "config = { model = \"mock\" }\n".to_owned(),
            false => format!("{l}\n"),
        })
        .collect();
    sb.write(
        "corral.toml",
        &format!("[policy]\nmode = \"auto-edit\"\n\n{table}"),
    );
}

/// `corral run --provider PROVIDER --json PROMPT` with `env`, in a new
/// workspace whose only plugin is `plugin` without its `base_url`; it must
/// end well.
fn run_without_base_url(
    cli: &Cli,
    plugin: String,
    [provider, prompt]: [&str; 2],
    env: &[(&str, &str)],
) {
    let sb = Sandbox::new();
    without_base_url(&sb, plugin);
    let args = ["run", "--provider", provider, "--json", prompt];
    let o = cli.run_env(&sb.ws(), &args, env);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        crate::support::output::printed(&o)
    );
}

#[test]
fn the_sdk_base_url_variables_are_honoured_within_the_grants() {
    let cli = Cli::new();
    let server = writer();
    let url = format!("http://127.0.0.1:{}/v1", server.port);
    run_without_base_url(
        &cli,
        openai_plugin(server.port, "", ""),
        ["openai", "Write it"],
        &[KEY, ("OPENAI_BASE_URL", &url)],
    );
    assert_reached(&server, "/v1/chat/completions", "OPENAI_BASE_URL");

    let anthropic = MockServer::start(|_, _| Reply::Sse(anthropic_sse("Hello.", &[])));
    let url = format!("http://127.0.0.1:{}", anthropic.port);
    run_without_base_url(
        &cli,
        anthropic_plugin(anthropic.port, "", ""),
        ["anthropic", "Say hello"],
        &[
            ("TEST_ANTHROPIC_KEY", "sk-ant"),
            ("ANTHROPIC_BASE_URL", &url),
        ],
    );
    assert_reached(&anthropic, "/v1/messages", "ANTHROPIC_BASE_URL + /v1");
    let reached = anthropic.requests().len();

    // The built-in provider is granted api.openai.com only: the variable
    // does not widen that, and the error says how to grant the server.
    let sb = Sandbox::new();
    let o = cli.run_env(
        &sb.ws(),
        &["run", "--provider", "openai", "--json", "Write it"],
        &[("OPENAI_API_KEY", "sk-x"), ("OPENAI_BASE_URL", &url)],
    );
    assert_exit(&o, 2);
    let err = stderr(&o);
    has(&err, "OPENAI_BASE_URL");
    assert!(
        err.contains(&format!(
            "grants.net = [\"http://127.0.0.1:{}\"]",
            anthropic.port
        )),
        "{err}"
    );
    assert_eq!(
        anthropic.requests().len(),
        reached,
        "nothing reached the server"
    );
}

/// Runs a model that writes `a.txt` and `b.txt` (calls `c-1` and `c-2`)
/// with `--approvals stdin`; writes `answers` on stdin (once the first
/// approval is requested if `wait`, else at once), then closes stdin.
fn answer_then_close(answers: &[&str], wait: bool) -> (Vec<Value>, String, Sandbox) {
    let server = calls_then_done(vec![
        write_call("w1", "a.txt", "a\n"),
        write_call("w2", "b.txt", "b\n"),
    ]);
    let sb = openai_workspace(server.port, "");
    let cli = Cli::new();
    let mut child = answering(&cli, &sb, "Write them", KEY.1);
    let rx = events(&mut child);
    let mut seen = Vec::new();
    if wait {
        seen.push(wait_for(&rx, HANG, "approval_requested", |e| {
            e["type"] == "approval_requested"
        }));
    }
    let mut stdin = child.stdin.take().expect("stdin");
    for id in answers {
        writeln!(
            stdin,
            "{{\"op\":\"approval\",\"call_id\":\"{id}\",\"decision\":\"approve\"}}"
        )
        .expect("answer");
    }
    drop(stdin);
    seen.push(wait_for(&rx, HANG, "stop", |e| e["type"] == "stop"));
    wait_bounded(&mut child, HANG);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err)
        .expect("stderr");
    seen.extend(rx.try_iter());
    (seen, err, sb)
}

fn written(sb: &Sandbox) -> Vec<String> {
    ["a.txt", "b.txt"]
        .into_iter()
        .filter(|f| sb.ws().join(f).exists())
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_answer_before_its_request_waits_for_it() {
    let (seen, err, sb) = answer_then_close(&["c-1", "c-2"], false);
    assert_eq!(written(&sb), ["a.txt", "b.txt"], "{err}\n{seen:#?}");
    lacks(&err, "error");
}

#[test]
fn closing_stdin_after_answering_reports_no_error() {
    // Both answers are given when the first call asks, and stdin closes
    // before the second asks: it was answered, so it is not refused.
    let (seen, err, sb) = answer_then_close(&["c-1", "c-2"], true);
    assert_eq!(written(&sb), ["a.txt", "b.txt"], "{err}\n{seen:#?}");
    assert!(!seen.iter().any(|e| e["type"] == "error"), "{seen:#?}");
    lacks_all(&err, &["no approval is pending", "stdin closed"]);
    assert!(
        !seen.iter().any(|e| e["reason"]
            .as_str()
            .is_some_and(|r| r.contains("stdin closed"))),
        "{seen:#?}"
    );
}

#[test]
fn the_schema_refuses_what_it_does_not_describe() {
    use crate::support::schema::check_event;
    check_event(&json!({"type": "stop", "reason": "final_answer", "message": null}));
    for bad in [
        json!({"type": "stop", "message": null}),
        json!({"type": "stop", "reason": "tired", "message": null}),
        json!({"type": "result", "session_id": "s"}),
        json!({"type": "no_such_event"}),
    ] {
        let refused = std::panic::catch_unwind(|| check_event(&bad)).is_err();
        assert!(refused, "the schema let {bad} through");
    }
}
